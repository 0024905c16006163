//! Linearizability checking of key-value register histories.
//!
//! Algorithm: Wing & Gong's search with Lowe's memoisation, as in Porcupine and
//! Knossos. The history is partitioned per key (a register store is
//! linearizable iff each key is, since ops touch one key). For one key, call and
//! return entries are sorted by time into a doubly linked list; the search
//! repeatedly tries to linearize an op whose call comes before the first
//! remaining return entry, lifting its entries out of the list, and backtracks
//! when it reaches the return of an op it has not linearized. A configuration
//! (set of linearized ops as a bitset, register state) seen before is never
//! explored twice.
//!
//! Outcomes: `fail` ops are dropped (they did not happen). `info`/pending ops
//! have a call entry but no return entry: they may be linearized at any point
//! after their call, or never; the search succeeds once every `ok` op is
//! linearized. An info/pending read is dropped (it constrains nothing). A cas
//! whose compare failed ([`Outcome::CompareFailed`]) did not happen either,
//! but it is a read: it must be linearized between its call and its return,
//! at a point where the register does not hold its `from`.
//!
//! Real time: op A precedes op B iff A returned strictly before B was called.
//! At equal timestamps ops are concurrent, except that a process's own ops stay
//! in program order (an explicit same-tick predecessor, not a list position:
//! see `same_tick_predecessors`).

use crate::register_history::{History, HistoryError, Op, Operation, Outcome, ProcessId, Value};
use std::collections::BTreeMap;

/// [`Memo`] is only looked up, never iterated, so its order cannot leak
/// (clippy.toml's determinism guard).
#[allow(clippy::disallowed_types)]
type LookupMap<K, V> = std::collections::HashMap<K, V>;
use std::fmt;

/// Limits for one check.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Search steps allowed per key before giving up with [`CheckResult::Unknown`].
    /// The problem is NP-complete; this keeps a pathological history bounded.
    pub max_steps_per_key: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions { max_steps_per_key: 50_000_000 }
    }
}

/// The verdict on a whole history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckResult {
    /// Every key is linearizable.
    Ok {
        /// Keys in the history.
        keys: usize,
        /// Ops the search considered, all keys together: `fail` ops (other
        /// than failed compares), info/pending reads and info/pending writes
        /// nothing observes are left out.
        ops: usize,
    },
    /// The first non-linearizable key, in key order.
    Violation(Violation),
    /// The step budget ran out on `key` before a verdict.
    Unknown {
        /// The key the search gave up on.
        key: String,
        /// Search steps it took on that key.
        steps: u64,
    },
}

impl CheckResult {
    /// Whether the history is linearizable ([`CheckResult::Ok`]).
    pub fn is_ok(&self) -> bool {
        matches!(self, CheckResult::Ok { .. })
    }
}

/// Why a key is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The key that is not linearizable.
    pub key: String,
    /// Longest linearizable prefix found: ops in linearization order, each with
    /// the register value after it (`None`: never written).
    pub linearized: Vec<(Operation, Option<Value>)>,
    /// Ops that could come next after that prefix (nothing else returned before
    /// they were called) yet none can: each with the reason.
    pub stuck: Vec<(Operation, String)>,
    /// Ops of this key that the check considered (fail ops other than failed
    /// compares, and info reads, excluded).
    pub key_ops: usize,
}

impl Violation {
    /// How many prefix ops the text form shows (the last ones).
    pub const SHOWN: usize = 20;
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "key {:?} is not linearizable ({} ops on it).", self.key, self.key_ops)?;
        writeln!(f, "Longest linearizable prefix ({} ops):", self.linearized.len())?;
        if self.linearized.is_empty() {
            writeln!(f, "  (none)")?;
        }
        // Long prefixes: the tail is where the trouble is; the struct has all.
        let skip = self.linearized.len().saturating_sub(Self::SHOWN);
        if skip > 0 {
            writeln!(f, "  ... {skip} earlier ops ...")?;
        }
        for (i, (op, state)) in self.linearized.iter().enumerate().skip(skip) {
            writeln!(f, "  {:>3}. {}  => {}", i + 1, op, show(state.as_ref()))?;
        }
        let state = self.linearized.last().and_then(|(_, s)| s.as_ref());
        writeln!(f, "With the register at {}, no op can come next:", show(state))?;
        for (op, why) in &self.stuck {
            writeln!(f, "  {op}: {why}")?;
        }
        Ok(())
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or("nil".to_string(), |v| v.to_string())
}

