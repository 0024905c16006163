//! [`Execution`]: one execution between steps, and its life cycle.
//!
//! [`Execution::new`] boots and connects every node; [`Execution::step`]
//! takes one engine step (gather the pending events, advance the clock,
//! compute the enabled set, ask the strategy, apply its pick, move the
//! cluster's script on); [`Execution::finish`] takes the nodes down and
//! gives the [`ExecutionResult`]. [`crate::execute`] loops them.

use std::time::{Duration, Instant};

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use vmm::node::NodeConfig;
use vmm::runtime::RuntimeKind;

use crate::actions::{effective_time, horizon, Enabled};
use crate::console::AgentMsg;
use crate::disk::{self, CrashPoint, DiskFaultCounts};
use crate::faults::{self, NodeClock, DRIFT_ENV};
use crate::host;
use crate::network;
use crate::node::Node;
use crate::outcome::{ExecutionResult, FailureKind, Verdict};
use crate::pending::Pending;
use crate::seeds::{entropy_seed, read_fault_seed};
use crate::spec::{EngineError, ExecutionSpec};
use crate::steps::StepLog;
use crate::strategy::{default_choice, ActionKind, Decision, EnabledAction, Strategy};
use crate::time::VirtualTime;
use crate::trace::{EventKind, Trace};
use crate::NodeIdx;
use simrng::streams::BOOT_CHOICE as BOOT_CHOICE_STREAM;

/// Progress of the cluster through its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Booting,
    /// Every agent is ready and the readiness probe
    /// ([`ExecutionSpec::ready_probe`]) runs on each node; `passed` of
    /// them have passed. Still part of the boot.
    Probing {
        passed: usize,
    },
    /// Warm-start mode ([`ExecutionSpec::boot_seed`]): every agent is
    /// ready and the workload has not started. The boot ends here, and
    /// an execution of its own begins at the next step (or in each child
    /// of a fork: see `crate::warm`).
    Ready,
    Workload,
    /// Invariants and liveness checks sent; `done` of them answered.
    Checks {
        done: usize,
    },
}

/// What [`Execution::step`] left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The execution goes on: call [`Execution::step`] again.
    Running,
    /// The execution has its verdict: call [`Execution::finish`].
    Done,
    /// Only with [`Execution::branch_at_crash`]: the step chose the
    /// execution's first power loss of a node whose disk would be left in
    /// one of few enough crash states to enumerate, and has not applied it
    /// yet. The next [`Execution::step`] applies it. A copy of the
    /// execution (a fork) that forces another state first
    /// ([`Execution::force_crash_state`]) is that state's sibling.
    CrashBranch(CrashBranch),
}

/// A power loss about to happen, whose crash states can be enumerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashBranch {
    /// Its crash number (1-based) in the execution.
    pub crash: u32,
    /// How many crash states the disk may be left in.
    pub states: u64,
    /// The one the execution draws (its siblings take the others).
    pub chosen: u64,
}

/// The strategy's side of the execution: what it was asked and what it
/// answered.
struct Choices {
    /// Choice points so far (steps with more than one enabled action).
    points: u64,
    /// Steps so far, every action counted.
    steps: u64,
    /// A critical-transition probe's calm continuation picks with this
    /// instead of asking the strategy (see `ExploreSpec::calm_from`).
    calm_rng: Option<Xoshiro256PlusPlus>,
    /// In warm-start mode, the boot picks with this (seeded from the boot
    /// seed) instead of asking the strategy, so every execution of a run
    /// shares one boot.
    boot_rng: Option<Xoshiro256PlusPlus>,
    /// Picks other than the default scheduler's.
    decisions: Vec<Decision>,
    /// Every action taken, quiet runs folded.
    log: StepLog,
    /// The enabled set of the current step (kept to reuse its buffer).
    enabled: Vec<Enabled>,
    /// Its descriptions, as the strategy sees them.
    descs: Vec<EnabledAction>,
    /// The pending events of the current step (kept to reuse its buffers).
    pending: Pending,
}

impl Choices {
    /// The index of the action to take among `enabled` (non-empty).
    fn pick(&mut self, enabled: &[Enabled], strategy: &mut dyn Strategy) -> usize {
        if enabled.len() == 1 {
            return 0;
        }
        let step = self.points;
        self.points += 1;
        if let Some(rng) = self.calm_rng.as_mut().or(self.boot_rng.as_mut()) {
            return (rng.next_u64() % enabled.len() as u64) as usize;
        }
        self.descs.clear();
        self.descs.extend(enabled.iter().map(|e| e.desc));
        let k = strategy.choose(step, &self.descs).min(enabled.len() - 1);
        if k != default_choice(&self.descs) {
            self.decisions.push(Decision { step, action: self.descs[k] });
        }
        k
    }
}

