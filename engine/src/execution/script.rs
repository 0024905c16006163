//! The cluster's script: agent commands and messages, the workload's
//! start, faults beginning, the quiet period, the checks, the history
//! check, and failing the execution.

use std::time::Duration;

use super::{Execution, Phase};
use crate::agent::{self, AgentCommand};
use crate::console::AgentMsg;
use crate::outcome::{Failure, FailureKind, Verdict};
use crate::spec::{EngineError, HistoryCheck, HistoryOutcome};
use crate::trace::EventKind;
use crate::NodeId;

impl Execution<'_> {
    /// Every node is ready: the workload starts, and so does the time from
    /// which crashes are possible.
    pub(crate) fn start_workload(&mut self) -> Result<(), EngineError> {
        let spec = self.cx.spec;
        if spec.explore.antithesis.await_setup && !self.script.setup_seen() {
            self.script.set_phase(Phase::Setup);
            let text = "every node ready: the workload waits for setup_complete ([antithesis])".to_string();
            self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
            return Ok(());
        }
        self.script.set_phase(Phase::Workload);
        if spec.explore.faults_after.is_none() || self.fault_period.start_after_seen() {
            self.begin_faults();
        }
        if self.wire.start_host(self.cx.now, &mut self.cx.trace) {
            // The host client runs the workload.
        } else if spec.host_workload.is_some() {
            self.fail(FailureKind::Workload, None, "a host workload needs the simulated network".into())
        } else {
            self.command(spec.workload_node, "workload")?
        }
        Ok(())
    }

    /// Faults begin now: draw when crashes, pauses and clock jumps become
    /// possible, and (with `start_after`) start the random partitions.
    pub(crate) fn begin_faults(&mut self) {
        self.fault_period.begin();
        self.draw_next_crash_time();
        self.crashes.begin_schedule(self.cx.now);
        self.start_node_faults();
        self.start_conn_faults();
        if let Some(name) = &self.cx.spec.explore.faults_after {
            self.wire.start_random_partitions(self.cx.now);
            let text = format!("faults begin: {name} reached ([faults] start_after)");
            self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
        }
    }

    /// Whether console `line` is the first to print `[faults]
    /// start_after`'s name; faults then begin at once in the workload, or
    /// when it starts.
    pub(crate) fn starts_faults(&mut self, line: &str) -> bool {
        let Some(name) = &self.cx.spec.explore.faults_after else { return false };
        if self.fault_period.start_after_seen() || crate::console::reached_name(line) != Some(name.as_str()) {
            return false;
        }
        self.fault_period.see_start_after(self.script.phase() == Phase::Workload)
    }

    /// Node `from` printed an Antithesis SDK line: a violated assertion
    /// fails the execution; `setup_complete` lets a waiting workload
    /// start (at the end of this step: see `advance_script`).
    pub(crate) fn on_sdk_line(&mut self, from: NodeId, line: Result<crate::sdk::SdkLine, String>) {
        use crate::sdk::SdkLine;
        match line {
            Ok(SdkLine::Assert(a)) if a.violated() && !self.script.is_decided() => {
                let what = a.describe_violation(&self.cx.nodes[from].name);
                self.fail(FailureKind::Assertion, Some(from), what);
            }
            Ok(SdkLine::Setup { status }) if status == "complete" && !self.script.setup_seen() => {
                self.script.see_setup();
                let text = format!("setup_complete from {} (Antithesis SDK)", self.cx.nodes[from].name);
                self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
            }
            Ok(_) => {}
            Err(why) => {
                let text = format!("{}: an @antithesis line that cannot be read ({why})", self.cx.nodes[from].name);
                self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
            }
        }
    }

    pub(crate) fn fail(&mut self, kind: FailureKind, node: Option<NodeId>, what: String) {
        let (name, what) = match node {
            Some(i) => (Some(self.cx.nodes[i].name.clone()), self.cx.nodes[i].with_tail(what)),
            None => (None, what),
        };
        self.script.decide(Verdict::Fail(Failure::new(kind, name, self.cx.now, what)));
    }

    /// Sends an agent command to `node`, or keeps it until the node is up
    /// and ready again (it may be powered off or rebooting after a crash).
    pub(crate) fn command(&mut self, node: NodeId, name: &str) -> Result<(), EngineError> {
        if !self.cx.nodes[node].is_ready() {
            self.cx.nodes[node].deferred.push(name.to_string());
            return Ok(());
        }
        self.cx.trace.push(self.cx.now, node, EventKind::Command { name: name.to_string() });
        // Checks start after the quiet period's settle time, which the
        // agent sleeps in the guest's virtual time (also after a restart).
        let mut line = match (self.script.phase(), self.cx.spec.explore.quiet_settle) {
            (Phase::Checks { .. }, Some(settle)) if !settle.is_zero() => {
                AgentCommand::Settle { ns: simtime::span_ns(settle) }.encode()
            }
            _ => Vec::new(),
        };
        line.extend(AgentCommand::Run(name.to_string()).encode());
        // A check killed by a crash runs again once its node is back; the
        // workload does not (it would start its history over), nor does the
        // readiness probe (every restart sends it anew).
        if matches!(self.script.phase(), Phase::Checks { .. }) && name != crate::READY_PROBE {
            self.cx.nodes[node].running.push(name.to_string());
        }
        let (now, watchdog) = (self.cx.now, self.cx.spec.watchdog);
        self.cx.nodes[node].vm().send_control(now, &line, watchdog)?;
        Ok(())
    }

    /// The quiet period begins: faults stop (see
    /// `ExploreSpec::quiet_settle`), paused nodes continue; the checks
    /// wait `settle`. A node's clock offset and drift stay: they are
    /// its hardware.
    fn begin_quiet(&mut self, settle: Duration) -> Result<(), EngineError> {
        self.fault_period.calm();
        self.calm_disks();
        self.wire.quiet();
        let text = format!("quiet period: faults stop; checks start after {} s", simtime::span_ns(settle) as f64 / 1e9);
        self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
        self.resume_all()
    }

    /// The workload passed: send the invariants and liveness checks.
    pub(crate) fn start_checks(&mut self) -> Result<(), EngineError> {
        self.script.set_phase(Phase::Checks { done: 0 });
        let spec = self.cx.spec;
        for (cmd, n) in spec.invariants.iter().chain(&spec.liveness) {
            self.command(*n, cmd)?;
        }
        Ok(())
    }

    /// Reacts to one agent message; may decide the verdict.
    pub(crate) fn on_agent_message(&mut self, from: NodeId, msg: AgentMsg) -> Result<(), EngineError> {
        let name = self.cx.nodes[from].name.clone();
        let now = self.cx.now;
        match msg {
            AgentMsg::Ready => {
                self.cx.nodes[from].set_ready();
                self.cx.trace.push(now, from, EventKind::Ready);
                self.start_role_probe(from)?;
                // After a restart the probe runs first: the agent runs
                // commands in the order sent, so what waited for the node
                // runs once it is ready again. (At boot, every node's is
                // sent together once all agents are ready.)
                if self.cx.spec.ready_probe && !matches!(self.script.phase(), Phase::Booting) {
                    self.command(from, crate::READY_PROBE)?;
                }
                for cmd in std::mem::take(&mut self.cx.nodes[from].deferred) {
                    self.command(from, &cmd)?;
                }
            }
            AgentMsg::Done { command, status } if command == crate::agent::EXEC => {
                self.on_exec_message(from, None, Some(status));
            }
            AgentMsg::Output(chunk) => self.on_exec_message(from, Some(chunk), None),
            AgentMsg::Done { command, status } => {
                let running = &mut self.cx.nodes[from].running;
                if let Some(k) = running.iter().position(|c| *c == command) {
                    running.remove(k);
                }
                self.cx.trace.push(now, from, EventKind::CommandDone { name: command.clone(), status });
                let hint = agent::status_hint(status);
                let is_liveness = self.cx.spec.liveness.iter().any(|(n, i)| *n == command && *i == from);
                if command == crate::READY_PROBE {
                    self.on_probe_done(from, status);
                } else if command == crate::ROLE_PROBE {
                    // It started the probe's loop in the background: no check.
                } else if command == "start" {
                    // The exit a kill caused (`[faults.kill]`) is no failure.
                    if status != 0 && !self.cx.nodes[from].start_exit_was_kill() {
                        let what = format!("node {name}: its start command exited with status {status}{hint}");
                        self.fail(FailureKind::StartCommand, Some(from), what);
                    }
                } else if command == "workload" && self.script.phase() == Phase::Workload {
                    if status != 0 {
                        let what = format!("the workload on {name} exited with status {status}{hint}");
                        self.fail(FailureKind::Workload, Some(from), what);
                        return Ok(());
                    }
                    if let Some(settle) = self.cx.spec.explore.quiet_settle {
                        self.begin_quiet(settle)?;
                    }
                    self.start_checks()?;
                } else if let Phase::Checks { done } = self.script.phase() {
                    let ok = status == 0;
                    self.cx.trace.push(now, from, EventKind::Invariant { name: command.clone(), ok });
                    self.script.set_phase(Phase::Checks { done: done + 1 });
                    if !ok && is_liveness {
                        let what = format!(
                            "liveness {command} never held on {name}: its predicate was still false at its deadline \
                             (exit status {status}{hint})"
                        );
                        self.fail(FailureKind::Liveness, Some(from), what);
                    } else if !ok {
                        let what = format!("invariant {command} failed on {name} (exit status {status}{hint})");
                        self.fail(FailureKind::Invariant, Some(from), what);
                    }
                }
            }
            AgentMsg::Role(role) => self.on_role(from, role),
            AgentMsg::Unknown(line) => {
                self.cx.trace.push(now, from, EventKind::Note { text: format!("agent: {line}") });
            }
        }
        Ok(())
    }

    /// Node `from`'s readiness probe answered `status`: 0 counts it ready
    /// (at boot), anything else fails the execution.
    fn on_probe_done(&mut self, from: NodeId, status: i32) {
        if status == 0 {
            if let Phase::Probing { passed } = self.script.phase() {
                self.script.set_phase(Phase::Probing { passed: passed + 1 });
            }
            return;
        }
        let name = &self.cx.nodes[from].name;
        let when =
            if matches!(self.script.phase(), Phase::Probing { .. }) { "after boot" } else { "after its restart" };
        let what = format!(
            "node {name} never became ready {when}: its readiness probe ([node] ready) still failed at its \
             deadline ([node] ready_within; exit status {status}{})",
            agent::status_hint(status)
        );
        self.fail(FailureKind::NotReady, Some(from), what);
    }

    /// The host-side check of the history `node` printed ([`HistoryCheck`]);
    /// its verdict goes into the trace as the check's invariant
    /// (`history-linearizable` for registers, `history-<consistency>` for
    /// transactions).
    pub(crate) fn check_history(&mut self, hc: &HistoryCheck) {
        let node = hc.node;
        let HistoryOutcome { ok, note, anomalies } = (hc.check)(self.cx.trace.events(), node);
        self.script.set_anomalies(anomalies);
        let name = hc.invariant.clone();
        let now = self.cx.now;
        self.cx.trace.push_engine(now, EventKind::Note { text: note.lines().next().unwrap_or("").to_string() });
        self.cx.trace.push(now, node, EventKind::Invariant { name, ok });
        if !ok {
            let what = format!("[check] history on {}: {note}", self.cx.nodes[node].name);
            self.script.decide(Verdict::Fail(Failure::new(hc.kind, Some(self.cx.nodes[node].name.clone()), now, what)));
        }
    }
}
