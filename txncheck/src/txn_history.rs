//! Transactional histories: events as a workload logs them, paired into
//! transactions.
//!
//! One event per line (see [`crate::json`] and [`crate::edn`] for the two
//! formats). An event's value is a list of micro-operations ("mops"):
//! `append k v` (list-append), `w k v` (rw-register) and `r k v` (both; the value
//! is `nil` on the invoke and filled in on an `ok` completion).
//!
//! Outcomes: `ok` committed; `fail` definitely did not commit; `info` may or may
//! not have committed. An invoke that never completes is `info` too. Each process
//! is sequential: it completes one transaction before it invokes the next.

use serde::ser::{SerializeTuple, Serializer};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// A client process, as named in the history. Jepsen numbers them; a process
/// that crashed (`info`) comes back under a new number.
pub type Process = i64;

/// A key of the store: workloads name keys by integer or by string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Key {
    /// An integer key (`:x 1` / `"x": 1`).
    Int(i64),
    /// A string or keyword key.
    Str(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Int(i) => write!(f, "{i}"),
            Key::Str(s) => write!(f, "{s}"),
        }
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key::Str(s.to_string())
    }
}
impl From<i64> for Key {
    fn from(i: i64) -> Key {
        Key::Int(i)
    }
}

/// What a read returned: a list (list-append) or a single value (rw-register).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadValue {
    /// An rw-register's value.
    Int(i64),
    /// A list-append key's list, oldest element first.
    List(Vec<i64>),
}

/// One micro-operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mop {
    /// list-append: append `value` to the list at `key`. Values are unique per key.
    Append {
        /// The list's key.
        key: Key,
        /// The element appended.
        value: i64,
    },
    /// rw-register: set `key` to `value`. Values are unique per key.
    Write {
        /// The register's key.
        key: Key,
        /// The value written.
        value: i64,
    },
    /// Read `key`. `None` is `nil`: unknown on an invoke; on an `ok` completion,
    /// the empty list (list-append) or the initial, never-written value (rw-register).
    Read {
        /// The key read.
        key: Key,
        /// What the read returned, when known.
        value: Option<ReadValue>,
    },
}

impl Mop {
    /// The key the micro-operation is on.
    pub fn key(&self) -> &Key {
        match self {
            Mop::Append { key, .. } | Mop::Write { key, .. } | Mop::Read { key, .. } => key,
        }
    }
    /// The function name as Jepsen spells it: `append`, `w`, `r`.
    pub fn f(&self) -> &'static str {
        match self {
            Mop::Append { .. } => "append",
            Mop::Write { .. } => "w",
            Mop::Read { .. } => "r",
        }
    }
    /// Same function, key and written value (a read's value may differ): what an
    /// `ok` completion must keep of its invoke.
    fn same_shape(&self, other: &Mop) -> bool {
        match (self, other) {
            (Mop::Append { key: a, value: x }, Mop::Append { key: b, value: y })
            | (Mop::Write { key: a, value: x }, Mop::Write { key: b, value: y }) => a == b && x == y,
            (Mop::Read { key: a, .. }, Mop::Read { key: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// Formats a list as `[1 2 3]`; a long one keeps its ends: `[1 2 ... 17 18 19 20] (20 elements)`.
pub(crate) fn fmt_list(list: &[i64]) -> String {
    let join = |s: &[i64]| s.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ");
    if list.len() <= 8 {
        format!("[{}]", join(list))
    } else {
        format!("[{} ... {}] ({} elements)", join(&list[..2]), join(&list[list.len() - 4..]), list.len())
    }
}

impl fmt::Display for Mop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mop::Append { key, value } => write!(f, "append {key} {value}"),
            Mop::Write { key, value } => write!(f, "w {key} {value}"),
            Mop::Read { key, value: None } => write!(f, "r {key} nil"),
            Mop::Read { key, value: Some(ReadValue::Int(v)) } => write!(f, "r {key} {v}"),
            Mop::Read { key, value: Some(ReadValue::List(l)) } => write!(f, "r {key} {}", fmt_list(l)),
        }
    }
}

/// Serialised as Jepsen writes it: `["append", key, 1]`, `["r", key, [1, 2]]`.
impl Serialize for Mop {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(3)?;
        t.serialize_element(self.f())?;
        t.serialize_element(self.key())?;
        match self {
            Mop::Append { value, .. } | Mop::Write { value, .. } => t.serialize_element(value)?,
            Mop::Read { value: None, .. } => t.serialize_element(&())?,
            Mop::Read { value: Some(ReadValue::Int(v)), .. } => t.serialize_element(v)?,
            Mop::Read { value: Some(ReadValue::List(l)), .. } => t.serialize_element(l)?,
        }
        t.end()
    }
}