/// Wall-clock statistics (never read for anything a guest sees).
struct Wall {
    began: Instant,
    /// The first node's spawn: boot time counts from here, so nothing the
    /// run did before (image build, scratch set-up, node configuration)
    /// is taken for boot time.
    first_spawn: Option<Instant>,
    /// From the first spawn until every agent was ready.
    boot: Option<Duration>,
}

/// One execution of a cluster under virtual time, between steps.
///
/// The engine is the only source of time for every node, and exactly one
/// node executes at any moment. Dropping an `Execution` takes its nodes
/// down.
pub struct Execution<'a> {
    pub(crate) spec: &'a ExecutionSpec,
    /// The seed every stream of the execution is drawn from: the
    /// execution's own ([`ExecutionSpec::seed`]), or in warm-start mode
    /// the boot seed until every agent is ready.
    pub(crate) seed: u64,
    pub(crate) nodes: Vec<Node>,
    pub(crate) net: Option<network::NetState>,
    /// The host-side client, with a host workload.
    pub(crate) host: Option<host::HostEndpoint>,
    pub(crate) trace: Trace,
    pub(crate) now: VirtualTime,
    pub(crate) phase: Phase,
    pub(crate) crashes: u32,
    pub(crate) crash_points: Vec<CrashPoint>,
    /// Crashes are enabled from this virtual time on (drawn when the
    /// workload starts; `None` before).
    pub(crate) crash_not_before: Option<VirtualTime>,
    /// Faults have begun: at the workload's start, or with `[faults]
    /// start_after` once its name was reached in the workload.
    pub(crate) faults_begun: bool,
    /// A guest printed `[faults] start_after`'s name.
    pub(crate) start_after_seen: bool,
    /// A probe's fault-free continuation began (see `ExploreSpec::calm_from`).
    pub(crate) calm: bool,
    pub(crate) grants: u64,
    /// Grants actually made, each a round trip to a node and back; fewer
    /// than `grants` by the wake-ups nodes took under lookahead.
    pub(crate) round_trips: u64,
    /// The wake-ups the node run of the current step took by itself, and
    /// when that grant began (`lookahead`), for the step log.
    pub(crate) free_runs: Option<(VirtualTime, vmm::node::FreeRuns)>,
    /// The streams of the disk faults decided at completion (lost flush,
    /// write error, misdirect): drawn only where a fault can happen (a
    /// flush or write completes and its fault's probability is > 0), so
    /// turning them on or off shifts no other draw.
    pub(crate) disk_faults: disk::CompletionFaults,
    /// Disk faults that hit requests, by kind.
    pub(crate) disk_fault_counts: DiskFaultCounts,
    /// Pauses and clock jumps: their streams, times and counts.
    pub(crate) faults: faults::FaultState,
    pub(crate) verdict: Option<Verdict>,
    /// What the history check found, by anomaly name (transactional
    /// models; see `HistoryOutcome::anomalies`).
    pub(crate) anomalies: std::collections::BTreeMap<String, u64>,
    pub(crate) msgs: Vec<(usize, AgentMsg)>,
    choices: Choices,
    wall: Wall,
    /// Stop at the first enumerable power loss ([`Step::CrashBranch`]).
    branch_at_crash: bool,
    /// The action a step chose and left for the next one to apply.
    held: Option<Enabled>,
}

