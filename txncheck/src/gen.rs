//! A deterministic generator of list-append histories, for tests and benches.
//!
//! A simulated database runs each transaction atomically at one instant
//! between its invoke and its completion, one at a time: the history it
//! produces is strictly serializable. Clients: `concurrency` processes, each
//! sequential; a process whose transaction ends `info` continues under a new
//! process number (Jepsen's convention). Some transactions fail (never
//! applied), some end `info` (applied or not, even odds). Keys rotate: a key
//! retires after `max_appends_per_key` appends, so reads stay short.
//!
//! [`Inject`] adds one anomaly halfway: two concurrent transactions both read
//! one snapshot, then both apply their appends. The next transaction reads the
//! keys involved, so that the anomaly is observed.

use crate::txn_history::{Event, EventKind, History, Key, Mop, ReadValue};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An anomaly to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// `[r x, r y, append x]` and `[r x, r y, append y]` on one snapshot: a
    /// cycle of two rw edges (G2-item), which snapshot isolation allows.
    WriteSkew,
    /// `[r x, append x]` twice on one snapshot: a ww edge one way and an rw edge
    /// back (G-single), which snapshot isolation forbids.
    LostUpdate,
}

/// The shape of a generated history.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Transactions to invoke.
    pub txns: usize,
    /// Client processes with a transaction open at once.
    pub concurrency: usize,
    /// Keys in use at any time.
    pub active_keys: usize,
    /// Appends a key takes before it retires (keeping reads short).
    pub max_appends_per_key: usize,
    /// Micro-ops per transaction: 1 to this many (plus reads of injected keys).
    pub max_mops: usize,
    /// Transactions in a thousand that fail (nothing applied).
    pub fail_per_mille: u64,
    /// Transactions in a thousand that end `info` (applied or not, half each).
    pub info_per_mille: u64,
    /// An anomaly to plant in the history, if any.
    pub inject: Option<Inject>,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            txns: 1000,
            concurrency: 8,
            active_keys: 8,
            max_appends_per_key: 32,
            max_mops: 4,
            fail_per_mille: 20,
            info_per_mille: 10,
            inject: None,
        }
    }
}

/// SplitMix64: small, and the same numbers on every platform.
struct Rng(simrng::mix::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Ok,
    Fail,
    InfoApplied,
    InfoLost,
}

/// The transaction a process has open: its ops (reads filled when it runs).
struct Open {
    process: i64,
    mops: Vec<Mop>,
    fate: Fate,
    /// The injected anomaly's second transaction, run on the same snapshot.
    partner: Option<(i64, Vec<Mop>)>,
}

struct Db {
    lists: Vec<Vec<i64>>,
    next_value: Vec<i64>,
    active: Vec<usize>,
}

impl Db {
    fn new_key(&mut self) -> usize {
        self.lists.push(Vec::new());
        self.next_value.push(0);
        self.lists.len() - 1
    }
    fn read(&self, k: usize) -> Option<ReadValue> {
        // An absent key reads as nil, as most databases under Jepsen return it.
        let l = &self.lists[k];
        (!l.is_empty()).then(|| ReadValue::List(l.clone()))
    }
    fn value(&mut self, k: usize) -> i64 {
        self.next_value[k] += 1;
        self.next_value[k]
    }
}

fn key_of(m: &Mop) -> usize {
    match m.key() {
        Key::Int(k) => *k as usize,
        Key::Str(_) => 0,
    }
}

