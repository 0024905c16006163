//! The list-append analysis: version orders, non-cycle anomalies and the
//! ww/wr/rw edges.
//!
//! A read of a list reveals the order of every append it includes, so a key's
//! version order is its longest committed read, and every other read must be a
//! prefix of it. An append no read shows came after every element a read
//! shows (appends go to the end, reads return prefixes): the writer of the
//! last observed element ww-precedes it, and the readers of the last observed
//! state (the empty list when no read saw an element) anti-depend on it
//! (Elle's "previously appended element"). Time and memory are linear in the
//! total length of the reads, except that a key whose last observed state is
//! read `r` times and then appended `u` times by transactions no read shows
//! costs `r * u` rw edges (as in Elle; workloads rotate keys, so both stay small).

use crate::analysis::{outcome, Analysis, Findings, LookupMap, Writer, Writes};
use crate::graph::{GEdge, RW, WR, WW};
use crate::model::{
    DIRTY_UPDATE, DUPLICATE_ELEMENTS, FUTURE_READ, G1A, G1B, INCOMPATIBLE_ORDER, INTERNAL, LOST_UPDATE,
};
use crate::report::{Finding, TxnRef};
use crate::txn_history::{fmt_list, History, Mop, Outcome, ReadValue};
use std::collections::BTreeMap;

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
    lost_updates(h, &writes, &mut findings);
    let mut out = Analysis { edges: Vec::new(), observed: vec![false; h.txns.len()], findings };
    for (k, key_reads) in reads.iter().enumerate() {
        per_key(h, &writes, k as u32, key_reads, &mut out);
    }
    out
}

/// Lost updates (Elle's `lost-update-cases`): two committed transactions whose
/// first op on a key is a read, of the same list, and which then both appended
/// to it. Whatever the version order, one of them did not see the other's append.
fn lost_updates(h: &History, writes: &Writes, findings: &mut Findings) {
    let mut by_version: BTreeMap<(u32, &[i64]), Vec<u32>> = BTreeMap::new();
    // Per key touched: (key, the list its first op read, if its first op was a read).
    let mut first: Vec<(u32, Option<&[i64]>, bool)> = Vec::new();
    for (t, txn) in h.txns.iter().enumerate().filter(|(_, t)| t.outcome == Outcome::Ok) {
        first.clear();
        for (m, mop) in txn.mops.iter().enumerate() {
            let Some(k) = writes.keys.get(mop.key()) else { continue };
            let at = match first.iter().position(|f| f.0 == k) {
                Some(at) => at,
                None => {
                    let read = matches!(mop, Mop::Read { .. }).then(|| list_of(h, t as u32, m as u32));
                    first.push((k, read, false));
                    first.len() - 1
                }
            };
            let (k, read, counted) = &mut first[at];
            if let (Mop::Append { .. }, Some(read), false) = (mop, *read, *counted) {
                *counted = true;
                by_version.entry((*k, read)).or_default().push(t as u32);
            }
        }
    }
    for ((k, read), txns) in by_version.into_iter().filter(|(_, t)| t.len() >= 2) {
        let key = writes.keys.key(k);
        let names: Vec<String> = txns.iter().map(|&t| format!("T{}", h.txns[t as usize].index)).collect();
        findings.add(LOST_UPDATE, || Finding {
            key: key.clone(),
            values: read.to_vec(),
            txns: txns.iter().take(4).map(|&t| TxnRef::new(h, t)).collect(),
            reason: format!(
                "{} all read {key} = {} and then appended to {key}, all committed: each missed another's append",
                names.join(", "),
                fmt_list(read)
            ),
        });
    }
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
                Mop::Append { value, key } => {
                    since.push(*value);
                    // A read earlier in this transaction already showed this element.
                    if let Some(prev) = *last_read {
                        let read = list_of(h, t, prev);
                        if read.contains(value) {
                            findings.add(FUTURE_READ, || Finding {
                                key: key.clone(),
                                values: vec![*value],
                                txns: vec![TxnRef::new(h, t)],
                                reason: format!(
                                    "T{} read {key} = {}, which includes {value}, before it appended {value} itself",
                                    txn.index,
                                    fmt_list(read)
                                ),
                            });
                        }
                    }
                }
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

    unobserved_appends(h, writes, k, reads, order, out);

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

/// Edges to the appends of key `k` that no read shows (see the module's
/// comment): ww from the last committed writer in `order`, rw from every read
/// whose external part is all of `order`. Failed transactions' appends are
/// left out; an `info` transaction's edges count only if a read shows another
/// of its writes (the graph drops the rest).
fn unobserved_appends(h: &History, writes: &Writes, k: u32, reads: &[ReadRef], order: &[i64], out: &mut Analysis) {
    let mut shown: LookupMap<i64, ()> = LookupMap::default();
    shown.extend(order.iter().map(|&v| (v, ())));
    let unseen: Vec<Writer> = writes.finals[k as usize]
        .iter()
        .filter(|w| outcome(h, w.txn) != Outcome::Fail)
        .filter(|w| match &h.txns[w.txn as usize].mops[w.mop as usize] {
            Mop::Append { value, .. } => !shown.contains_key(value),
            _ => false,
        })
        .copied()
        .collect();
    if unseen.is_empty() {
        return;
    }
    let last = order.iter().rev().find_map(|&v| writes.writer(k, v).filter(|w| outcome(h, w.txn) != Outcome::Fail));
    let last_readers: Vec<&ReadRef> =
        reads.iter().filter(|r| r.ext == order.len() && list_of(h, r.txn, r.mop)[..r.ext] == *order).collect();
    for w in unseen {
        if let Some(p) = last.filter(|p| p.txn != w.txn) {
            out.edges.push(GEdge { from: p.txn, to: w.txn, kind: WW, from_mop: p.mop, to_mop: w.mop });
        }
        for r in last_readers.iter().filter(|r| r.txn != w.txn) {
            out.edges.push(GEdge { from: r.txn, to: w.txn, kind: RW, from_mop: r.mop, to_mop: w.mop });
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
