//! Client histories: what a guest workload observed, as a list of events.
//!
//! A guest workload prints one JSON object per line (JSON lines), Jepsen style:
//!
//! ```text
//! {"process":1,"type":"invoke","time":100,"f":"write","key":"x","value":3}
//! {"process":1,"type":"ok","time":250,"f":"write","key":"x","value":3}
//! {"process":2,"type":"invoke","time":120,"f":"read","key":"x","value":null}
//! {"process":2,"type":"ok","time":300,"f":"read","key":"x","value":3}
//! {"process":3,"type":"invoke","time":130,"f":"cas","key":"x","from":3,"to":4}
//! {"process":3,"type":"info","time":900,"f":"cas","key":"x","from":3,"to":4}
//! ```
//!
//! Outcomes: `ok` took effect between invoke and completion; `fail` definitely did
//! not take effect; `info` (and an invoke never completed, "pending") may or may
//! not have taken effect, at any time after the invoke. A `fail` cas whose
//! completion says `"error":"compare-failed"` did not take effect either, but it
//! observed something: at some point between its invoke and its completion the
//! register held a value other than `from` ([`Outcome::CompareFailed`]). Any other
//! `error` (or none) on a `fail` cas says nothing about what it read:
//!
//! ```text
//! {"process":4,"type":"invoke","time":140,"f":"cas","key":"x","from":1,"to":2}
//! {"process":4,"type":"fail","time":180,"f":"cas","key":"x","from":1,"to":2,"error":"compare-failed"}
//! ```
//! Times are virtual
//! nanoseconds. Each process is sequential: at most one outstanding op. Jepsen
//! convention: after an `info`, a workload continues under a fresh process id,
//! but reusing the id is also accepted here (the info op simply stays open).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A client process (thread of a workload), as named in the history.
pub type ProcessId = u64;

/// A register value: an integer or a string, as printed by the workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A JSON integer.
    Int(i64),
    /// A JSON string.
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}

/// What kind of event a history line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The process called the op (`"invoke"`).
    Invoke,
    /// The op completed and took effect (`"ok"`).
    Ok,
    /// The op completed and definitely did not take effect (`"fail"`).
    Fail,
    /// The process gave up on the op, which may or may not have taken
    /// effect (`"info"`).
    Info,
}

/// An operation on one key of a key-value register store.
///
/// For `read`, the invoke carries `value: null` (or omits it) and the `ok`
/// completion carries the value read (`null`: the key was never written).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "lowercase")]
pub enum Op {
    /// Reads the key's register.
    Read {
        /// The key.
        key: String,
        /// The value read, on the `ok` completion; `None` on the invoke, and
        /// on a completion for a key never written.
        #[serde(default)]
        value: Option<Value>,
    },
    /// Sets the key's register to `value`.
    Write {
        /// The key.
        key: String,
        /// The value written.
        value: Value,
    },
    /// Compare-and-set: sets the key's register to `to` if it holds `from`.
    Cas {
        /// The key.
        key: String,
        /// The value the register must hold for the cas to take effect.
        from: Value,
        /// The value it then holds.
        to: Value,
    },
}

impl Op {
    /// A read of `key`; `value` is `None` for an invoke, the value read for
    /// a completion.
    pub fn read(key: &str, value: Option<Value>) -> Op {
        Op::Read { key: key.into(), value }
    }
    /// A write of `value` to `key`.
    pub fn write(key: &str, value: impl Into<Value>) -> Op {
        Op::Write { key: key.into(), value: value.into() }
    }
    /// A cas of `key` from `from` to `to`.
    pub fn cas(key: &str, from: impl Into<Value>, to: impl Into<Value>) -> Op {
        Op::Cas { key: key.into(), from: from.into(), to: to.into() }
    }
    /// The key the op is on.
    pub fn key(&self) -> &str {
        match self {
            Op::Read { key, .. } | Op::Write { key, .. } | Op::Cas { key, .. } => key,
        }
    }
    /// The function name as printed in histories (`read`, `write`, `cas`).
    pub fn f(&self) -> &'static str {
        match self {
            Op::Read { .. } => "read",
            Op::Write { .. } => "write",
            Op::Cas { .. } => "cas",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Read { key, value: Some(v) } => write!(f, "read {key} -> {v}"),
            Op::Read { key, value: None } => write!(f, "read {key} -> nil"),
            Op::Write { key, value } => write!(f, "write {key} := {value}"),
            Op::Cas { key, from, to } => write!(f, "cas {key} {from} -> {to}"),
        }
    }
}

