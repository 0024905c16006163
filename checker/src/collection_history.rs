//! Histories of set and queue operations, for [`crate::set_full`] and
//! [`crate::total_queue`]: JSON lines in the shape of a register history
//! ([`crate::history`]), with no key, whose `value` is one element (an
//! integer or a string) or, on a read's or a drain's `ok`, a JSON array of
//! elements:
//!
//! ```text
//! {"process":0,"type":"invoke","time":100,"f":"add","value":3}
//! {"process":0,"type":"ok","time":250,"f":"add","value":3}
//! {"process":1,"type":"invoke","time":300,"f":"read"}
//! {"process":1,"type":"ok","time":400,"f":"read","value":[1,2,3]}
//! {"process":2,"type":"invoke","time":500,"f":"enqueue","value":7}
//! {"process":2,"type":"ok","time":600,"f":"enqueue","value":7}
//! {"process":3,"type":"invoke","time":700,"f":"dequeue"}
//! {"process":3,"type":"ok","time":800,"f":"dequeue","value":7}
//! {"process":3,"type":"invoke","time":900,"f":"drain"}
//! {"process":3,"type":"ok","time":950,"f":"drain","value":[8,9]}
//! ```
//!
//! Outcomes as in a register history: `ok` took effect between invoke and
//! completion, `fail` did not take effect, `info` (and an invoke never
//! completed) may have. A dequeue's invoke carries no value (or `null`);
//! an `ok` dequeue with `null` found the queue empty. Processes are
//! sequential; after an `info` a process may go on (under the same id or a
//! fresh one). Real-time order comes from `time`, line order breaks ties.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::history::{EventType, Outcome, ProcessId, Value};

/// What one operation of a set or queue history does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CollectionOp {
    /// Adds an element to the set.
    Add(Value),
    /// Reads the whole set: `None` on the invoke (and an op that did not
    /// complete `ok`), the elements read on an `ok`.
    Read(Option<Vec<Value>>),
    /// Puts an element on the queue.
    Enqueue(Value),
    /// Takes one element off the queue: `None` on the invoke, and on an
    /// `ok` that found the queue empty.
    Dequeue(Option<Value>),
    /// Takes every element off the queue: `None` on the invoke, the
    /// elements on an `ok`.
    Drain(Option<Vec<Value>>),
}

impl CollectionOp {
    /// The function name as printed in histories.
    pub fn f(&self) -> &'static str {
        match self {
            CollectionOp::Add(_) => "add",
            CollectionOp::Read(_) => "read",
            CollectionOp::Enqueue(_) => "enqueue",
            CollectionOp::Dequeue(_) => "dequeue",
            CollectionOp::Drain(_) => "drain",
        }
    }
}

/// Up to 8 elements, then how many more.
fn elements(f: &mut fmt::Formatter<'_>, v: &[Value]) -> fmt::Result {
    write!(f, "{{")?;
    for (i, e) in v.iter().take(8).enumerate() {
        write!(f, "{}{e}", if i == 0 { "" } else { " " })?;
    }
    if v.len() > 8 {
        write!(f, " ... {} more", v.len() - 8)?;
    }
    write!(f, "}}")
}

impl fmt::Display for CollectionOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectionOp::Add(v) => write!(f, "add {v}"),
            CollectionOp::Enqueue(v) => write!(f, "enqueue {v}"),
            CollectionOp::Read(None) => write!(f, "read"),
            CollectionOp::Dequeue(None) => write!(f, "dequeue"),
            CollectionOp::Drain(None) => write!(f, "drain"),
            CollectionOp::Dequeue(Some(v)) => write!(f, "dequeue -> {v}"),
            CollectionOp::Read(Some(v)) => {
                write!(f, "read -> ")?;
                elements(f, v)
            }
            CollectionOp::Drain(Some(v)) => {
                write!(f, "drain -> ")?;
                elements(f, v)
            }
        }
    }
}

/// An invoke paired with its completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectionOperation {
    /// Position in the list [`parse`] returns (invoke order).
    pub id: usize,
    /// The client process that invoked it.
    pub process: ProcessId,
    /// The op as completed (an `ok` read, dequeue or drain carries what it
    /// got).
    pub op: CollectionOp,
    /// How it ended ([`Outcome::Pending`] if it never completed).
    pub outcome: Outcome,
    /// Invoke time.
    pub call: u64,
    /// Completion time; `None` for info and pending ops.
    pub ret: Option<u64>,
    /// The invoke's line, 1-based.
    pub line: usize,
}

impl CollectionOperation {
    /// Orders invokes in real time: by time, then by line.
    pub fn call_key(&self) -> (u64, usize) {
        (self.call, self.line)
    }
}

