//! What the two model analyses share: key interning, the index of writes, the
//! collector of non-cycle findings, and their common result.

use crate::cycles::MAX_REPORTED;
use crate::graph::GEdge;
use crate::model::{DUPLICATE_WRITES, MODEL_MISMATCH};
use crate::report::{Finding, TxnRef};
use crate::txn_history::{History, Key, Mop, Outcome};
use std::collections::BTreeMap;

/// Only ever looked up, never iterated, so its order cannot reach the output
/// (clippy.toml's determinism guard).
#[allow(clippy::disallowed_types)]
pub(crate) type LookupMap<K, V> = std::collections::HashMap<K, V>;

/// What a model analysis hands to the graph search.
pub(crate) struct Analysis {
    /// ww, wr and rw edges between transactions (by position in the history).
    pub edges: Vec<GEdge>,
    /// Transactions one of whose writes some committed read observed.
    pub observed: Vec<bool>,
    pub findings: Findings,
}

/// Non-cycle anomalies: exact counts, the first [`MAX_REPORTED`] of each kept.
#[derive(Default)]
pub(crate) struct Findings {
    pub by_name: BTreeMap<&'static str, (usize, Vec<Finding>)>,
}

impl Findings {
    /// Counts one `name`; builds its evidence only if it will be kept.
    pub fn add(&mut self, name: &'static str, make: impl FnOnce() -> Finding) {
        let (count, kept) = self.by_name.entry(name).or_default();
        *count += 1;
        if kept.len() < MAX_REPORTED {
            kept.push(make());
        }
    }
}

/// Keys numbered in order of first appearance (deterministic).
#[derive(Default)]
pub(crate) struct Keys {
    ids: LookupMap<Key, u32>,
    keys: Vec<Key>,
}

impl Keys {
    pub fn id(&mut self, key: &Key) -> u32 {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.ids.insert(key.clone(), id);
        self.keys.push(key.clone());
        id
    }
    /// The id of a key already numbered.
    pub fn get(&self, key: &Key) -> Option<u32> {
        self.ids.get(key).copied()
    }
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    pub fn key(&self, id: u32) -> &Key {
        &self.keys[id as usize]
    }
}

/// Who wrote a value: the transaction, the mop, and whether it was the
/// transaction's last write to that key (else the value is intermediate).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Writer {
    pub txn: u32,
    pub mop: u32,
    pub last: bool,
}

/// Every append (list-append) or write (rw-register) of every transaction,
/// whatever its outcome: per key, value -> writer.
pub(crate) struct Writes {
    pub keys: Keys,
    pub by_key: Vec<LookupMap<i64, Writer>>,
    /// Per key, the last write of each transaction that wrote it, in history order.
    pub finals: Vec<Vec<Writer>>,
}

impl Writes {
    /// Indexes the writes `is_write` recognises; a value written twice to a key
    /// is a `duplicate-writes` finding (the first writer keeps it), and a mop
    /// of the other model is a `model-mismatch`.
    pub fn index(h: &History, findings: &mut Findings, fits: impl Fn(&Mop) -> Option<bool>) -> Writes {
        let mut w = Writes { keys: Keys::default(), by_key: Vec::new(), finals: Vec::new() };
        for (t, txn) in h.txns.iter().enumerate() {
            let mut touched: Vec<u32> = Vec::new();
            for (m, mop) in txn.mops.iter().enumerate() {
                let k = w.keys.id(mop.key());
                if w.by_key.len() < w.keys.len() {
                    w.by_key.push(LookupMap::default());
                    w.finals.push(Vec::new());
                }
                match fits(mop) {
                    None => {
                        // Reads of failed or indeterminate transactions carry nothing to check.
                        if txn.outcome == Outcome::Ok || !matches!(mop, Mop::Read { .. }) {
                            findings.add(MODEL_MISMATCH, || Finding {
                                key: mop.key().clone(),
                                values: vec![],
                                txns: vec![TxnRef::new(h, t as u32)],
                                reason: format!("T{}'s op [{mop}] does not fit the model", txn.index),
                            });
                        }
                    }
                    Some(false) => {}
                    Some(true) => {
                        let (Mop::Append { value, .. } | Mop::Write { value, .. }) = mop else { continue };
                        let writer = Writer { txn: t as u32, mop: m as u32, last: false };
                        if let Some(prev) = w.by_key[k as usize].get(value) {
                            let prev = *prev;
                            findings.add(DUPLICATE_WRITES, || Finding {
                                key: mop.key().clone(),
                                values: vec![*value],
                                txns: vec![TxnRef::new(h, prev.txn), TxnRef::new(h, t as u32)],
                                reason: format!(
                                    "T{} and T{} both wrote {value} to {}",
                                    h.txns[prev.txn as usize].index,
                                    txn.index,
                                    mop.key()
                                ),
                            });
                            continue;
                        }
                        w.by_key[k as usize].insert(*value, writer);
                        if !touched.contains(&k) {
                            touched.push(k);
                        }
                    }
                }
            }
            // Mark each touched key's last write, scanning back.
            for &k in &touched {
                let last = txn.mops.iter().rev().find_map(|mop| match mop {
                    Mop::Append { value, .. } | Mop::Write { value, .. } if w.keys.key(k) == mop.key() => {
                        w.by_key[k as usize].get_mut(value).filter(|wr| wr.txn == t as u32).map(|wr| {
                            wr.last = true;
                            *wr
                        })
                    }
                    _ => None,
                });
                if let Some(last) = last {
                    w.finals[k as usize].push(last);
                }
            }
        }
        w
    }

    pub fn writer(&self, key: u32, value: i64) -> Option<Writer> {
        self.by_key.get(key as usize)?.get(&value).copied()
    }
}

/// The outcome of the transaction at position `t`.
pub(crate) fn outcome(h: &History, t: u32) -> Outcome {
    h.txns[t as usize].outcome
}