/// One line of a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The client process that recorded it.
    pub process: ProcessId,
    /// Invoke or completion, and how it completed (`"type"` in the JSON).
    #[serde(rename = "type")]
    pub kind: EventType,
    /// Virtual time in nanoseconds.
    pub time: u64,
    /// The operation; its fields (`f`, `key`, `value`, `from`, `to`) sit
    /// at the top level of the JSON object.
    #[serde(flatten)]
    pub op: Op,
    /// Why the op failed, as the workload says; only `"compare-failed"`
    /// (on a `fail` cas: [`COMPARE_FAILED`]) means anything to the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The `error` of a `fail` cas completion whose compare failed: the register
/// held something other than `from` (see [`Outcome::CompareFailed`]).
pub const COMPARE_FAILED: &str = "compare-failed";

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Took effect between call and return.
    Ok,
    /// Definitely did not take effect.
    Fail,
    /// Indeterminate: may have taken effect at any time after the call.
    Info,
    /// Invoked, never completed: treated like `Info`.
    Pending,
    /// A cas that failed because its compare failed (`"error":"compare-failed"`
    /// on its `fail` completion): it did not take effect, but between call and
    /// return the register held a value other than its `from`.
    #[serde(rename = "compare-failed")]
    CompareFailed,
}

impl Outcome {
    /// Whether the op must be placed in a linearization, between its call
    /// and its return: `ok` ops and cas ops whose compare failed. The others
    /// (`fail`: never happened; `info`, pending: may have) are optional.
    pub fn must_linearize(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::CompareFailed)
    }
}

/// An invoke paired with its completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Position in the list returned by [`History::operations`].
    pub id: usize,
    /// The client process that invoked it.
    pub process: ProcessId,
    /// The op as completed (for an `ok` read: carries the value read).
    pub op: Op,
    /// How it ended ([`Outcome::Pending`] if it never completed).
    pub outcome: Outcome,
    /// Invoke time (ns).
    pub call: u64,
    /// Completion time (ns); `None` for info/pending ops (open-ended).
    pub ret: Option<u64>,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
            Outcome::Pending => "pending",
            Outcome::CompareFailed => "fail (compare failed)",
        };
        match self.ret {
            Some(r) => write!(f, "#{} p{} {} [{}..{} ns] {}", self.id, self.process, self.op, self.call, r, outcome),
            None => write!(f, "#{} p{} {} [{}.. ns] {}", self.id, self.process, self.op, self.call, outcome),
        }
    }
}