impl fmt::Display for CollectionOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail | Outcome::CompareFailed => "fail",
            Outcome::Info => "info",
            Outcome::Pending => "pending",
        };
        match self.ret {
            Some(r) => write!(
                f,
                "#{} p{} {} [{}..{}] {} (line {})",
                self.id, self.process, self.op, self.call, r, outcome, self.line
            ),
            None => write!(
                f,
                "#{} p{} {} [{}..] {} (line {})",
                self.id, self.process, self.op, self.call, outcome, self.line
            ),
        }
    }
}

/// Which operations a history may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `add` and `read`.
    Set,
    /// `enqueue`, `dequeue` and `drain`.
    Queue,
}

impl Kind {
    fn functions(self) -> &'static [&'static str] {
        match self {
            Kind::Set => &["add", "read"],
            Kind::Queue => &["enqueue", "dequeue", "drain"],
        }
    }
}

/// A set or queue history that cannot be read or paired; the message
/// names the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct CollectionHistoryError {
    /// The line, 1-based; blank lines count.
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

#[derive(Deserialize)]
struct RawEvent {
    process: ProcessId,
    #[serde(rename = "type")]
    kind: EventType,
    time: u64,
    f: String,
    #[serde(default)]
    value: serde_json::Value,
}

fn element(v: &serde_json::Value) -> Option<Value> {
    match v {
        serde_json::Value::String(s) => Some(Value::Str(s.clone())),
        serde_json::Value::Number(n) => n.as_i64().map(Value::Int),
        _ => None,
    }
}

