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
//! - a kill (`ActionKind::Kill`, `[faults.kill]`) SIGKILLs a node's start
//!   command; its restart delay is drawn when it is chosen, and the restart
//!   is a timed action (a node `ActionKind::Restart`), sent to the agent
//!   as `start`.
//!
//! The agent (`src/image/rootfs.rs`) acts on `pause`, `resume` and `clock`
//! in its read loop while commands run in a runner of their own.

use std::time::Duration;

use simrng::Rng;

use crate::time::{NodeId, GUEST_EPOCH_NS};
use simrng::streams::{CLOCK_DRIFT as DRIFT_STREAM, CLOCK_OFFSET as OFFSET_STREAM};

/// `[faults.pause]`, checked. `max` 0: off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseSpec {
    /// Pauses per execution at most.
    pub max: u32,
    /// Nodes whose start command may be paused.
    pub nodes: Vec<NodeId>,
    /// A pause lasts a length drawn uniformly from this range.
    pub length: (Duration, Duration),
    /// Pauses become possible at a time drawn uniformly from the first
    /// `span` of the workload, and again after each pause from its time.
    pub span: Duration,
    /// Random walk weight of a pause (ordinary events: 100).
    pub weight: u32,
}

/// `[faults.kill]`, checked. `max` 0: off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KillSpec {
    /// Kills per execution at most.
    pub max: u32,
    /// Nodes whose start command may be killed.
    pub nodes: Vec<NodeId>,
    /// The start command runs again after a delay drawn uniformly from
    /// this range (both ends equal: that delay, nothing drawn).
    pub restart_after: (Duration, Duration),
    /// Kills become possible at a time drawn uniformly from the first
    /// `span` of the workload, and again after each kill from its time.
    pub span: Duration,
    /// Random walk weight of a kill (ordinary events: 100).
    pub weight: u32,
}

/// `[[faults.crash.schedule]]`, checked: `nodes` lose power at virtual
/// time `at` after faults begin, whatever the strategy does (several
/// nodes: together, a coordinated power failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledCrash {
    /// From the moment faults begin (the workload's start, or `[faults]
    /// start_after`).
    pub at: Duration,
    /// The nodes, ascending.
    pub nodes: Vec<NodeId>,
}

/// A delay drawn uniformly from `range` (inclusive) from `rng`; both ends
/// equal: that delay, and nothing drawn (so a fixed delay shifts no draw).
pub(crate) fn draw_delay(rng: &mut Rng, range: (Duration, Duration)) -> Duration {
    let (lo, hi) = (simtime::span_ns(range.0), simtime::span_ns(range.1));
    if lo >= hi {
        return range.0;
    }
    Duration::from_nanos(lo + simrng::below(rng, hi - lo + 1))
}

/// A strobe: the wall clock jumps forward by `delta_ns` and back every
/// `period` (of the node's own monotonic clock), for `length`, and
/// ends where it would have been without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrobeSpec {
    /// Each jump (ns; negative: back).
    pub delta_ns: i64,
    /// Time between jumps.
    pub period: Duration,
    /// How long a strobe lasts.
    pub length: Duration,
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
    pub nodes: Vec<NodeId>,
    /// Jumps become possible at a time drawn uniformly from the first
    /// `span` of the workload, and again after each jump from its time.
    pub span: Duration,
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Start commands killed (`[faults.kill]`).
    #[serde(default)]
    pub kills: u32,
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

pub(crate) use simrng::between;

/// Uniform in `[0, n)`; 0, drawing nothing, for `n` = 0 (a span of 0).
pub(crate) fn below(rng: &mut Rng, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    simrng::below(rng, n)
}

/// Each node's clock hardware, drawn before anything boots: offsets from
/// their stream, then drifts from theirs, over `spec.nodes` in order. A
/// part that is off draws nothing.
pub(super) fn node_clocks(spec: &ClockSpec, nodes: usize, seed: u64) -> Vec<NodeClock> {
    let mut clocks = vec![NodeClock::default(); nodes];
    if let Some((lo, hi)) = spec.offset_ns {
        let mut rng = simrng::stream(seed, OFFSET_STREAM);
        for i in spec.nodes.iter().map(|n| n.index()) {
            clocks[i].offset_ns = Some(between(&mut rng, lo, hi));
        }
    }
    if let Some((lo, hi)) = spec.drift_ppm {
        let mut rng = simrng::stream(seed, DRIFT_STREAM);
        for i in spec.nodes.iter().map(|n| n.index()) {
            clocks[i].drift_ppm = Some(between(&mut rng, lo, hi));
        }
    }
    clocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = simrng::seeded(7);
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
        let off = ClockSpec { nodes: vec![NodeId::at(0), NodeId::at(1)], ..Default::default() };
        assert_eq!(node_clocks(&off, 3, 1), vec![NodeClock::default(); 3]);
        let spec = ClockSpec {
            offset_ns: Some((-3_000_000_000, 3_000_000_000)),
            drift_ppm: Some((100, 200)),
            nodes: vec![NodeId::at(1), NodeId::at(2)],
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
