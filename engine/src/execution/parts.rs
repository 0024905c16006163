//! The small parts of an [`super::Execution`]'s state: the script's
//! progress, when faults may happen, and the grants' counts. The larger
//! parts live in the module of their concern with their behaviour (`wire`,
//! `crashes`, `disks`, `node_faults`, `conn_faults`, `choices`).
//!
//! Every part keeps its fields private: a reader can tell from its methods
//! how a step may change it.

use std::collections::BTreeMap;

use crate::outcome::Verdict;
use simtime::VirtualTime;
use vmm::node::FreeRuns;

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
    phase: Phase,
    /// Set by a failure or when every check passed; the execution is over
    /// from then on.
    verdict: Option<Verdict>,
    /// What the history check found, by anomaly name (transactional
    /// models; see `HistoryOutcome::anomalies`).
    anomalies: BTreeMap<String, u64>,
    /// Some node's Antithesis SDK reported `setup_complete`.
    setup_seen: bool,
}

impl Script {
    /// Booting, no verdict.
    pub fn new() -> Script {
        Script { phase: Phase::Booting, verdict: None, anomalies: BTreeMap::new(), setup_seen: false }
    }

    /// Where the cluster is in its script.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The cluster moves on to `phase`.
    pub fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
    }

    /// Whether the execution has its verdict (it is over).
    pub fn is_decided(&self) -> bool {
        self.verdict.is_some()
    }

    /// The verdict, once there is one.
    pub fn verdict(&self) -> Option<&Verdict> {
        self.verdict.as_ref()
    }

    /// The execution's verdict is `verdict` (its callers check
    /// [`Self::is_decided`] where a first verdict must stay).
    pub fn decide(&mut self, verdict: Verdict) {
        self.verdict = Some(verdict);
    }

    /// Takes the verdict out (at the end, or around an inspection command
    /// that must not end the execution).
    pub fn take_verdict(&mut self) -> Option<Verdict> {
        self.verdict.take()
    }

    /// Puts back what [`Self::take_verdict`] took (inspection).
    pub fn restore_verdict(&mut self, verdict: Option<Verdict>) {
        self.verdict = verdict;
    }

    /// Whether some node's Antithesis SDK reported `setup_complete`.
    pub fn setup_seen(&self) -> bool {
        self.setup_seen
    }

    /// Some node's Antithesis SDK reported `setup_complete`.
    pub fn see_setup(&mut self) {
        self.setup_seen = true;
    }

    /// The history check found `anomalies`.
    pub fn set_anomalies(&mut self, anomalies: BTreeMap<String, u64>) {
        self.anomalies = anomalies;
    }

    /// The anomalies, at the end.
    pub fn take_anomalies(&mut self) -> BTreeMap<String, u64> {
        std::mem::take(&mut self.anomalies)
    }
}

/// When faults may happen: from their beginning (the workload's start,
/// or `[faults] start_after`) until they stop for good (the quiet period,
/// a calm probe). Each kind's own gate (its drawn time, its budget) is in
/// its part: `Crashes`, `NodeFaults`, `ConnFaults`, `DiskFaults`, and the
/// wire's partitions.
#[derive(Default)]
pub(crate) struct FaultPeriod {
    /// Faults have begun.
    begun: bool,
    /// A guest printed `[faults] start_after`'s name.
    start_after_seen: bool,
    /// Faults have stopped: no fault is enabled or drawn from then on.
    calm: bool,
}

impl FaultPeriod {
    /// Faults begin now.
    pub fn begin(&mut self) {
        self.begun = true;
    }

    /// Faults stop for good.
    pub fn calm(&mut self) {
        self.calm = true;
    }

    /// Whether faults have stopped.
    pub fn is_calm(&self) -> bool {
        self.calm
    }

    /// Whether `[faults] start_after`'s name was printed.
    pub fn start_after_seen(&self) -> bool {
        self.start_after_seen
    }

    /// `[faults] start_after`'s name is printed for the first time: whether
    /// faults are to begin now, given whether the workload runs.
    pub fn see_start_after(&mut self, in_workload: bool) -> bool {
        self.start_after_seen = true;
        in_workload && !self.begun && !self.calm
    }
}

/// Grants handed to nodes.
#[derive(Default)]
pub(crate) struct Grants {
    /// Every grant, each a node's wake-up at a time the engine chose.
    total: u64,
    /// Grants actually made, each a round trip to a node and back; fewer
    /// than `total` by the wake-ups nodes took under lookahead.
    round_trips: u64,
    /// The wake-ups the node run of the current step took by itself, and
    /// when that grant began (`lookahead`), for the step log.
    free_runs: Option<(VirtualTime, FreeRuns)>,
}

impl Grants {
    /// A node is granted a wake-up.
    pub fn grant(&mut self) {
        self.total += 1;
    }

    /// A grant was made: a round trip to the node and back.
    pub fn round_trip(&mut self) {
        self.round_trips += 1;
    }

    /// The node run of this step, granted at `began`, took `free` wake-ups
    /// by itself: each was a grant too, and the step log takes them in
    /// ([`Self::take_free_runs`]).
    pub fn ran_free(&mut self, began: VirtualTime, free: FreeRuns) {
        self.total += free.count;
        self.free_runs = Some((began, free));
    }

    /// The wake-ups [`Self::ran_free`] left for the step log.
    pub fn take_free_runs(&mut self) -> Option<(VirtualTime, FreeRuns)> {
        self.free_runs.take()
    }

    /// Every grant, and the round trips among them.
    pub fn totals(&self) -> (u64, u64) {
        (self.total, self.round_trips)
    }
}
