//! Applying pauses, resumes, clock jumps and kills (`[faults.pause]`,
//! `[faults.clock]`, `[faults.kill]`), and when they are enabled. What they
//! are and the clock hardware drawn per node are in `faults`.
//!
//! Invariant: each kind draws from its own stream only (when it becomes
//! possible, and its length, delay or jump when it is chosen), so turning
//! one on or off shifts no other draw.

use std::time::Duration;

use simrng::Rng;

use super::ctx::Ctx;
use super::gates::FaultGates;
use crate::actions::Enabled;
use crate::agent::AgentCommand;
use crate::faults::{below, between, draw_delay, ClockSpec, FaultCounts, KillSpec, PauseSpec};
use crate::spec::{EngineError, ExploreSpec};
use crate::trace::EventKind;
use crate::NodeId;
use simtime::VirtualTime;

/// Pauses, clock jumps and kills in one execution: their streams, when
/// each becomes possible, and how many happened.
pub(in crate::execution) struct NodeFaults {
    pause_rng: Rng,
    clock_rng: Rng,
    kill_rng: Rng,
    /// Pauses are enabled from this virtual time on (`None` before the
    /// workload, or when pauses are off).
    pause_not_before: Option<VirtualTime>,
    clock_not_before: Option<VirtualTime>,
    kill_not_before: Option<VirtualTime>,
    counts: FaultCounts,
}

impl NodeFaults {
    /// No fault yet; the streams drawn from `seed`.
    pub fn new(seed: u64) -> NodeFaults {
        NodeFaults {
            pause_rng: simrng::stream(seed, simrng::streams::PAUSE),
            clock_rng: simrng::stream(seed, simrng::streams::CLOCK),
            kill_rng: simrng::stream(seed, simrng::streams::KILL),
            pause_not_before: None,
            clock_not_before: None,
            kill_not_before: None,
            counts: FaultCounts::default(),
        }
    }

    /// The streams start again from `seed` (a warm start's boot ends).
    /// The counts stay: the boot counted its clock offsets and drifts, and
    /// nothing else can have happened before the workload.
    pub fn reseed(&mut self, seed: u64) {
        *self = NodeFaults { counts: self.counts, ..NodeFaults::new(seed) };
    }

    /// What happened so far.
    pub fn counts(&self) -> FaultCounts {
        self.counts
    }

    /// The workload starts at `now`: draw when pauses, clock jumps and
    /// kills become possible (only for those that are on).
    fn start(&mut self, now: VirtualTime, e: &ExploreSpec) {
        if e.pause.max > 0 {
            self.pause_not_before = Some(now + span_draw(&mut self.pause_rng, e.pause.span));
        }
        if e.clock.jumps() {
            self.clock_not_before = Some(now + span_draw(&mut self.clock_rng, e.clock.span));
        }
        if e.kill.max > 0 {
            self.kill_not_before = Some(now + span_draw(&mut self.kill_rng, e.kill.span));
        }
    }

    /// When a pause becomes possible, if `p`'s budget has one left.
    fn pause_possible(&self, p: &PauseSpec) -> Option<VirtualTime> {
        self.pause_not_before.filter(|_| self.counts.pauses < p.max)
    }

    /// When a kill becomes possible, if `k`'s budget has one left.
    fn kill_possible(&self, k: &KillSpec) -> Option<VirtualTime> {
        self.kill_not_before.filter(|_| self.counts.kills < k.max)
    }

    /// When a clock jump becomes possible, if `c`'s budget has one left.
    fn clock_possible(&self, c: &ClockSpec) -> Option<VirtualTime> {
        let used = self.counts.clock_bumps + self.counts.clock_strobes;
        self.clock_not_before.filter(|_| used < c.max)
    }

    /// Whether a pause may come at `now` within the budget of `p`.
    fn pause_due(&self, now: VirtualTime, p: &PauseSpec) -> bool {
        self.pause_possible(p).is_some_and(|t| now >= t)
    }

    /// Whether a kill may come at `now` within the budget of `k`.
    fn kill_due(&self, now: VirtualTime, k: &KillSpec) -> bool {
        self.kill_possible(k).is_some_and(|t| now >= t)
    }

    /// Whether a clock jump may come at `now` within the budget of `c`.
    fn clock_due(&self, now: VirtualTime, c: &ClockSpec) -> bool {
        self.clock_possible(c).is_some_and(|t| now >= t)
    }

    /// When a pause, a clock jump and a kill become possible, for those
    /// with budget left (for lookahead's bound).
    pub fn next_possible(&self, e: &ExploreSpec) -> [Option<VirtualTime>; 3] {
        [self.pause_possible(&e.pause), self.clock_possible(&e.clock), self.kill_possible(&e.kill)]
    }

