//! Node faults besides power loss: process pauses (`[faults.pause]`) and
//! clock faults (`[faults.clock]`).
//!
//! Every one is the engine's, at a virtual time, from a seeded stream of
//! its own (so turning one on or off shifts no other draw, and one that is
//! off draws nothing):
//! - a pause is an action (`ActionKind::Pause`) the strategy chooses; its
//!   length is drawn when it is chosen, and the resume is a timed action at
//!   pause time + length (`ActionKind::Resume`), like a restart after a crash;
//! - a clock jump (`ActionKind::ClockJump`) is a bump or a strobe of a
//!   node's wall clock, sent to the agent as `clock bump NS` or `clock
//!   strobe DELTA PERIOD LENGTH` (the guest's `/sim/clock` helper does it);
//! - a clock offset and a drift are decisions taken once per node, before
//!   it boots: the offset moves the node's time of day (GET_TOD under
//!   user-mode Linux, the CMOS date under KVM), the drift reaches the guest
//!   on its kernel command line and `/init` sets it with `/sim/clock drift`.
//!   Both hold for every boot of the node (they are the node's hardware).
//!
//! The agent (`src/image/rootfs.rs`) acts on `pause`, `resume` and `clock`
//! in its read loop while commands run in a runner of their own.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::agent::AgentCommand;
use super::{EngineError, Execution, GUEST_EPOCH_NS};
use crate::time::NodeIdx;
use crate::trace::EventKind;

/// `[faults.pause]`, checked. `max` 0: off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseSpec {
    /// Pauses per execution at most.
    pub max: u32,
    /// Nodes whose start command may be paused.
    pub nodes: Vec<NodeIdx>,
    /// A pause lasts a length drawn uniformly from this range (ns).
    pub length_ns: (u64, u64),
    /// Pauses become possible at a time drawn uniformly from the first
    /// `span_ns` of the workload, and again after each pause from its time.
    pub span_ns: u64,
    /// Random walk weight of a pause (ordinary events: 100).
    pub weight: u32,
}

/// A strobe: the wall clock jumps forward by `delta_ns` and back every
/// `period_ns` (of the node's own monotonic clock), for `length_ns`, and
/// ends where it would have been without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrobeSpec {
    /// Each jump (ns; negative: back).
    pub delta_ns: i64,
    /// Time between jumps (ns).
    pub period_ns: u64,
    /// How long a strobe lasts (ns).
    pub length_ns: u64,
}

/// `[faults.clock]`, checked. Everything `None` and `max` 0: off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClockSpec {
    /// Each node's wall clock at boot is off by an offset drawn from this
    /// range (ns; negative: behind).
    pub offset_ns: Option<(i64, i64)>,
    /// Each node's clocks run this many ppm fast (negative: slow), drawn
    /// per node from this range.
    pub drift_ppm: Option<(i64, i64)>,
    /// A bump jumps the wall clock by a delta drawn from this range (ns).
    pub bump_ns: Option<(i64, i64)>,
    /// A strobe's shape, if strobes are on.
    pub strobe: Option<StrobeSpec>,
    /// Clock jumps (bumps and strobes) per execution at most.
    pub max: u32,
    /// Nodes whose clocks are faulty.
    pub nodes: Vec<NodeIdx>,
    /// Jumps become possible at a time drawn uniformly from the first
    /// `span_ns` of the workload, and again after each jump from its time.
    pub span_ns: u64,
    /// Random walk weight of a clock jump (ordinary events: 100).
    pub weight: u32,
}

impl ClockSpec {
    /// Whether clock jumps are on (they need the budget and a kind).
    pub fn jumps(&self) -> bool {
        self.max > 0 && (self.bump_ns.is_some() || self.strobe.is_some())
    }
}

/// How many of each node fault an execution saw (the run's JSON line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Pauses applied.
    pub pauses: u32,
    /// Clock bumps applied.
    pub clock_bumps: u32,
    /// Clock strobes begun.
    pub clock_strobes: u32,
    /// Boots with a clock offset (every boot of an offset node counts).
    pub clock_offsets: u32,
    /// Boots with a clock drift.
    pub clock_drifts: u32,
}

/// A node's clock hardware: what every boot of it starts with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeClock {
    /// The wall clock's offset from the cluster's (ns), if drawn.
    pub offset_ns: Option<i64>,
    /// The clocks' drift (ppm), if drawn.
    pub drift_ppm: Option<i64>,
}

impl NodeClock {
    /// The wall-clock time (ns since the Unix epoch) this node's clock reads
    /// at virtual time 0.
    pub fn time_of_day(&self) -> u64 {
        GUEST_EPOCH_NS.wrapping_add_signed(self.offset_ns.unwrap_or(0))
    }
}

/// The environment variable that carries a node's drift to `/init` on its
/// kernel command line.
pub const DRIFT_ENV: &str = "SIM_CLOCK_DRIFT_PPM";

