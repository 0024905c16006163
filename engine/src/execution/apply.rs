//! Applying the action a step chose: a node's run, the host client's poll,
//! a delivery, a disk completion, a crash or restart (pauses and clock
//! jumps are in `node_faults`), and recording what it produced in the
//! trace.

use vmm::node::{DiskCompletion, GuestOutput, OutputStream, RunOutcome};

use super::{Execution, Phase};
use crate::actions::Action;
use crate::console;
use crate::disk;
use crate::host::HostOutcome;
use crate::outcome::{Failure, FailureKind, Verdict};
use crate::spec::EngineError;
use crate::trace::{DiskOp, EventKind};
use crate::NodeId;

impl Execution<'_> {
    /// Applies `action` at `self.now`.
    pub(crate) fn apply(&mut self, action: Action) -> Result<(), EngineError> {
        let now = self.now;
        match action {
            Action::NetworkFault { .. } => self.apply_network_fault(),
            Action::Deliver(id) => self.wire.deliver(id, now, &mut self.nodes, &mut self.trace, self.spec.watchdog)?,
            Action::Crash(node) => {
                self.crash(node)?;
                self.draw_next_crash_time();
            }
            Action::PowerFailure => {
                self.power_failure()?;
                self.draw_next_crash_time();
            }
            Action::Restart(node) => {
                self.trace.push(now, node, EventKind::Restart);
                self.nodes[node].boot(self.seed)?;
                self.nodes[node].connect(now, self.spec.connect_timeout)?;
                self.record_node_clock(node);
            }
            Action::Pause(node) => self.pause(node)?,
            Action::Resume(node) => self.resume(node)?,
            Action::ClockJump(node) => self.clock_jump(node)?,
            Action::ConnReset(key) => self.conn_reset(key),
            Action::ConnStall(key) => self.conn_stall(key),
            Action::Kill(node) => self.kill(node)?,
            Action::Respawn(node) => self.respawn(node)?,
            Action::CompleteDisk(node, request) => {
                let watchdog = self.spec.watchdog;
                self.maybe_disk_fault(node, disksim::RequestId(request));
                // Enabled only for a node whose disk holds the request.
                let disk = self.nodes[node].data_disk_mut().ok_or(vmm::node::NodeError::NoDisk { node })?;
                let done = disk.complete_disk(now, disksim::RequestId(request), watchdog)?;
                if done.request.kind == disksim::RequestKind::Flush {
                    self.nodes[node].flushed_since_run = true;
                }
                self.record_disk(node, &[done]);
            }
            Action::Run(node) => self.run_node(node)?,
            Action::RunHost => self.run_host()?,
        }
        Ok(())
    }

    /// A coordinated power failure: every crashable node that is up loses
    /// power at this instant, in node order, each disk into a crash state
    /// of its own (each a crash of the budget, numbered in that order).
    fn power_failure(&mut self) -> Result<(), EngineError> {
        let down: Vec<NodeId> = self.power_failure_nodes();
        self.crash_together(down)
    }

    /// Nodes `down` (two or more) lose power at this instant, in node order.
    pub(super) fn crash_together(&mut self, down: Vec<NodeId>) -> Result<(), EngineError> {
        self.faults.power_failures += 1;
        let nodes: Vec<String> = down.iter().map(|&node| self.nodes[node].name.clone()).collect();
        self.trace.push_engine(self.now, EventKind::PowerFailure { nodes });
        for node in down {
            self.crash(node)?;
        }
        Ok(())
    }

    /// Power-fails `node`: its disk falls into a crash state. With
    /// restart delays per node or drawn from a range, its delay is drawn
    /// now (nothing is drawn for a fixed one).
    pub(super) fn crash(&mut self, node: NodeId) -> Result<(), EngineError> {
        let now = self.now;
        self.faults.crashes += 1;
        if let Some(&range) = self.spec.explore.restart_ranges.get(node.index()) {
            let delay = crate::faults::draw_delay(&mut self.faults.node.restart_rng, range);
            self.faults.restart_delays.insert(node, delay);
        }
        let crash = self.faults.crashes;
        let name = self.nodes[node].name.clone();
        if !self.nodes[node].running.is_empty() {
            let text = format!(
                "the crash kills {name}'s running command(s) {}; sent again once {name} is ready",
                self.nodes[node].running.join(", ")
            );
            self.trace.push(now, node, EventKind::Note { text });
        }
        if self.nodes[node].paused_until().is_some() {
            // Its paused processes die with it (`Node::power_off`).
            let text = format!("the crash ends {name}'s pause");
            self.trace.push(now, node, EventKind::Note { text });
        }
        // What the guest's page cache held goes with the power.
        let dirty_files = self.nodes[node].runtime().and_then(|r| r.dirty_files());
        let disk = self.nodes[node].power_off(now)?;
        let detail = match (disk, &self.spec.disk) {
            (Some(disk), Some(ds)) => {
                let seed = self.seed;
                let forced = self.faults.forced_crash_states.get(&crash).copied();
                let (mut point, state) = disk::crash_disk(disk, ds, crash, &name, now, seed, forced)
                    .map_err(|source| EngineError::Crash { node: name.clone(), source })?;
                point.dirty_files = dirty_files;
                let which = match point.chosen {
                    Some(k) => format!("crash state {} of {}", k + 1, point.states),
                    None => format!(
                        "a sampled crash state of {}{}",
                        if point.states_exact { "" } else { "at least " },
                        point.states
                    ),
                };
                let cache =
                    dirty_files.map(|f| format!("page cache: dirty data of {f} files lost; ")).unwrap_or_default();
                let d = format!(
                    "power loss; {cache}disk: {which}, {} of {} volatile writes persisted",
                    state.persisted.len(),
                    point.volatile_writes
                );
                self.faults.crash_points.push(point);
                d
            }
            _ => "power loss".into(),
        };
        self.trace.push(now, node, EventKind::Crash { detail });
        self.wire.node_down(node);
        Ok(())
    }

    /// Lets `node` run until it waits again (a grant), and takes in
    /// what it did: output, disk completions, frames, agent messages.
    fn run_node(&mut self, node: NodeId) -> Result<(), EngineError> {
        let now = self.now;
        self.trace.push(now, node, EventKind::run());
        self.grants.total += 1;
        let time_of_day = self.nodes[node].clock.time_of_day();
        // A grant that ends waiting has settled the node at `now` too:
        // interrupts owed for transmitted frames and control output, and
        // input that waited for receive buffers, reached it.
        let bound = self.lookahead_bound(node);
        let free_until = self.lookahead_given(node, bound);
        let grant = self.nodes[node].vm().grant_ahead(now, free_until, time_of_day, self.spec.watchdog)?;
        self.grants.round_trips += 1;
        if grant.free_runs.count > 0 {
            self.account_free_runs(node, grant.free_runs, bound)?;
            self.grants.free_runs = Some((now, grant.free_runs));
        }
        let now = self.now;
        self.record_output(node, grant.output);
        self.record_disk(node, &grant.disk);
        self.nodes[node].flushed_since_run = false;
        if self.wire.is_on() {
            self.nodes[node].just_sent = !grant.tx.is_empty();
        }
        self.wire.transmit(node, grant.tx, &mut self.trace);
        if !matches!(grant.outcome, RunOutcome::Waiting { .. }) {
            self.wire.node_down(node);
        }
        match grant.outcome {
            RunOutcome::Waiting { .. } => {}
            RunOutcome::Exited { .. } | RunOutcome::Reset { .. } => {
                let n = &self.nodes[node];
                // A reset is traced as an exit without status (what it was before
                // the outcome had its own variant: trace hashes stay as they were).
                let (status, signal) = match grant.outcome {
                    RunOutcome::Exited { status, signal } => (status, signal),
                    _ => (None, None),
                };
                self.trace.push(now, node, EventKind::Exit { status, signal, panic: n.saw_panic });
                let (kind, what) = if n.saw_panic {
                    let line = n.panic_line.as_deref().unwrap_or("Kernel panic");
                    (FailureKind::GuestPanic, format!("node {} panicked: {line}", n.name))
                } else if let RunOutcome::Reset { reason } = &grant.outcome {
                    (FailureKind::GuestExit, format!("node {} reset: {reason}", n.name))
                } else {
                    let what = format!(
                        "node {} powered off or died unexpectedly (status {status:?}, signal {signal:?})",
                        n.name
                    );
                    (FailureKind::GuestExit, what)
                };
                self.fail(kind, Some(node), what);
                return Ok(());
            }
            RunOutcome::Hung { wall } => {
                self.trace.push(now, node, EventKind::Hung);
                let what = format!(
                    "node {} hung: it ran {:.1} s of wall time without letting virtual time advance \
                     (a guest busy loop waiting for time to pass never sees it pass)",
                    self.nodes[node].name,
                    wall.as_secs_f64()
                );
                self.fail(FailureKind::GuestHang, Some(node), what);
                return Ok(());
            }
        }
        let msgs = std::mem::take(&mut self.msgs);
        for (from, msg) in msgs {
            if self.script.verdict.is_none() {
                self.on_agent_message(from, msg)?;
            }
        }
        Ok(())
    }

    /// Moves a node's stamped output into the trace: console lines as
    /// events, control lines parsed into agent messages.
    pub(crate) fn record_output(&mut self, node: NodeId, output: Vec<GuestOutput>) {
        for o in output {
            match o.stream {
                OutputStream::Console => {
                    for line in self.nodes[node].console.feed(&o.bytes) {
                        self.nodes[node].remember_line(&line);
                        let begin = self.starts_faults(&line);
                        let sdk = self.spec.explore.antithesis.sdk.then(|| crate::sdk::sdk_line(&line)).flatten();
                        self.trace.push(o.time, node, EventKind::Console { text: line });
                        if begin {
                            self.begin_faults();
                        }
                        if let Some(sdk) = sdk {
                            self.on_sdk_line(node, sdk);
                        }
                    }
                }
                OutputStream::Control => {
                    for line in self.nodes[node].control.feed(&o.bytes) {
                        if let Some(m) = console::agent_message(&line) {
                            self.msgs.push((node, m));
                        }
                    }
                }
            }
        }
    }

    /// Moves a node's disk completions (reads done at submission, reported
    /// by its grant; a write or flush the engine completed) into the trace.
    pub(crate) fn record_disk(&mut self, node: NodeId, completions: &[DiskCompletion]) {
        for c in completions {
            let op = match c.request.kind {
                disksim::RequestKind::Read => DiskOp::Read,
                disksim::RequestKind::Write { .. } => DiskOp::Write,
                disksim::RequestKind::Flush => DiskOp::Flush,
            };
            let (id, sector, sectors) = (c.request.id.0, c.request.sector, c.request.sectors);
            self.trace.push(c.completed, node, EventKind::Disk { id, op, sector, sectors });
            if let Some(f) = c.fault {
                self.faults.disk_counts.count(&f);
                let detail = disk::describe_fault(&f, &c.request);
                let fault = disk::fault_kind(&f);
                self.trace.push(c.completed, node, EventKind::DiskFault { id, fault, detail });
            }
        }
    }

    /// `[faults.disk]` lost_flush, write_error, misdirect: drawn for
    /// pending request `id` of `node` just before it completes (nothing
    /// while calm, nothing for a fault that is off) and injected into its
    /// disk. The completion reports it, and `record_disk` traces and counts
    /// it there, like a read's corruption.
    pub(crate) fn maybe_disk_fault(&mut self, node: NodeId, id: disksim::RequestId) {
        let Some(rates) = self.spec.disk.as_ref().map(|d| d.faults) else { return };
        if self.faults.calm || !rates.any_at_completion() {
            return;
        }
        let Some(vm) = self.nodes[node].data_disk_mut() else { return };
        let Some(r) = vm.pending_disk().into_iter().find(|r| r.id == id) else { return };
        let capacity = vm.disk().map_or(0, |d| d.capacity_sectors());
        if let Some(fault) = self.faults.disk.draw(&rates, &r, capacity) {
            // Always fits: a pending request of the kind the fault is for.
            vm.disk_fault(id, fault);
        }
    }

    /// Disk faults stop (the quiet period, a calm probe): the engine draws
    /// none at completions (`calm`), and the devices no longer corrupt
    /// reads, now or after a restart.
    pub(crate) fn calm_disks(&mut self) {
        for n in self.nodes.iter_mut() {
            n.stop_read_faults();
        }
    }

    /// The host endpoint's action: poll it, send what it transmitted, and
    /// act on the workload's end (invariants next, or the failure).
    fn run_host(&mut self) -> Result<(), EngineError> {
        let now = self.now;
        let Some((node, outcome)) = self.wire.poll_host(now, &mut self.trace) else { return Ok(()) };
        // The workload's end comes after the frames of its last poll, so
        // that a report finds it as the failing event.
        let status = match outcome {
            HostOutcome::Running => return Ok(()),
            HostOutcome::Passed => 0,
            HostOutcome::Failed(_) => 1,
        };
        self.trace.push(now, node, EventKind::CommandDone { name: "workload".into(), status });
        match outcome {
            HostOutcome::Running => {}
            HostOutcome::Passed if self.script.phase == Phase::Workload => self.start_checks()?,
            HostOutcome::Passed => {}
            HostOutcome::Failed(what) => {
                self.script.verdict =
                    Some(Verdict::Fail(Failure::new(FailureKind::Workload, Some("host".into()), now, what)));
            }
        }
        Ok(())
    }
}
