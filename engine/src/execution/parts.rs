//! The small parts of an [`super::Execution`]'s state: the script's
//! progress, when faults may happen, the grants' counts, stopping at a
//! crash point, and the wall clock. The larger
//! parts live in the module of their concern with their behaviour (`wire`,
//! `crashes`, `disks`, `node_faults`, `conn_faults`, `choices`).
//!
//! Every part keeps its fields private: a reader can tell from its methods
//! how a step may change it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::ctx::Ctx;
use crate::actions::Enabled;
use crate::agent::AgentCommand;
use crate::console::AgentMsg;
use crate::outcome::{Failure, FailureKind, Verdict};
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;
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
    /// Agent messages of a node run not yet acted on. A node run acts on
    /// them at its end; one that ends the execution (the node exited or
    /// hung) leaves them to the next node run, which acts on them only
    /// while the execution goes on (an inspection command running).
    inbox: Vec<(NodeId, AgentMsg)>,
}

impl Script {
    /// Booting, no verdict.
    pub fn new() -> Script {
        Script {
            phase: Phase::Booting,
            verdict: None,
            anomalies: BTreeMap::new(),
            setup_seen: false,
            inbox: Vec::new(),
        }
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

    /// The execution fails now, on `node` if one is to blame (its last
    /// console lines go into `what`).
    pub fn fail(&mut self, cx: &Ctx, kind: FailureKind, node: Option<NodeId>, what: String) {
        let (name, what) = match node {
            Some(i) => (Some(cx.nodes[i].name.clone()), cx.nodes[i].with_tail(what)),
            None => (None, what),
        };
        self.decide(Verdict::Fail(Failure::new(kind, name, cx.now, what)));
    }

    /// Sends an agent command to `node`, or keeps it until the node is up
    /// and ready again (it may be powered off or rebooting after a crash).
    pub fn command(&self, cx: &mut Ctx, node: NodeId, name: &str) -> Result<(), EngineError> {
        if !cx.nodes[node].is_ready() {
            cx.nodes[node].deferred.push(name.to_string());
            return Ok(());
        }
        cx.trace.push(cx.now, node, EventKind::Command { name: name.to_string() });
        // Checks start after the quiet period's settle time, which the
        // agent sleeps in the guest's virtual time (also after a restart).
        let mut line = match (self.phase, cx.spec.explore.quiet_settle) {
            (Phase::Checks { .. }, Some(settle)) if !settle.is_zero() => {
                AgentCommand::Settle { ns: simtime::span_ns(settle) }.encode()
            }
            _ => Vec::new(),
        };
        line.extend(AgentCommand::Run(name.to_string()).encode());
        // A check killed by a crash runs again once its node is back; the
        // workload does not (it would start its history over), nor does the
        // readiness probe (every restart sends it anew).
        if matches!(self.phase, Phase::Checks { .. }) && name != crate::READY_PROBE {
            cx.nodes[node].running.push(name.to_string());
        }
        let (now, watchdog) = (cx.now, cx.spec.watchdog);
        cx.nodes[node].vm().send_control(now, &line, watchdog)?;
        Ok(())
    }

    /// Whether some node's Antithesis SDK reported `setup_complete`.
    pub fn setup_seen(&self) -> bool {
        self.setup_seen
    }

    /// Some node's Antithesis SDK reported `setup_complete`.
    pub fn see_setup(&mut self) {
        self.setup_seen = true;
    }

    /// Node `from`'s agent sent `msg` (acted on at the end of the run).
    pub fn receive(&mut self, from: NodeId, msg: AgentMsg) {
        self.inbox.push((from, msg));
    }

    /// The agent messages not yet acted on, in the order they came.
    pub fn take_inbox(&mut self) -> Vec<(NodeId, AgentMsg)> {
        std::mem::take(&mut self.inbox)
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

/// Stopping at the first enumerable power loss for a warm start's
/// crash-state siblings ([`super::Step::CrashBranch`]).
///
/// Invariant: an action is held only while stopping is on, from the step
/// that chose it to the next, which applies it before anything else.
#[derive(Default)]
pub(crate) struct Branching {
    /// Stop at the first enumerable power loss.
    on: bool,
    /// The action a step chose and left for the next one to apply.
    held: Option<Enabled>,
}

impl Branching {
    /// Stop at the first enumerable power loss from now on, or not.
    pub fn set(&mut self, on: bool) {
        self.on = on;
    }

    /// Whether the steps stop at the first enumerable power loss.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// A step chose `chosen` and stopped before applying it.
    pub fn hold(&mut self, chosen: Enabled) {
        self.held = Some(chosen);
    }

    /// Whether an action waits to be applied.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// The action waiting to be applied, taken out.
    pub fn take_held(&mut self) -> Option<Enabled> {
        self.held.take()
    }
}

/// Wall-clock statistics (never read for anything a guest sees).
pub(crate) struct Wall {
    began: Instant,
    /// The first node's spawn: boot time counts from here, so nothing the
    /// run did before (image build, scratch set-up, node configuration)
    /// is taken for boot time.
    first_spawn: Option<Instant>,
    /// From the first spawn until every agent was ready.
    boot: Option<Duration>,
}

impl Wall {
    /// The execution began at `began`; its first node spawned at
    /// `first_spawn`.
    pub fn new(began: Instant, first_spawn: Option<Instant>) -> Wall {
        Wall { began, first_spawn, boot: None }
    }

    /// Wall time counts from now (a forked child's own run).
    pub fn restart(&mut self) {
        self.began = Instant::now();
    }

    /// Every agent is ready: the boot took until now.
    pub fn booted(&mut self) {
        self.boot = self.first_spawn.map(|t| t.elapsed());
    }

    /// The wall time since the execution began, and the boot's.
    pub fn totals(&self) -> (Duration, Option<Duration>) {
        (self.began.elapsed(), self.boot)
    }
}
