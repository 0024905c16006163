//! The rw-register analysis: non-cycle anomalies and the ww/wr/rw edges.
//!
//! A register read reveals one version, not an order, so a key's version order
//! is only partly known. What is known: the initial value (nil) precedes every
//! write; a transaction that read `a` and then wrote `b` to the same key places
//! `a` before `b`. ww and rw edges follow from those pairs only; wr edges run
//! from the writer of each value read to its reader.
//!
//! Cost: linear in the history, except that every committed read of nil gets
//! an rw edge to every committed writer of the key, so a key read as nil `r`
//! times and written `w` times costs `r * w` edges (workloads rotate keys).

use crate::analysis::{outcome, Analysis, Findings, LookupMap, Writes};
use crate::graph::{GEdge, RW, WR, WW};
use crate::model::{FUTURE_READ, G1A, G1B, INTERNAL, LOST_UPDATE};
use crate::report::{Finding, TxnRef};
use crate::txn_history::{History, Mop, Outcome, ReadValue};
use std::collections::BTreeMap;

/// A committed read of a key before its transaction wrote the key, the first
/// such read (later ones must agree with it: internal consistency).
struct ExtRead {
    txn: u32,
    mop: u32,
    key: u32,
    value: Option<i64>,
}

/// Per key: version read (nil: `None`) -> the (transaction, mop) of its external reads.
type Readers = LookupMap<Option<i64>, Vec<(u32, u32)>>;

/// A committed transaction read `read` of `key` and then wrote it: `read` < its write.
struct WriteFollowsRead {
    txn: u32,
    key: u32,
    read: Option<i64>,
    write_mop: u32,
}

/// Per key touched by a transaction: what a read must return (if known),
/// whether it wrote, its first external read, its last write.
struct KeyState {
    key: u32,
    expected: Option<Option<i64>>,
    ext_read: Option<Option<i64>>,
    wrote: bool,
    last_write: Option<u32>,
}

pub(crate) fn analyze(h: &History) -> Analysis {
    let mut findings = Findings::default();
    let writes = Writes::index(h, &mut findings, |m| match m {
        Mop::Write { .. } => Some(true),
        Mop::Read { value: None | Some(ReadValue::Int(_)), .. } => Some(false),
        _ => None,
    });
    let (ext, wfr) = scan(h, &writes, &mut findings);
    let mut out = Analysis { edges: Vec::new(), observed: vec![false; h.txns.len()], findings };
    let committed = |t: u32| outcome(h, t) != Outcome::Fail;
    let mut readers: Vec<Readers> = (0..writes.keys.len()).map(|_| LookupMap::default()).collect();
    for r in &ext {
        readers[r.key as usize].entry(r.value).or_default().push((r.txn, r.mop));
        let Some(w) = r.value.and_then(|v| writes.writer(r.key, v)) else { continue };
        out.observed[w.txn as usize] = true;
        let (key, v) = (writes.keys.key(r.key), r.value.unwrap_or_default());
        if w.txn == r.txn {
            // An external read comes before the transaction's first write of the key.
            let txn = h.txns[r.txn as usize].index;
            out.findings.add(FUTURE_READ, || Finding {
                key: key.clone(),
                values: vec![v],
                txns: vec![TxnRef::new(h, r.txn)],
                reason: format!("T{txn} read {key} = {v} before it wrote {v} to {key} itself"),
            });
            continue;
        }
        let (reader, writer) = (h.txns[r.txn as usize].index, h.txns[w.txn as usize].index);
        if !committed(w.txn) {
            out.findings.add(G1A, || Finding {
                key: key.clone(),
                values: vec![v],
                txns: vec![TxnRef::new(h, r.txn), TxnRef::new(h, w.txn)],
                reason: format!("T{reader} read {key} = {v}, written by T{writer}, which failed"),
            });
            continue;
        }
        out.edges.push(GEdge { from: w.txn, to: r.txn, kind: WR, from_mop: w.mop, to_mop: r.mop });
        if !w.last {
            out.findings.add(G1B, || Finding {
                key: key.clone(),
                values: vec![v],
                txns: vec![TxnRef::new(h, r.txn), TxnRef::new(h, w.txn)],
                reason: format!(
                    "T{reader} read {key} = {v}, but T{writer} wrote {key} again after {v}: an intermediate version"
                ),
            });
        }
    }
    // nil precedes every committed write (observed, or by a committed transaction).
    let included = |t: u32| outcome(h, t) == Outcome::Ok || out.observed[t as usize];
    let mut nil_rw = Vec::new();
    for (k, finals) in writes.finals.iter().enumerate() {
        let Some(nil_readers) = readers[k].get(&None) else { continue };
        for w in finals.iter().filter(|w| included(w.txn)) {
            for &(r, m) in nil_readers.iter().filter(|(r, _)| *r != w.txn) {
                nil_rw.push(GEdge { from: r, to: w.txn, kind: RW, from_mop: m, to_mop: w.mop });
            }
        }
    }
    out.edges.extend(nil_rw);
    // Writes that follow reads: writer(a) -ww-> T, readers of a -rw-> T.
    let mut by_version: BTreeMap<(u32, Option<i64>), Vec<u32>> = BTreeMap::new();
    for f in &wfr {
        by_version.entry((f.key, f.read)).or_default().push(f.txn);
        let Some(a) = f.read else { continue };
        if let Some(w) = writes.writer(f.key, a).filter(|w| w.txn != f.txn && committed(w.txn)) {
            out.edges.push(GEdge { from: w.txn, to: f.txn, kind: WW, from_mop: w.mop, to_mop: f.write_mop });
        }
        for &(r, m) in readers[f.key as usize].get(&Some(a)).into_iter().flatten().filter(|(r, _)| *r != f.txn) {
            out.edges.push(GEdge { from: r, to: f.txn, kind: RW, from_mop: m, to_mop: f.write_mop });
        }
    }
    for ((k, a), txns) in by_version.into_iter().filter(|(_, t)| t.len() >= 2) {
        let key = writes.keys.key(k);
        let version = a.map_or("nil".to_string(), |v| v.to_string());
        let names: Vec<String> = txns.iter().map(|&t| format!("T{}", h.txns[t as usize].index)).collect();
        out.findings.add(LOST_UPDATE, || Finding {
            key: key.clone(),
            values: a.into_iter().collect(),
            txns: txns.iter().take(4).map(|&t| TxnRef::new(h, t)).collect(),
            reason: format!(
                "{} all read {key} = {version} and then wrote {key}, all committed: all but one update is lost",
                names.join(", ")
            ),
        });
    }
    out
}

