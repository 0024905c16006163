//! Host-side checks on a client history a guest recorded.
//!
//! A workload that records its history (invoke/ok/fail/info events, see
//! [`crate::history`]) and prints it on its console between the lines
//! `@history begin` and `@history end` gets it checked by simcluster itself
//! after the execution, with the linearizability checker for a key-value
//! register model. The console is part of the trace, so the check is as
//! deterministic as the execution and replays with it; nothing in the guest
//! has to be trusted to run the check.

use crate::history::{History, HistoryError, Outcome};
use crate::linearizability::{check_operations, CheckOptions, CheckResult};
use engine::trace::{Event, EventKind};

/// What the host-side check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryVerdict {
    /// Linearizable; counts for the report.
    Linearizable { ops: usize, ok: usize, info: usize, fail: usize },
    /// Not linearizable: the checker's explanation.
    Violation(String),
    /// The node printed no history.
    Missing,
    /// The history could not be parsed or paired.
    Malformed(String),
    /// The search budget ran out before a verdict.
    Unknown(String),
}

/// The history lines `node` printed on its console (the last
/// `@history begin` .. `@history end` block).
pub fn history_lines(events: &[Event], node: u16) -> Option<String> {
    let mut block: Option<String> = None;
    let mut inside = false;
    for e in events.iter().filter(|e| e.node == node) {
        let EventKind::Console { text } = &e.kind else { continue };
        let l = text.trim();
        if l.starts_with("@history begin") {
            inside = true;
            block = Some(String::new());
        } else if l.starts_with("@history end") {
            inside = false;
        } else if inside && l.starts_with('{') {
            let b = block.as_mut().expect("set at begin");
            b.push_str(l);
            b.push('\n');
        }
    }
    block
}

/// The engine's hook for `[check] history` on `node`: the engine runs
/// [`engine_check`] after a passing execution.
pub fn hook(node: engine::NodeIdx) -> engine::HistoryCheck {
    engine::HistoryCheck { node, check: engine_check }
}

/// [`check_history`] as the engine reports it: whether the history passed,
/// and a note for the trace (its first line) and the failure message.
pub fn engine_check(events: &[Event], node: u16) -> engine::HistoryOutcome {
    use HistoryVerdict as H;
    let (ok, note) = match check_history(events, node) {
        H::Linearizable { ops, ok, info, fail } => {
            (true, format!("history: {ops} operations ({ok} ok, {info} info, {fail} fail) are linearizable"))
        }
        H::Violation(why) => (false, format!("history is not linearizable: {why}")),
        H::Missing => (false, "no history: the node printed no \"@history begin\" .. \"@history end\" block".into()),
        H::Malformed(why) => (false, format!("the history cannot be read: {why}")),
        H::Unknown(why) => (false, format!("the linearizability check could not decide: {why}")),
    };
    engine::HistoryOutcome { ok, note }
}

/// Checks the history `node` printed for linearizability.
pub fn check_history(events: &[Event], node: u16) -> HistoryVerdict {
    let Some(text) = history_lines(events, node) else { return HistoryVerdict::Missing };
    let parsed = History::from_json_lines(&text).and_then(|h| h.operations().map(|ops| (h, ops)));
    let ops = match parsed {
        Ok((_, ops)) => ops,
        Err(e) => return HistoryVerdict::Malformed(describe(&e)),
    };
    let count = |o: Outcome| ops.iter().filter(|x| x.outcome == o).count();
    match check_operations(&ops, &CheckOptions::default()) {
        CheckResult::Ok { .. } => HistoryVerdict::Linearizable {
            ops: ops.len(),
            ok: count(Outcome::Ok),
            info: count(Outcome::Info),
            fail: count(Outcome::Fail),
        },
        CheckResult::Violation(v) => HistoryVerdict::Violation(v.to_string()),
        CheckResult::Unknown { key, steps } => {
            HistoryVerdict::Unknown(format!("the search gave up on key {key:?} after {steps} steps"))
        }
    }
}

fn describe(e: &HistoryError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::trace::Trace;

    fn console(t: &mut Trace, node: u16, line: &str) {
        t.push(0, node, EventKind::Console { text: line.to_string() });
    }

    fn trace_with(history: &[&str]) -> Trace {
        let mut t = Trace::new();
        console(&mut t, 1, "booting");
        console(&mut t, 2, "@history begin");
        console(&mut t, 2, "{\"process\":9,\"type\":\"invoke\",\"time\":1,\"f\":\"read\",\"key\":\"x\"}");
        console(&mut t, 1, "@history begin");
        for l in history {
            console(&mut t, 1, l);
        }
        console(&mut t, 1, "@history end");
        t
    }

    #[test]
    fn linearizable_history_passes() {
        let t = trace_with(&[
            r#"{"process":0,"type":"invoke","time":1,"f":"write","key":"x","value":1}"#,
            r#"{"process":0,"type":"ok","time":2,"f":"write","key":"x","value":1}"#,
            r#"{"process":1,"type":"invoke","time":3,"f":"read","key":"x"}"#,
            r#"{"process":1,"type":"ok","time":4,"f":"read","key":"x","value":1}"#,
        ]);
        assert_eq!(check_history(t.events(), 1), HistoryVerdict::Linearizable { ops: 2, ok: 2, info: 0, fail: 0 });
    }

    #[test]
    fn a_stale_read_is_a_violation_and_other_nodes_do_not_mix_in() {
        let t = trace_with(&[
            r#"{"process":0,"type":"invoke","time":1,"f":"write","key":"x","value":1}"#,
            r#"{"process":0,"type":"ok","time":2,"f":"write","key":"x","value":1}"#,
            r#"{"process":1,"type":"invoke","time":3,"f":"read","key":"x"}"#,
            r#"{"process":1,"type":"ok","time":4,"f":"read","key":"x","value":null}"#,
        ]);
        match check_history(t.events(), 1) {
            HistoryVerdict::Violation(why) => assert!(why.contains("not linearizable"), "{why}"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn missing_and_malformed_histories_are_reported() {
        let mut t = Trace::new();
        console(&mut t, 1, "no history here");
        assert_eq!(check_history(t.events(), 1), HistoryVerdict::Missing);
        let t = trace_with(&["{not json"]);
        assert!(matches!(check_history(t.events(), 1), HistoryVerdict::Malformed(_)));
    }
}