/// The op an event names; `Err` says what is wrong with its value.
fn op_of(kind: EventType, f: &str, value: &serde_json::Value) -> Result<CollectionOp, String> {
    let one = || element(value).ok_or_else(|| format!("{f}'s value must be an integer or a string, not {value}"));
    let many = || -> Result<Option<Vec<Value>>, String> {
        if kind != EventType::Ok {
            return Ok(None);
        }
        let serde_json::Value::Array(items) = value else {
            return Err(format!("an ok {f} carries the elements as a JSON array, not {value}"));
        };
        items
            .iter()
            .map(|i| element(i).ok_or_else(|| format!("an element must be an integer or a string, not {i}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    };
    Ok(match f {
        "add" => CollectionOp::Add(one()?),
        "enqueue" => CollectionOp::Enqueue(one()?),
        "read" => CollectionOp::Read(many()?),
        "drain" => CollectionOp::Drain(many()?),
        "dequeue" if kind != EventType::Ok || value.is_null() => CollectionOp::Dequeue(None),
        "dequeue" => CollectionOp::Dequeue(Some(one()?)),
        other => return Err(format!("unknown function {other:?}")),
    })
}

/// Parses `text` (JSON lines; blank lines skipped) as a history of `kind`
/// and pairs each invoke with its process's next completion. Operations
/// come in invoke (line) order.
pub fn parse(text: &str, kind: Kind) -> Result<Vec<CollectionOperation>, CollectionHistoryError> {
    let mut ops: Vec<CollectionOperation> = Vec::new();
    // process -> slot of its open op
    let mut open: BTreeMap<ProcessId, usize> = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let err = |what: String| CollectionHistoryError { line, what };
        let ev: RawEvent = serde_json::from_str(l).map_err(|e| err(e.to_string()))?;
        if !kind.functions().contains(&ev.f.as_str()) {
            let fs = kind.functions().join(", ");
            return Err(err(format!("function {:?} is not one of this model's ({fs})", ev.f)));
        }
        let op = op_of(ev.kind, &ev.f, &ev.value).map_err(err)?;
        if ev.kind == EventType::Invoke {
            if let Some(&slot) = open.get(&ev.process) {
                if ops[slot].outcome != Outcome::Info {
                    return Err(err(format!(
                        "process {} invokes while its op of line {} is still open",
                        ev.process, ops[slot].line
                    )));
                }
            }
            open.insert(ev.process, ops.len());
            ops.push(CollectionOperation {
                id: ops.len(),
                process: ev.process,
                op,
                outcome: Outcome::Pending,
                call: ev.time,
                ret: None,
                line,
            });
            continue;
        }
        let Some(slot) = open.remove(&ev.process).filter(|&s| ops[s].outcome == Outcome::Pending) else {
            return Err(err(format!("process {} completes an op it never invoked", ev.process)));
        };
        let o = &mut ops[slot];
        if ev.time < o.call {
            return Err(err(format!("completion at {} precedes its invoke at {} (line {})", ev.time, o.call, o.line)));
        }
        let same = match (&o.op, &op) {
            (CollectionOp::Add(a), CollectionOp::Add(b)) | (CollectionOp::Enqueue(a), CollectionOp::Enqueue(b)) => {
                a == b
            }
            (a, b) => a.f() == b.f(),
        };
        if !same {
            return Err(err(format!("completion ({op}) does not match its invoke ({}) of line {}", o.op, o.line)));
        }
        match ev.kind {
            EventType::Ok => {
                o.outcome = Outcome::Ok;
                o.ret = Some(ev.time);
                o.op = op;
            }
            EventType::Fail => {
                o.outcome = Outcome::Fail;
                o.ret = Some(ev.time);
            }
            EventType::Info => {
                o.outcome = Outcome::Info;
                // Kept open, so that the process may invoke again.
                open.insert(ev.process, slot);
            }
            EventType::Invoke => unreachable!("handled above"),
        }
    }
    Ok(ops)
}

/// Counts of a history's ops by outcome, for a report's first line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OutcomeCounts {
    /// Operations (invokes).
    pub ops: usize,
    /// Of them, completed `ok`.
    pub ok: usize,
    /// Completed `info`.
    pub info: usize,
    /// Completed `fail`.
    pub fail: usize,
}

impl OutcomeCounts {
    /// The counts of `ops`.
    pub fn of(ops: &[CollectionOperation]) -> OutcomeCounts {
        let n = |o: Outcome| ops.iter().filter(|x| x.outcome == o).count();
        OutcomeCounts { ops: ops.len(), ok: n(Outcome::Ok), info: n(Outcome::Info), fail: n(Outcome::Fail) }
    }
}

impl fmt::Display for OutcomeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} operations ({} ok, {} info, {} fail)", self.ops, self.ok, self.info, self.fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_queue_lines_pair_into_operations() {
        let text = r#"{"process":0,"type":"invoke","time":100,"f":"add","value":3}
{"process":1,"type":"invoke","time":120,"f":"read","value":null}

{"process":0,"type":"ok","time":250,"f":"add","value":3}
{"process":1,"type":"ok","time":400,"f":"read","value":[1,"two",3]}
{"process":0,"type":"invoke","time":500,"f":"add","value":4}
{"process":0,"type":"info","time":600,"f":"add","value":4}
{"process":0,"type":"invoke","time":700,"f":"read"}
"#;
        let ops = parse(text, Kind::Set).unwrap();
        assert_eq!(ops.len(), 4);
        assert_eq!((ops[0].outcome, ops[0].ret, ops[0].line), (Outcome::Ok, Some(250), 1));
        assert_eq!(ops[1].op, CollectionOp::Read(Some(vec![1.into(), "two".into(), 3.into()])));
        assert_eq!(ops[1].to_string(), "#1 p1 read -> {1 \"two\" 3} [120..400] ok (line 2)");
        assert_eq!((ops[2].outcome, ops[2].ret), (Outcome::Info, None));
        assert_eq!(ops[3].outcome, Outcome::Pending, "a process goes on after info");

        let q = r#"{"process":0,"type":"invoke","time":1,"f":"dequeue"}
{"process":0,"type":"ok","time":2,"f":"dequeue","value":null}
{"process":0,"type":"invoke","time":3,"f":"drain"}
{"process":0,"type":"ok","time":4,"f":"drain","value":[5,6]}"#;
        let ops = parse(q, Kind::Queue).unwrap();
        assert_eq!(ops[0].op, CollectionOp::Dequeue(None), "an empty queue");
        assert_eq!(ops[1].op, CollectionOp::Drain(Some(vec![5.into(), 6.into()])));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = |text: &str, kind| parse(text, kind).unwrap_err().to_string();
        let add = r#"{"process":0,"type":"invoke","time":1,"f":"add","value":1}"#;
        assert!(
            bad(add, Kind::Queue).starts_with("line 1: function \"add\" is not one of"),
            "{}",
            bad(add, Kind::Queue)
        );
        let e = bad(&format!("{add}\n{add}"), Kind::Set);
        assert_eq!(e, "line 2: process 0 invokes while its op of line 1 is still open");
        let e = bad(&format!("{add}\n{}", r#"{"process":0,"type":"ok","time":2,"f":"add","value":2}"#), Kind::Set);
        assert!(e.starts_with("line 2: completion (add 2) does not match"), "{e}");
        let e = bad(r#"{"process":0,"type":"ok","time":2,"f":"read","value":[1]}"#, Kind::Set);
        assert_eq!(e, "line 1: process 0 completes an op it never invoked");
        let e = bad(
            "{\"process\":0,\"type\":\"invoke\",\"time\":1,\"f\":\"read\"}\n\
             {\"process\":0,\"type\":\"ok\",\"time\":2,\"f\":\"read\",\"value\":3}",
            Kind::Set,
        );
        assert!(e.starts_with("line 2: an ok read carries the elements as a JSON array"), "{e}");
        let e = bad(r#"{"process":0,"type":"invoke","time":1,"f":"add","value":[1]}"#, Kind::Set);
        assert!(e.contains("add's value must be an integer or a string"), "{e}");
        let e = bad("\n{\"process\":0}", Kind::Set);
        assert!(e.starts_with("line 2: missing field"), "{e}");
    }
}