/// Node `i`'s configuration for its first boot.
fn node_config(spec: &ExecutionSpec, i: usize, peers: &str, clock: &NodeClock) -> NodeConfig {
    let name = &spec.node_names[i];
    let mut init_env = vec![
        ("NODE_ID".into(), (i + 1).to_string()),
        ("NODE_NAME".into(), name.clone()),
        ("PEERS".into(), peers.to_string()),
    ];
    if let Some(ppm) = clock.drift_ppm {
        // `/init` sets it before anything else runs (see `faults`).
        init_env.push((DRIFT_ENV.into(), ppm.to_string()));
    }
    NodeConfig {
        kernel: spec.kernel.clone(),
        initrd: spec.initrd.clone(),
        mem_mb: spec.mem_mb,
        node_id: NodeIdx::number_of(i),
        run_dir: spec.scratch.join(name),
        init_env,
        extra_args: if spec.runtime == RuntimeKind::Uml { spec.uml_args.clone() } else { vec![] },
        net: spec.network.is_some(),
        // Node::boot sets it for each boot (see `entropy_seed`).
        entropy_seed: entropy_seed(spec.stream_seed(), i as u64, 0),
        read_faults: disksim::ReadFaults {
            corrupt_read: spec.disk.as_ref().map_or(0.0, |d| d.faults.corrupt_read),
            // Node::boot sets it for each boot (see `read_fault_seed`).
            seed: read_fault_seed(spec.stream_seed(), i as u64, 0),
        },
        shared_clock: spec.shared_clock,
        root_disk: spec.root_disk.clone(),
        kernel_faults_cpuid: spec.kernel_faults_cpuid,
    }
}

/// Spawns every node (not yet connected); notes the first spawn's time.
fn boot_nodes(spec: &ExecutionSpec, first_spawn: &mut Option<Instant>) -> Result<Vec<Node>, EngineError> {
    let peers = spec.node_names.join(",");
    // Clock hardware is set at boot: in warm-start mode the boot seed's.
    let clocks = faults::node_clocks(&spec.explore.clock, spec.node_names.len(), spec.stream_seed());
    let mut nodes = Vec::new();
    for (i, name) in spec.node_names.iter().enumerate() {
        let cfg = node_config(spec, i, &peers, &clocks[i]);
        let mut n = Node::new(name.clone(), cfg, spec.runtime, spec.scratch.clone());
        n.disk = spec.disk.as_ref().map(|d| disksim::Disk::new(d.base.clone()));
        n.clock = clocks[i];
        first_spawn.get_or_insert_with(Instant::now);
        n.boot(spec.stream_seed())?;
        nodes.push(n);
    }
    Ok(nodes)
}

/// The host-side client of `spec`'s host workload, drawing from `seed`, its
/// clock starting at `now`; `None` without one (or without a network).
fn host_endpoint(spec: &ExecutionSpec, seed: u64, now: VirtualTime) -> Option<host::HostEndpoint> {
    match (&spec.host_workload, &spec.network) {
        (Some(w), Some(_)) => host::HostEndpoint::new(spec.node_names.len() as u16, w.clone(), seed, now.as_ns()),
        _ => None,
    }
}

/// The simulated network (with the host client's node, if any: in
/// warm-start mode before the client itself exists).
fn network(spec: &ExecutionSpec) -> Result<Option<network::NetState>, EngineError> {
    let Some(n) = &spec.network else { return Ok(None) };
    let guests = spec.node_names.len() as u16;
    let host = spec.host_workload.as_ref().and_then(|_| host::client_node(guests));
    network::NetState::new(
        n,
        guests + u16::from(host.is_some()),
        host,
        spec.stream_seed(),
        spec.time_limit_ns,
        // In warm-start mode random partitions start with the execution's
        // own seed, when the boot ends.
        spec.explore.faults_after.is_some() || spec.boot_seed.is_some(),
    )
    .map(Some)
    .map_err(|source| EngineError::Scratch { path: spec.scratch.clone(), source })
}

