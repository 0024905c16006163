//! Host-side checks on a client history a guest recorded.
//!
//! A workload that records its history (invoke/ok/fail/info events, see
//! [`crate::register_history`]) and prints it on its console between the lines
//! `@history begin` and `@history end` gets it checked by simcluster itself
//! after the execution ([`HistoryModel`]): with the linearizability checker
//! for a key-value register model (the default), or, for a transactional
//! history (list-append or rw-register), with `txncheck` against a
//! consistency model. The console is part of the trace, so the check is as
//! deterministic as the execution and replays with it; nothing in the guest
//! has to be trusted to run the check.

use std::sync::Arc;

use crate::linearizability::{check_operations, CheckOptions, CheckResult};
pub use crate::printed_history::history_lines;
use crate::register_history::{History, HistoryError, Outcome};
use engine::trace::Event;

/// What a client history is checked against (`[check] model` and
/// `[check] consistency` in cluster.toml, `--model` and `--consistency` of
/// `simcluster check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryModel {
    /// One read/write/cas register per key, for linearizability.
    #[default]
    Register,
    /// Transactions of micro-ops, for the anomalies `consistency` forbids.
    Txn {
        /// The transactional model: list-append or rw-register.
        model: txncheck::Model,
        /// The consistency model whose anomalies fail the check.
        consistency: txncheck::Consistency,
    },
    /// Adds and whole-set reads, checked as Jepsen's set-full
    /// ([`crate::set_full`]): acknowledged adds lost.
    Set {
        /// Stale elements fail too (`consistency = "linearizable"`).
        linearizable: bool,
    },
    /// Enqueues, dequeues and drains, checked as Jepsen's total-queue
    /// ([`crate::total_queue`]): acknowledged enqueues lost.
    Queue,
}

/// A `--model`/`--consistency` (or `[check]`) pair that names no check.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelNameError {
    /// Not one of [`HistoryModel::NAMES`].
    #[error("unknown model {0:?} (expected one of: {names})", names = HistoryModel::NAMES.join(", "))]
    UnknownModel(String),
    /// Not a consistency model txncheck knows.
    #[error(transparent)]
    UnknownConsistency(#[from] txncheck::model::UnknownName),
    /// A consistency model with the register model.
    #[error(
        "a consistency model applies to the transactional models (list-append, rw-register); the register model \
         is checked for linearizability"
    )]
    ConsistencyOfRegister,
    /// A consistency other than `linearizable` with the set model, or any
    /// with the queue model.
    #[error(
        "the set model takes consistency \"linearizable\" (stale reads fail too) or none; the queue model takes none"
    )]
    ConsistencyOfCollection,
}

impl HistoryModel {
    /// The consistency a transactional model is checked against unless told.
    pub const DEFAULT_CONSISTENCY: txncheck::Consistency = txncheck::Consistency::Serializable;