/// A history that cannot be parsed or paired.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A line is not a valid event.
    #[error("history line {line}: {source}")]
    Parse {
        /// The line, 1-based; blank lines count.
        line: usize,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A completion with no open invoke of its process (or a second
    /// completion of an op already completed `info`).
    #[error("event {index}: process {process} completes an op it never invoked")]
    CompletionWithoutInvoke {
        /// The completion's index in [`History::events`] (0-based).
        index: usize,
        /// Its process.
        process: ProcessId,
    },
    /// An invoke while the process's previous op is still pending (an op
    /// completed `info` does not count).
    #[error("event {index}: process {process} invokes while its op at event {open} is still open")]
    DoubleInvoke {
        /// The second invoke's index in [`History::events`] (0-based).
        index: usize,
        /// Its process.
        process: ProcessId,
        /// Index of the invoke still open (0-based).
        open: usize,
    },
    /// A completion names another function or key than its invoke (or,
    /// for write and cas, other arguments).
    #[error("event {index}: completion ({completion}) does not match the invoke at event {invoke} ({invoked})")]
    Mismatch {
        /// The completion's index in [`History::events`] (0-based).
        index: usize,
        /// The invoke's index (0-based).
        invoke: usize,
        /// The invoked op, as [`Op`] displays it.
        invoked: String,
        /// The completed op, as [`Op`] displays it.
        completion: String,
    },
    /// A completion's time is before its invoke's.
    #[error("event {index}: completion at {time} ns precedes its invoke at {invoke_time} ns")]
    TimeWentBackwards {
        /// The completion's index in [`History::events`] (0-based).
        index: usize,
        /// The completion's time, ns.
        time: u64,
        /// The invoke's time, ns.
        invoke_time: u64,
    },
    /// `"error":"compare-failed"` on a completion other than a `fail` cas.
    #[error(
        "event {index}: \"error\":\"compare-failed\" on {what}: only a fail cas completion can say its compare failed"
    )]
    CompareFailedMisplaced {
        /// The completion's index in [`History::events`] (0-based).
        index: usize,
        /// What the completion was, e.g. `an ok cas completion`.
        what: String,
    },
}

/// A list of events in the order they were recorded. Real-time order between
/// operations comes from the `time` fields, not from the line order, so logs
/// from several clients may simply be concatenated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The events, in line order.
    pub events: Vec<Event>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Parses JSON lines; blank lines are skipped. Errors name the 1-based line.
    pub fn from_json_lines(text: &str) -> Result<History, HistoryError> {
        let mut events = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let ev = serde_json::from_str(line).map_err(|source| HistoryError::Parse { line: i + 1, source })?;
            events.push(ev);
        }
        Ok(History { events })
    }

    /// One JSON object per line, each line ending in `\n`.
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        for ev in &self.events {
            // Serialising these plain types cannot fail.
            out.push_str(&serde_json::to_string(ev).expect("event serialises"));
            out.push('\n');
        }
        out
    }

    /// Appends an event with no `error`; returns `self` for chaining.
    pub fn push(&mut self, process: ProcessId, kind: EventType, time: u64, op: Op) -> &mut Self {
        self.events.push(Event { process, kind, time, op, error: None });
        self
    }
    /// Appends an invoke of `op` by `process` at `time` (ns).
    pub fn invoke(&mut self, process: ProcessId, time: u64, op: Op) -> &mut Self {
        self.push(process, EventType::Invoke, time, op)
    }
    /// Appends an `ok` completion; for a read, `op` carries the value read.
    pub fn ok(&mut self, process: ProcessId, time: u64, op: Op) -> &mut Self {
        self.push(process, EventType::Ok, time, op)
    }
    /// Appends a `fail` completion (with no `error`).
    pub fn fail(&mut self, process: ProcessId, time: u64, op: Op) -> &mut Self {
        self.push(process, EventType::Fail, time, op)
    }
    /// Appends an `info` completion: the op's effect is unknown.
    pub fn info(&mut self, process: ProcessId, time: u64, op: Op) -> &mut Self {
        self.push(process, EventType::Info, time, op)
    }
    /// A `fail` completion of a cas whose compare failed
    /// (`"error":"compare-failed"`).
    pub fn compare_failed(&mut self, process: ProcessId, time: u64, op: Op) -> &mut Self {
        self.events.push(Event { process, kind: EventType::Fail, time, op, error: Some(COMPARE_FAILED.to_string()) });
        self
    }

    /// Pairs each invoke with the next completion of the same process.
    /// Operations are returned in invoke order (line order of the invokes).
    pub fn operations(&self) -> Result<Vec<Operation>, HistoryError> {
        // process -> (event index of the open invoke, op slot)
        let mut open: BTreeMap<ProcessId, (usize, usize)> = BTreeMap::new();
        let mut ops: Vec<Operation> = Vec::new();
        for (index, ev) in self.events.iter().enumerate() {
            match ev.kind {
                EventType::Invoke => {
                    if let Some(&(open_at, slot)) = open.get(&ev.process) {
                        if ops[slot].outcome != Outcome::Info {
                            return Err(HistoryError::DoubleInvoke { index, process: ev.process, open: open_at });
                        }
                    }
                    let id = ops.len();
                    ops.push(Operation {
                        id,
                        process: ev.process,
                        op: ev.op.clone(),
                        outcome: Outcome::Pending,
                        call: ev.time,
                        ret: None,
                    });
                    open.insert(ev.process, (index, id));
                }
                kind => {
                    let Some((invoke, slot)) = open.remove(&ev.process) else {
                        return Err(HistoryError::CompletionWithoutInvoke { index, process: ev.process });
                    };
                    let o = &mut ops[slot];
                    if o.outcome == Outcome::Info {
                        // The process already gave up on this op; a second completion is a bug.
                        return Err(HistoryError::CompletionWithoutInvoke { index, process: ev.process });
                    }
                    if ev.time < o.call {
                        return Err(HistoryError::TimeWentBackwards { index, time: ev.time, invoke_time: o.call });
                    }
                    let compare_failed = ev.error.as_deref() == Some(COMPARE_FAILED);
                    if compare_failed && !(kind == EventType::Fail && matches!(ev.op, Op::Cas { .. })) {
                        let what = match kind {
                            EventType::Ok => "an ok",
                            EventType::Info => "an info",
                            _ => "a fail",
                        };
                        let what = format!("{what} {} completion", ev.op.f());
                        return Err(HistoryError::CompareFailedMisplaced { index, what });
                    }
                    if !completion_matches(&o.op, &ev.op) {
                        return Err(HistoryError::Mismatch {
                            index,
                            invoke,
                            invoked: o.op.to_string(),
                            completion: ev.op.to_string(),
                        });
                    }
                    match kind {
                        EventType::Ok => {
                            o.outcome = Outcome::Ok;
                            o.ret = Some(ev.time);
                            o.op = ev.op.clone();
                        }
                        EventType::Fail => {
                            o.outcome = if compare_failed { Outcome::CompareFailed } else { Outcome::Fail };
                            o.ret = Some(ev.time);
                        }
                        EventType::Info => {
                            // Open-ended; keep it registered so a reused process id
                            // is accepted by the invoke branch above.
                            o.outcome = Outcome::Info;
                            open.insert(ev.process, (invoke, slot));
                        }
                        EventType::Invoke => unreachable!(),
                    }
                }
            }
        }
        Ok(ops)
    }
}

