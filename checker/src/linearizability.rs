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
//! linearized. An info/pending read is dropped (it constrains nothing).
//!
//! Real time: op A precedes op B iff A returned strictly before B was called.
//! At equal timestamps ops are concurrent, except that a process's own ops stay
//! in program order.

use crate::history::{History, HistoryError, Op, Operation, Outcome, Value};
use std::collections::{BTreeMap, HashMap};
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
    Ok { keys: usize, ops: usize },
    /// The first non-linearizable key, in key order.
    Violation(Violation),
    /// The step budget ran out on `key` before a verdict.
    Unknown { key: String, steps: u64 },
}

impl CheckResult {
    pub fn is_ok(&self) -> bool {
        matches!(self, CheckResult::Ok { .. })
    }
}

/// Why a key is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub key: String,
    /// Longest linearizable prefix found: ops in linearization order, each with
    /// the register value after it (`None`: never written).
    pub linearized: Vec<(Operation, Option<Value>)>,
    /// Ops that could come next after that prefix (nothing else returned before
    /// they were called) yet none can: each with the reason.
    pub stuck: Vec<(Operation, String)>,
    /// Ops of this key that the check considered (fail ops and info reads excluded).
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
}

impl Step {
    fn apply(self, s: State) -> Option<State> {
        match self {
            Step::Read(v) => (v == s).then_some(s),
            Step::Write(v) => Some(v),
            Step::Cas(from, to) => (from == s).then_some(to),
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

fn check_key(key: &str, all: &[&Operation], opts: &CheckOptions) -> KeyResult {
    // Select the ops that matter and compile them.
    let mut interner = Interner { ids: BTreeMap::new(), values: Vec::new() };
    let mut ops: Vec<&Operation> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    for &o in all {
        let open = matches!(o.outcome, Outcome::Info | Outcome::Pending);
        let step = match (&o.op, o.outcome) {
            (_, Outcome::Fail) => continue,
            (Op::Read { .. }, _) if open => continue,
            (Op::Read { value, .. }, _) => Step::Read(interner.id(value.as_ref())),
            (Op::Write { value, .. }, _) => Step::Write(interner.id(Some(value))),
            (Op::Cas { from, to, .. }, _) => Step::Cas(interner.id(Some(from)), interner.id(Some(to))),
        };
        ops.push(o);
        steps.push(step);
    }
    // An info/pending op whose resulting value no op ever observes (reads it,
    // or CASes from it) is dropped: if a linearization applies it, removing
    // it leaves a linearization (nothing after it depended on its value), so
    // the verdict is unchanged, while each optional op kept would double the
    // configurations a violation has to rule out.
    let mut observed = vec![false; interner.values.len() + 1];
    for st in &steps {
        match *st {
            Step::Read(v) | Step::Cas(v, _) => observed[v as usize] = true,
            Step::Write(_) => {}
        }
    }
    let mut kept = 0;
    for i in 0..ops.len() {
        let open = ops[i].outcome != Outcome::Ok;
        let result = match steps[i] {
            Step::Read(_) => None,
            Step::Write(v) | Step::Cas(_, v) => Some(v),
        };
        if open && result.is_some_and(|v| !observed[v as usize]) {
            continue;
        }
        ops[kept] = ops[i];
        steps[kept] = steps[i];
        kept += 1;
    }
    ops.truncate(kept);
    steps.truncate(kept);

    let n = ops.len();
    let ok_count = ops.iter().filter(|o| o.outcome == Outcome::Ok).count();

    // Time-ordered entries. Sort key (time, class, op): class 0 = call,
    // 1 = return, 2 = call right after the same process's return at the same
    // time (program order). Calls before returns at equal times = concurrent.
    let mut last_ret: BTreeMap<u64, u64> = BTreeMap::new(); // process -> latest ret time
    let mut keyed: Vec<((u64, u8, usize), Entry)> = Vec::with_capacity(2 * n);
    let mut by_call: Vec<usize> = (0..n).collect();
    by_call.sort_by_key(|&i| (ops[i].call, i));
    for &i in &by_call {
        let o = ops[i];
        let class = if last_ret.get(&o.process) == Some(&o.call) { 2 } else { 0 };
        keyed.push(((o.call, class, i), Entry { op: i, is_call: true }));
        if let Some(r) = o.ret {
            if o.outcome == Outcome::Ok {
                keyed.push(((r, 1, i), Entry { op: i, is_call: false }));
                last_ret.insert(o.process, r);
            }
        }
    }
    keyed.sort_by_key(|(k, _)| *k);
    let entries: Vec<Entry> = keyed.into_iter().map(|(_, e)| e).collect();

    let search = Search::new(&entries, n);
    match search.run(&steps, ok_count, opts.max_steps_per_key) {
        SearchEnd::Linearizable => KeyResult::Ok(n),
        SearchEnd::OutOfBudget(s) => KeyResult::Unknown(s),
        SearchEnd::Violation { prefix } => {
            // Replay the best prefix to report states, then list the candidates.
            let mut state = 0;
            let mut linearized = Vec::new();
            let mut done = vec![false; n];
            for &i in &prefix {
                state = steps[i].apply(state).expect("prefix replays");
                done[i] = true;
                linearized.push((ops[i].clone(), interner.value(state)));
            }
            let first_ret = ops
                .iter()
                .enumerate()
                .filter(|(i, o)| !done[*i] && o.outcome == Outcome::Ok)
                .filter_map(|(_, o)| o.ret)
                .min();
            let mut stuck = Vec::new();
            for (i, o) in ops.iter().enumerate() {
                if done[i] || first_ret.is_some_and(|r| o.call > r) {
                    continue;
                }
                if steps[i].apply(state).is_some() {
                    // Could step, but every continuation from there failed too.
                    if o.outcome == Outcome::Ok {
                        stuck.push(((*o).clone(), "fits here, but no linearization continues after it".to_string()));
                    }
                    continue;
                }
                let why = match &o.op {
                    Op::Read { .. } => format!("reads a value the register does not hold ({})", show(interner.value(state).as_ref())),
                    Op::Cas { from, .. } => format!("cas expects {from} but the register holds {}", show(interner.value(state).as_ref())),
                    Op::Write { .. } => unreachable!("a write always applies"),
                };
                stuck.push(((*o).clone(), why));
            }
            KeyResult::Violation(Violation { key: key.to_string(), linearized, stuck, key_ops: n })
        }
    }
}

/// Memo of configurations seen: (Zobrist hash of the linearized set, state)
/// -> the full bitsets with that hash. The hash (XOR of a fixed random word
/// per op) is maintained incrementally, so a lookup is O(1) plus a bitset
/// comparison on a match; a hash collision can never make two different
/// configurations look equal. HashMap for lookup only: never iterated.
#[derive(Default)]
struct Memo {
    map: HashMap<(u64, State), Vec<Box<[u64]>>>,
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
    crate::strategy::mix64(op as u64 ^ 0x6c69_6e65_6172)
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
    next: Vec<usize>,
    prev: Vec<usize>,
    /// For each op: (call entry index, return entry index if any).
    pos: Vec<(usize, Option<usize>)>,
}

const NIL: usize = usize::MAX;

impl<'a> Search<'a> {
    fn new(entries: &'a [Entry], n_ops: usize) -> Self {
        let len = entries.len();
        let head = len;
        let mut next = vec![NIL; len + 1];
        let mut prev = vec![NIL; len + 1];
        let mut p = head;
        for i in 0..len {
            next[p] = i;
            prev[i] = p;
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
        Search { entries, next, prev, pos }
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
                if optional != pass_two {
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
mod tests {
    use super::*;
    use crate::history::Value;

    fn v(i: i64) -> Option<Value> {
        Some(Value::Int(i))
    }

    fn verdict(h: &History) -> CheckResult {
        check(h, &CheckOptions::default()).unwrap()
    }

    fn violation(h: &History) -> Violation {
        match verdict(h) {
            CheckResult::Violation(v) => v,
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    #[test]
    fn empty_history_is_linearizable() {
        assert_eq!(verdict(&History::new()), CheckResult::Ok { keys: 0, ops: 0 });
    }

    #[test]
    fn sequential_valid() {
        let mut h = History::new();
        h.invoke(1, 0, Op::read("x", None)).ok(1, 1, Op::read("x", None));
        h.invoke(1, 2, Op::write("x", 1)).ok(1, 3, Op::write("x", 1));
        h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", v(1)));
        h.invoke(2, 6, Op::cas("x", 1, 2)).ok(2, 7, Op::cas("x", 1, 2));
        h.invoke(1, 8, Op::read("x", None)).ok(1, 9, Op::read("x", v(2)));
        assert_eq!(verdict(&h), CheckResult::Ok { keys: 1, ops: 5 });
    }

    #[test]
    fn stale_read_is_a_violation() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
        h.invoke(1, 20, Op::write("x", 2)).ok(1, 30, Op::write("x", 2));
        h.invoke(2, 40, Op::read("x", None)).ok(2, 50, Op::read("x", v(1)));
        let v = violation(&h);
        assert_eq!(v.key, "x");
        assert_eq!(v.linearized.len(), 2);
        assert_eq!(v.stuck.len(), 1);
        assert_eq!(v.stuck[0].0.id, 2);
        let text = v.to_string();
        let expected = "key \"x\" is not linearizable (3 ops on it).
Longest linearizable prefix (2 ops):
    1. #0 p1 write x := 1 [0..10 ns] ok  => 1
    2. #1 p1 write x := 2 [20..30 ns] ok  => 2
With the register at 2, no op can come next:
  #2 p2 read x -> 1 [40..50 ns] ok: reads a value the register does not hold (2)
";
        assert_eq!(text, expected);
        assert!(text.contains("key \"x\" is not linearizable"), "{text}");
        assert!(text.contains("read x -> 1"), "{text}");
        assert!(text.contains("With the register at 2"), "{text}");
    }

    #[test]
    fn long_prefixes_are_shortened_in_text() {
        let mut h = History::new();
        for i in 0..30 {
            h.invoke(1, 10 * i, Op::write("x", i as i64)).ok(1, 10 * i + 1, Op::write("x", i as i64));
        }
        h.invoke(2, 1000, Op::read("x", None)).ok(2, 1001, Op::read("x", v(3)));
        let bad = violation(&h);
        assert_eq!(bad.linearized.len(), 30);
        let text = bad.to_string();
        assert!(text.contains("... 10 earlier ops ..."), "{text}");
        assert!(text.contains(" 30. #29 p1 write x := 29"), "{text}");
        assert!(!text.contains("write x := 9 "), "{text}");
    }

    #[test]
    fn lost_write_is_a_violation() {
        // Two acknowledged writes, then reads see the first one forever: the
        // second write was lost. Concurrent writes, so either order is allowed,
        // but the reads disagree with each other.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).invoke(2, 1, Op::write("x", 2));
        h.ok(1, 10, Op::write("x", 1)).ok(2, 11, Op::write("x", 2));
        h.invoke(3, 20, Op::read("x", None)).ok(3, 21, Op::read("x", v(2)));
        h.invoke(3, 30, Op::read("x", None)).ok(3, 31, Op::read("x", v(1)));
        let bad = violation(&h);
        assert_eq!(bad.linearized.len(), 3, "{bad}");
        assert_eq!(bad.stuck[0].0.op, Op::read("x", v(1)));
    }

    #[test]
    fn cas_anomaly_is_a_violation() {
        // Two CAS 0->1 and 0->2 both succeed: impossible for a register.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 0)).ok(1, 1, Op::write("x", 0));
        h.invoke(1, 2, Op::cas("x", 0, 1)).invoke(2, 3, Op::cas("x", 0, 2));
        h.ok(1, 10, Op::cas("x", 0, 1)).ok(2, 11, Op::cas("x", 0, 2));
        let v = violation(&h);
        assert!(v.to_string().contains("cas expects 0"), "{v}");
    }

    #[test]
    fn failed_cas_never_happened() {
        // The cas failed, so the read of 5 is impossible.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 0)).ok(1, 1, Op::write("x", 0));
        h.invoke(1, 2, Op::cas("x", 0, 5)).fail(1, 3, Op::cas("x", 0, 5));
        h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", v(5)));
        violation(&h);
        // And a failed write is equally absent.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 7)).fail(1, 3, Op::write("x", 7));
        h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", None));
        assert!(verdict(&h).is_ok());
    }

    #[test]
    fn concurrent_overlapping_ops() {
        // Read overlaps the write: may see old or new value.
        for seen in [None, v(1)] {
            let mut h = History::new();
            h.invoke(1, 0, Op::write("x", 1)).invoke(2, 5, Op::read("x", None));
            h.ok(2, 8, Op::read("x", seen.clone())).ok(1, 10, Op::write("x", 1));
            assert!(verdict(&h).is_ok(), "seen {seen:?}");
        }
        // Three concurrent writes and reads that need a particular order
        // (3, then 1, then 2) inside the overlap.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).invoke(2, 0, Op::write("x", 2)).invoke(3, 0, Op::write("x", 3));
        h.invoke(4, 1, Op::read("x", None)).ok(4, 2, Op::read("x", v(3)));
        h.invoke(4, 3, Op::read("x", None)).ok(4, 4, Op::read("x", v(1)));
        h.invoke(4, 5, Op::read("x", None)).ok(4, 6, Op::read("x", v(2)));
        h.ok(1, 10, Op::write("x", 1)).ok(2, 10, Op::write("x", 2)).ok(3, 10, Op::write("x", 3));
        assert!(verdict(&h).is_ok());
        // ...but 3 cannot come back after 1 and 2 are both read since 3's write
        // was read first: 3,1,2,3 would need write 3 twice.
        h.invoke(4, 7, Op::read("x", None)).ok(4, 8, Op::read("x", v(3)));
        violation(&h);
    }

    #[test]
    fn equal_timestamps_are_concurrent_across_processes() {
        // p1's write returns at 10, p2's read is called at 10: concurrent, so
        // reading the old value is fine.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
        h.invoke(2, 10, Op::read("x", None)).ok(2, 12, Op::read("x", None));
        assert!(verdict(&h).is_ok());
        // Same process at the same instant: program order holds.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
        h.invoke(1, 10, Op::read("x", None)).ok(1, 12, Op::read("x", None));
        violation(&h);
    }

    #[test]
    fn info_write_may_have_happened() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).info(1, 5, Op::write("x", 1));
        h.invoke(2, 10, Op::read("x", None)).ok(2, 11, Op::read("x", v(1)));
        assert!(verdict(&h).is_ok());
    }

    #[test]
    fn info_write_may_not_have_happened() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).info(1, 5, Op::write("x", 1));
        h.invoke(2, 10, Op::read("x", None)).ok(2, 11, Op::read("x", None));
        assert!(verdict(&h).is_ok());
    }

    #[test]
    fn info_write_may_take_effect_late() {
        // The info write takes effect after the first read, long after the
        // client gave up: still allowed.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).info(1, 5, Op::write("x", 1));
        h.invoke(2, 10, Op::read("x", None)).ok(2, 11, Op::read("x", None));
        h.invoke(2, 20, Op::read("x", None)).ok(2, 21, Op::read("x", v(1)));
        assert!(verdict(&h).is_ok());
        // But not before it was invoked.
        let mut h = History::new();
        h.invoke(2, 0, Op::read("x", None)).ok(2, 1, Op::read("x", v(1)));
        h.invoke(1, 5, Op::write("x", 1)).info(1, 6, Op::write("x", 1));
        violation(&h);
    }

    #[test]
    fn info_cas_with_failed_precondition_is_fine() {
        // A pending cas whose precondition never holds just never happened.
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).ok(1, 1, Op::write("x", 1));
        h.invoke(2, 2, Op::cas("x", 9, 10)); // pending forever
        h.invoke(3, 3, Op::read("x", None)).ok(3, 4, Op::read("x", v(1)));
        assert!(verdict(&h).is_ok());
    }

    #[test]
    fn info_ops_cannot_take_effect_twice() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 0)).ok(1, 1, Op::write("x", 0));
        h.invoke(2, 2, Op::write("x", 1)).info(2, 3, Op::write("x", 1));
        h.invoke(3, 4, Op::read("x", None)).ok(3, 5, Op::read("x", v(1)));
        h.invoke(3, 6, Op::write("x", 0)).ok(3, 7, Op::write("x", 0));
        h.invoke(3, 8, Op::read("x", None)).ok(3, 9, Op::read("x", v(1)));
        let v = violation(&h);
        assert_eq!(v.linearized.len(), 4, "{v}");
    }

