//! The list-append analysis: version orders, non-cycle anomalies and the
//! ww/wr/rw edges.
//!
//! A read of a list reveals the order of every append it includes, so a key's
//! version order is its longest committed read, and every other read must be a
//! prefix of it. Time and memory are linear in the total length of the reads.

use crate::analysis::{outcome, Analysis, Findings, LookupMap, Writer, Writes};
use crate::graph::{GEdge, RW, WR, WW};
use crate::history::{fmt_list, History, Mop, Outcome, ReadValue};
use crate::model::{DIRTY_UPDATE, DUPLICATE_ELEMENTS, G1A, G1B, INCOMPATIBLE_ORDER, INTERNAL};
use crate::report::{Finding, TxnRef};

/// A committed read of a list. `ext`: the length of its external part, the
/// list less the trailing elements its own transaction appended (what the
/// transaction depends on others for).
struct ReadRef {
    txn: u32,
    mop: u32,
    ext: usize,
}

pub(crate) fn analyze(h: &History) -> Analysis {
    let mut findings = Findings::default();
    let writes = Writes::index(h, &mut findings, |m| match m {
        Mop::Append { .. } => Some(true),
        Mop::Read { value: None | Some(ReadValue::List(_)), .. } => Some(false),
        _ => None,
    });
    let reads = collect_reads(h, &writes, &mut findings);
    let mut out = Analysis { edges: Vec::new(), observed: vec![false; h.txns.len()], findings };
    for (k, key_reads) in reads.iter().enumerate() {
        per_key(h, &writes, k as u32, key_reads, &mut out);
    }
    out
}

fn list_of(h: &History, txn: u32, mop: u32) -> &[i64] {
    match &h.txns[txn as usize].mops[mop as usize] {
        Mop::Read { value: Some(ReadValue::List(l)), .. } => l,
        _ => &[],
    }
}

/// The committed reads of each key, checking each transaction's internal
/// consistency on the way: after a read, the next read of the key must be that
/// read plus the transaction's appends since; before any read, it must end
/// with the transaction's appends so far.
fn collect_reads(h: &History, writes: &Writes, findings: &mut Findings) -> Vec<Vec<ReadRef>> {
    let mut reads: Vec<Vec<ReadRef>> = (0..writes.keys.len()).map(|_| Vec::new()).collect();
    // Per key touched by the transaction: (key, its last read, appends since).
    let mut state: Vec<(u32, Option<u32>, Vec<i64>)> = Vec::new();
    for (t, txn) in h.txns.iter().enumerate().filter(|(_, t)| t.outcome == Outcome::Ok) {
        let t = t as u32;
        state.clear();
        for (m, mop) in txn.mops.iter().enumerate() {
            let Some(k) = writes.keys.get(mop.key()) else { continue };
            let at = match state.iter().position(|s| s.0 == k) {
                Some(at) => at,
                None => {
                    state.push((k, None, Vec::new()));
                    state.len() - 1
                }
            };
            let (_, last_read, since) = &mut state[at];
            match mop {
                Mop::Append { value, .. } => since.push(*value),
                Mop::Read { value: None | Some(ReadValue::List(_)), key } => {
                    let list = list_of(h, t, m as u32);
                    let expected: Option<Vec<i64>> = match last_read {
                        Some(prev) => {
                            let prev = list_of(h, t, *prev);
                            (list.len() != prev.len() + since.len()
                                || !list.starts_with(prev)
                                || !list.ends_with(since))
                            .then(|| prev.iter().chain(since.iter()).copied().collect())
                        }
                        None => (!list.ends_with(since)).then(|| since.clone()),
                    };
                    if let Some(expected) = expected {
                        let how = if last_read.is_some() { "to be" } else { "to end with its own appends" };
                        findings.add(INTERNAL, || Finding {
                            key: key.clone(),
                            values: list.to_vec(),
                            txns: vec![TxnRef::new(h, t)],
                            reason: format!(
                                "T{} read {key} = {}, but its own earlier ops imply it {how} {}",
                                txn.index,
                                fmt_list(list),
                                fmt_list(&expected)
                            ),
                        });
                    }
                    *last_read = Some(m as u32);
                    since.clear();
                    let own =
                        list.iter().rev().take_while(|&&v| writes.writer(k, v).is_some_and(|w| w.txn == t)).count();
                    reads[k as usize].push(ReadRef { txn: t, mop: m as u32, ext: list.len() - own });
                }
                _ => {}
            }
        }
    }
    reads
}