/// Internal consistency of each committed transaction, and its external reads
/// and writes-follow-reads.
fn scan(h: &History, writes: &Writes, findings: &mut Findings) -> (Vec<ExtRead>, Vec<WriteFollowsRead>) {
    let (mut ext, mut wfr) = (Vec::new(), Vec::new());
    let mut state: Vec<KeyState> = Vec::new();
    for (t, txn) in h.txns.iter().enumerate().filter(|(_, t)| t.outcome == Outcome::Ok) {
        let t = t as u32;
        state.clear();
        for (m, mop) in txn.mops.iter().enumerate() {
            let Some(k) = writes.keys.get(mop.key()) else { continue };
            let at = state.iter().position(|s| s.key == k).unwrap_or_else(|| {
                state.push(KeyState { key: k, expected: None, ext_read: None, wrote: false, last_write: None });
                state.len() - 1
            });
            let s = &mut state[at];
            let read = match mop {
                Mop::Write { value, .. } => {
                    (s.expected, s.wrote, s.last_write) = (Some(Some(*value)), true, Some(m as u32));
                    continue;
                }
                Mop::Read { value: None, .. } => None,
                Mop::Read { value: Some(ReadValue::Int(v)), .. } => Some(*v),
                _ => continue,
            };
            if let Some(expected) = s.expected.filter(|e| *e != read) {
                let show = |v: Option<i64>| v.map_or("nil".to_string(), |v| v.to_string());
                findings.add(INTERNAL, || Finding {
                    key: mop.key().clone(),
                    values: read.into_iter().collect(),
                    txns: vec![TxnRef::new(h, t)],
                    reason: format!(
                        "T{} read {} = {}, but its own earlier ops imply {}",
                        txn.index,
                        mop.key(),
                        show(read),
                        show(expected)
                    ),
                });
            }
            if !s.wrote && s.ext_read.is_none() {
                s.ext_read = Some(read);
                ext.push(ExtRead { txn: t, mop: m as u32, key: k, value: read });
            }
            s.expected = Some(read);
        }
        for s in &state {
            if let (Some(read), Some(write_mop)) = (s.ext_read, s.last_write) {
                wfr.push(WriteFollowsRead { txn: t, key: s.key, read, write_mop });
            }
        }
    }
    (ext, wfr)
}
