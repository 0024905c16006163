//! Applying pauses, resumes, clock jumps and kills (`[faults.pause]`,
//! `[faults.clock]`, `[faults.kill]`), and when they are enabled. What they are, their
//! streams and the clock hardware drawn per node are in `faults`.

use std::time::Duration;

use super::Execution;
use crate::agent::AgentCommand;
use crate::faults::{below, between, draw_delay};
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;

impl Execution<'_> {
    /// The workload starts: draw when pauses and clock jumps become
    /// possible (only for those that are on).
    pub(crate) fn start_node_faults(&mut self) {
        let (now, e) = (self.now, &self.spec.explore);
        let f = &mut self.faults.node;
        if e.pause.max > 0 {
            f.pause_not_before =
                Some(now + Duration::from_nanos(below(&mut f.pause_rng, simtime::span_ns(e.pause.span))));
        }
        if e.clock.jumps() {
            f.clock_not_before =
                Some(now + Duration::from_nanos(below(&mut f.clock_rng, simtime::span_ns(e.clock.span))));
        }
        if e.kill.max > 0 {
            f.kill_not_before = Some(now + Duration::from_nanos(below(&mut f.kill_rng, simtime::span_ns(e.kill.span))));
        }
    }

    /// Records `node`'s clock hardware at one of its boots.
    pub(crate) fn record_node_clock(&mut self, node: NodeId) {
        let now = self.now;
        let clock = self.nodes[node].clock;
        if let Some(offset_ns) = clock.offset_ns {
            self.faults.node.counts.clock_offsets += 1;
            self.trace.push(now, node, EventKind::ClockOffset { offset_ns });
        }
        if let Some(ppm) = clock.drift_ppm {
            self.faults.node.counts.clock_drifts += 1;
            self.trace.push(now, node, EventKind::ClockDrift { ppm });
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
    pub(crate) fn pause_enabled(&self, node: NodeId) -> bool {
        let p = &self.spec.explore.pause;
        let n = &self.nodes[node];
        let time = self.faults.node.pause_not_before.is_some_and(|t| self.now >= t);
        let sending = self.wire.has_in_flight_from(node);
        time && self.faults.node.counts.pauses < p.max
            && !self.faults.calm
            && n.is_ready()
            && n.paused_until().is_none()
            && n.killed_until().is_none()
            && match self.spec.explore.roles.pause.as_deref() {
                None => sending,
                target => self.role_allows(target, node),
            }
    }

    /// `node`'s start command may be killed now: from the drawn time on,
    /// within the budget, not calm, up and ready, neither paused nor killed
    /// already. Like a clock jump, every moment of a running service is at
    /// stake (its memory is lost); the drawn times spread the kills, and a
    /// kill just after the node sent something (an acknowledgement) is
    /// weighted up.
    pub(crate) fn kill_enabled(&self, node: NodeId) -> bool {
        let (k, n) = (&self.spec.explore.kill, &self.nodes[node]);
        let time = self.faults.node.kill_not_before.is_some_and(|t| self.now >= t);
        time && self.faults.node.counts.kills < k.max
            && !self.faults.calm
            && n.is_ready()
            && n.paused_until().is_none()
            && n.killed_until().is_none()
    }

    /// SIGKILLs `node`'s start command; it runs again a drawn delay from now.
    pub(crate) fn kill(&mut self, node: NodeId) -> Result<(), EngineError> {
        let (now, k) = (self.now, &self.spec.explore.kill);
        let f = &mut self.faults.node;
        let delay = draw_delay(&mut f.kill_rng, k.restart_after);
        f.kill_not_before = Some(now + Duration::from_nanos(below(&mut f.kill_rng, simtime::span_ns(k.span))));
        f.counts.kills += 1;
        let restart_at = now + delay;
        self.nodes[node].set_killed_until(Some(restart_at));
        self.trace.push(now, node, EventKind::Kill { restart_at });
        self.control(node, &AgentCommand::Kill)
    }

    /// Starts `node`'s killed start command again.
    pub(crate) fn respawn(&mut self, node: NodeId) -> Result<(), EngineError> {
        self.nodes[node].set_killed_until(None);
        self.trace.push(self.now, node, EventKind::Respawn);
        self.control(node, &AgentCommand::Start)
    }

    /// `node`'s clock may jump now: from the drawn time on, within the
    /// budget, not calm, up and ready. Every moment of a running node is
    /// at stake for its clock; the drawn times spread the jumps. With
    /// `[faults.clock] target`, only on a node holding that role.
    pub(crate) fn clock_jump_enabled(&self, node: NodeId) -> bool {
        let n = &self.nodes[node];
        let time = self.faults.node.clock_not_before.is_some_and(|t| self.now >= t);
        let c = &self.spec.explore.clock;
        let used = self.faults.node.counts.clock_bumps + self.faults.node.counts.clock_strobes;
        time && used < c.max
            && !self.faults.calm
            && n.is_ready()
            && self.role_allows(self.spec.explore.roles.clock.as_deref(), node)
    }

    /// Stops `node`'s start command until a drawn length from now.
    pub(crate) fn pause(&mut self, node: NodeId) -> Result<(), EngineError> {
        let (now, p) = (self.now, &self.spec.explore.pause);
        let f = &mut self.faults.node;
        let (lo, hi) = (simtime::span_ns(p.length.0), simtime::span_ns(p.length.1));
        let length = between(&mut f.pause_rng, lo as i64, hi as i64) as u64;
        f.pause_not_before = Some(now + Duration::from_nanos(below(&mut f.pause_rng, simtime::span_ns(p.span))));
        f.counts.pauses += 1;
        let resume_at = now + Duration::from_nanos(length);
        self.nodes[node].set_paused_until(Some(resume_at));
        self.trace.push(now, node, EventKind::Pause { resume_at });
        self.control(node, &AgentCommand::Pause)
    }

    /// Continues `node`'s paused start command.
    pub(crate) fn resume(&mut self, node: NodeId) -> Result<(), EngineError> {
        self.nodes[node].set_paused_until(None);
        self.trace.push(self.now, node, EventKind::Resume);
        self.control(node, &AgentCommand::Resume)
    }

    /// The quiet period or a calm probe begins: every paused node that is
    /// up continues now.
    pub(crate) fn resume_all(&mut self) -> Result<(), EngineError> {
        for node in self.nodes.ids() {
            if self.nodes[node].paused_until().is_some() && self.nodes[node].is_up() {
                self.resume(node)?;
            }
        }
        Ok(())
    }

    /// Jumps `node`'s wall clock: a bump, or a strobe (drawn when both
    /// are on).
    pub(crate) fn clock_jump(&mut self, node: NodeId) -> Result<(), EngineError> {
        let (now, c) = (self.now, &self.spec.explore.clock);
        let f = &mut self.faults.node;
        let strobe = match (c.bump_ns, c.strobe) {
            (Some(_), Some(s)) => (below(&mut f.clock_rng, 2) == 1).then_some(s),
            (None, s) => s,
            (Some(_), None) => None,
        };
        let (event, command) = match (strobe, c.bump_ns) {
            (Some(s), _) => {
                f.counts.clock_strobes += 1;
                let (delta_ns, period_ns, length_ns) =
                    (s.delta_ns, simtime::span_ns(s.period), simtime::span_ns(s.length));
                (
                    EventKind::ClockStrobe { delta_ns, period_ns, length_ns },
                    AgentCommand::ClockStrobe { delta_ns, period_ns, length_ns },
                )
            }
            (None, Some((lo, hi))) => {
                f.counts.clock_bumps += 1;
                let delta_ns = between(&mut f.clock_rng, lo, hi);
                (EventKind::ClockBump { delta_ns }, AgentCommand::ClockBump { delta_ns })
            }
            (None, None) => unreachable!("clock jumps are enabled only with a bump or a strobe"),
        };
        f.clock_not_before = Some(now + Duration::from_nanos(below(&mut f.clock_rng, simtime::span_ns(c.span))));
        self.trace.push(now, node, event);
        self.control(node, &command)
    }
}