/// What kind of event a line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A client began a transaction.
    Invoke,
    /// It committed.
    Ok,
    /// It definitely did not commit.
    Fail,
    /// Its fate is unknown (a timeout, a lost reply).
    Info,
}

/// One line of a history, as parsed (or as a generator makes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// 1-based line in the source text (for error messages).
    pub line: usize,
    /// Jepsen's `:index` when given, else the 0-based position among the source's
    /// non-blank lines. Transactions are named `T<index of their invoke>`.
    pub index: usize,
    /// The client process (Jepsen's `:process`).
    pub process: Process,
    /// Invoke or which completion.
    pub kind: EventKind,
    /// Nanoseconds (any monotonic unit works: only the order matters).
    pub time: u64,
    /// `None`: the line had no value (allowed on `fail`/`info` completions only).
    pub mops: Option<Vec<Mop>>,
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Committed.
    Ok,
    /// Definitely did not commit.
    Fail,
    /// May or may not have committed: an `info` completion, or none at all.
    Info,
}

/// An invoke paired with its completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// The invoke's history index ([`Event::index`]).
    pub index: usize,
    /// The client process that ran it.
    pub process: Process,
    /// How it ended.
    pub outcome: Outcome,
    /// When it was invoked.
    pub invoke_time: u64,
    /// `None` when the transaction never completed.
    pub complete_time: Option<u64>,
    /// The invoke's 1-based line.
    pub line: usize,
    /// For `ok`, the completion's mops (reads filled in); otherwise the invoke's
    /// (reads of a failed or indeterminate transaction are unknown).
    pub mops: Vec<Mop>,
}

/// Transactions in the order of their invokes' lines.
///
/// Invariant (kept by [`History::from_events`]): a process's transactions do not
/// overlap in time, and a completed transaction's completion time is at least
/// its invoke time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The transactions.
    pub txns: Vec<Txn>,
}

/// A history that cannot be read. Every variant names the 1-based line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// The line is not a JSON object or EDN map.
    #[error("line {line}: {msg}")]
    Syntax {
        /// The line.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A field is missing or of the wrong type.
    #[error("line {line}: field {field}: {msg}")]
    Field {
        /// The line.
        line: usize,
        /// The field's name.
        field: &'static str,
        /// What is wrong.
        msg: String,
    },
    /// A completion for a process with no open transaction. No longer
    /// produced: such a completion is a transaction of its own (Elle reads
    /// completions-only histories); kept so that matches on it still compile.
    #[error("line {line}: process {process} completes a transaction it never invoked")]
    CompletionWithoutInvoke {
        /// The completion's line.
        line: usize,
        /// The process.
        process: Process,
    },
    /// An invoke for a process whose transaction is still open.
    #[error("line {line}: process {process} invokes while its transaction from line {open} is still open")]
    DoubleInvoke {
        /// The second invoke's line.
        line: usize,
        /// The process.
        process: Process,
        /// The open transaction's invoke line.
        open: usize,
    },
    /// A completion timed before its invoke.
    #[error("line {line}: completion at time {time} precedes its invoke at time {invoke_time} (line {invoke_line})")]
    TimeWentBackwards {
        /// The completion's line.
        line: usize,
        /// The completion's time.
        time: u64,
        /// The invoke's time.
        invoke_time: u64,
        /// The invoke's line.
        invoke_line: usize,
    },
    /// An ok completion whose micro-operations are not the invoke's.
    #[error("line {line}: op {op} of the ok completion ({completion}) does not match the invoke on line {invoke_line} ({invoked})")]
    Mismatch {
        /// The completion's line.
        line: usize,
        /// The invoke's line.
        invoke_line: usize,
        /// Which micro-operation (0-based).
        op: usize,
        /// The invoke's micro-operation, as written.
        invoked: String,
        /// The completion's, as written.
        completion: String,
    },
}