/// The events of a generated history, in time order.
pub fn list_append_events(seed: u64, opts: &GenOptions) -> Vec<Event> {
    let mut rng = Rng(simrng::mix::SplitMix64(seed));
    let mut db = Db { lists: Vec::new(), next_value: Vec::new(), active: Vec::new() };
    for _ in 0..opts.active_keys.max(2) {
        let k = db.new_key();
        db.active.push(k);
    }
    let slots = opts.concurrency.max(1);
    let mut open: Vec<Option<Open>> = (0..slots).map(|_| None).collect();
    let mut process: Vec<i64> = (0..slots as i64).collect();
    let mut events: Vec<Event> = Vec::new();
    // (time, sequence number, phase: 0 invoke / 1 run / 2 complete, slot)
    let mut queue: BinaryHeap<Reverse<(u64, u64, u8, usize)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut BinaryHeap<_>, time: u64, phase: u8, slot: usize| {
        seq += 1;
        queue.push(Reverse((time, seq, phase, slot)));
    };
    for s in 0..slots {
        push(&mut queue, rng.below(10), 0, s);
    }
    let (mut started, mut injected) = (0usize, false);
    let mut must_read: Vec<usize> = Vec::new();
    while let Some(Reverse((time, _, phase, s))) = queue.pop() {
        match phase {
            0 if started < opts.txns => {
                started += 1;
                let txn = if let (Some(kind), false, true) = (opts.inject, injected, started > opts.txns / 2) {
                    injected = true;
                    let (x, y) = (db.active[0], db.active[1]);
                    let r = |k: usize| Mop::Read { key: Key::Int(k as i64), value: None };
                    let a = |k: usize, db: &mut Db| Mop::Append { key: Key::Int(k as i64), value: db.value(k) };
                    let (first, second) = match kind {
                        Inject::WriteSkew => (vec![r(x), r(y), a(x, &mut db)], vec![r(x), r(y), a(y, &mut db)]),
                        Inject::LostUpdate => (vec![r(x), a(x, &mut db)], vec![r(x), a(x, &mut db)]),
                    };
                    let partner = 1_000_000 + started as i64;
                    emit(&mut events, partner, EventKind::Invoke, time, &second);
                    Open { process: process[s], mops: first, fate: Fate::Ok, partner: Some((partner, second)) }
                } else {
                    // Reads of the injected keys go in a transaction that commits.
                    let observer = !must_read.is_empty();
                    let mut mops: Vec<Mop> =
                        must_read.drain(..).map(|k| Mop::Read { key: Key::Int(k as i64), value: None }).collect();
                    for _ in 0..1 + rng.below(opts.max_mops.max(1) as u64) {
                        let k = db.active[rng.below(db.active.len() as u64) as usize];
                        mops.push(if rng.below(2) == 0 {
                            Mop::Read { key: Key::Int(k as i64), value: None }
                        } else {
                            Mop::Append { key: Key::Int(k as i64), value: db.value(k) }
                        });
                    }
                    let roll = rng.below(1000);
                    let fate = if observer {
                        Fate::Ok
                    } else if roll < opts.fail_per_mille {
                        Fate::Fail
                    } else if roll < opts.fail_per_mille + opts.info_per_mille {
                        if rng.below(2) == 0 {
                            Fate::InfoApplied
                        } else {
                            Fate::InfoLost
                        }
                    } else {
                        Fate::Ok
                    };
                    Open { process: process[s], mops, fate, partner: None }
                };
                emit(&mut events, txn.process, EventKind::Invoke, time, &txn.mops);
                open[s] = Some(txn);
                push(&mut queue, time + 1 + rng.below(20), 1, s);
            }
            1 => {
                let Some(txn) = open[s].as_mut() else { continue };
                if let Some((_, second)) = txn.partner.as_mut() {
                    // Both read one snapshot, then both apply.
                    for m in txn.mops.iter_mut().chain(second.iter_mut()) {
                        if let Mop::Read { key: Key::Int(k), value } = m {
                            *value = db.read(*k as usize);
                        }
                    }
                    for m in txn.mops.iter().chain(second.iter()) {
                        apply_append(&mut db, m, opts.max_appends_per_key);
                        if matches!(m, Mop::Append { .. }) && !must_read.contains(&key_of(m)) {
                            must_read.push(key_of(m));
                        }
                    }
                } else if matches!(txn.fate, Fate::Ok | Fate::InfoApplied) {
                    for m in txn.mops.iter_mut() {
                        if let Mop::Read { key: Key::Int(k), value } = m {
                            *value = db.read(*k as usize);
                        }
                        apply_append(&mut db, m, opts.max_appends_per_key);
                    }
                }
                push(&mut queue, time + 1 + rng.below(20), 2, s);
            }
            2 => {
                let Some(txn) = open[s].take() else { continue };
                let (kind, mops) = match txn.fate {
                    Fate::Ok => (EventKind::Ok, txn.mops),
                    Fate::Fail => (EventKind::Fail, blank(txn.mops)),
                    Fate::InfoApplied | Fate::InfoLost => (EventKind::Info, blank(txn.mops)),
                };
                emit(&mut events, txn.process, kind, time, &mops);
                if let Some((partner, second)) = txn.partner {
                    emit(&mut events, partner, EventKind::Ok, time, &second);
                }
                if kind == EventKind::Info {
                    process[s] += slots as i64;
                }
                push(&mut queue, time + rng.below(10), 0, s);
            }
            _ => {}
        }
    }
    events
}

fn emit(events: &mut Vec<Event>, process: i64, kind: EventKind, time: u64, mops: &[Mop]) {
    let index = events.len();
    events.push(Event { line: index + 1, index, process, kind, time, mops: Some(mops.to_vec()) });
}

/// A failed or indeterminate transaction's completion carries its invoke's ops.
fn blank(mut mops: Vec<Mop>) -> Vec<Mop> {
    for m in mops.iter_mut() {
        if let Mop::Read { value, .. } = m {
            *value = None;
        }
    }
    mops
}

/// Applies an append; a key that has taken its share of appends is retired
/// (replaced among the active keys by a fresh one).
fn apply_append(db: &mut Db, m: &Mop, max_appends: usize) {
    let Mop::Append { value, .. } = m else { return };
    let k = key_of(m);
    db.lists[k].push(*value);
    if db.lists[k].len() >= max_appends.max(1) {
        if let Some(slot) = db.active.iter().position(|&a| a == k) {
            let fresh = db.new_key();
            db.active[slot] = fresh;
        }
    }
}

/// A generated history (see the module documentation).
pub fn list_append_history(seed: u64, opts: &GenOptions) -> History {
    // The generator's events always pair: each process is sequential and
    // completes what it invoked.
    History::from_events(list_append_events(seed, opts)).unwrap_or_default()
}