/// Checks a whole history.
pub fn check(history: &History, opts: &CheckOptions) -> Result<CheckResult, HistoryError> {
    Ok(check_operations(&history.operations()?, opts))
}

/// Checks paired operations (as from [`History::operations`]).
pub fn check_operations(ops: &[Operation], opts: &CheckOptions) -> CheckResult {
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.op.key()).or_default().push(op);
    }
    let mut total = 0;
    for (key, key_ops) in &by_key {
        match check_key(key, key_ops, opts) {
            KeyResult::Ok(n) => total += n,
            KeyResult::Violation(v) => return CheckResult::Violation(v),
            KeyResult::Unknown(steps) => return CheckResult::Unknown { key: key.to_string(), steps },
        }
    }
    CheckResult::Ok { keys: by_key.len(), ops: total }
}

enum KeyResult {
    Ok(usize),
    Violation(Violation),
    Unknown(u64),
}

/// Register state: 0 = nil, otherwise an interned value id.
type State = u32;

#[derive(Clone, Copy)]
enum Step {
    Read(State),
    Write(State),
    Cas(State, State),
    /// A cas whose compare failed: the register held anything but this.
    ReadNot(State),
}

impl Step {
    fn apply(self, s: State) -> Option<State> {
        match self {
            Step::Read(v) => (v == s).then_some(s),
            Step::Write(v) => Some(v),
            Step::Cas(from, to) => (from == s).then_some(to),
            Step::ReadNot(v) => (v != s).then_some(s),
        }
    }
}

struct Interner<'a> {
    ids: BTreeMap<&'a Value, State>,
    values: Vec<&'a Value>,
}

impl<'a> Interner<'a> {
    fn id(&mut self, v: Option<&'a Value>) -> State {
        let Some(v) = v else { return 0 };
        if let Some(&id) = self.ids.get(v) {
            return id;
        }
        self.values.push(v);
        let id = self.values.len() as State;
        self.ids.insert(v, id);
        id
    }
    fn value(&self, s: State) -> Option<Value> {
        (s != 0).then(|| self.values[s as usize - 1].clone())
    }
}

/// One entry of the time-ordered list.
#[derive(Clone, Copy)]
struct Entry {
    op: usize,
    is_call: bool,
}

/// One key's operations, compiled for the search: the ops that matter, each
/// with its register step, and the values they name, interned.
struct Compiled<'a> {
    ops: Vec<&'a Operation>,
    steps: Vec<Step>,
    interner: Interner<'a>,
}

fn check_key(key: &str, all: &[&Operation], opts: &CheckOptions) -> KeyResult {
    let compiled = compile(all);
    let n = compiled.ops.len();
    let ok_count = compiled.ops.iter().filter(|o| o.outcome.must_linearize()).count();
    let entries = time_ordered(&compiled.ops);
    let after = same_tick_predecessors(&compiled.ops);
    let search = Search::new(&entries, &after, n);
    match search.run(&compiled.steps, ok_count, opts.max_steps_per_key) {
        SearchEnd::Linearizable => KeyResult::Ok(n),
        SearchEnd::OutOfBudget(s) => KeyResult::Unknown(s),
        SearchEnd::Violation { prefix } => KeyResult::Violation(explain(key, &compiled, &after, &prefix)),
    }
}