impl ParseError {
    /// The 1-based line the error is about.
    pub fn line(&self) -> usize {
        match self {
            ParseError::Syntax { line, .. }
            | ParseError::Field { line, .. }
            | ParseError::CompletionWithoutInvoke { line, .. }
            | ParseError::DoubleInvoke { line, .. }
            | ParseError::TimeWentBackwards { line, .. }
            | ParseError::Mismatch { line, .. } => *line,
        }
    }
}

/// A mop's value before it is typed by its function (shared by both parsers).
pub(crate) enum RawValue {
    Nil,
    Int(i64),
    List(Vec<i64>),
}

/// Values that are not integers (strings, keywords), numbered in order of
/// first appearance from `i64::MIN` up, a range no workload's integers reach,
/// so that the analyses compare plain integers. Shared by the lines of one file.
#[derive(Default)]
pub(crate) struct ValueNames {
    ids: BTreeMap<String, i64>,
}

impl ValueNames {
    pub fn id(&mut self, name: &str) -> i64 {
        let next = i64::MIN + self.ids.len() as i64;
        *self.ids.entry(name.to_string()).or_insert(next)
    }
}

/// What every parser does with the events of one file: a history whose lines
/// lack `time` is timed by line order (each event at its position), and the
/// events are paired ([`History::from_events`]). `untimed` says whether any
/// event had no time; times are then replaced for all, so that they stay
/// comparable.
pub(crate) fn finish(mut events: Vec<Event>, untimed: bool) -> Result<History, ParseError> {
    if untimed {
        for ev in &mut events {
            ev.time = ev.index as u64;
        }
    }
    History::from_events(events)
}

/// The process of every op whose line names none, as Elle reads them (one
/// `nil` process): an invoke pairs with the next completion that names no
/// process either. Jepsen numbers its processes from 0.
pub const NO_PROCESS: Process = -1;

/// What is wrong with one field of a history line (shared by both
/// parsers; each part names what it found as the format writes it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldProblem {
    #[error("expected [f key value], got {0}")]
    MopShape(String),
    #[error("function {0} is not a keyword or string")]
    Function(String),
    #[error("key {0} cannot be a key (nil)")]
    Key(String),
    #[error("value {0} is not nil, an integer or a list")]
    Value(String),
    #[error("list element {0} is not an integer")]
    ListElement(String),
    #[error("{f} on key {key} needs an integer value")]
    NeedsInteger { f: String, key: Key },
    #[error("unknown micro-op {0:?} (expected append, r or w)")]
    UnknownFunction(String),
    #[error("unknown type {0:?} (expected invoke, ok, fail or info)")]
    UnknownType(String),
}

/// Builds a mop from its three parts, or says what is wrong with them.
pub(crate) fn make_mop(f: &str, key: Key, value: RawValue) -> Result<Mop, FieldProblem> {
    match (f, value) {
        ("append", RawValue::Int(value)) => Ok(Mop::Append { key, value }),
        ("w", RawValue::Int(value)) => Ok(Mop::Write { key, value }),
        ("append" | "w", _) => Err(FieldProblem::NeedsInteger { f: f.to_string(), key }),
        ("r", RawValue::Nil) => Ok(Mop::Read { key, value: None }),
        ("r", RawValue::Int(v)) => Ok(Mop::Read { key, value: Some(ReadValue::Int(v)) }),
        ("r", RawValue::List(l)) => Ok(Mop::Read { key, value: Some(ReadValue::List(l)) }),
        (other, _) => Err(FieldProblem::UnknownFunction(other.to_string())),
    }
}

