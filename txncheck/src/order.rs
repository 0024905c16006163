//! Process and realtime edges.
//!
//! Only committed (`ok`) transactions have outgoing edges here: an `info`
//! transaction may have taken effect at any time after its invoke, so nothing
//! is known to follow it; it can still follow others.

use crate::graph::{GEdge, NO_MOP, PROCESS, REALTIME};
use crate::txn_history::{History, Outcome, Process};
use std::collections::BTreeMap;

/// Each included transaction follows the previous committed one of its process.
pub(crate) fn process_edges(h: &History, included: &[bool], out: &mut Vec<GEdge>) {
    let mut last: BTreeMap<Process, u32> = BTreeMap::new();
    for (t, txn) in h.txns.iter().enumerate().filter(|&(t, _)| included[t]) {
        if let Some(&prev) = last.get(&txn.process) {
            out.push(GEdge { from: prev, to: t as u32, kind: PROCESS, from_mop: NO_MOP, to_mop: NO_MOP });
        }
        if txn.outcome == Outcome::Ok {
            last.insert(txn.process, t as u32);
        }
    }
}

/// T1 -> T2 when T1 completed strictly before T2 was invoked, as a transitive
/// reduction over a frontier: the committed transactions no later completed
/// transaction is known to follow. An invoke gets an edge from each member of
/// the frontier; a completion replaces, in the frontier, the members its
/// transaction already follows. Every realtime order is then implied by a path,
/// and each transaction gets about as many edges as there were transactions
/// running beside it.
pub(crate) fn realtime_edges(h: &History, included: &[bool], out: &mut Vec<GEdge>) {
    // (time, 0 = invoke / 1 = completion, txn): at equal times invokes come
    // first, so transactions touching at one instant stay concurrent.
    let mut events: Vec<(u64, u8, u32)> = Vec::new();
    for (t, txn) in h.txns.iter().enumerate().filter(|&(t, _)| included[t]) {
        events.push((txn.invoke_time, 0, t as u32));
        if let (Outcome::Ok, Some(done)) = (txn.outcome, txn.complete_time) {
            events.push((done, 1, t as u32));
        }
    }
    events.sort_unstable();
    let mut frontier: Vec<u32> = Vec::new();
    let mut in_frontier = vec![false; h.txns.len()];
    // What the frontier was at each open transaction's invoke.
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); h.txns.len()];
    for (_, phase, t) in events {
        if phase == 0 {
            for &p in &frontier {
                out.push(GEdge { from: p, to: t, kind: REALTIME, from_mop: NO_MOP, to_mop: NO_MOP });
            }
            if h.txns[t as usize].outcome == Outcome::Ok {
                preds[t as usize] = frontier.clone();
            }
        } else {
            for p in std::mem::take(&mut preds[t as usize]) {
                in_frontier[p as usize] = false;
            }
            frontier.retain(|&p| in_frontier[p as usize]);
            frontier.push(t);
            in_frontier[t as usize] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn_history::Txn;

    fn txn(process: Process, start: u64, end: Option<u64>) -> Txn {
        let outcome = if end.is_some() { Outcome::Ok } else { Outcome::Info };
        Txn { index: 0, process, outcome, invoke_time: start, complete_time: end, line: 0, mops: vec![] }
    }

    fn realtime(txns: Vec<Txn>) -> Vec<(u32, u32)> {
        let h = History { txns };
        let mut out = Vec::new();
        realtime_edges(&h, &vec![true; h.txns.len()], &mut out);
        let mut pairs: Vec<(u32, u32)> = out.iter().map(|e| (e.from, e.to)).collect();
        pairs.sort_unstable();
        pairs
    }

    #[test]
    fn realtime_edges_are_a_transitive_reduction() {
        // Sequential: only neighbours.
        assert_eq!(realtime(vec![txn(0, 0, Some(1)), txn(1, 2, Some(3)), txn(2, 4, Some(5))]), [(0, 1), (1, 2)]);
        // 0 and 1 overlap; both precede 2; 3 needs only 2.
        let txns = vec![txn(0, 0, Some(10)), txn(1, 5, Some(15)), txn(2, 20, Some(30)), txn(3, 40, Some(50))];
        assert_eq!(realtime(txns), [(0, 2), (1, 2), (2, 3)]);
        // Touching at one instant is concurrent; an info transaction precedes nothing.
        assert_eq!(realtime(vec![txn(0, 0, Some(5)), txn(1, 5, Some(6))]), []);
        assert_eq!(realtime(vec![txn(0, 0, None), txn(1, 5, Some(6)), txn(2, 7, Some(8))]), [(1, 2)]);
    }

    #[test]
    fn process_edges_skip_uncommitted_predecessors() {
        let mut txns = vec![txn(0, 0, Some(1)), txn(0, 2, None), txn(0, 4, Some(5)), txn(1, 0, Some(9))];
        txns[1].outcome = Outcome::Info;
        let h = History { txns };
        let mut out = Vec::new();
        process_edges(&h, &[true; 4], &mut out);
        let pairs: Vec<(u32, u32)> = out.iter().map(|e| (e.from, e.to)).collect();
        assert_eq!(pairs, [(0, 1), (0, 2)]);
    }
}