/// Stream names (ASCII), XORed into the execution seed: distinct from each
/// other and from every other stream of the engine.
const PAUSE_STREAM: u64 = 0x0070_6175_7365; // "pause"
const CLOCK_STREAM: u64 = 0x0063_6c6f_636b; // "clock"
const OFFSET_STREAM: u64 = 0x6f66_6673_6574; // "offset"
const DRIFT_STREAM: u64 = 0x0064_7269_6674; // "drift"

/// Uniform in `[lo, hi]` (`lo <= hi`), by Lemire's multiply-shift over the
/// width of the range (exact for any i64 range).
fn between(rng: &mut Xoshiro256PlusPlus, lo: i64, hi: i64) -> i64 {
    debug_assert!(lo <= hi);
    let width = (hi as i128 - lo as i128) as u128 + 1;
    if width > u64::MAX as u128 {
        return rng.next_u64() as i64;
    }
    let k = ((rng.next_u64() as u128 * width) >> 64) as i128;
    (lo as i128 + k) as i64
}

/// Uniform in `[0, n)`; 0 for `n` = 0.
fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

/// Each node's clock hardware, drawn before anything boots: offsets from
/// their stream, then drifts from theirs, over `spec.nodes` in order. A
/// part that is off draws nothing.
pub(super) fn node_clocks(spec: &ClockSpec, nodes: usize, seed: u64) -> Vec<NodeClock> {
    let mut clocks = vec![NodeClock::default(); nodes];
    if let Some((lo, hi)) = spec.offset_ns {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ OFFSET_STREAM);
        for i in spec.nodes.iter().map(|n| n.index()) {
            clocks[i].offset_ns = Some(between(&mut rng, lo, hi));
        }
    }
    if let Some((lo, hi)) = spec.drift_ppm {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ DRIFT_STREAM);
        for i in spec.nodes.iter().map(|n| n.index()) {
            clocks[i].drift_ppm = Some(between(&mut rng, lo, hi));
        }
    }
    clocks
}

/// The engine's state of pauses and clock jumps in one execution.
pub(super) struct FaultState {
    pause_rng: Xoshiro256PlusPlus,
    clock_rng: Xoshiro256PlusPlus,
    /// Pauses are enabled from this virtual time on (`None` before the
    /// workload, or when pauses are off).
    pause_not_before: Option<u64>,
    clock_not_before: Option<u64>,
    pub counts: FaultCounts,
}

impl FaultState {
    pub fn new(seed: u64) -> FaultState {
        FaultState {
            pause_rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ PAUSE_STREAM),
            clock_rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ CLOCK_STREAM),
            pause_not_before: None,
            clock_not_before: None,
            counts: FaultCounts::default(),
        }
    }
}

