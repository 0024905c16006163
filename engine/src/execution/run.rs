//! Running a node or the host client: a grant to a node, and taking in
//! what it did (console and control output, disk completions, frames,
//! agent messages); a poll of the host client and the workload's end.

use vmm::node::{GuestOutput, OutputStream, RunOutcome};

use super::{Execution, Phase};
use crate::console;
use crate::host::HostOutcome;
use crate::outcome::{Failure, FailureKind, Verdict};
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;

impl Execution<'_> {
    /// Lets `node` run until it waits again (a grant), and takes in
    /// what it did: output, disk completions, frames, agent messages.
    pub(super) fn run_node(&mut self, node: NodeId) -> Result<(), EngineError> {
        let now = self.cx.now;
        self.cx.trace.push(now, node, EventKind::run());
        self.grants.grant();
        let time_of_day = self.cx.nodes[node].clock.time_of_day();
        // A grant that ends waiting has settled the node at `now` too:
        // interrupts owed for transmitted frames and control output, and
        // input that waited for receive buffers, reached it.
        let bound = self.lookahead_bound(node);
        let free_until = self.lookahead_given(node, bound);
        let grant = self.cx.nodes[node].vm().grant_ahead(now, free_until, time_of_day, self.cx.spec.watchdog)?;
        self.grants.round_trip();
        if grant.free_runs.count > 0 {
            self.account_free_runs(node, grant.free_runs, bound)?;
            self.grants.ran_free(now, grant.free_runs);
        }
        let now = self.cx.now;
        self.record_output(node, grant.output);
        self.disk_faults.record(&mut self.cx, node, &grant.disk);
        self.cx.nodes[node].flushed_since_run = false;
        if self.wire.is_on() {
            self.cx.nodes[node].just_sent = !grant.tx.is_empty();
        }
        self.wire.transmit(node, grant.tx, &mut self.cx.trace);
        if !matches!(grant.outcome, RunOutcome::Waiting { .. }) {
            self.wire.node_down(node);
        }
        match grant.outcome {
            RunOutcome::Waiting { .. } => {}
            RunOutcome::Exited { .. } | RunOutcome::Reset { .. } => {
                let n = &self.cx.nodes[node];
                // A reset is traced as an exit without status (what it was before
                // the outcome had its own variant: trace hashes stay as they were).
                let (status, signal) = match grant.outcome {
                    RunOutcome::Exited { status, signal } => (status, signal),
                    _ => (None, None),
                };
                self.cx.trace.push(now, node, EventKind::Exit { status, signal, panic: n.saw_panic });
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
                self.script.fail(&self.cx, kind, Some(node), what);
                return Ok(());
            }
            RunOutcome::Hung { wall } => {
                self.cx.trace.push(now, node, EventKind::Hung);
                let what = format!(
                    "node {} hung: it ran {:.1} s of wall time without letting virtual time advance \
                     (a guest busy loop waiting for time to pass never sees it pass)",
                    self.cx.nodes[node].name,
                    wall.as_secs_f64()
                );
                self.script.fail(&self.cx, FailureKind::GuestHang, Some(node), what);
                return Ok(());
            }
        }
        for (from, msg) in self.script.take_inbox() {
            if !self.script.is_decided() {
                self.on_agent_message(from, msg)?;
            }
        }
        Ok(())
    }

    /// Moves a node's stamped output into the trace: console lines as
    /// events, control lines parsed into agent messages for the script's
    /// inbox (acted on once the whole output is in).
    fn record_output(&mut self, node: NodeId, output: Vec<GuestOutput>) {
        for o in output {
            match o.stream {
                OutputStream::Console => {
                    for line in self.cx.nodes[node].console.feed(&o.bytes) {
                        self.cx.nodes[node].remember_line(&line);
                        let in_workload = self.script.phase() == Phase::Workload;
                        let begin = self.fault_period.starts_with(&self.cx, &line, in_workload);
                        let sdk = self.cx.spec.explore.antithesis.sdk.then(|| crate::sdk::sdk_line(&line)).flatten();
                        self.cx.trace.push(o.time, node, EventKind::Console { text: line });
                        if begin {
                            self.begin_faults();
                        }
                        if let Some(sdk) = sdk {
                            self.script.on_sdk_line(&mut self.cx, node, sdk);
                        }
                    }
                }
                OutputStream::Control => {
                    for line in self.cx.nodes[node].control.feed(&o.bytes) {
                        if let Some(m) = console::agent_message(&line) {
                            self.script.receive(node, m);
                        }
                    }
                }
            }
        }
    }

    /// The host endpoint's action: poll it, send what it transmitted, and
    /// act on the workload's end (invariants next, or the failure).
    pub(super) fn run_host(&mut self) -> Result<(), EngineError> {
        let now = self.cx.now;
        let Some((node, outcome)) = self.wire.poll_host(&mut self.cx) else { return Ok(()) };
        // The workload's end comes after the frames of its last poll, so
        // that a report finds it as the failing event.
        let status = match outcome {
            HostOutcome::Running => return Ok(()),
            HostOutcome::Passed => 0,
            HostOutcome::Failed(_) => 1,
        };
        self.cx.trace.push(now, node, EventKind::CommandDone { name: "workload".into(), status });
        match outcome {
            HostOutcome::Running => {}
            HostOutcome::Passed if self.script.phase() == Phase::Workload => self.start_checks()?,
            HostOutcome::Passed => {}
            HostOutcome::Failed(what) => {
                self.script.decide(Verdict::Fail(Failure::new(FailureKind::Workload, Some("host".into()), now, what)));
            }
        }
        Ok(())
    }
}