    /// A pause is chosen at `now`: its length (drawn), and the next pause
    /// may come a drawn time from now.
    fn draw_pause(&mut self, now: VirtualTime, p: &PauseSpec) -> Duration {
        let (lo, hi) = (simtime::span_ns(p.length.0), simtime::span_ns(p.length.1));
        let length = between(&mut self.pause_rng, lo as i64, hi as i64) as u64;
        self.pause_not_before = Some(now + span_draw(&mut self.pause_rng, p.span));
        self.counts.pauses += 1;
        Duration::from_nanos(length)
    }

    /// A kill is chosen at `now`: its restart delay (drawn), and the next
    /// kill may come a drawn time from now.
    fn draw_kill(&mut self, now: VirtualTime, k: &KillSpec) -> Duration {
        let delay = draw_delay(&mut self.kill_rng, k.restart_after);
        self.kill_not_before = Some(now + span_draw(&mut self.kill_rng, k.span));
        self.counts.kills += 1;
        delay
    }

    /// A clock jump is chosen at `now`: a bump or a strobe (drawn when
    /// both are on), as traced and as sent to the agent; the next jump may
    /// come a drawn time from now.
    fn draw_clock_jump(&mut self, now: VirtualTime, c: &ClockSpec) -> (EventKind, AgentCommand) {
        let strobe = match (c.bump_ns, c.strobe) {
            (Some(_), Some(s)) => (below(&mut self.clock_rng, 2) == 1).then_some(s),
            (None, s) => s,
            (Some(_), None) => None,
        };
        let jump = match (strobe, c.bump_ns) {
            (Some(s), _) => {
                self.counts.clock_strobes += 1;
                let (delta_ns, period_ns, length_ns) =
                    (s.delta_ns, simtime::span_ns(s.period), simtime::span_ns(s.length));
                (
                    EventKind::ClockStrobe { delta_ns, period_ns, length_ns },
                    AgentCommand::ClockStrobe { delta_ns, period_ns, length_ns },
                )
            }
            (None, Some((lo, hi))) => {
                self.counts.clock_bumps += 1;
                let delta_ns = between(&mut self.clock_rng, lo, hi);
                (EventKind::ClockBump { delta_ns }, AgentCommand::ClockBump { delta_ns })
            }
            (None, None) => unreachable!("clock jumps are enabled only with a bump or a strobe"),
        };
        self.clock_not_before = Some(now + span_draw(&mut self.clock_rng, c.span));
        jump
    }
}

/// A time uniformly within `span` (nothing drawn for a span of 0).
fn span_draw(rng: &mut Rng, span: Duration) -> Duration {
    Duration::from_nanos(below(rng, simtime::span_ns(span)))
}

/// The actions: each acts at `cx.now` and tells the node's agent.
impl NodeFaults {
    /// The workload starts: draw when pauses, clock jumps and kills
    /// become possible (only for those that are on).
    pub fn begin(&mut self, cx: &Ctx) {
        self.start(cx.now, &cx.spec.explore);
    }

    /// Records `node`'s clock hardware at one of its boots.
    pub fn record_clock(&mut self, cx: &mut Ctx, node: NodeId) {
        let now = cx.now;
        let clock = cx.nodes[node].clock;
        if let Some(offset_ns) = clock.offset_ns {
            self.counts.clock_offsets += 1;
            cx.trace.push(now, node, EventKind::ClockOffset { offset_ns });
        }
        if let Some(ppm) = clock.drift_ppm {
            self.counts.clock_drifts += 1;
            cx.trace.push(now, node, EventKind::ClockDrift { ppm });
        }
    }

    /// `node` may be paused now: in the workload (or later, without a
    /// quiet period) from the drawn time on, within the budget, not calm,
    /// up, ready, not paused already, and with frames in flight: a pause
    /// matters while the rest of the cluster waits for the node's answers
    /// (a pause of an idle node tests nothing; offered at every step, the
    /// budget would go on the first steps after the drawn time). With
    /// `[faults.pause] target`, only on a node holding that role, and
    /// there whether or not it is sending.
    fn pause_enabled(&self, cx: &Ctx, gates: &FaultGates, node: NodeId) -> bool {
        let n = &cx.nodes[node];
        let sending = gates.wire.has_in_flight_from(node);
        self.pause_due(cx.now, &cx.spec.explore.pause)
            && !gates.calm
            && n.is_ready()
            && n.paused_until().is_none()
            && n.killed_until().is_none()
            && match cx.spec.explore.roles.pause.as_deref() {
                None => sending,
                target => gates.roles.allows(cx, target, node),
            }
    }

    /// `node`'s start command may be killed now: from the drawn time on,
    /// within the budget, not calm, up and ready, neither paused nor killed
    /// already. Like a clock jump, every moment of a running service is at
    /// stake (its memory is lost); the drawn times spread the kills, and a
    /// kill just after the node sent something (an acknowledgement) is
    /// weighted up.
    fn kill_enabled(&self, cx: &Ctx, gates: &FaultGates, node: NodeId) -> bool {
        let n = &cx.nodes[node];
        self.kill_due(cx.now, &cx.spec.explore.kill)
            && !gates.calm
            && n.is_ready()
            && n.paused_until().is_none()
            && n.killed_until().is_none()
    }