impl Execution<'_> {
    /// The workload starts: draw when pauses and clock jumps become
    /// possible (only for those that are on).
    pub(super) fn start_node_faults(&mut self) {
        let (now, e) = (self.now, &self.spec.explore);
        let f = &mut self.faults;
        if e.pause.max > 0 {
            f.pause_not_before = Some(now + below(&mut f.pause_rng, e.pause.span_ns));
        }
        if e.clock.jumps() {
            f.clock_not_before = Some(now + below(&mut f.clock_rng, e.clock.span_ns));
        }
    }

    /// Records node `i`'s clock hardware at one of its boots.
    pub(super) fn record_node_clock(&mut self, i: usize) {
        let (now, node) = (self.now, (i + 1) as u16);
        let clock = self.nodes[i].clock;
        if let Some(offset_ns) = clock.offset_ns {
            self.faults.counts.clock_offsets += 1;
            self.trace.push(now, node, EventKind::ClockOffset { offset_ns });
        }
        if let Some(ppm) = clock.drift_ppm {
            self.faults.counts.clock_drifts += 1;
            self.trace.push(now, node, EventKind::ClockDrift { ppm });
        }
    }

    /// Node `i` may be paused now: in the workload (or later, without a
    /// quiet period) from the drawn time on, within the budget, not calm,
    /// up, ready, not paused already, and with frames in flight: a pause
    /// matters while the rest of the cluster waits for the node's answers
    /// (a pause of an idle node tests nothing; offered at every step, the
    /// budget would go on the first steps after the drawn time).
    pub(super) fn pause_enabled(&self, i: usize) -> bool {
        let p = &self.spec.explore.pause;
        let n = &self.nodes[i];
        let time = self.faults.pause_not_before.is_some_and(|t| self.now >= t);
        let id = netsim::NodeId::new((i + 1) as u16).expect("node ids fit");
        let sending = self.net.as_ref().is_some_and(|ns| ns.has_in_flight_from(id));
        time && self.faults.counts.pauses < p.max
            && !self.calm
            && n.is_up()
            && n.ready
            && n.paused_until.is_none()
            && sending
    }

    /// Node `i`'s clock may jump now: from the drawn time on, within the
    /// budget, not calm, up and ready. Every moment of a running node is
    /// at stake for its clock; the drawn times spread the jumps.
    pub(super) fn clock_jump_enabled(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        let time = self.faults.clock_not_before.is_some_and(|t| self.now >= t);
        let c = &self.spec.explore.clock;
        let used = self.faults.counts.clock_bumps + self.faults.counts.clock_strobes;
        time && used < c.max && !self.calm && n.is_up() && n.ready
    }

    /// Stops node `i`'s start command until a drawn length from now.
    pub(super) fn pause(&mut self, i: usize) -> Result<(), EngineError> {
        let (now, p) = (self.now, &self.spec.explore.pause);
        let f = &mut self.faults;
        let length = between(&mut f.pause_rng, p.length_ns.0 as i64, p.length_ns.1 as i64) as u64;
        f.pause_not_before = Some(now + below(&mut f.pause_rng, p.span_ns));
        f.counts.pauses += 1;
        let resume_at = now + length;
        self.nodes[i].paused_until = Some(resume_at);
        self.trace.push(now, (i + 1) as u16, EventKind::Pause { resume_at });
        self.control(i, &AgentCommand::Pause)
    }

    /// Continues node `i`'s paused start command.
    pub(super) fn resume(&mut self, i: usize) -> Result<(), EngineError> {
        self.nodes[i].paused_until = None;
        self.trace.push(self.now, (i + 1) as u16, EventKind::Resume);
        self.control(i, &AgentCommand::Resume)
    }

    /// The quiet period or a calm probe begins: every paused node that is
    /// up continues now.
    pub(super) fn resume_all(&mut self) -> Result<(), EngineError> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].paused_until.is_some() && self.nodes[i].is_up() {
                self.resume(i)?;
            }
        }
        Ok(())
    }

    /// Jumps node `i`'s wall clock: a bump, or a strobe (drawn when both
    /// are on).
    pub(super) fn clock_jump(&mut self, i: usize) -> Result<(), EngineError> {
        let (now, c) = (self.now, &self.spec.explore.clock);
        let f = &mut self.faults;
        let strobe = match (c.bump_ns, c.strobe) {
            (Some(_), Some(s)) => (below(&mut f.clock_rng, 2) == 1).then_some(s),
            (None, s) => s,
            (Some(_), None) => None,
        };
        let (event, command) = match (strobe, c.bump_ns) {
            (Some(s), _) => {
                f.counts.clock_strobes += 1;
                let (delta_ns, period_ns, length_ns) = (s.delta_ns, s.period_ns, s.length_ns);
                (EventKind::ClockStrobe { delta_ns, period_ns, length_ns }, AgentCommand::ClockStrobe { delta_ns, period_ns, length_ns })
            }
            (None, Some((lo, hi))) => {
                f.counts.clock_bumps += 1;
                let delta_ns = between(&mut f.clock_rng, lo, hi);
                (EventKind::ClockBump { delta_ns }, AgentCommand::ClockBump { delta_ns })
            }
            (None, None) => unreachable!("clock jumps are enabled only with a bump or a strobe"),
        };
        f.clock_not_before = Some(now + below(&mut f.clock_rng, c.span_ns));
        self.trace.push(now, (i + 1) as u16, event);
        self.control(i, &command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..1000 {
            let v = between(&mut rng, -3, 2);
            assert!((-3..=2).contains(&v), "{v}");
            assert!(below(&mut rng, 5) < 5);
        }
        assert_eq!(between(&mut rng, 4, 4), 4);
        assert_eq!(below(&mut rng, 0), 0);
        // Both ends are reachable.
        let seen: std::collections::BTreeSet<i64> = (0..200).map(|_| between(&mut rng, -1, 1)).collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![-1, 0, 1]);
        let _ = between(&mut rng, i64::MIN, i64::MAX);
    }

    #[test]
    fn node_clocks_are_drawn_only_for_faulty_nodes_and_only_when_on() {
        let off = ClockSpec { nodes: vec![NodeIdx::new(0), NodeIdx::new(1)], ..Default::default() };
        assert_eq!(node_clocks(&off, 3, 1), vec![NodeClock::default(); 3]);
        let spec = ClockSpec {
            offset_ns: Some((-3_000_000_000, 3_000_000_000)),
            drift_ppm: Some((100, 200)),
            nodes: vec![NodeIdx::new(1), NodeIdx::new(2)],
            ..Default::default()
        };
        let c = node_clocks(&spec, 3, 1);
        assert_eq!(c[0], NodeClock::default());
        for n in &c[1..] {
            assert!(n.offset_ns.is_some_and(|o| o.abs() <= 3_000_000_000));
            assert!(n.drift_ppm.is_some_and(|p| (100..=200).contains(&p)));
        }
        assert_eq!(c, node_clocks(&spec, 3, 1), "a pure function of the seed");
        // The offset stream does not depend on whether drift is on.
        let offsets_only = ClockSpec { drift_ppm: None, ..spec.clone() };
        let o = node_clocks(&offsets_only, 3, 1);
        assert_eq!(o[1].offset_ns, c[1].offset_ns);
        assert_eq!(NodeClock { offset_ns: Some(-5), drift_ppm: None }.time_of_day(), GUEST_EPOCH_NS - 5);
    }
}