/// A completion must name the same function and key; for write/cas also the
/// same arguments. A read's completion carries the value read, so any value.
fn completion_matches(invoked: &Op, done: &Op) -> bool {
    match (invoked, done) {
        (Op::Read { key: a, .. }, Op::Read { key: b, .. }) => a == b,
        (a @ Op::Write { .. }, b @ Op::Write { .. }) | (a @ Op::Cas { .. }, b @ Op::Cas { .. }) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_round_trip() {
        let text = r#"{"process":1,"type":"invoke","time":100,"f":"write","key":"x","value":3}
{"process":2,"type":"invoke","time":120,"f":"read","key":"x","value":null}
{"process":1,"type":"ok","time":250,"f":"write","key":"x","value":3}
{"process":2,"type":"ok","time":300,"f":"read","key":"x","value":3}
{"process":3,"type":"invoke","time":130,"f":"cas","key":"x","from":3,"to":"four"}

{"process":3,"type":"info","time":900,"f":"cas","key":"x","from":3,"to":"four","extra":"ignored"}
"#;
        let h = History::from_json_lines(text).unwrap();
        assert_eq!(h.events.len(), 6);
        assert_eq!(h.events[4].op, Op::cas("x", 3, "four"));
        let again = History::from_json_lines(&h.to_json_lines()).unwrap();
        assert_eq!(h, again);
        let ops = h.operations().unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].outcome, Outcome::Ok);
        assert_eq!(ops[1].op, Op::read("x", Some(Value::Int(3))));
        assert_eq!(ops[1].ret, Some(300));
        assert_eq!(ops[2].outcome, Outcome::Info);
        assert_eq!(ops[2].ret, None);
    }

    #[test]
    fn read_invoke_may_omit_value() {
        let h = History::from_json_lines(r#"{"process":1,"type":"invoke","time":1,"f":"read","key":"k"}"#).unwrap();
        assert_eq!(h.events[0].op, Op::read("k", None));
        assert_eq!(h.operations().unwrap()[0].outcome, Outcome::Pending);
    }

    #[test]
    fn parse_error_names_line() {
        let err = History::from_json_lines("\n{\"process\":1}\n").unwrap_err();
        assert!(err.to_string().starts_with("history line 2:"), "{err}");
    }

    #[test]
    fn pairing_errors() {
        let mut h = History::new();
        h.ok(1, 5, Op::write("x", 1));
        assert!(matches!(h.operations(), Err(HistoryError::CompletionWithoutInvoke { index: 0, process: 1 })));

        let mut h = History::new();
        h.invoke(1, 5, Op::write("x", 1)).invoke(1, 6, Op::write("x", 2));
        assert!(matches!(h.operations(), Err(HistoryError::DoubleInvoke { index: 1, open: 0, .. })));

        let mut h = History::new();
        h.invoke(1, 5, Op::write("x", 1)).ok(1, 6, Op::write("x", 2));
        let e = h.operations().unwrap_err();
        assert!(e.to_string().contains("write x := 1"), "{e}");

        let mut h = History::new();
        h.invoke(1, 5, Op::write("x", 1)).ok(1, 4, Op::write("x", 1));
        assert!(matches!(h.operations(), Err(HistoryError::TimeWentBackwards { .. })));
    }

    #[test]
    fn a_compare_failed_cas_is_its_own_outcome_and_only_a_fail_cas_may_say_so() {
        let text = r#"{"process":1,"type":"invoke","time":1,"f":"cas","key":"x","from":1,"to":2}
{"process":1,"type":"fail","time":2,"f":"cas","key":"x","from":1,"to":2,"error":"compare-failed"}
{"process":1,"type":"invoke","time":3,"f":"cas","key":"x","from":1,"to":2}
{"process":1,"type":"fail","time":4,"f":"cas","key":"x","from":1,"to":2,"error":"timeout"}
"#;
        let h = History::from_json_lines(text).unwrap();
        assert_eq!(h.events[1].error.as_deref(), Some(COMPARE_FAILED));
        let ops = h.operations().unwrap();
        assert_eq!(ops[0].outcome, Outcome::CompareFailed);
        assert!(ops[0].to_string().ends_with("fail (compare failed)"), "{}", ops[0]);
        assert_eq!(ops[1].outcome, Outcome::Fail, "another error says nothing about the compare");
        assert_eq!(History::from_json_lines(&h.to_json_lines()).unwrap(), h);

        let mut h = History::new();
        h.invoke(1, 1, Op::write("x", 1));
        h.events.push(Event {
            process: 1,
            kind: EventType::Fail,
            time: 2,
            op: Op::write("x", 1),
            error: Some(COMPARE_FAILED.into()),
        });
        let e = h.operations().unwrap_err();
        assert!(e.to_string().contains("on a fail write completion"), "{e}");
        let mut h = History::new();
        h.invoke(1, 1, Op::cas("x", 1, 2)).events.push(Event {
            process: 1,
            kind: EventType::Ok,
            time: 2,
            op: Op::cas("x", 1, 2),
            error: Some(COMPARE_FAILED.into()),
        });
        assert!(matches!(h.operations(), Err(HistoryError::CompareFailedMisplaced { index: 1, .. })));
    }

    #[test]
    fn process_may_continue_after_info() {
        let mut h = History::new();
        h.invoke(1, 5, Op::write("x", 1)).info(1, 9, Op::write("x", 1)).invoke(1, 10, Op::read("x", None)).ok(
            1,
            12,
            Op::read("x", Some(1.into())),
        );
        let ops = h.operations().unwrap();
        assert_eq!(ops[0].outcome, Outcome::Info);
        assert_eq!(ops[1].outcome, Outcome::Ok);
    }
}