fn per_key(h: &History, writes: &Writes, k: u32, reads: &[ReadRef], out: &mut Analysis) {
    let Some(longest) =
        reads.iter().reduce(|a, b| if list_of(h, b.txn, b.mop).len() > list_of(h, a.txn, a.mop).len() { b } else { a })
    else {
        return;
    };
    let key = writes.keys.key(k);
    let order = list_of(h, longest.txn, longest.mop);
    // The shortest prefix of the order that repeats an element.
    let mut seen: LookupMap<i64, ()> = LookupMap::default();
    let dup_end = order.iter().position(|&v| seen.insert(v, ()).is_some()).map(|i| i + 1);
    let wpos: Vec<Option<Writer>> = order.iter().map(|&v| writes.writer(k, v)).collect();
    let committed = |w: &Writer| outcome(h, w.txn) != Outcome::Fail;
    for w in wpos.iter().flatten() {
        out.observed[w.txn as usize] = true;
    }
    // next_good[i]: the first position from i on whose writer is known and did not fail.
    let mut next_good = vec![order.len(); order.len() + 1];
    for i in (0..order.len()).rev() {
        next_good[i] = if wpos[i].as_ref().is_some_and(committed) { i } else { next_good[i + 1] };
    }
    let failed_at: Vec<usize> = (0..order.len()).filter(|&i| wpos[i].is_some_and(|w| !committed(&w))).collect();

    for r in reads {
        let list = list_of(h, r.txn, r.mop);
        let compatible = order.starts_with(list);
        let name = |t: u32| h.txns[t as usize].index;
        let mut failed: Vec<(i64, u32)> = Vec::new();
        if compatible {
            if dup_end.is_some_and(|d| list.len() >= d) {
                out.findings.add(DUPLICATE_ELEMENTS, || dup_finding(h, r, list));
            }
            failed.extend(
                failed_at.iter().take_while(|&&i| i < list.len()).filter_map(|&i| Some((order[i], wpos[i]?.txn))),
            );
        } else {
            out.findings.add(INCOMPATIBLE_ORDER, || Finding {
                key: key.clone(),
                values: list.to_vec(),
                txns: vec![TxnRef::new(h, r.txn), TxnRef::new(h, longest.txn)],
                reason: format!(
                    "T{} read {key} = {} and T{} read {key} = {}: neither is a prefix of the other",
                    name(r.txn),
                    fmt_list(list),
                    name(longest.txn),
                    fmt_list(order)
                ),
            });
            let mut seen: LookupMap<i64, ()> = LookupMap::default();
            if list.iter().any(|&v| seen.insert(v, ()).is_some()) {
                out.findings.add(DUPLICATE_ELEMENTS, || dup_finding(h, r, list));
            }
            for &v in list {
                if let Some(w) = writes.writer(k, v) {
                    out.observed[w.txn as usize] = true;
                    if !committed(&w) {
                        failed.push((v, w.txn));
                    }
                }
            }
        }
        if !failed.is_empty() {
            out.findings.add(G1A, || {
                let mut txns = vec![TxnRef::new(h, r.txn)];
                txns.extend(failed.iter().take(4).map(|&(_, t)| TxnRef::new(h, t)));
                let what: Vec<String> = failed.iter().map(|&(v, t)| format!("{v} (T{})", name(t))).collect();
                Finding {
                    key: key.clone(),
                    values: failed.iter().map(|f| f.0).collect(),
                    txns,
                    reason: format!(
                        "T{} read {key} = {}, which includes elements appended by failed transactions: {}",
                        name(r.txn),
                        fmt_list(list),
                        what.join(", ")
                    ),
                }
            });
        }
        // wr: from the writer of the last external element; G1b if that
        // element was not its writer's last append to the key.
        if r.ext > 0 {
            let v = list[r.ext - 1];
            if let Some(w) = writes.writer(k, v).filter(|w| w.txn != r.txn && committed(w)) {
                out.edges.push(GEdge { from: w.txn, to: r.txn, kind: WR, from_mop: w.mop, to_mop: r.mop });
                if !w.last {
                    out.findings.add(G1B, || Finding {
                        key: key.clone(),
                        values: vec![v],
                        txns: vec![TxnRef::new(h, r.txn), TxnRef::new(h, w.txn)],
                        reason: format!(
                            "T{} read {key} = {}, ending in {v}, but T{} appended more to {key} after {v}: an intermediate version",
                            name(r.txn),
                            fmt_list(list),
                            name(w.txn)
                        ),
                    });
                }
            }
        }
        // rw: to the writer of the next version after the external part.
        if compatible {
            if let Some(w) = wpos.get(next_good[r.ext]).copied().flatten().filter(|w| w.txn != r.txn) {
                out.edges.push(GEdge { from: r.txn, to: w.txn, kind: RW, from_mop: r.mop, to_mop: w.mop });
            }
        }
    }

    // ww between consecutive committed writers, and dirty updates.
    let mut prev: Option<Writer> = None;
    let mut first_failed: Option<usize> = None;
    let mut dirty_reported = false;
    for (i, w) in wpos.iter().enumerate() {
        let Some(w) = *w else { continue };
        if !committed(&w) {
            first_failed.get_or_insert(i);
            continue;
        }
        if let Some(p) = prev.filter(|p| p.txn != w.txn) {
            out.edges.push(GEdge { from: p.txn, to: w.txn, kind: WW, from_mop: p.mop, to_mop: w.mop });
        }
        prev = Some(w);
        // One per key: the first aborted element followed by a committed one.
        if let (Some(f), false) = (first_failed, dirty_reported) {
            dirty_reported = true;
            let fw = wpos[f].map_or(0, |fw| fw.txn);
            out.findings.add(DIRTY_UPDATE, || Finding {
                key: key.clone(),
                values: vec![order[f], order[i]],
                txns: vec![TxnRef::new(h, fw), TxnRef::new(h, w.txn)],
                reason: format!(
                    "{key}'s version order has {} (appended by T{}, which failed) followed by {} (appended by T{}, committed)",
                    order[f],
                    h.txns[fw as usize].index,
                    order[i],
                    h.txns[w.txn as usize].index
                ),
            });
        }
    }
}

fn dup_finding(h: &History, r: &ReadRef, list: &[i64]) -> Finding {
    let mut seen: LookupMap<i64, ()> = LookupMap::default();
    let dups: Vec<i64> = list.iter().copied().filter(|&v| seen.insert(v, ()).is_some()).collect();
    let key = h.txns[r.txn as usize].mops[r.mop as usize].key().clone();
    Finding {
        reason: format!(
            "T{} read {key} = {}, which repeats {}",
            h.txns[r.txn as usize].index,
            fmt_list(list),
            fmt_list(&dups)
        ),
        key,
        values: dups,
        txns: vec![TxnRef::new(h, r.txn)],
    }
}