    /// The model names `--model` and `[check] model` accept.
    pub const NAMES: [&'static str; 5] = ["register", "list-append", "rw-register", "set", "queue"];

    /// The model called `name` (one of [`Self::NAMES`]), checked against
    /// `consistency` (a transactional model only; `None`:
    /// [`Self::DEFAULT_CONSISTENCY`]). The error does not say where the
    /// names came from.
    pub fn from_names(name: &str, consistency: Option<&str>) -> Result<HistoryModel, ModelNameError> {
        match (name, consistency) {
            ("set", None | Some("linearizable")) => {
                return Ok(HistoryModel::Set { linearizable: consistency.is_some() });
            }
            ("queue", None) => return Ok(HistoryModel::Queue),
            ("set" | "queue", Some(_)) => return Err(ModelNameError::ConsistencyOfCollection),
            _ => {}
        }
        let model = match name {
            "register" => None,
            other => {
                Some(other.parse::<txncheck::Model>().map_err(|_| ModelNameError::UnknownModel(other.to_string()))?)
            }
        };
        let consistency = consistency.map(str::parse::<txncheck::Consistency>).transpose()?;
        match (model, consistency) {
            (None, None) => Ok(HistoryModel::Register),
            (None, Some(_)) => Err(ModelNameError::ConsistencyOfRegister),
            (Some(model), c) => Ok(HistoryModel::Txn { model, consistency: c.unwrap_or(Self::DEFAULT_CONSISTENCY) }),
        }
    }

    /// `register`, `list-append` or `rw-register`.
    pub fn name(self) -> String {
        match self {
            HistoryModel::Register => "register".into(),
            HistoryModel::Txn { model, .. } => model.to_string(),
            HistoryModel::Set { .. } => "set".into(),
            HistoryModel::Queue => "queue".into(),
        }
    }

    /// The invariant the check's verdict goes into the trace as:
    /// `history-linearizable`, `history-<consistency>`, `history-set-full`
    /// or `history-total-queue`.
    pub fn invariant(self) -> String {
        match self {
            HistoryModel::Register => "history-linearizable".into(),
            HistoryModel::Txn { consistency, .. } => format!("history-{consistency}"),
            HistoryModel::Set { .. } => "history-set-full".into(),
            HistoryModel::Queue => "history-total-queue".into(),
        }
    }
}

/// What the host-side check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryVerdict {
    /// Linearizable; counts for the report.
    Linearizable {
        /// Operations in the history (invokes).
        ops: usize,
        /// Of them, completed `ok`.
        ok: usize,
        /// Completed `info` (ops never completed are in none of the counts).
        info: usize,
        /// Completed `fail`, failed compares included.
        fail: usize,
    },
    /// Not linearizable: the checker's explanation.
    Violation(String),
    /// The node printed no history.
    Missing,
    /// The history could not be parsed or paired.
    Malformed(String),
    /// The search budget ran out before a verdict.
    Unknown(String),
}

/// The engine's hook for `[check] history` on `node`, register model: the
/// engine runs [`engine_check`] after a passing execution.
pub fn hook(node: engine::NodeId) -> engine::HistoryCheck {
    hook_for(node, HistoryModel::Register)
}

/// The engine's hook for `[check] history` on `node`, checked against
/// `model`: [`engine_check`] for registers (invariant
/// `history-linearizable`, failure kind `Linearizability`),
/// [`engine_check_txn`] for transactions (invariant
/// `history-<consistency>`, failure kind `Anomaly`), and
/// [`crate::set_full::engine_check`] and [`crate::total_queue::engine_check`]
/// for sets and queues (invariants `history-set-full`,
/// `history-total-queue`; failure kind `Anomaly`, the JSON line's
/// `anomalies` counting lost, stale, unexpected, duplicated elements).
pub fn hook_for(node: engine::NodeId, model: HistoryModel) -> engine::HistoryCheck {
    let invariant = model.invariant();
    match model {
        HistoryModel::Register => engine::HistoryCheck {
            node,
            invariant,
            kind: engine::FailureKind::Linearizability,
            check: Arc::new(|events: &[Event], n: engine::NodeId| engine_check(events, n)),
        },
        HistoryModel::Txn { model, consistency } => engine::HistoryCheck {
            node,
            invariant,
            kind: engine::FailureKind::Anomaly,
            check: Arc::new(move |events: &[Event], n: engine::NodeId| engine_check_txn(events, n, model, consistency)),
        },
        HistoryModel::Set { linearizable } => engine::HistoryCheck {
            node,
            invariant,
            kind: engine::FailureKind::Anomaly,
            check: Arc::new(move |events: &[Event], n: engine::NodeId| {
                crate::set_full::engine_check(events, n, crate::set_full::SetOptions { linearizable })
            }),
        },
        HistoryModel::Queue => engine::HistoryCheck {
            node,
            invariant,
            kind: engine::FailureKind::Anomaly,
            check: Arc::new(|events: &[Event], n: engine::NodeId| crate::total_queue::engine_check(events, n)),
        },
    }
}

/// [`check_history`] as the engine reports it: whether the history passed,
/// and a note for the trace (its first line) and the failure message.
pub fn engine_check(events: &[Event], node: engine::NodeId) -> engine::HistoryOutcome {
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
    engine::HistoryOutcome { ok, note, anomalies: Default::default() }
}

/// What the host-side check of a transactional history concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnVerdict {
    /// Checked: valid or not, with the evidence.
    Checked(Box<txncheck::CheckReport>),
    /// The node printed no history.
    Missing,
    /// The history could not be parsed or paired.
    Malformed(String),
}