/// Selects the ops that matter and compiles them to register steps.
fn compile<'a>(all: &[&'a Operation]) -> Compiled<'a> {
    let mut interner = Interner { ids: BTreeMap::new(), values: Vec::new() };
    let mut ops: Vec<&Operation> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    for &o in all {
        let open = matches!(o.outcome, Outcome::Info | Outcome::Pending);
        let step = match (&o.op, o.outcome) {
            (_, Outcome::Fail) => continue,
            (Op::Cas { from, .. }, Outcome::CompareFailed) => Step::ReadNot(interner.id(Some(from))),
            // Only a cas can fail its compare (`History::operations` checks).
            (_, Outcome::CompareFailed) => continue,
            (Op::Read { .. }, _) if open => continue,
            (Op::Read { value, .. }, _) => Step::Read(interner.id(value.as_ref())),
            (Op::Write { value, .. }, _) => Step::Write(interner.id(Some(value))),
            (Op::Cas { from, to, .. }, _) => Step::Cas(interner.id(Some(from)), interner.id(Some(to))),
        };
        ops.push(o);
        steps.push(step);
    }
    let mut compiled = Compiled { ops, steps, interner };
    drop_unobserved_open_ops(&mut compiled);
    compiled
}

/// An info/pending op whose resulting value no op ever observes (reads it,
/// CASes from it, or failed a compare against it) is dropped: if a
/// linearization applies it, removing it leaves a linearization (nothing
/// after it depended on its value), so the verdict is unchanged, while each
/// optional op kept would double the configurations a violation has to rule
/// out.
///
/// Except what a failed compare needs: a cas whose compare failed needs the
/// register to hold anything but its `from`, and the last write before it
/// may be such an unobserved op. Those ops are interchangeable (no read or
/// cas matches their values, every failed compare passes on them) except
/// for when they may happen (any time after their call), and each failed
/// compare needs at most one of them, so with K failed compares the K
/// earliest called (and any called at the same time as the K-th) are kept:
/// a linearization that uses another can use a kept one, called no later
/// and unused, in its place.
fn drop_unobserved_open_ops(c: &mut Compiled<'_>) {
    let mut observed = vec![false; c.interner.values.len() + 1];
    let mut failed_compares = 0usize;
    for st in &c.steps {
        match *st {
            Step::Read(v) | Step::Cas(v, _) => observed[v as usize] = true,
            Step::ReadNot(v) => {
                observed[v as usize] = true;
                failed_compares += 1;
            }
            Step::Write(_) => {}
        }
    }
    let unobserved: Vec<bool> = (0..c.ops.len())
        .map(|i| {
            let result = match c.steps[i] {
                Step::Read(_) | Step::ReadNot(_) => None,
                Step::Write(v) | Step::Cas(_, v) => Some(v),
            };
            !c.ops[i].outcome.must_linearize() && result.is_some_and(|v| !observed[v as usize])
        })
        .collect();
    // Unobserved ops called after this go (None: all go).
    let mut calls: Vec<u64> = (0..c.ops.len()).filter(|&i| unobserved[i]).map(|i| c.ops[i].call).collect();
    calls.sort_unstable();
    let keep_until = failed_compares.checked_sub(1).and_then(|k| calls.get(k).or(calls.last()).copied());
    let mut kept = 0;
    for (i, &unseen) in unobserved.iter().enumerate() {
        if unseen && keep_until.is_none_or(|t| c.ops[i].call > t) {
            continue;
        }
        c.ops[kept] = c.ops[i];
        c.steps[kept] = c.steps[i];
        kept += 1;
    }
    c.ops.truncate(kept);
    c.steps.truncate(kept);
}

/// The calls and returns in time order. Sort key (time, class, op): class
/// 0 = call, 1 = return, so that at equal times calls come first and ops
/// are concurrent. Program order at equal times is not in this list (a
/// total order cannot keep it without ordering other processes' ops too);
/// [`same_tick_predecessors`] carries it.
fn time_ordered(ops: &[&Operation]) -> Vec<Entry> {
    let mut keyed: Vec<((u64, u8, usize), Entry)> = Vec::with_capacity(2 * ops.len());
    for (i, o) in ops.iter().enumerate() {
        keyed.push(((o.call, 0, i), Entry { op: i, is_call: true }));
        if let (Some(r), true) = (o.ret, o.outcome.must_linearize()) {
            keyed.push(((r, 1, i), Entry { op: i, is_call: false }));
        }
    }
    keyed.sort_by_key(|(k, _)| *k);
    keyed.into_iter().map(|(_, e)| e).collect()
}

