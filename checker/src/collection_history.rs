//! Histories of set and queue operations, for [`crate::set_full`] and
//! [`crate::total_queue`]: JSON lines in the shape of a register history
//! ([`crate::register_history`]), with no key, whose `value` is one element (an
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
//!
//! Jepsen's `history.edn` reads too ([`parse_any`]), one op map per line:
//!
//! ```text
//! {:type :invoke, :f :add, :value 3, :process 0, :time 100, :index 0}
//! {:type :ok, :f :read, :value #{1 2 3}, :process 1, :time 400, :index 3}
//! ```
//!
//! A read's or drain's elements may be a set, a vector or a list; a keyword
//! element `:a` is the string `":a"`; ops of the process `:nemesis` are
//! skipped; an op without `:time` is timed by its line number.

use std::collections::BTreeMap;
use std::fmt;

use clojure_reader::edn::Edn;
use serde::Deserialize;

use crate::register_history::{EventType, Outcome, ProcessId, Value};

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

/// An EDN value as the JSON value a JSON-lines history would carry.
fn edn_json(v: &Edn) -> Result<serde_json::Value, String> {
    Ok(match v {
        Edn::Nil => serde_json::Value::Null,
        Edn::Int(i) => serde_json::json!(i),
        Edn::Str(s) => serde_json::json!(s),
        Edn::Key(k) => serde_json::json!(format!(":{k}")),
        Edn::Vector(items) | Edn::List(items) => {
            serde_json::Value::Array(items.iter().map(edn_json).collect::<Result<_, _>>()?)
        }
        Edn::Set(items) => serde_json::Value::Array(items.iter().map(edn_json).collect::<Result<_, _>>()?),
        other => {
            return Err(format!(
                "{other} is not an element (an integer, a string or a keyword) or a collection of them"
            ))
        }
    })
}

/// One line of Jepsen's `history.edn` as the event a JSON line would be;
/// `None` for a nemesis op.
fn edn_event(text: &str, line: usize) -> Result<Option<RawEvent>, String> {
    // The reader recurses per level: a line nested thousands deep would
    // overflow the stack. An op needs three levels (map, read, element).
    if too_deep(text, 16) {
        return Err("nested more than 16 levels deep".into());
    }
    let (value, rest) = clojure_reader::edn::read(text).map_err(|e| format!("not EDN: {e}"))?;
    if !(rest.trim().is_empty() || rest.trim().starts_with(';')) {
        return Err(format!("unexpected text after the op: {:.40}", rest.trim()));
    }
    let value = match &value {
        Edn::Tagged(_, inner) => inner.as_ref(),
        v => v,
    };
    let Edn::Map(map) = value else { return Err("expected a map".into()) };
    let get = |k: &'static str| map.get(&Edn::Key(k));
    let process = match get("process") {
        Some(Edn::Int(p)) if *p >= 0 => *p as u64,
        Some(Edn::Key("nemesis")) => return Ok(None),
        other => return Err(format!(":process must be a non-negative integer, not {}", show(other))),
    };
    let kind = match get("type") {
        Some(Edn::Key("invoke")) => EventType::Invoke,
        Some(Edn::Key("ok")) => EventType::Ok,
        Some(Edn::Key("fail")) => EventType::Fail,
        Some(Edn::Key("info")) => EventType::Info,
        other => return Err(format!(":type must be :invoke, :ok, :fail or :info, not {}", show(other))),
    };
    let time = match get("time") {
        Some(Edn::Int(t)) if *t >= 0 => *t as u64,
        None | Some(Edn::Nil) => line as u64,
        other => return Err(format!(":time must be a non-negative integer, not {}", show(other))),
    };
    let f = match get("f") {
        Some(Edn::Key(f) | Edn::Symbol(f) | Edn::Str(f)) => f.to_string(),
        other => return Err(format!(":f must be a keyword, not {}", show(other))),
    };
    let value = get("value").map(edn_json).transpose()?.unwrap_or(serde_json::Value::Null);
    Ok(Some(RawEvent { process, kind, time, f, value }))
}