/// Checks the transactional history `node` printed (JSON lines or EDN)
/// against `consistency`.
pub fn check_txn_history(
    events: &[Event],
    node: engine::NodeId,
    model: txncheck::Model,
    consistency: txncheck::Consistency,
) -> TxnVerdict {
    let Some(text) = history_lines(events, node) else { return TxnVerdict::Missing };
    match txncheck::parse_history(&text) {
        Ok(h) => match txncheck::check_model(&h, model) {
            Ok(()) => TxnVerdict::Checked(Box::new(txncheck::check(&h, model, consistency))),
            Err(e) => TxnVerdict::Malformed(e.to_string()),
        },
        Err(e) => TxnVerdict::Malformed(e.to_string()),
    }
}

/// The anomalies of a report that its consistency forbids, as
/// `G-single-item (1), G2-item (2)`.
pub fn anomaly_summary(report: &txncheck::CheckReport) -> String {
    let counts = report.counts_of(&report.anomaly_types);
    counts.iter().map(|(n, c)| format!("{n} ({c})")).collect::<Vec<_>>().join(", ")
}

/// [`check_txn_history`] as the engine reports it: a first line for the
/// trace, then (when it fails) txncheck's explanation.
pub fn engine_check_txn(
    events: &[Event],
    node: engine::NodeId,
    model: txncheck::Model,
    consistency: txncheck::Consistency,
) -> engine::HistoryOutcome {
    let mut anomalies = std::collections::BTreeMap::new();
    let (ok, note) = match check_txn_history(events, node, model, consistency) {
        TxnVerdict::Checked(r) if r.valid => {
            let t = &r.txns;
            let note = format!(
                "history: {} transactions ({} ok, {} info, {} fail) show no anomaly {consistency} forbids ({model})",
                t.total, t.ok, t.info, t.fail
            );
            (true, note)
        }
        TxnVerdict::Checked(r) => {
            anomalies = r.counts_of(&r.anomaly_types).into_iter().map(|(n, c)| (n, c as u64)).collect();
            (false, format!("history is not {consistency} ({model}): {}\n{r}", anomaly_summary(&r)))
        }
        TxnVerdict::Missing => {
            (false, "no history: the node printed no \"@history begin\" .. \"@history end\" block".into())
        }
        TxnVerdict::Malformed(why) => (false, format!("the history cannot be read: {why}")),
    };
    engine::HistoryOutcome { ok, note, anomalies }
}