/// For each op, the same process's previous ok op when that one returned
/// at the very time this one was called: this op may only be linearized
/// after it. A coarse guest clock (jiffies) stamps a client's back-to-back
/// ops with one time; real time then says nothing about their order, but
/// the process ran them one after the other. Ops of other processes at
/// that time stay concurrent with both.
fn same_tick_predecessors(ops: &[&Operation]) -> Vec<Option<usize>> {
    let mut by_call: Vec<usize> = (0..ops.len()).collect();
    by_call.sort_by_key(|&i| (ops[i].call, i));
    let mut last_ok: BTreeMap<ProcessId, usize> = BTreeMap::new();
    let mut after = vec![None; ops.len()];
    for i in by_call {
        let o = ops[i];
        if let Some(&p) = last_ok.get(&o.process) {
            if ops[p].ret == Some(o.call) {
                after[i] = Some(p);
            }
        }
        if o.outcome.must_linearize() && o.ret.is_some() {
            last_ok.insert(o.process, i);
        }
    }
    after
}

/// Replays the search's best prefix to report the register's states, then
/// lists the ops that could have come next and why none fits.
fn explain(key: &str, c: &Compiled<'_>, after: &[Option<usize>], prefix: &[usize]) -> Violation {
    let (ops, steps, interner) = (&c.ops, &c.steps, &c.interner);
    let n = ops.len();
    let mut state = 0;
    let mut linearized = Vec::new();
    let mut done = vec![false; n];
    for &i in prefix {
        state = steps[i].apply(state).expect("prefix replays");
        done[i] = true;
        linearized.push((ops[i].clone(), interner.value(state)));
    }
    let first_ret = ops
        .iter()
        .enumerate()
        .filter(|(i, o)| !done[*i] && o.outcome.must_linearize())
        .filter_map(|(_, o)| o.ret)
        .min();
    let mut stuck = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        if done[i] || first_ret.is_some_and(|r| o.call > r) || after[i].is_some_and(|p| !done[p]) {
            continue;
        }
        if steps[i].apply(state).is_some() {
            // Could step, but every continuation from there failed too.
            if o.outcome.must_linearize() {
                stuck.push(((*o).clone(), "fits here, but no linearization continues after it".to_string()));
            }
            continue;
        }
        let why = match &o.op {
            Op::Cas { from, .. } if o.outcome == Outcome::CompareFailed => {
                format!("its compare failed, so the register held something other than {from}, but it holds {from}")
            }
            Op::Read { .. } => {
                format!("reads a value the register does not hold ({})", show(interner.value(state).as_ref()))
            }
            Op::Cas { from, .. } => {
                format!("cas expects {from} but the register holds {}", show(interner.value(state).as_ref()))
            }
            Op::Write { .. } => unreachable!("a write always applies"),
        };
        stuck.push(((*o).clone(), why));
    }
    Violation { key: key.to_string(), linearized, stuck, key_ops: n }
}

/// Memo of configurations seen: (Zobrist hash of the linearized set, state)
/// -> the full bitsets with that hash. The hash (XOR of a fixed random word
/// per op) is maintained incrementally, so a lookup is O(1) plus a bitset
/// comparison on a match; a hash collision can never make two different
/// configurations look equal. HashMap for lookup only: never iterated.
#[derive(Default)]
struct Memo {
    map: LookupMap<(u64, State), Vec<Box<[u64]>>>,
}

impl Memo {
    /// Records the configuration; false if it was already there.
    fn insert(&mut self, hash: u64, state: State, bits: &[u64]) -> bool {
        let v = self.map.entry((hash, state)).or_default();
        if v.iter().any(|b| **b == *bits) {
            return false;
        }
        v.push(bits.into());
        true
    }
}

fn zobrist(op: usize) -> u64 {
    simrng::splitmix64(op as u64 ^ 0x6c69_6e65_6172)
}

enum SearchEnd {
    Linearizable,
    Violation { prefix: Vec<usize> },
    OutOfBudget(u64),
}

/// The linked list over entries plus search bookkeeping.
/// Node `len` is the head sentinel; `next == NIL` ends the list.
struct Search<'a> {
    entries: &'a [Entry],
    /// [`same_tick_predecessors`]: an op waits for its own.
    after: &'a [Option<usize>],
    next: Vec<usize>,
    prev: Vec<usize>,
    /// For each op: (call entry index, return entry index if any).
    pos: Vec<(usize, Option<usize>)>,
}

