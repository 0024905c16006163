//! [`Execution`]: one execution between steps, and its life cycle.
//!
//! [`Execution::new`] boots and connects every node; [`Execution::step`]
//! takes one engine step (gather the pending events, advance the clock,
//! compute the enabled set, ask the strategy, apply its pick, move the
//! cluster's script on); [`Execution::finish`] takes the nodes down and
//! gives the [`ExecutionResult`]. [`crate::execute`] loops them.
//!
//! Its state is in parts (`parts/`), each with private fields and the
//! methods that change them: the wire, the power losses, the disk faults,
//! the node and connection faults, the roles, an inspection command, the
//! strategy's side, the script, and the small ones. What every part acts
//! on (the clock, the spec, the seed, the nodes, the trace) is the context
//! (`parts/ctx.rs`), which the parts' methods take. Applying a chosen
//! action (`apply.rs`) is one call into the part it belongs to.
//!
//! What stays on `Execution` coordinates several parts: the step and its
//! life cycle (here), the enabled set (`enabled.rs`: every part's offers
//! in a fixed order), lookahead's bound (`lookahead.rs`: every part's next
//! possible event), a node's run and the host client's poll (`run.rs`:
//! what they did goes into the wire, the disks, the script), the script's
//! reactions to agent messages (`script.rs`: they start the workload,
//! faults, checks, the quiet period), scheduled crashes (`schedule.rs`) and
//! inspection (`inspect.rs`), which step the execution.

mod apply;
mod boot;
mod enabled;
mod inspect;
mod lookahead;
mod parts;
mod run;
mod schedule;
mod script;

use std::time::Instant;

use self::boot::{boot_nodes, host_endpoint, network};
pub use self::inspect::{ExecOutput, InspectError, Reached, Until};
pub(crate) use self::parts::Phase;
use self::parts::{
    Branching, Choices, ConnFaults, Crashes, Ctx, DiskFaults, FaultPeriod, Grants, Inspection, NodeFaults, Roles,
    Script, Wall, Wire,
};
use crate::actions::{effective_time, horizon, Enabled};
use crate::disk;
use crate::node::Nodes;
use crate::outcome::{ExecutionResult, FailureKind, Verdict};
use crate::spec::{EngineError, ExecutionSpec};
use crate::strategy::{ActionKind, Strategy};
use crate::trace::{EventKind, Trace};
use simtime::VirtualTime;

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