/// Checks the history `node` printed for linearizability.
pub fn check_history(events: &[Event], node: engine::NodeId) -> HistoryVerdict {
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
            fail: count(Outcome::Fail) + count(Outcome::CompareFailed),
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
    use engine::trace::EventKind;
    use engine::trace::Trace;

    fn console(t: &mut Trace, node: u16, line: &str) {
        t.push(
            simtime::VirtualTime::ZERO,
            engine::NodeId::new(node).unwrap(),
            EventKind::Console { text: line.to_string() },
        );
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
        assert_eq!(
            check_history(t.events(), engine::NodeId::new(1).unwrap()),
            HistoryVerdict::Linearizable { ops: 2, ok: 2, info: 0, fail: 0 }
        );
    }

    #[test]
    fn a_stale_read_is_a_violation_and_other_nodes_do_not_mix_in() {
        let t = trace_with(&[
            r#"{"process":0,"type":"invoke","time":1,"f":"write","key":"x","value":1}"#,
            r#"{"process":0,"type":"ok","time":2,"f":"write","key":"x","value":1}"#,
            r#"{"process":1,"type":"invoke","time":3,"f":"read","key":"x"}"#,
            r#"{"process":1,"type":"ok","time":4,"f":"read","key":"x","value":null}"#,
        ]);
        match check_history(t.events(), engine::NodeId::new(1).unwrap()) {
            HistoryVerdict::Violation(why) => assert!(why.contains("not linearizable"), "{why}"),
            v => panic!("{v:?}"),
        }
    }

    /// tests/histories/g-single.jsonl: a G-single (one rw and one wr edge).
    const G_SINGLE: &str = include_str!("../../tests/histories/g-single.jsonl");

    #[test]
    fn the_hook_carries_the_model_into_invariant_kind_and_verdict() {
        let reg = hook(engine::NodeId::at(0));
        assert_eq!((reg.invariant.as_str(), reg.kind), ("history-linearizable", engine::FailureKind::Linearizability));
        let txn = HistoryModel::from_names("list-append", None).unwrap();
        let hc = hook_for(engine::NodeId::at(0), txn);
        assert_eq!((hc.invariant.as_str(), hc.kind), ("history-serializable", engine::FailureKind::Anomaly));
        let t = trace_with(&G_SINGLE.lines().collect::<Vec<_>>());
        let out = (hc.check)(t.events(), engine::NodeId::at(0));
        assert!(!out.ok, "{}", out.note);
        let first = out.note.lines().next().unwrap();
        assert_eq!(first, "history is not serializable (list-append): G-single-item (1)");
        assert!(out.note.contains("-rw") && out.note.contains("-wr"), "{}", out.note);
        let rc = HistoryModel::from_names("list-append", Some("read-committed")).unwrap();
        let out = (hook_for(engine::NodeId::at(0), rc).check)(t.events(), engine::NodeId::at(0));
        assert!(out.ok, "{}", out.note);
        assert_eq!(
            out.note,
            "history: 3 transactions (3 ok, 0 info, 0 fail) show no anomaly read-committed forbids (list-append)"
        );
        let out =
            (hook_for(engine::NodeId::at(0), rc).check)(trace_with(&["{\"type\":1}"]).events(), engine::NodeId::at(0));
        assert!(!out.ok && out.note.starts_with("the history cannot be read: line 1:"), "{}", out.note);
    }

    #[test]
    fn model_names_and_edn_detection() {
        assert_eq!(HistoryModel::from_names("register", None), Ok(HistoryModel::Register));
        let e = HistoryModel::from_names("register", Some("serializable")).unwrap_err().to_string();
        assert!(e.contains("transactional models"), "{e}");
        let e = HistoryModel::from_names("bank", None).unwrap_err().to_string();
        assert!(e.contains("\"bank\"") && e.contains("register, list-append, rw-register, set, queue"), "{e}");
        assert_eq!(
            HistoryModel::NAMES.join(", "),
            "register, list-append, rw-register, set, queue",
            "the error's list"
        );
        assert_eq!(HistoryModel::from_names("set", None), Ok(HistoryModel::Set { linearizable: false }));
        let lin = HistoryModel::from_names("set", Some("linearizable")).unwrap();
        assert_eq!((lin, lin.invariant()), (HistoryModel::Set { linearizable: true }, "history-set-full".into()));
        assert_eq!(HistoryModel::from_names("set", Some("serializable")), Err(ModelNameError::ConsistencyOfCollection));
        assert_eq!(
            HistoryModel::from_names("queue", None).map(HistoryModel::invariant),
            Ok("history-total-queue".into())
        );
        assert_eq!(
            HistoryModel::from_names("queue", Some("linearizable")),
            Err(ModelNameError::ConsistencyOfCollection)
        );
        let hc = hook_for(engine::NodeId::at(0), HistoryModel::Queue);
        assert_eq!((hc.invariant.as_str(), hc.kind), ("history-total-queue", engine::FailureKind::Anomaly));
        let e = HistoryModel::from_names("rw-register", Some("linearizable")).unwrap_err().to_string();
        assert!(e.contains("\"linearizable\"") && e.contains("strict-serializable"), "{e}");
        assert_eq!(
            HistoryModel::from_names("rw-register", Some("snapshot-isolation")).unwrap().invariant(),
            "history-snapshot-isolation"
        );
        assert!(txncheck::looks_like_edn("\n  {:type :invoke}"));
        assert!(txncheck::looks_like_edn("{ :type :invoke}"));
        assert!(txncheck::looks_like_edn("#jepsen.history.Op{:type :invoke}"));
        assert!(!txncheck::looks_like_edn("{\"type\":\"invoke\"}"));
        assert!(!txncheck::looks_like_edn(""));
    }

    #[test]
    fn missing_and_malformed_histories_are_reported() {
        let mut t = Trace::new();
        console(&mut t, 1, "no history here");
        assert_eq!(check_history(t.events(), engine::NodeId::new(1).unwrap()), HistoryVerdict::Missing);
        let t = trace_with(&["{not json"]);
        assert!(matches!(check_history(t.events(), engine::NodeId::new(1).unwrap()), HistoryVerdict::Malformed(_)));
    }
}