const NIL: usize = usize::MAX;

impl<'a> Search<'a> {
    fn new(entries: &'a [Entry], after: &'a [Option<usize>], n_ops: usize) -> Self {
        let len = entries.len();
        let head = len;
        let mut next = vec![NIL; len + 1];
        let mut prev = vec![NIL; len + 1];
        let mut p = head;
        for (i, back) in prev.iter_mut().enumerate().take(len) {
            next[p] = i;
            *back = p;
            p = i;
        }
        let mut pos = vec![(NIL, None); n_ops];
        for (i, e) in entries.iter().enumerate() {
            if e.is_call {
                pos[e.op].0 = i;
            } else {
                pos[e.op].1 = Some(i);
            }
        }
        Search { entries, after, next, prev, pos }
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    /// Reinserts `i`; valid only in reverse order of unlinking (dancing links).
    fn relink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = i;
        if n != NIL {
            self.prev[n] = i;
        }
    }

    fn lift(&mut self, op: usize) {
        let (c, r) = self.pos[op];
        self.unlink(c);
        if let Some(r) = r {
            self.unlink(r);
        }
    }

    fn unlift(&mut self, op: usize) {
        let (c, r) = self.pos[op];
        if let Some(r) = r {
            self.relink(r);
        }
        self.relink(c);
    }

    fn run(mut self, steps: &[Step], ok_count: usize, budget: u64) -> SearchEnd {
        let head = self.entries.len();
        let words = steps.len().div_ceil(64);
        let mut linearized = vec![0u64; words];
        let mut ok_done = 0usize;
        let mut state: State = 0;
        let mut hash = 0u64;
        let mut seen = Memo::default();
        // (op, state before it)
        let mut stack: Vec<(usize, State)> = Vec::new();
        let mut best: Vec<usize> = Vec::new();
        let mut entry = self.next[head];
        // Pass 1 tries ok ops, pass 2 the optional (info) ones: every
        // candidate is still tried, but optional ops only when needed.
        let mut pass_two = false;
        let mut count = 0u64;
        loop {
            if ok_done == ok_count {
                return SearchEnd::Linearizable;
            }
            count += 1;
            if count > budget {
                return SearchEnd::OutOfBudget(count - 1);
            }
            let at_return = entry == NIL || !self.entries[entry].is_call;
            if !at_return {
                let op = self.entries[entry].op;
                let optional = self.pos[op].1.is_none();
                let waits = self.after[op].is_some_and(|p| linearized[p / 64] & (1 << (p % 64)) == 0);
                if optional != pass_two || waits {
                    entry = self.next[entry];
                    continue;
                }
                if let Some(new_state) = steps[op].apply(state) {
                    linearized[op / 64] |= 1 << (op % 64);
                    let h = hash ^ zobrist(op);
                    if seen.insert(h, new_state, &linearized) {
                        hash = h;
                        stack.push((op, state));
                        state = new_state;
                        pass_two = false;
                        if self.pos[op].1.is_some() {
                            ok_done += 1;
                        }
                        self.lift(op);
                        entry = self.next[head];
                        continue;
                    }
                    linearized[op / 64] &= !(1 << (op % 64));
                }
                entry = self.next[entry];
                continue;
            }
            // Reached the return of an unlinearized op (or the end).
            if !pass_two {
                pass_two = true;
                entry = self.next[head];
                continue;
            }
            // Both passes failed here: backtrack.
            if stack.len() > best.len() {
                best = stack.iter().map(|&(op, _)| op).collect();
            }
            let Some((op, before)) = stack.pop() else {
                return SearchEnd::Violation { prefix: best };
            };
            state = before;
            hash ^= zobrist(op);
            linearized[op / 64] &= !(1 << (op % 64));
            if self.pos[op].1.is_some() {
                ok_done -= 1;
            }
            self.unlift(op);
            pass_two = self.pos[op].1.is_none();
            entry = self.next[self.pos[op].0];
        }
    }
}

#[cfg(test)]
mod tests;
