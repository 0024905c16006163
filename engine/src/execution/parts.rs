//! The named parts of an [`super::Execution`]'s state, one per concern.
//!
//! Each part is plain data; the behaviour that reads and changes it is in
//! the sibling module named after the concern (`script`, `node_faults`,
//! `apply`, `lookahead`, `enabled`). A part holds only what its concern
//! owns, so a reader can tell from the type which step of the engine may
//! have changed a value.

use std::collections::BTreeMap;

use crate::disk::CrashPoint;
use crate::disk::{CompletionFaults, DiskFaultCounts};
use crate::faults::FaultState;
use crate::outcome::Verdict;
use crate::NodeId;
use simtime::VirtualTime;

/// Progress of the cluster through its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Booting,
    /// Every agent is ready and the readiness probe
    /// ([`crate::ExecutionSpec::ready_probe`]) runs on each node; `passed`
    /// of them have passed. Still part of the boot.
    Probing {
        passed: usize,
    },
    /// Warm-start mode ([`crate::ExecutionSpec::boot_seed`]): every agent
    /// is ready and the workload has not started. The boot ends here, and
    /// an execution of its own begins at the next step (or in each child
    /// of a fork: see `crate::warm`).
    Ready,
    /// `[antithesis]`: every node is ready, and the workload waits for
    /// some node's SDK to report `setup_complete`.
    Setup,
    Workload,
    /// Invariants and liveness checks sent; `done` of them answered.
    Checks {
        done: usize,
    },
}

/// The script (boot, workload, checks) and how the execution ended.
pub(crate) struct Script {
    pub phase: Phase,
    /// Set once, by the first failure or when every check passed; the
    /// execution is over from then on.
    pub verdict: Option<Verdict>,
    /// What the history check found, by anomaly name (transactional
    /// models; see `HistoryOutcome::anomalies`).
    pub anomalies: BTreeMap<String, u64>,
    /// Some node's Antithesis SDK reported `setup_complete`.
    pub setup_seen: bool,
}

impl Script {
    pub fn new() -> Script {
        Script { phase: Phase::Booting, verdict: None, anomalies: BTreeMap::new(), setup_seen: false }
    }
}

/// Every fault the engine injects (crashes, disk faults, pauses, clock
/// jumps): when each kind becomes possible, its random streams, and what
/// happened.
pub(crate) struct Faults {
    /// Faults have begun: at the workload's start, or with `[faults]
    /// start_after` once its name was reached in the workload.
    pub begun: bool,
    /// A guest printed `[faults] start_after`'s name.
    pub start_after_seen: bool,
    /// A probe's fault-free continuation began (see `ExploreSpec::calm_from`):
    /// no fault is enabled from then on.
    pub calm: bool,
    /// Power losses so far; the next one is number `crashes + 1`.
    pub crashes: u32,
    /// Coordinated power failures so far (each counted in `crashes` once per node).
    pub power_failures: u32,
    /// Crashes are enabled from this virtual time on (drawn when the
    /// faults begin, and again after each crash; `None` before).
    pub crash_not_before: Option<VirtualTime>,
    /// Each crashed node's restart delay drawn at its crash (`[faults.crash]
    /// restart_after` as a range or per node), by node; a node
    /// absent restarts `restart_after` after its crash.
    pub restart_delays: BTreeMap<NodeId, std::time::Duration>,
    /// When faults began: the time `[[faults.crash.schedule]]` counts from.
    pub schedule_base: Option<VirtualTime>,
    /// The next entry of the crash schedule to apply.
    pub schedule_next: usize,
    /// What each crash of a node with a disk left behind.
    pub crash_points: Vec<CrashPoint>,
    /// The crash state a crash is forced into, by crash number: the
    /// spec's (`explore.crash_states`), and a warm-start sibling's
    /// (`Execution::force_crash_state`).
    pub forced_crash_states: BTreeMap<u32, u64>,
    /// The streams of the disk faults decided at completion (lost flush,
    /// write error, misdirect): drawn only where a fault can happen (a
    /// flush or write completes and its fault's probability is > 0), so
    /// turning them on or off shifts no other draw.
    pub disk: CompletionFaults,
    /// Disk faults that hit requests, by kind.
    pub disk_counts: DiskFaultCounts,
    /// Pauses and clock jumps: their streams, times and counts.
    pub node: FaultState,
    /// Connection resets and stalls: their stream, time and counts.
    pub conn: crate::conn_faults::ConnFaultState,
}

impl Faults {
    /// No fault yet; every stream drawn from `seed`.
    pub fn new(seed: u64, forced_crash_states: BTreeMap<u32, u64>) -> Faults {
        Faults {
            begun: false,
            start_after_seen: false,
            calm: false,
            crashes: 0,
            power_failures: 0,
            crash_not_before: None,
            restart_delays: BTreeMap::new(),
            schedule_base: None,
            schedule_next: 0,
            crash_points: Vec::new(),
            forced_crash_states,
            disk: CompletionFaults::new(seed),
            disk_counts: DiskFaultCounts::default(),
            node: FaultState::new(seed),
            conn: crate::conn_faults::ConnFaultState::new(seed),
        }
    }

    /// The streams start again from `seed` (a warm start's boot ends). The
    /// counts stay: the boot counted its clock offsets and drifts, and
    /// nothing else can have happened before the workload. (Before session
    /// 20 they were reset here, so a warm-start run reported no offsets.)
    pub fn reseed(&mut self, seed: u64) {
        self.disk = CompletionFaults::new(seed);
        let counts = self.node.counts;
        self.node = FaultState::new(seed);
        self.conn = crate::conn_faults::ConnFaultState::new(seed);
        self.node.counts = counts;
    }
}

/// Grants handed to nodes.
#[derive(Default)]
pub(crate) struct Grants {
    /// Every grant, each a node's wake-up at a time the engine chose.
    pub total: u64,
    /// Grants actually made, each a round trip to a node and back; fewer
    /// than `total` by the wake-ups nodes took under lookahead.
    pub round_trips: u64,
    /// The wake-ups the node run of the current step took by itself, and
    /// when that grant began (`lookahead`), for the step log.
    pub free_runs: Option<(VirtualTime, vmm::node::FreeRuns)>,
}

#[cfg(test)]
mod tests {
    use rand_core::RngCore;

    use super::*;

    #[test]
    fn reseeding_restarts_the_streams_and_keeps_the_counts() {
        let mut f = Faults::new(1, BTreeMap::new());
        f.node.counts.clock_offsets = 2;
        f.node.counts.clock_drifts = 1;
        f.node.pause_rng.next_u64();
        f.reseed(7);
        assert_eq!((f.node.counts.clock_offsets, f.node.counts.clock_drifts), (2, 1), "the boot's counts stay");
        let fresh = FaultState::new(7);
        let (mut p, mut c) = (fresh.pause_rng, fresh.clock_rng);
        assert_eq!(f.node.pause_rng.next_u64(), p.next_u64());
        assert_eq!(f.node.clock_rng.next_u64(), c.next_u64());
        assert_ne!(FaultState::new(1).pause_rng.next_u64(), FaultState::new(7).pause_rng.next_u64());
    }
}
