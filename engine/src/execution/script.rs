//! The cluster's script: agent commands and messages, the workload's
//! start, faults beginning, the quiet period, the checks, the history
//! check, and failing the execution.

use std::time::Duration;

use super::{Execution, Phase};
use crate::agent;
use crate::console::AgentMsg;
use crate::outcome::FailureKind;
use crate::spec::EngineError;
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
        if self.wire.start_host(&mut self.cx) {
            // The host client runs the workload.
        } else if spec.host_workload.is_some() {
            self.script.fail(
                &self.cx,
                FailureKind::Workload,
                None,
                "a host workload needs the simulated network".into(),
            )
        } else {
            self.script.command(&mut self.cx, spec.workload_node, "workload")?
        }
        Ok(())
    }

    /// Faults begin now: draw when crashes, pauses and clock jumps become
    /// possible, and (with `start_after`) start the random partitions.
    pub(crate) fn begin_faults(&mut self) {
        self.fault_period.begin();
        self.crashes.begin(&self.cx);
        self.node_faults.begin(&self.cx);
        self.conn_faults.begin(&self.cx);
        if let Some(name) = &self.cx.spec.explore.faults_after {
            self.wire.start_random_partitions(self.cx.now);
            let text = format!("faults begin: {name} reached ([faults] start_after)");
            self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
        }
    }

    /// The quiet period begins: faults stop (see
    /// `ExploreSpec::quiet_settle`), paused nodes continue; the checks
    /// wait `settle`. A node's clock offset and drift stay: they are
    /// its hardware.
    fn begin_quiet(&mut self, settle: Duration) -> Result<(), EngineError> {
        self.fault_period.calm();
        self.disk_faults.calm(&mut self.cx);
        self.wire.quiet();
        let text = format!("quiet period: faults stop; checks start after {} s", simtime::span_ns(settle) as f64 / 1e9);
        self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
        self.node_faults.resume_all(&mut self.cx)
    }

    /// The workload passed: send the invariants and liveness checks.
    pub(crate) fn start_checks(&mut self) -> Result<(), EngineError> {
        self.script.set_phase(Phase::Checks { done: 0 });
        let spec = self.cx.spec;
        for (cmd, n) in spec.invariants.iter().chain(&spec.liveness) {
            self.script.command(&mut self.cx, *n, cmd)?;
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
                self.roles.node_ready(&mut self.cx, from)?;
                // After a restart the probe runs first: the agent runs
                // commands in the order sent, so what waited for the node
                // runs once it is ready again. (At boot, every node's is
                // sent together once all agents are ready.)
                if self.cx.spec.ready_probe && !matches!(self.script.phase(), Phase::Booting) {
                    self.script.command(&mut self.cx, from, crate::READY_PROBE)?;
                }
                for cmd in std::mem::take(&mut self.cx.nodes[from].deferred) {
                    self.script.command(&mut self.cx, from, &cmd)?;
                }
            }
            AgentMsg::Done { command, status } if command == crate::agent::EXEC => {
                self.inspection.on_message(&mut self.cx, from, None, Some(status));
            }
            AgentMsg::Output(chunk) => self.inspection.on_message(&mut self.cx, from, Some(chunk), None),
            AgentMsg::Done { command, status } => {
                let running = &mut self.cx.nodes[from].running;
                if let Some(k) = running.iter().position(|c| *c == command) {
                    running.remove(k);
                }
                self.cx.trace.push(now, from, EventKind::CommandDone { name: command.clone(), status });
                let hint = agent::status_hint(status);
                let is_liveness = self.cx.spec.liveness.iter().any(|(n, i)| *n == command && *i == from);
                if command == crate::READY_PROBE {
                    self.script.on_probe_done(&self.cx, from, status);
                } else if command == crate::ROLE_PROBE {
                    // It started the probe's loop in the background: no check.
                } else if command == "start" {
                    // The exit a kill caused (`[faults.kill]`) is no failure.
                    if status != 0 && !self.cx.nodes[from].start_exit_was_kill() {
                        let what = format!("node {name}: its start command exited with status {status}{hint}");
                        self.script.fail(&self.cx, FailureKind::StartCommand, Some(from), what);
                    }
                } else if command == "workload" && self.script.phase() == Phase::Workload {
                    if status != 0 {
                        let what = format!("the workload on {name} exited with status {status}{hint}");
                        self.script.fail(&self.cx, FailureKind::Workload, Some(from), what);
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
                        self.script.fail(&self.cx, FailureKind::Liveness, Some(from), what);
                    } else if !ok {
                        let what = format!("invariant {command} failed on {name} (exit status {status}{hint})");
                        self.script.fail(&self.cx, FailureKind::Invariant, Some(from), what);
                    }
                }
            }
            AgentMsg::Role(role) => self.roles.on_role(&mut self.cx, from, role),
            AgentMsg::Unknown(line) => {
                self.cx.trace.push(now, from, EventKind::Note { text: format!("agent: {line}") });
            }
        }
        Ok(())
    }
}