/// An event's type from its name.
pub(crate) fn make_kind(s: &str) -> Result<EventKind, FieldProblem> {
    match s {
        "invoke" => Ok(EventKind::Invoke),
        "ok" => Ok(EventKind::Ok),
        "fail" => Ok(EventKind::Fail),
        "info" => Ok(EventKind::Info),
        other => Err(FieldProblem::UnknownType(other.to_string())),
    }
}

impl History {
    /// Pairs each invoke with the next completion of the same process, in line
    /// order. Invokes never completed become `info`. A completion with no open
    /// invoke is a transaction of its own, invoked at an unknown time (so at
    /// time 0: it may have run beside anything that came before it), as Elle
    /// reads histories of completions only.
    pub fn from_events(events: Vec<Event>) -> Result<History, ParseError> {
        let mut open: BTreeMap<Process, usize> = BTreeMap::new();
        let mut txns: Vec<Txn> = Vec::new();
        for ev in events {
            if ev.kind == EventKind::Invoke {
                if let Some(&slot) = open.get(&ev.process) {
                    return Err(ParseError::DoubleInvoke { line: ev.line, process: ev.process, open: txns[slot].line });
                }
                let Some(mops) = ev.mops else {
                    return Err(ParseError::Field {
                        line: ev.line,
                        field: "value",
                        msg: "an invoke needs its ops".into(),
                    });
                };
                open.insert(ev.process, txns.len());
                txns.push(Txn {
                    index: ev.index,
                    process: ev.process,
                    outcome: Outcome::Info,
                    invoke_time: ev.time,
                    complete_time: None,
                    line: ev.line,
                    mops,
                });
                continue;
            }
            let slot = match open.remove(&ev.process) {
                Some(slot) => slot,
                None => {
                    let Some(mops) = ev.mops.clone() else {
                        return Err(ParseError::Field {
                            line: ev.line,
                            field: "value",
                            msg: "a completion without an invoke needs its ops".into(),
                        });
                    };
                    txns.push(Txn {
                        index: ev.index,
                        process: ev.process,
                        outcome: Outcome::Info,
                        invoke_time: 0,
                        complete_time: None,
                        line: ev.line,
                        mops,
                    });
                    txns.len() - 1
                }
            };
            let txn = &mut txns[slot];
            if ev.time < txn.invoke_time {
                return Err(ParseError::TimeWentBackwards {
                    line: ev.line,
                    time: ev.time,
                    invoke_time: txn.invoke_time,
                    invoke_line: txn.line,
                });
            }
            txn.complete_time = Some(ev.time);
            txn.outcome = match ev.kind {
                EventKind::Ok => Outcome::Ok,
                EventKind::Fail => Outcome::Fail,
                _ => Outcome::Info,
            };
            if ev.kind == EventKind::Ok {
                let Some(mops) = ev.mops else {
                    return Err(ParseError::Field {
                        line: ev.line,
                        field: "value",
                        msg: "an ok completion needs its ops".into(),
                    });
                };
                check_shape(&txn.mops, &mops, ev.line, txn.line)?;
                txn.mops = mops;
            }
        }
        Ok(History { txns })
    }

    /// Number of micro-operations over all transactions.
    pub fn mop_count(&self) -> usize {
        self.txns.iter().map(|t| t.mops.len()).sum()
    }
}

/// An `ok` completion must carry the invoke's ops, reads filled in.
fn check_shape(invoked: &[Mop], done: &[Mop], line: usize, invoke_line: usize) -> Result<(), ParseError> {
    let mismatch = |op: usize, invoked: String, completion: String| ParseError::Mismatch {
        line,
        invoke_line,
        op: op + 1,
        invoked,
        completion,
    };
    for i in 0..invoked.len().max(done.len()) {
        match (invoked.get(i), done.get(i)) {
            (Some(a), Some(b)) if a.same_shape(b) => {}
            (a, b) => {
                let show = |m: Option<&Mop>| m.map_or("nothing".to_string(), |m| m.to_string());
                return Err(mismatch(i, show(a), show(b)));
            }
        }
    }
    Ok(())
}
