//! The script (boot, workload, checks) and how the execution ended.

use std::collections::BTreeMap;

use super::ctx::Ctx;
use crate::agent::{self, AgentCommand};
use crate::console::AgentMsg;
use crate::outcome::{Failure, FailureKind, Verdict};
use crate::spec::{EngineError, HistoryCheck, HistoryOutcome};
use crate::trace::EventKind;
use crate::NodeId;

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

    /// The execution's verdict is `verdict`, unless it has failed already:
    /// the first failure stays, since it is the earliest thing that went
    /// wrong (a node that printed a violated SDK assertion and then
    /// panicked or exited in the same grant failed on the assertion). A
    /// failure does replace a pass: the history check runs after every
    /// check passed.
    pub fn decide(&mut self, verdict: Verdict) {
        if !matches!(self.verdict, Some(Verdict::Fail(_))) {
            self.verdict = Some(verdict);
        }
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

    /// Node `from` printed an Antithesis SDK line: a violated assertion
    /// fails the execution; `setup_complete` lets a waiting workload
    /// start (at the end of this step: see `advance_script`).
    pub fn on_sdk_line(&mut self, cx: &mut Ctx, from: NodeId, line: Result<crate::sdk::SdkLine, String>) {
        use crate::sdk::SdkLine;
        match line {
            Ok(SdkLine::Assert(a)) if a.violated() && !self.is_decided() => {
                let what = a.describe_violation(&cx.nodes[from].name);
                self.fail(cx, FailureKind::Assertion, Some(from), what);
            }
            Ok(SdkLine::Setup { status }) if status == "complete" && !self.setup_seen() => {
                self.see_setup();
                let text = format!("setup_complete from {} (Antithesis SDK)", cx.nodes[from].name);
                cx.trace.push_engine(cx.now, EventKind::Note { text });
            }
            Ok(_) => {}
            Err(why) => {
                let text = format!("{}: an @antithesis line that cannot be read ({why})", cx.nodes[from].name);
                cx.trace.push_engine(cx.now, EventKind::Note { text });
            }
        }
    }

    /// Node `from`'s readiness probe answered `status`: 0 counts it ready
    /// (at boot), anything else fails the execution.
    pub fn on_probe_done(&mut self, cx: &Ctx, from: NodeId, status: i32) {
        if status == 0 {
            if let Phase::Probing { passed } = self.phase() {
                self.set_phase(Phase::Probing { passed: passed + 1 });
            }
            return;
        }
        let name = &cx.nodes[from].name;
        let when = if matches!(self.phase(), Phase::Probing { .. }) { "after boot" } else { "after its restart" };
        let what = format!(
            "node {name} never became ready {when}: its readiness probe ([node] ready) still failed at its \
             deadline ([node] ready_within; exit status {status}{})",
            agent::status_hint(status)
        );
        self.fail(cx, FailureKind::NotReady, Some(from), what);
    }

    /// The host-side check of the history `node` printed ([`HistoryCheck`]);
    /// its verdict goes into the trace as the check's invariant
    /// (`history-linearizable` for registers, `history-<consistency>` for
    /// transactions).
    pub fn check_history(&mut self, cx: &mut Ctx, hc: &HistoryCheck) {
        let node = hc.node;
        let HistoryOutcome { ok, note, anomalies } = (hc.check)(cx.trace.events(), node);
        self.set_anomalies(anomalies);
        let name = hc.invariant.clone();
        let now = cx.now;
        cx.trace.push_engine(now, EventKind::Note { text: note.lines().next().unwrap_or("").to_string() });
        cx.trace.push(now, node, EventKind::Invariant { name, ok });
        if !ok {
            let what = format!("[check] history on {}: {note}", cx.nodes[node].name);
            self.decide(Verdict::Fail(Failure::new(hc.kind, Some(cx.nodes[node].name.clone()), now, what)));
        }
    }

    /// Whether some node's Antithesis SDK reported `setup_complete`.
    pub fn setup_seen(&self) -> bool {
        self.setup_seen
    }

    /// Some node's Antithesis SDK reported `setup_complete`.
    fn see_setup(&mut self) {
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
    fn set_anomalies(&mut self, anomalies: BTreeMap<String, u64>) {
        self.anomalies = anomalies;
    }

    /// The anomalies, at the end.
    pub fn take_anomalies(&mut self) -> BTreeMap<String, u64> {
        std::mem::take(&mut self.anomalies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use simtime::VirtualTime;

    fn failure(kind: FailureKind) -> Verdict {
        Verdict::Fail(Failure::new(kind, Some("n1".into()), VirtualTime::from_ns(5), "what".into()))
    }

    #[test]
    fn the_first_failure_stays_and_a_failure_replaces_a_pass() {
        let mut script = Script::new();
        script.decide(failure(FailureKind::Assertion));
        script.decide(failure(FailureKind::GuestPanic));
        script.decide(Verdict::Pass);
        assert_eq!(script.verdict().and_then(Verdict::failure).map(|f| f.kind), Some(FailureKind::Assertion));

        let mut script = Script::new();
        script.decide(Verdict::Pass);
        script.decide(failure(FailureKind::Linearizability));
        assert_eq!(script.verdict().and_then(Verdict::failure).map(|f| f.kind), Some(FailureKind::Linearizability));
    }
}