/// One execution of a cluster under virtual time, between steps.
///
/// The engine is the only source of time for every node, and exactly one
/// node executes at any moment. Dropping an `Execution` takes its nodes
/// down.
pub struct Execution<'a> {
    /// The clock, the spec, the seed, the nodes and the trace, which every
    /// part acts on.
    cx: Ctx<'a>,
    wire: Wire,
    script: Script,
    /// When faults may happen at all.
    fault_period: FaultPeriod,
    crashes: Crashes,
    disk_faults: DiskFaults,
    node_faults: NodeFaults,
    conn_faults: ConnFaults,
    grants: Grants,
    choices: Choices,
    wall: Wall,
    /// Stopping at a crash point (warm start's crash-state siblings).
    branching: Branching,
    /// Each node's role (`[roles]`).
    roles: Roles,
    /// Commands run in the guests for inspection.
    inspection: Inspection,
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
            cx: Ctx {
                spec,
                seed: spec.stream_seed(),
                now: VirtualTime::ZERO,
                trace: Trace::new(),
                nodes: Nodes::new(nodes),
            },
            wire: Wire::new(net, host),
            script: Script::new(),
            fault_period: FaultPeriod::default(),
            crashes: Crashes::new(spec.stream_seed(), spec.explore.crash_states.clone()),
            disk_faults: DiskFaults::new(spec.stream_seed()),
            node_faults: NodeFaults::new(spec.stream_seed()),
            conn_faults: ConnFaults::new(spec.stream_seed()),
            grants: Grants::default(),
            choices: Choices::new(spec.boot_seed),
            wall: Wall::new(began, first_spawn),
            branching: Branching::default(),
            roles: Roles::default(),
            inspection: Inspection::default(),
        };
        for node in ex.cx.nodes.ids() {
            ex.cx.nodes[node].connect(VirtualTime::ZERO, spec.connect_timeout)?;
            ex.cx.trace.push(VirtualTime::ZERO, node, EventKind::Boot);
            ex.node_faults.record_clock(&mut ex.cx, node);
        }
        Ok(ex)
    }

    /// The current virtual time.
    pub fn now(&self) -> VirtualTime {
        self.cx.now
    }

    /// In warm-start mode, every agent is ready and the workload has not
    /// started: the point where every execution of a run begins from the
    /// same boot (see [`ExecutionSpec::boot_seed`]).
    pub fn is_booted(&self) -> bool {
        self.script.phase() == Phase::Ready
    }

    /// Ends a warm-start boot ([`Self::is_booted`]) for the execution with
    /// seed `seed`: every stream is drawn from it from now on (netsim's,
    /// the random partitions', the disk and node faults', the host
    /// client's, each node's entropy and read-fault devices'), the
    /// strategy makes the choices, and the workload starts. A cold run
    /// does this at its first step after the boot, a forked child before
    /// its first step, so both go on alike.
    pub(crate) fn end_boot(&mut self, seed: u64) -> Result<(), EngineError> {
        debug_assert_eq!(self.script.phase(), Phase::Ready);
        self.cx.seed = seed;
        self.choices.end_boot();
        // Only the streams start again: what the boot counted stays.
        self.crashes.reseed(seed);
        self.disk_faults.reseed(seed);
        self.node_faults.reseed(seed);
        self.conn_faults = ConnFaults::new(seed);
        let host = host_endpoint(self.cx.spec, seed, self.cx.now);
        self.wire.reseed(host, seed, self.cx.now, self.cx.spec.explore.faults_after.is_none());
        for (node, n) in self.cx.nodes.with_ids_mut() {
            n.reseed_devices(seed, node);
        }
        let text = "boot ends: every agent ready; the execution's own streams begin".to_string();
        self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
        self.start_workload()
    }

    /// The spec the execution runs (in a warm start's child, the run's own:
    /// [`Self::use_spec`]).
    pub(crate) fn spec(&self) -> &'a ExecutionSpec {
        self.cx.spec
    }

    /// Gets every running node ready for fork(2) (warm start).
    pub(crate) fn prepare_fork(&mut self) -> Result<(), EngineError> {
        for n in self.cx.nodes.iter_mut() {
            if let Some(vm) = n.runtime_mut() {
                vm.prepare_fork()?;
            }
        }
        Ok(())
    }

    /// In a child of fork(2): every running node taken over, and wall time
    /// counted from now, for the child's own run.
    pub(crate) fn rehome(&mut self) -> Result<(), EngineError> {
        for n in self.cx.nodes.iter_mut() {
            if let Some(vm) = n.runtime_mut() {
                vm.rehome()?;
            }
        }
        self.wall.restart();
        Ok(())
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.cx.trace
    }

    /// One engine step: gather the pending events, fail the execution if
    /// nothing is pending or the earliest is past the time limit,
    /// compute the enabled set, let `strategy` choose at a choice point
    /// (a step with more than one enabled action), apply the pick at its
    /// time, and move the cluster's script on (workload, checks, verdict).
    /// Returns [`Step::Done`] once the execution has its verdict.
    pub fn step(&mut self, strategy: &mut dyn Strategy) -> Result<Step, EngineError> {
        if self.script.is_decided() {
            return Ok(Step::Done);
        }
        if self.cx.spec.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            // The nodes go down as the execution drops, as on every other error.
            return Err(EngineError::Cancelled);
        }
        if let Some(chosen) = self.branching.take_held() {
            return self.apply_chosen(chosen);
        }
        if self.script.phase() == Phase::Ready {
            self.end_boot(self.cx.spec.seed)?;
        }
        let mut pending = self.choices.take_pending();
        self.gather_pending(&mut pending);
        let Some(earliest) = pending.earliest() else {
            self.script.fail(&self.cx, FailureKind::GuestExit, None, "every node has exited".into());
            return Ok(Step::Done);
        };
        if earliest > self.cx.spec.time_limit {
            self.time_limit();
            return Ok(Step::Done);
        }
        if self.calm_probe()? {
            // Calming resumes paused nodes: gather again.
            self.gather_pending(&mut pending);
        }
        if let Some((at, k)) = self.next_scheduled_crash().filter(|&(at, _)| at <= earliest) {
            // A scheduled crash is the earliest event: no choice.
            self.choices.put_pending(pending);
            self.cx.now = at.max(self.cx.now);
            return self.scheduled_crash(k);
        }
        let window = self.cx.spec.explore.window;
        let horizon = horizon(earliest, self.cx.now, window, pending.min_requested());
        let mut enabled = self.choices.take_enabled();
        self.enabled(&pending, horizon, &mut enabled);
        self.choices.put_pending(pending);
        let chosen = enabled[self.choices.pick(&enabled, strategy)];
        self.choices.put_enabled(enabled);
        self.cx.now = effective_time(&chosen, self.cx.now);
        self.choices.count_steps(1);
        if let Some(branch) = self.crash_branch(&chosen) {
            self.branching.hold(chosen);
            return Ok(Step::CrashBranch(branch));
        }
        self.apply_chosen(chosen)
    }

    /// The rest of a step once its action is chosen (and its time taken):
    /// apply it and move the script on.
    fn apply_chosen(&mut self, chosen: Enabled) -> Result<Step, EngineError> {
        let visible = self.cx.trace.visible();
        self.apply(chosen.action)?;
        let mut desc = chosen.desc;
        if let Some((began, free)) = self.grants.take_free_runs() {
            // The node ran ahead: this step is its last wake-up.
            desc = self.log_free_runs(desc, began, free);
        }
        // Quiet: a node run that added nothing to the trace but its (folded)
        // `Run`; the step log folds those as the trace does.
        let quiet = desc.kind == ActionKind::RunNode && self.cx.trace.visible() == visible;
        self.choices.log(self.cx.now, desc, quiet);
        self.advance_script()?;
        Ok(if self.script.is_decided() { Step::Done } else { Step::Running })
    }

    /// With [`Self::branch_at_crash`]: whether `chosen` is the execution's
    /// first power loss of a node with a disk, no state forced for it, and
    /// its crash states few enough to enumerate (the crash-state siblings
    /// of a run are those of the first crash point).
    fn crash_branch(&self, chosen: &Enabled) -> Option<CrashBranch> {
        let crate::actions::Action::Crash(i) = chosen.action else { return None };
        if !self.branching.is_on() {
            return None;
        }
        let crash = self.crashes.first_unforced()?;
        let states = disk::enumerable_states(self.cx.nodes[i].data_disk()?.disk()?, self.cx.spec.disk.as_ref()?)?;
        let chosen = disk::drawn_state(self.cx.seed, crash, states);
        Some(CrashBranch { crash, states: states as u64, chosen })
    }

    /// From now on, [`Self::step`] stops at the first enumerable power loss
    /// with [`Step::CrashBranch`] (a warm start's crash-state siblings).
    pub fn branch_at_crash(&mut self, on: bool) {
        self.branching.set(on);
    }

    /// Crash number `crash` leaves its disk in crash state `state`: for a
    /// copy of the execution stopped at [`Step::CrashBranch`], which then
    /// becomes that state's sibling. The state is part of the execution's
    /// spec (`explore.crash_states`), as a cold sibling's is.
    pub fn force_crash_state(&mut self, crash: u32, state: u64) {
        self.crashes.force_state(crash, state);
    }

    /// The run's own spec in place of the boot's, in a warm start's forked
    /// child (`crate::warm`): its forced crash states with it.
    pub(crate) fn use_spec(&mut self, spec: &'a ExecutionSpec) {
        self.cx.spec = spec;
        self.crashes.set_forced(spec.explore.crash_states.clone());
    }

    /// The earliest pending event is past the virtual-time limit.
    fn time_limit(&mut self) {
        let what = match self.script.phase() {
            Phase::Booting => "the nodes did not all boot",
            Phase::Probing { .. } => "the nodes were not all ready ([node] ready)",
            Phase::Ready => unreachable!("a step leaves Ready before it looks at the time"),
            Phase::Setup => "no node's Antithesis SDK reported setup_complete ([antithesis] setup_complete)",
            Phase::Workload => "the workload did not finish",
            Phase::Checks { .. } => "the invariants did not finish",
        };
        let limit = self.cx.spec.time_limit;
        self.cx.now = limit;
        let msg = format!("{what} within the virtual-time limit of {} s", limit.as_secs_f64());
        self.script.fail(&self.cx, FailureKind::TimeLimit, None, msg);
    }

    /// A critical-transition probe's calm continuation begins at this step
    /// (`ExploreSpec::calm_from`): before the enabled set, since calming
    /// heals a partition and stops crashes. Whether it began.
    fn calm_probe(&mut self) -> Result<bool, EngineError> {
        let steps = self.choices.steps();
        let Some((_, seed)) = self.cx.spec.explore.calm_from.filter(|&(at, _)| at == steps) else { return Ok(false) };
        self.fault_period.calm();
        self.disk_faults.calm(&mut self.cx);
        self.choices.calm(seed);
        self.wire.calm(seed);
        self.node_faults.resume_all(&mut self.cx)?;
        Ok(true)
    }

    /// After an action: every node ready starts the workload; every check
    /// answered passes the execution.
    fn advance_script(&mut self) -> Result<(), EngineError> {
        if self.script.phase() == Phase::Booting
            && self.cx.nodes.iter().all(|n| n.agent_ready())
            && !self.script.is_decided()
        {
            self.wall.booted();
            if self.cx.spec.ready_probe {
                self.script.set_phase(Phase::Probing { passed: 0 });
                for node in self.cx.nodes.ids() {
                    self.script.command(&mut self.cx, node, crate::READY_PROBE)?;
                }
            } else {
                self.boot_done()?;
            }
        }
        if self.script.phase() == (Phase::Probing { passed: self.cx.nodes.len() }) && !self.script.is_decided() {
            let text = "every node ready: its readiness probe passed ([node] ready)".to_string();
            self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
            self.boot_done()?;
        }
        if self.script.phase() == Phase::Setup && self.script.setup_seen() && !self.script.is_decided() {
            self.start_workload()?;
        }
        if let Phase::Checks { done } = self.script.phase() {
            if done == self.cx.spec.invariants.len() + self.cx.spec.liveness.len() && !self.script.is_decided() {
                self.script.decide(Verdict::Pass);
            }
        }
        Ok(())
    }

    /// The boot is over (every node ready): the workload starts, or in
    /// warm-start mode the boot ends at the next step.
    fn boot_done(&mut self) -> Result<(), EngineError> {
        if self.cx.spec.boot_seed.is_some() {
            self.script.set_phase(Phase::Ready);
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
        let node_memory_kib = self.cx.nodes.iter().map(|n| n.runtime().map_or(0, |v| v.memory_kib())).collect();
        // What simcluster itself holds per node for its disk: the blocks that
        // differ from the shared base image, the cache view and the write log.
        let disk_storage_bytes = self.cx.nodes.iter().map(|n| n.disk().map_or(0, |d| d.storage().total())).collect();
        for n in self.cx.nodes.iter_mut() {
            if let Some(vm) = n.runtime_mut() {
                vm.kill();
            }
        }
        let now = self.cx.now;
        for (node, n) in self.cx.nodes.with_ids_mut() {
            if let Some(line) = n.console.finish() {
                self.cx.trace.push(now, node, EventKind::Console { text: line });
            }
        }
        let spec = self.cx.spec;
        if let (Some(hc), None | Some(Verdict::Pass)) = (&spec.history, self.script.verdict()) {
            self.script.check_history(&mut self.cx, hc);
        }
        let (network, pcaps) = self.wire.finish();
        let trace = std::mem::take(&mut self.cx.trace);
        let (crashes, power_failures, crash_points) = self.crashes.finish();
        let (grants, round_trips) = self.grants.totals();
        let (decisions, choice_points, race_points, chosen) = self.choices.finish();
        let (wall, boot_wall) = self.wall.totals();
        ExecutionResult {
            verdict: self.script.take_verdict().unwrap_or(Verdict::Pass),
            trace_hash: trace.hash(),
            trace,
            ended_at: now,
            wall,
            boot_wall,
            grants,
            round_trips,
            node_memory_kib,
            disk_storage_bytes,
            network,
            pcaps,
            decisions,
            choice_points,
            race_points,
            chosen,
            crashes,
            power_failures,
            crash_points,
            disk_faults: self.disk_faults.counts(),
            node_faults: self.node_faults.counts(),
            conn_faults: self.conn_faults.counts(),
            anomalies: self.script.take_anomalies(),
        }
    }
}