/// Whether brackets nest deeper than `max` in `text`, outside strings and
/// after a backslash (an escape, or a character literal).
fn too_deep(text: &str, max: usize) -> bool {
    let (mut depth, mut in_string, mut chars) = (0usize, false, text.chars());
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '(' | '[' | '{' if !in_string => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            ')' | ']' | '}' if !in_string => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn show(v: Option<&Edn>) -> String {
    v.map_or("nothing".to_string(), ToString::to_string)
}

/// Parses `text` as a history of `kind`, JSON lines ([`parse`]) or
/// Jepsen's EDN (when [`txncheck::looks_like_edn`] says so).
pub fn parse_any(text: &str, kind: Kind) -> Result<Vec<CollectionOperation>, CollectionHistoryError> {
    pair(text, kind, txncheck::looks_like_edn(text))
}

/// Parses `text` (JSON lines; blank lines skipped) as a history of `kind`
/// and pairs each invoke with its process's next completion. Operations
/// come in invoke (line) order.
pub fn parse(text: &str, kind: Kind) -> Result<Vec<CollectionOperation>, CollectionHistoryError> {
    pair(text, kind, false)
}

fn pair(text: &str, kind: Kind, edn: bool) -> Result<Vec<CollectionOperation>, CollectionHistoryError> {
    let mut ops: Vec<CollectionOperation> = Vec::new();
    // process -> slot of its open op
    let mut open: BTreeMap<ProcessId, usize> = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() || (edn && l.trim().starts_with(';')) {
            continue;
        }
        let err = |what: String| CollectionHistoryError { line, what };
        let ev: RawEvent = if edn {
            match edn_event(l.trim(), line).map_err(err)? {
                Some(ev) => ev,
                None => continue,
            }
        } else {
            serde_json::from_str(l).map_err(|e| err(e.to_string()))?
        };
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
    fn jepsen_edn_reads_as_the_same_operations() {
        let edn = r#"; a Jepsen set-full history
{:type :invoke, :f :add, :value 3, :process 0, :time 100, :index 0}
{:type :info, :f :start-partition, :value nil, :process :nemesis, :time 150}
{:type :ok, :f :add, :value 3, :process 0, :time 250, :index 1}
#jepsen.history.Op{:type :invoke, :f :read, :value nil, :process 1, :time 300, :index 2}
{:type :ok, :f :read, :value #{1 3 "s" :k}, :process 1, :time 400, :index 3}
"#;
        let ops = parse_any(edn, Kind::Set).unwrap();
        assert_eq!(ops.len(), 2, "the nemesis op is skipped");
        assert_eq!((ops[0].op.clone(), ops[0].ret, ops[0].line), (CollectionOp::Add(3.into()), Some(250), 2));
        let CollectionOp::Read(Some(mut read)) = ops[1].op.clone() else { panic!("{:?}", ops[1]) };
        read.sort();
        assert_eq!(read, vec![1.into(), 3.into(), ":k".into(), "s".into()]);
        let json = r#"{"process":0,"type":"invoke","time":100,"f":"add","value":3}
{"process":0,"type":"ok","time":250,"f":"add","value":3}"#;
        assert_eq!(parse_any(json, Kind::Set).unwrap(), parse(json, Kind::Set).unwrap());

        let q = "{:type :invoke, :f :drain, :process 2}\n{:type :ok, :f :drain, :value [4 5], :process 2}";
        let ops = parse_any(q, Kind::Queue).unwrap();
        assert_eq!(ops[0].op, CollectionOp::Drain(Some(vec![4.into(), 5.into()])));
        assert_eq!((ops[0].call, ops[0].ret), (1, Some(2)), "untimed: timed by line");

        let bad = |text: &str| parse_any(text, Kind::Set).unwrap_err().to_string();
        assert!(bad("{:type :invoke, :f :add, :value 1.5, :process 0}").starts_with("line 1: "));
        assert!(bad("{:type :invoke :f :add").starts_with("line 1: not EDN: "), "{}", bad("{:type :invoke :f :add"));
        assert!(
            bad("{:type :invoke, :f :add, :value 1, :process -1}").contains(":process must be a non-negative integer")
        );
        assert!(bad("{:type :begin, :f :add, :value 1, :process 0}").contains(":type must be :invoke"));
        assert!(bad("{:type :invoke, :f :add, :value {:a 1}, :process 0}").contains("is not an element"));
        let deep = format!("{{:type :ok, :f :read, :process 0, :value {}{}}}", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(bad(&deep), "line 1: nested more than 16 levels deep");
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