    #[test]
    fn unobserved_info_writes_do_not_blow_up_the_search() {
        // 60 crashed writes nobody ever reads, then a stale read: without
        // dropping them, refuting 2^60 subsets would never finish.
        let mut h = History::new();
        h.invoke(0, 0, Op::write("x", 1)).ok(0, 1, Op::write("x", 1));
        for p in 1..=60u64 {
            h.invoke(p, 2, Op::write("x", 100 + p as i64)).info(p, 3, Op::write("x", 100 + p as i64));
        }
        h.invoke(0, 10, Op::write("x", 2)).ok(0, 11, Op::write("x", 2));
        h.invoke(0, 12, Op::read("x", None)).ok(0, 13, Op::read("x", v(1)));
        let r = check(&h, &CheckOptions { max_steps_per_key: 10_000 }).unwrap();
        assert!(matches!(r, CheckResult::Violation(_)), "{r:?}");
        // An observed one is kept and may explain a read.
        h.invoke(0, 14, Op::read("x", None)).ok(0, 15, Op::read("x", v(107)));
        let r = check(&h, &CheckOptions { max_steps_per_key: 10_000 }).unwrap();
        assert!(matches!(r, CheckResult::Violation(_)), "still stale at 13: {r:?}");
    }

    #[test]
    fn info_write_observed_by_a_cas_is_kept() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 5)).info(1, 1, Op::write("x", 5));
        h.invoke(2, 2, Op::cas("x", 5, 6)).ok(2, 3, Op::cas("x", 5, 6));
        h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", v(6)));
        assert!(verdict(&h).is_ok());
    }

    #[test]
    fn info_reads_are_ignored() {
        let mut h = History::new();
        h.invoke(1, 0, Op::read("x", None)).info(1, 5, Op::read("x", None));
        h.invoke(2, 6, Op::read("x", None)); // pending read
        assert_eq!(verdict(&h), CheckResult::Ok { keys: 1, ops: 0 });
    }

    #[test]
    fn keys_are_independent_and_reported_in_order() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("b", 1)).ok(1, 1, Op::write("b", 1));
        h.invoke(1, 2, Op::write("a", 1)).ok(1, 3, Op::write("a", 1));
        h.invoke(1, 4, Op::read("b", None)).ok(1, 5, Op::read("b", v(1)));
        h.invoke(1, 6, Op::read("a", None)).ok(1, 7, Op::read("a", v(1)));
        assert_eq!(verdict(&h), CheckResult::Ok { keys: 2, ops: 4 });
        h.invoke(1, 8, Op::read("b", None)).ok(1, 9, Op::read("b", v(2)));
        h.invoke(1, 10, Op::read("c", None)).ok(1, 11, Op::read("c", v(2)));
        assert_eq!(violation(&h).key, "b");
    }

    #[test]
    fn string_values() {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", "a")).ok(1, 1, Op::write("x", "a"));
        h.invoke(1, 2, Op::read("x", None)).ok(1, 3, Op::read("x", Some("a".into())));
        assert!(verdict(&h).is_ok());
        h.invoke(1, 4, Op::read("x", None)).ok(1, 5, Op::read("x", Some("b".into())));
        violation(&h);
    }

    #[test]
    fn budget_gives_unknown() {
        let mut h = History::new();
        for p in 0..6 {
            h.invoke(p, 0, Op::write("x", p as i64));
        }
        for p in 0..6 {
            h.ok(p, 10, Op::write("x", p as i64));
        }
        h.invoke(9, 11, Op::read("x", None)).ok(9, 12, Op::read("x", v(99)));
        let r = check(&h, &CheckOptions { max_steps_per_key: 5 }).unwrap();
        assert_eq!(r, CheckResult::Unknown { key: "x".into(), steps: 5 });
        assert!(matches!(verdict(&h), CheckResult::Violation(_)));
    }

    #[test]
    fn history_errors_propagate() {
        let mut h = History::new();
        h.ok(1, 1, Op::write("x", 1));
        assert!(check(&h, &CheckOptions::default()).is_err());
    }
}