    /// `node`'s clock may jump now: from the drawn time on, within the
    /// budget, not calm, up and ready. Every moment of a running node is
    /// at stake for its clock; the drawn times spread the jumps. With
    /// `[faults.clock] target`, only on a node holding that role.
    fn clock_jump_enabled(&self, cx: &Ctx, gates: &FaultGates, node: NodeId) -> bool {
        let n = &cx.nodes[node];
        self.clock_due(cx.now, &cx.spec.explore.clock)
            && !gates.calm
            && n.is_ready()
            && gates.roles.allows(cx, cx.spec.explore.roles.clock.as_deref(), node)
    }

    /// Pauses, then clock jumps, each by node (after every older kind, so
    /// executions without them keep their choice indices).
    pub fn enabled(&self, cx: &Ctx, gates: &FaultGates, into: &mut Vec<Enabled>) {
        let e = &cx.spec.explore;
        for &i in &e.pause.nodes {
            if self.pause_enabled(cx, gates, i) {
                into.push(Enabled::pause(i, cx.now).at_risk(e.roles.pause.is_some()));
            }
        }
        for &i in &e.clock.nodes {
            if self.clock_jump_enabled(cx, gates, i) {
                into.push(Enabled::clock_jump(i, cx.now).at_risk(e.roles.clock.is_some()));
            }
        }
    }

    /// Kills enabled now, by node (weighted up on a node that just sent).
    pub fn enabled_kills(&self, cx: &Ctx, gates: &FaultGates, into: &mut Vec<Enabled>) {
        for &i in &cx.spec.explore.kill.nodes {
            if self.kill_enabled(cx, gates, i) {
                into.push(Enabled::kill(i, cx.now).at_risk(cx.nodes[i].just_sent));
            }
        }
    }

    /// SIGKILLs `node`'s start command; it runs again a drawn delay from now.
    pub fn kill(&mut self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        let now = cx.now;
        let restart_at = now + self.draw_kill(now, &cx.spec.explore.kill);
        cx.nodes[node].set_killed_until(Some(restart_at));
        cx.trace.push(now, node, EventKind::Kill { restart_at });
        cx.control(node, &AgentCommand::Kill)
    }

    /// Starts `node`'s killed start command again.
    pub fn respawn(&self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        cx.nodes[node].set_killed_until(None);
        cx.trace.push(cx.now, node, EventKind::Respawn);
        cx.control(node, &AgentCommand::Start)
    }

    /// Stops `node`'s start command until a drawn length from now.
    pub fn pause(&mut self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        let now = cx.now;
        let resume_at = now + self.draw_pause(now, &cx.spec.explore.pause);
        cx.nodes[node].set_paused_until(Some(resume_at));
        cx.trace.push(now, node, EventKind::Pause { resume_at });
        cx.control(node, &AgentCommand::Pause)
    }

    /// Continues `node`'s paused start command.
    pub fn resume(&self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        cx.nodes[node].set_paused_until(None);
        cx.trace.push(cx.now, node, EventKind::Resume);
        cx.control(node, &AgentCommand::Resume)
    }

    /// The quiet period or a calm probe begins: every paused node that is
    /// up continues now.
    pub fn resume_all(&self, cx: &mut Ctx) -> Result<(), EngineError> {
        for node in cx.nodes.ids() {
            if cx.nodes[node].paused_until().is_some() && cx.nodes[node].is_up() {
                self.resume(cx, node)?;
            }
        }
        Ok(())
    }

    /// Jumps `node`'s wall clock: a bump, or a strobe (drawn when both
    /// are on).
    pub fn clock_jump(&mut self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        let now = cx.now;
        let (event, command) = self.draw_clock_jump(now, &cx.spec.explore.clock);
        cx.trace.push(now, node, event);
        cx.control(node, &command)
    }
}

#[cfg(test)]
mod tests {
    use rand_core::RngCore;

    use super::*;

    #[test]
    fn reseeding_restarts_the_streams_and_keeps_the_counts() {
        let mut f = NodeFaults::new(1);
        f.counts.clock_offsets = 2;
        f.counts.clock_drifts = 1;
        f.pause_rng.next_u64();
        f.reseed(7);
        assert_eq!((f.counts.clock_offsets, f.counts.clock_drifts), (2, 1), "the boot's counts stay");
        let fresh = NodeFaults::new(7);
        let (mut p, mut c) = (fresh.pause_rng, fresh.clock_rng);
        assert_eq!(f.pause_rng.next_u64(), p.next_u64());
        assert_eq!(f.clock_rng.next_u64(), c.next_u64());
        assert_ne!(NodeFaults::new(1).pause_rng.next_u64(), NodeFaults::new(7).pause_rng.next_u64());
    }
}
