//! What a check returns: the verdict, and for each anomaly its evidence, in a
//! form that serialises to JSON and prints for a person.

use crate::graph::{GEdge, NO_MOP, PROCESS, RW, WR, WW};
use crate::model::{Consistency, Model};
use crate::txn_history::{fmt_list, History, Key, Mop, Outcome, Process, ReadValue};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// A transaction as evidence: its history index (named `T<index>`), process,
/// outcome and ops (reads filled in when it committed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TxnRef {
    /// The invoke's history index.
    pub index: usize,
    /// The client process.
    pub process: Process,
    /// How it ended.
    pub outcome: Outcome,
    /// Its micro-operations.
    pub ops: Vec<Mop>,
}

impl TxnRef {
    pub(crate) fn new(h: &History, id: u32) -> TxnRef {
        let t = &h.txns[id as usize];
        TxnRef { index: t.index, process: t.process, outcome: t.outcome, ops: t.mops.clone() }
    }
}

impl fmt::Display for TxnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        };
        write!(f, "T{} (process {}, {outcome}):", self.index, self.process)?;
        self.ops.iter().try_for_each(|m| write!(f, " [{m}]"))
    }
}

/// Why one transaction must precede another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeKind {
    /// Write-write: the second wrote the next version of a key after the first.
    Ww,
    /// Write-read: the second read what the first wrote.
    Wr,
    /// Read-write (anti-dependency): the first read a version the second replaced.
    Rw,
    /// Same process, the first before the second.
    Process,
    /// The first completed before the second was invoked.
    Realtime,
}

impl EdgeKind {
    pub(crate) fn from_bits(bits: u8) -> EdgeKind {
        match bits {
            WW => EdgeKind::Ww,
            WR => EdgeKind::Wr,
            RW => EdgeKind::Rw,
            PROCESS => EdgeKind::Process,
            _ => EdgeKind::Realtime,
        }
    }
    /// The edge kind's name in reports (`ww`, `wr`, `rw`, `process`, `realtime`).
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Process => "process",
            EdgeKind::Realtime => "realtime",
        }
    }
}

/// One edge of a cycle, with a one-line reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    /// History indices of the two transactions.
    pub from: usize,
    /// (see `from`)
    pub to: usize,
    /// Why `from` precedes `to`.
    pub kind: EdgeKind,
    /// The key the dependency is on (none for process and realtime edges).
    pub key: Option<Key>,
    /// The evidence, in a sentence.
    pub reason: String,
}

/// A dependency cycle: `edges[i]` leads from `txns[i]` to `txns[i + 1]`, and the
/// last edge back to `txns[0]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cycle {
    /// The transactions around the cycle.
    pub txns: Vec<TxnRef>,
    /// The edges between them.
    pub edges: Vec<Edge>,
}

/// An anomaly that is not a cycle: what was read or written, and by whom.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The key the anomaly is on.
    pub key: Key,
    /// The values involved (the offending elements or versions).
    pub values: Vec<i64>,
    /// The transactions involved, the one that observed the anomaly first.
    pub txns: Vec<TxnRef>,
    /// What is wrong, in a sentence.
    pub reason: String,
}

/// Evidence of one anomaly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Anomaly {
    /// A dependency cycle (G0, G1c, G-single, G2-item and their variants).
    Cycle(Cycle),
    /// Anything else: aborted or intermediate reads (G1a, G1b), internal
    /// inconsistency, duplicate elements, incompatible orders, and the like.
    Finding(Finding),
}

/// How many transactions the history has, and how many the graph holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxnCounts {
    /// Every transaction.
    pub total: usize,
    /// Committed.
    pub ok: usize,
    /// Failed.
    pub fail: usize,
    /// Indeterminate.
    pub info: usize,
    /// `info` transactions in the graph: one of their writes was observed.
    pub info_included: usize,
}

/// The verdict on a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// No anomaly that `consistency` forbids was found.
    pub valid: bool,
    /// The workload's data model.
    pub model: Model,
    /// The consistency model checked against.
    pub consistency: Consistency,
    /// Names of the forbidden anomalies found, sorted.
    pub anomaly_types: Vec<String>,
    /// Evidence for each forbidden anomaly found: the shortest cycles first, at
    /// most a few per name (see `counts` for how many there are).
    pub anomalies: BTreeMap<String, Vec<Anomaly>>,
    /// Names of anomalies found that `consistency` allows.
    pub also_found: Vec<String>,
    /// Every anomaly found, forbidden or not, with its count (cycles: one per
    /// strongly connected component and shape).
    pub counts: BTreeMap<String, usize>,
    /// The consistency models that the anomalies found rule out, strongest first.
    pub ruled_out: Vec<Consistency>,
    /// How many transactions, by outcome.
    pub txns: TxnCounts,
    /// Edges of the dependency graph by kind (`ww`, `wr`, `rw`, `process`, `realtime`).
    pub edges: BTreeMap<String, usize>,
    /// Components where the G-single search ran out of budget; when non-zero a
    /// G-single there may have gone unreported (never the case for the other shapes).
    pub cycle_search_truncated: usize,
}