impl<'a> Execution<'a> {
    /// Boots every node of `spec` and connects it at virtual time 0. The
    /// caller has called the strategy's `begin_execution`.
    pub fn new(spec: &'a ExecutionSpec) -> Result<Execution<'a>, EngineError> {
        let began = Instant::now();
        let mut first_spawn = None;
        let nodes = boot_nodes(spec, &mut first_spawn)?;
        // In warm-start mode the host client is made when the boot ends,
        // with the execution's seed; its node is in the network from now.
        let host = spec.boot_seed.is_none().then(|| host_endpoint(spec, spec.seed, VirtualTime::ZERO)).flatten();
        let net = network(spec)?;
        let mut ex = Execution {
            spec,
            seed: spec.stream_seed(),
            nodes,
            net,
            host,
            trace: Trace::new(),
            now: VirtualTime::ZERO,
            phase: Phase::Booting,
            crashes: 0,
            crash_points: Vec::new(),
            crash_not_before: None,
            faults_begun: false,
            start_after_seen: false,
            calm: false,
            grants: 0,
            round_trips: 0,
            free_runs: None,
            disk_faults: disk::CompletionFaults::new(spec.stream_seed()),
            disk_fault_counts: DiskFaultCounts::default(),
            faults: faults::FaultState::new(spec.stream_seed()),
            verdict: None,
            anomalies: Default::default(),
            msgs: Vec::new(),
            choices: Choices {
                points: 0,
                steps: 0,
                calm_rng: None,
                boot_rng: spec.boot_seed.map(|s| simrng::stream(s, BOOT_CHOICE_STREAM)),
                decisions: Vec::new(),
                log: StepLog::new(),
                enabled: Vec::new(),
                descs: Vec::new(),
                pending: Pending::default(),
            },
            wall: Wall { began, first_spawn, boot: None },
            branch_at_crash: false,
            held: None,
        };
        for i in 0..ex.nodes.len() {
            ex.nodes[i].connect(VirtualTime::ZERO, spec.connect_timeout)?;
            ex.trace.push(VirtualTime::ZERO, NodeIdx::number_of(i), EventKind::Boot);
            ex.record_node_clock(i);
        }
        Ok(ex)
    }

    /// The current virtual time.
    pub fn now(&self) -> VirtualTime {
        self.now
    }

    /// In warm-start mode, every agent is ready and the workload has not
    /// started: the point where every execution of a run begins from the
    /// same boot (see [`ExecutionSpec::boot_seed`]).
    pub fn is_booted(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Ends a warm-start boot ([`Self::is_booted`]) for the execution with
    /// seed `seed`: every stream is drawn from it from now on (netsim's,
    /// the random partitions', the disk and node faults', the host
    /// client's, each node's entropy and read-fault devices'), the
    /// strategy makes the choices, and the workload starts. A cold run
    /// does this at its first step after the boot, a forked child before
    /// its first step, so both go on alike.
    pub(crate) fn end_boot(&mut self, seed: u64) -> Result<(), EngineError> {
        debug_assert_eq!(self.phase, Phase::Ready);
        self.seed = seed;
        self.choices.boot_rng = None;
        self.disk_faults = disk::CompletionFaults::new(seed);
        self.faults = faults::FaultState::new(seed);
        self.host = host_endpoint(self.spec, seed, self.now);
        if let Some(ns) = self.net.as_mut() {
            ns.reseed(seed, self.now.as_ns(), self.spec.explore.faults_after.is_none());
        }
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.reseed_devices(seed, i as u64);
        }
        let text = "boot ends: every agent ready; the execution's own streams begin".to_string();
        self.trace.push(self.now, crate::trace::ENGINE, EventKind::Note { text });
        self.start_workload()
    }

    /// Wall time counts from now (a forked child's, for its own run).
    pub(crate) fn restart_wall_clock(&mut self) {
        self.wall.began = Instant::now();
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// One engine step: gather the pending events, fail the execution if
    /// nothing is pending or the earliest is past the time limit,
    /// compute the enabled set, let `strategy` choose at a choice point
    /// (a step with more than one enabled action), apply the pick at its
    /// time, and move the cluster's script on (workload, checks, verdict).
    /// Returns [`Step::Done`] once the execution has its verdict.
    pub fn step(&mut self, strategy: &mut dyn Strategy) -> Result<Step, EngineError> {
        if self.verdict.is_some() {
            return Ok(Step::Done);
        }
        if self.spec.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            // The nodes go down as the execution drops, as on every other error.
            return Err(EngineError::Cancelled);
        }
        if let Some(chosen) = self.held.take() {
            return self.apply_chosen(chosen);
        }
        if self.phase == Phase::Ready {
            self.end_boot(self.spec.seed)?;
        }
        let mut pending = std::mem::take(&mut self.choices.pending);
        self.gather_pending(&mut pending);
        let Some(earliest) = pending.earliest() else {
            self.fail(FailureKind::GuestExit, None, "every node has exited".into());
            return Ok(Step::Done);
        };
        if earliest > VirtualTime::from_ns(self.spec.time_limit_ns) {
            self.time_limit();
            return Ok(Step::Done);
        }
        if self.calm_probe()? {
            // Calming resumes paused nodes: gather again.
            self.gather_pending(&mut pending);
        }
        let window = Duration::from_nanos(self.spec.explore.window_ns);
        let horizon = horizon(earliest, self.now, window, pending.min_requested());
        let mut enabled = std::mem::take(&mut self.choices.enabled);
        self.enabled(&pending, horizon, &mut enabled);
        self.choices.pending = pending;
        let chosen = enabled[self.choices.pick(&enabled, strategy)];
        self.choices.enabled = enabled;
        self.now = effective_time(&chosen, self.now);
        self.choices.steps += 1;
        if let Some(branch) = self.crash_branch(&chosen) {
            self.held = Some(chosen);
            return Ok(Step::CrashBranch(branch));
        }
        self.apply_chosen(chosen)
    }

    /// The rest of a step once its action is chosen (and its time taken):
    /// apply it and move the script on.
    fn apply_chosen(&mut self, chosen: Enabled) -> Result<Step, EngineError> {
        let visible = self.trace.visible();
        self.apply(chosen.action)?;
        let mut desc = chosen.desc;
        if let Some((began, free)) = self.free_runs.take() {
            // The node ran ahead: this step is its last wake-up.
            desc = self.log_free_runs(desc, began, free);
        }
        // Quiet: a node run that added nothing to the trace but its (folded)
        // `Run`; the step log folds those as the trace does.
        let quiet = desc.kind == ActionKind::RunNode && self.trace.visible() == visible;
        self.choices.log.push(self.now, desc, quiet);
        self.advance_script()?;
        Ok(if self.verdict.is_some() { Step::Done } else { Step::Running })
    }

    /// With [`Self::branch_at_crash`]: whether `chosen` is the execution's
    /// first power loss of a node with a disk, no state forced for it, and
    /// its crash states few enough to enumerate (the crash-state siblings
    /// of a run are those of the first crash point).
    fn crash_branch(&self, chosen: &Enabled) -> Option<CrashBranch> {
        let crate::actions::Action::Crash(i) = chosen.action else { return None };
        if !self.branch_at_crash || !self.crash_points.is_empty() {
            return None;
        }
        let crash = self.crashes + 1;
        if self.spec.explore.crash_states.contains_key(&crash) {
            return None;
        }
        let states = disk::enumerable_states(self.nodes[i].vm.as_ref()?.disk()?, self.spec.disk.as_ref()?)?;
        let chosen = disk::drawn_state(self.seed, crash, states);
        Some(CrashBranch { crash, states: states as u64, chosen })
    }

    /// From now on, [`Self::step`] stops at the first enumerable power loss
    /// with [`Step::CrashBranch`] (a warm start's crash-state siblings).
    pub fn branch_at_crash(&mut self, on: bool) {
        self.branch_at_crash = on;
    }

    /// Crash number `crash` leaves its disk in crash state `state`: for a
    /// copy of the execution stopped at [`Step::CrashBranch`], which then
    /// becomes that state's sibling. The state is part of the execution's
    /// spec (`explore.crash_states`), as a cold sibling's is: the spec is
    /// replaced by a copy that lives as long as the process.
    pub fn force_crash_state(&mut self, crash: u32, state: u64) {
        let mut spec = self.spec.clone();
        spec.explore.crash_states.insert(crash, state);
        self.spec = Box::leak(Box::new(spec));
    }

    /// Steps taken so far, every action counted.
    pub(crate) fn choices_steps(&self) -> u64 {
        self.choices.steps
    }

    /// Counts `n` more steps (taken by a node running ahead).
    pub(crate) fn add_steps(&mut self, n: u64) {
        self.choices.steps += n;
    }

    /// The pending events of the current step.
    pub(crate) fn pending(&self) -> &Pending {
        &self.choices.pending
    }

    /// The step log, to append to.
    pub(crate) fn log_mut(&mut self) -> &mut StepLog {
        &mut self.choices.log
    }

    /// The earliest pending event is past the virtual-time limit.
    fn time_limit(&mut self) {
        let what = match self.phase {
            Phase::Booting => "the nodes did not all boot",
            Phase::Probing { .. } => "the nodes were not all ready ([node] ready)",
            Phase::Ready => unreachable!("a step leaves Ready before it looks at the time"),
            Phase::Workload => "the workload did not finish",
            Phase::Checks { .. } => "the invariants did not finish",
        };
        let limit = self.spec.time_limit_ns;
        self.now = VirtualTime::from_ns(limit);
        let msg = format!("{what} within the virtual-time limit of {} s", limit as f64 / 1e9);
        self.fail(FailureKind::TimeLimit, None, msg);
    }

    /// A critical-transition probe's calm continuation begins at this step
    /// (`ExploreSpec::calm_from`): before the enabled set, since calming
    /// heals a partition and stops crashes. Whether it began.
    fn calm_probe(&mut self) -> Result<bool, EngineError> {
        let steps = self.choices.steps;
        let Some((_, seed)) = self.spec.explore.calm_from.filter(|&(at, _)| at == steps) else { return Ok(false) };
        self.calm = true;
        self.calm_disks();
        self.choices.calm_rng = Some(Xoshiro256PlusPlus::seed_from_u64(seed));
        if let Some(ns) = self.net.as_mut() {
            ns.calm(seed);
        }
        self.resume_all()?;
        Ok(true)
    }

    /// After an action: every node ready starts the workload; every check
    /// answered passes the execution.
    fn advance_script(&mut self) -> Result<(), EngineError> {
        if self.phase == Phase::Booting && self.nodes.iter().all(|n| n.ready) && self.verdict.is_none() {
            self.wall.boot = self.wall.first_spawn.map(|t| t.elapsed());
            if self.spec.ready_probe {
                self.phase = Phase::Probing { passed: 0 };
                for i in 0..self.nodes.len() {
                    self.command(i, crate::READY_PROBE)?;
                }
            } else {
                self.boot_done()?;
            }
        }
        if self.phase == (Phase::Probing { passed: self.nodes.len() }) && self.verdict.is_none() {
            let text = "every node ready: its readiness probe passed ([node] ready)".to_string();
            self.trace.push(self.now, crate::trace::ENGINE, EventKind::Note { text });
            self.boot_done()?;
        }
        if let Phase::Checks { done } = self.phase {
            if done == self.spec.invariants.len() + self.spec.liveness.len() && self.verdict.is_none() {
                self.verdict = Some(Verdict::Pass);
            }
        }
        Ok(())
    }

    /// The boot is over (every node ready): the workload starts, or in
    /// warm-start mode the boot ends at the next step.
    fn boot_done(&mut self) -> Result<(), EngineError> {
        if self.spec.boot_seed.is_some() {
            self.phase = Phase::Ready;
            Ok(())
        } else {
            self.start_workload()
        }
    }

    /// Takes the nodes down, flushes their last console lines, runs the
    /// history check of a passing execution (`ExecutionSpec::history`),
    /// and gives the result.
    pub fn finish(mut self) -> ExecutionResult {
        self.finish_in_place()
    }

    /// [`Self::finish`] on an execution that stays behind, spent (a forked
    /// child's, which leaves through `_exit`).
    pub(crate) fn finish_in_place(&mut self) -> ExecutionResult {
        let node_memory_kib = self.nodes.iter().map(|n| n.vm.as_ref().map_or(0, |v| v.memory_kib())).collect();
        // What simcluster itself holds per node for its disk: the blocks that
        // differ from the shared base image, the cache view and the write log.
        let disk_storage_bytes = self
            .nodes
            .iter()
            .map(|n| n.vm.as_ref().and_then(|v| v.disk()).or(n.disk.as_ref()).map_or(0, |d| d.storage().total()))
            .collect();
        for n in self.nodes.iter_mut() {
            if let Some(vm) = n.vm.as_mut() {
                vm.kill();
            }
        }
        let now = self.now;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if let Some(line) = n.console.finish() {
                self.trace.push(now, NodeIdx::number_of(i), EventKind::Console { text: line });
            }
        }
        let spec = self.spec;
        if let (Some(hc), None | Some(Verdict::Pass)) = (&spec.history, &self.verdict) {
            self.check_history(hc);
        }
        let net = self.net.as_mut();
        let (network, pcaps) = match net {
            Some(n) => (Some(n.finish()), n.take_pcaps()),
            None => (None, Vec::new()),
        };
        let trace = std::mem::take(&mut self.trace);
        ExecutionResult {
            verdict: self.verdict.take().unwrap_or(Verdict::Pass),
            trace_hash: trace.hash(),
            trace,
            ended_at: now,
            wall: self.wall.began.elapsed(),
            boot_wall: self.wall.boot,
            grants: self.grants,
            round_trips: self.round_trips,
            node_memory_kib,
            disk_storage_bytes,
            network,
            pcaps,
            decisions: std::mem::take(&mut self.choices.decisions),
            choice_points: self.choices.points,
            chosen: std::mem::take(&mut self.choices.log),
            crashes: self.crashes,
            crash_points: std::mem::take(&mut self.crash_points),
            disk_faults: self.disk_fault_counts,
            node_faults: self.faults.counts,
            anomalies: std::mem::take(&mut self.anomalies),
        }
    }
}