impl CheckReport {
    /// Each of `names` (say `anomaly_types` or `also_found`) with its count.
    pub fn counts_of(&self, names: &[String]) -> BTreeMap<String, usize> {
        names.iter().map(|n| (n.clone(), self.counts.get(n).copied().unwrap_or(0))).collect()
    }
}

/// Explains an edge of the graph from its two micro-ops.
pub(crate) fn explain(h: &History, e: &GEdge) -> Edge {
    let (a, b) = (&h.txns[e.from as usize], &h.txns[e.to as usize]);
    let kind = EdgeKind::from_bits(e.kind);
    let (ta, tb) = (format!("T{}", a.index), format!("T{}", b.index));
    let (ma, mb) = (mop_at(a, e.from_mop), mop_at(b, e.to_mop));
    let key = ma.or(mb).map(|m| m.key().clone());
    let k = key.as_ref().map(|k| k.to_string()).unwrap_or_default();
    let reason = match (kind, ma, mb) {
        (EdgeKind::Process, _, _) => format!("{ta} then {tb}, one after the other on process {}: process", a.process),
        (EdgeKind::Realtime, _, _) => format!(
            "{ta} completed (time {}) before {tb} was invoked (time {}): realtime",
            a.complete_time.unwrap_or(a.invoke_time),
            b.invoke_time
        ),
        (EdgeKind::Ww, Some(x), Some(y)) => format!("{ta} {}, {tb} {} after it: ww on {k}", wrote(x), wrote(y)),
        (EdgeKind::Wr, Some(x), Some(y)) => format!("{ta} {}, {tb} read {}: wr on {k}", wrote(x), read(y)),
        (EdgeKind::Rw, Some(x), Some(y)) => {
            format!("{ta} read {}, {tb} {} after that version: rw on {k}", read(x), wrote(y))
        }
        _ => format!("{ta} -> {tb}: {}", kind.name()),
    };
    Edge { from: a.index, to: b.index, kind, key, reason }
}

fn mop_at(t: &crate::txn_history::Txn, i: u32) -> Option<&Mop> {
    if i == NO_MOP {
        None
    } else {
        t.mops.get(i as usize)
    }
}

fn wrote(m: &Mop) -> String {
    match m {
        Mop::Append { key, value } => format!("appended {value} to {key}"),
        Mop::Write { key, value } => format!("wrote {key} = {value}"),
        Mop::Read { .. } => format!("[{m}]"),
    }
}

pub(crate) fn read(m: &Mop) -> String {
    match m {
        Mop::Read { key, value: None } => format!("{key} = nil"),
        Mop::Read { key, value: Some(ReadValue::Int(v)) } => format!("{key} = {v}"),
        Mop::Read { key, value: Some(ReadValue::List(l)) } => format!("{key} = {}", fmt_list(l)),
        other => format!("[{other}]"),
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (t, e) in self.txns.iter().zip(&self.edges) {
            write!(f, "T{} (process {}) -{}", t.index, t.process, e.kind.name())?;
            match &e.key {
                Some(k) => write!(f, " {k}-> ")?,
                None => write!(f, "-> ")?,
            }
        }
        match self.txns.first() {
            Some(t) => writeln!(f, "T{}", t.index)?,
            None => writeln!(f)?,
        }
        self.edges.iter().try_for_each(|e| writeln!(f, "      {}", e.reason))?;
        self.txns.iter().try_for_each(|t| writeln!(f, "      {t}"))
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::Cycle(c) => write!(f, "{c}"),
            Anomaly::Finding(x) => {
                writeln!(f, "{}", x.reason)?;
                x.txns.iter().try_for_each(|t| writeln!(f, "      {t}"))
            }
        }
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.valid { "valid" } else { "INVALID" };
        writeln!(f, "{} history, checked for {}: {verdict}", self.model, self.consistency)?;
        let t = &self.txns;
        writeln!(
            f,
            "  {} transactions: {} ok, {} fail, {} info ({} of them observed, so in the graph)",
            t.total, t.ok, t.fail, t.info, t.info_included
        )?;
        let edges: Vec<String> = self.edges.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(f, "  edges: {}", edges.join(", "))?;
        for (name, list) in &self.anomalies {
            writeln!(f, "{name} ({}):", self.counts.get(name).copied().unwrap_or(list.len()))?;
            list.iter().try_for_each(|a| write!(f, "  - {a}"))?;
        }
        if !self.also_found.is_empty() {
            let names: Vec<String> =
                self.also_found.iter().map(|n| format!("{n} ({})", self.counts.get(n).copied().unwrap_or(0))).collect();
            writeln!(f, "also found, allowed by {}: {}", self.consistency, names.join(", "))?;
        }
        if !self.ruled_out.is_empty() {
            let names: Vec<&str> = self.ruled_out.iter().map(|c| c.name()).collect();
            writeln!(f, "ruled out: {}", names.join(", "))?;
        }
        if self.cycle_search_truncated > 0 {
            writeln!(f, "warning: the G-single search gave up in {} components", self.cycle_search_truncated)?;
        }
        Ok(())
    }
}
