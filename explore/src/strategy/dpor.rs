//! Stateless exhaustive exploration with dynamic partial-order reduction
//! (Flanagan & Godefroid, POPL 2005) and sleep sets (Godefroid 1996).
//!
//! The engine cannot copy a cluster's state, so exploration is by re-execution:
//! each execution replays a prefix recorded on the stack and then explores a
//! new branch. The engine drives it:
//!
//! ```text
//! while dpor.begin_execution() {
//!     reset the cluster;
//!     loop {
//!         let enabled = engine.enabled();            // same order for same state
//!         if enabled.is_empty() { break }
//!         match dpor.choose(&enabled)? { Some(i) => engine.run(&enabled[i]), None => break }
//!     }
//! }
//! ```
//!
//! Transitions belong to processes (FG's threads; for engine actions, a
//! (node, kind, peer) triple): one process has at most one enabled transition
//! in a state. Algorithm: Source-DPOR (Abdulla, Aronis, Jonsson, Sagonas,
//! POPL 2014) with sleep sets, over FG's stateless setting: whenever a
//! transition runs, every earlier transition in a race with it (dependent,
//! other process, happens-before it directly, by vector clocks) gets a
//! backtrack point at the state before it, unless one of the processes that
//! could start the reversed order is already there. Sleep sets skip
//! transitions whose interleavings were already covered; an execution whose
//! every enabled transition sleeps is cut short (`choose` returns None).
//! (FG's original rule, which looks only at the last dependent transition,
//! loses traces when combined with sleep sets; the randomized test against
//! naive DFS below caught exactly that.)
//!
//! An execution should run until `choose` returns None or nothing is
//! enabled; one stopped early loses only the unexplored subtree of its newest
//! branch.
//!
//! Requirement on `dependent`: it must be symmetric and sound (two
//! transitions it calls independent commute and do not enable or disable
//! each other). A crash disables a node's actions, so the engine relation
//! makes a crash dependent with every action of that node. Cost: O(n^2) work
//! per step in the worst case for an execution of n steps; meant for the
//! short executions of exhaustive mode.

use engine::strategy::{ActionKind, EnabledAction};
use engine::{Actor, NodeId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// A transition that knows its process.
pub trait Transition: Clone + PartialEq + Debug {
    /// Who a transition belongs to; one process has at most one enabled
    /// transition in a state.
    type Process: Clone + Ord + Debug;
    /// The process this transition belongs to.
    fn process(&self) -> Self::Process;
}

impl Transition for EnabledAction {
    type Process = (Actor, ActionKind, Option<NodeId>);
    /// A node's runs, a channel's deliveries (FIFO per sender), a node's disk.
    fn process(&self) -> Self::Process {
        (self.node, self.kind, self.peer)
    }
}

/// Why an exploration cannot go on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DporError {
    /// Replaying the recorded prefix, the enabled set differs from the one
    /// recorded: the system is not deterministic.
    #[error("nondeterminism while replaying step {step}: recorded enabled set {recorded}, now {now}")]
    Diverged {
        /// The step (0-based) of the current execution.
        step: usize,
        /// The enabled set recorded at that step, `Debug`-formatted.
        recorded: String,
        /// The enabled set given now, `Debug`-formatted.
        now: String,
    },
}

struct Frame<T: Transition> {
    enabled: Vec<T>,
    chosen: usize,
    backtrack: BTreeSet<T::Process>,
    done: BTreeSet<T::Process>,
    /// Transitions asleep in this state: inherited plus explored siblings.
    sleep: Vec<T>,
    /// Vector clock of the chosen transition: process -> 1 + index of the
    /// latest transition of that process that happens-before it.
    clock: BTreeMap<T::Process, usize>,
}

impl<T: Transition> Frame<T> {
    fn chosen(&self) -> &T {
        &self.enabled[self.chosen]
    }
}

/// Counters of an exploration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DporStats {
    /// Executions started (including the current one).
    pub executions: u64,
    /// Executions cut short because every enabled transition was asleep.
    pub sleep_blocked: u64,
}

/// A stateless exhaustive exploration by re-execution, with or without
/// reduction (see the module doc); `D` is the dependence relation.
pub struct Dpor<T: Transition, D: Fn(&T, &T) -> bool> {
    dependent: D,
    reduce: bool,
    stack: Vec<Frame<T>>,
    depth: usize,
    started: bool,
    stats: DporStats,
}

impl<T: Transition, D: Fn(&T, &T) -> bool> Dpor<T, D> {
    /// DPOR with sleep sets. `dependent` must be symmetric; transitions of
    /// the same process are always treated as dependent.
    pub fn new(dependent: D) -> Self {
        Dpor { dependent, reduce: true, stack: Vec::new(), depth: 0, started: false, stats: DporStats::default() }
    }

    /// Plain depth-first search over every interleaving (no reduction): the
    /// baseline, and a fallback when the dependence relation is in doubt.
    pub fn naive(dependent: D) -> Self {
        Dpor { reduce: false, ..Dpor::new(dependent) }
    }

    /// The exploration's counters so far.
    pub fn stats(&self) -> &DporStats {
        &self.stats
    }

    /// The transitions chosen so far in the current execution.
    pub fn current_path(&self) -> Vec<T> {
        self.stack[..self.depth].iter().map(|f| f.chosen().clone()).collect()
    }

    fn dep(&self, a: &T, b: &T) -> bool {
        a.process() == b.process() || (self.dependent)(a, b)
    }

    /// Starts the next execution; false when the exploration is complete.
    pub fn begin_execution(&mut self) -> bool {
        if !self.started {
            self.started = true;
            self.stats.executions = 1;
            return true;
        }
        // If the last execution stopped early (a failure, a step limit), the
        // frames below its stop point are still the recorded plan: keep them.
        // Only the unexplored subtree of the newest branch is skipped.
        self.depth = 0;
        while let Some(top) = self.stack.last_mut() {
            if self.reduce {
                let explored = top.chosen().clone();
                top.sleep.push(explored);
            }
            let next = (0..top.enabled.len()).find(|&i| {
                let p = top.enabled[i].process();
                top.backtrack.contains(&p) && !top.done.contains(&p) && !top.sleep.contains(&top.enabled[i])
            });
            if let Some(i) = next {
                top.chosen = i;
                top.done.insert(top.enabled[i].process());
                let d = self.stack.len() - 1;
                let t = self.stack[d].enabled[i].clone();
                let clock = self.clock_for(d, &t);
                if self.reduce {
                    self.add_backtrack_points(d, &t, &clock);
                }
                self.stack[d].clock = clock;
                self.stats.executions += 1;
                return true;
            }
            self.stack.pop();
        }
        false
    }

    /// Vector clock of transition `t` placed at depth `d`.
    fn clock_for(&self, d: usize, t: &T) -> BTreeMap<T::Process, usize> {
        let mut clock: BTreeMap<T::Process, usize> = BTreeMap::new();
        for f in &self.stack[..d] {
            if self.dep(f.chosen(), t) {
                for (p, &v) in &f.clock {
                    let e = clock.entry(p.clone()).or_insert(0);
                    *e = (*e).max(v);
                }
            }
        }
        clock.insert(t.process(), d + 1);
        clock
    }

    /// Does the chosen transition at depth `k` happen-before the one at `j`?
    fn hb(&self, k: usize, j: usize) -> bool {
        let pk = self.stack[k].chosen().process();
        self.stack[j].clock.get(&pk).is_some_and(|&v| v > k)
    }

    /// Picks a transition among `enabled` (the same order for the same state)
    /// and returns its index; `None` when the execution should stop here
    /// (nothing enabled, or everything enabled is asleep: already covered).
    pub fn choose(&mut self, enabled: &[T]) -> Result<Option<usize>, DporError> {
        let d = self.depth;
        if d < self.stack.len() {
            let f = &self.stack[d];
            if f.enabled != enabled {
                return Err(DporError::Diverged {
                    step: d,
                    recorded: format!("{:?}", f.enabled),
                    now: format!("{enabled:?}"),
                });
            }
            self.depth += 1;
            return Ok(Some(f.chosen));
        }
        if enabled.is_empty() {
            return Ok(None);
        }
        let mut sleep = Vec::new();
        if self.reduce {
            if let Some(parent) = self.stack.last() {
                let t = parent.chosen();
                sleep = parent.sleep.iter().filter(|q| !self.dep(q, t)).cloned().collect();
            }
        }
        let Some(pick) = (0..enabled.len()).find(|&i| !sleep.contains(&enabled[i])) else {
            self.stats.sleep_blocked += 1;
            return Ok(None);
        };
        let backtrack: BTreeSet<T::Process> = if self.reduce {
            BTreeSet::from([enabled[pick].process()])
        } else {
            enabled.iter().map(|t| t.process()).collect()
        };
        let clock = self.clock_for(d, &enabled[pick]);
        if self.reduce {
            self.add_backtrack_points(d, &enabled[pick], &clock);
        }
        self.stack.push(Frame {
            enabled: enabled.to_vec(),
            chosen: pick,
            done: BTreeSet::from([enabled[pick].process()]),
            backtrack,
            sleep,
            clock,
        });
        self.depth += 1;
        Ok(Some(pick))
    }

    /// Source-DPOR race analysis for transition `t` about to run at depth
    /// `d` (with vector clock `ct`): for every earlier transition e_i in a
    /// race with t (dependent, other process, no transition between them that
    /// e_i happens-before and that happens-before t), let v be the transitions
    /// after e_i that do not happen after it, followed by t; unless the
    /// backtrack set before e_i already holds one of v's initials (processes
    /// that can start v), add one.
    fn add_backtrack_points(&mut self, d: usize, t: &T, ct: &BTreeMap<T::Process, usize>) {
        let pt = t.process();
        let hb_t = |this: &Self, k: usize| ct.get(&this.stack[k].chosen().process()).is_some_and(|&v| v > k);
        for i in 0..d {
            let ei = self.stack[i].chosen();
            if ei.process() == pt || !(self.dependent)(ei, t) {
                continue;
            }
            if (i + 1..d).any(|k| self.hb(i, k) && hb_t(self, k)) {
                continue; // not a direct race: reversing it is handled at k
            }
            let v: Vec<usize> = (i + 1..d).filter(|&k| !self.hb(i, k)).collect();
            let mut initials: BTreeSet<T::Process> = BTreeSet::new();
            for (n, &j) in v.iter().enumerate() {
                if !v[..n].iter().any(|&k| self.hb(k, j)) {
                    initials.insert(self.stack[j].chosen().process());
                }
            }
            if !v.iter().any(|&k| hb_t(self, k)) {
                initials.insert(pt.clone());
            }
            let f = &mut self.stack[i];
            if f.backtrack.iter().any(|p| initials.contains(p)) {
                continue;
            }
            let q = f.enabled.iter().map(|u| u.process()).find(|p| initials.contains(p));
            if let Some(q) = q.or_else(|| initials.first().cloned()) {
                f.backtrack.insert(q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use rand_core::RngCore;
    use simtime::VirtualTime;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Ins {
        Inc(usize),
        Write(usize, i64),
        Read(usize),
    }

    impl Ins {
        fn var(self) -> usize {
            match self {
                Ins::Inc(v) | Ins::Write(v, _) | Ins::Read(v) => v,
            }
        }
        fn writes(self) -> bool {
            !matches!(self, Ins::Read(_))
        }
    }

    #[derive(Clone, PartialEq, Eq, Debug)]
    struct Step {
        pid: usize,
        pc: usize,
        ins: Ins,
    }

    impl Transition for Step {
        type Process = usize;
        fn process(&self) -> usize {
            self.pid
        }
    }

    fn dependent(a: &Step, b: &Step) -> bool {
        a.ins.var() == b.ins.var() && (a.ins.writes() || b.ins.writes())
    }

    /// Final state: shared variables and what each process read.
    type Final = (Vec<i64>, Vec<Vec<i64>>);

    /// A Mazurkiewicz trace, canonically: for every dependent pair of
    /// transitions (by (pid, pc)), which one ran first.
    type Trace = BTreeSet<((usize, usize), (usize, usize))>;

    struct Explored {
        executions: u64,
        finals: BTreeSet<Final>,
        traces: BTreeSet<Trace>,
        complete_runs: u64,
    }

    fn trace_of(path: &[Step]) -> Trace {
        let mut t = Trace::new();
        for (i, a) in path.iter().enumerate() {
            for b in &path[i + 1..] {
                if a.pid != b.pid && dependent(a, b) {
                    t.insert(((a.pid, a.pc), (b.pid, b.pc)));
                }
            }
        }
        t
    }

    fn explore(progs: &[Vec<Ins>], nvars: usize, mut dpor: Dpor<Step, fn(&Step, &Step) -> bool>) -> Explored {
        let mut finals = BTreeSet::new();
        let mut traces = BTreeSet::new();
        let mut complete_runs = 0;
        while dpor.begin_execution() {
            let mut vars = vec![0i64; nvars];
            let mut pcs = vec![0usize; progs.len()];
            let mut reads = vec![Vec::new(); progs.len()];
            let mut path = Vec::new();
            loop {
                let enabled: Vec<Step> = (0..progs.len())
                    .filter(|&p| pcs[p] < progs[p].len())
                    .map(|p| Step { pid: p, pc: pcs[p], ins: progs[p][pcs[p]] })
                    .collect();
                if enabled.is_empty() {
                    finals.insert((vars.clone(), reads.clone()));
                    traces.insert(trace_of(&path));
                    complete_runs += 1;
                    break;
                }
                let Some(i) = dpor.choose(&enabled).unwrap() else { break };
                let s = &enabled[i];
                match s.ins {
                    Ins::Inc(v) => vars[v] += 1,
                    Ins::Write(v, x) => vars[v] = x,
                    Ins::Read(v) => reads[s.pid].push(vars[v]),
                }
                pcs[s.pid] += 1;
                path.push(s.clone());
            }
        }
        Explored { executions: dpor.stats().executions, finals, traces, complete_runs }
    }

    fn both(progs: &[Vec<Ins>], nvars: usize) -> (Explored, Explored) {
        (explore(progs, nvars, Dpor::naive(dependent)), explore(progs, nvars, Dpor::new(dependent)))
    }

    #[test]
    fn independent_counters_need_one_execution() {
        use Ins::Inc;
        let progs = vec![vec![Inc(0); 3], vec![Inc(1); 3]];
        let (naive, dpor) = both(&progs, 2);
        assert_eq!(naive.executions, 20, "C(6,3) interleavings");
        assert_eq!(dpor.executions, 1);
        assert_eq!(naive.finals, dpor.finals);
    }

    #[test]
    fn finds_a_bug_that_needs_a_specific_order() {
        use Ins::*;
        // The bug: p1 reads x == 1, i.e. runs between p0's two writes.
        // p2 and p3 are independent noise that naive DFS interleaves freely.
        let progs = vec![vec![Write(0, 1), Write(0, 2)], vec![Read(0)], vec![Inc(1), Inc(1)], vec![Inc(2), Inc(2)]];
        let (naive, dpor) = both(&progs, 3);
        eprintln!("naive: {} executions; dpor: {} executions", naive.executions, dpor.executions);
        let bug = |e: &Explored| e.finals.iter().any(|(_, reads)| reads[1] == vec![1]);
        assert!(bug(&naive));
        assert!(bug(&dpor), "DPOR must still find the bug");
        assert_eq!(naive.finals, dpor.finals);
        assert_eq!(dpor.traces.len(), 3, "three Mazurkiewicz traces: read before, between, after");
        assert_eq!(naive.traces, dpor.traces);
        assert!(dpor.executions * 50 < naive.executions, "dpor {} vs naive {}", dpor.executions, naive.executions);
    }

    #[test]
    fn same_final_states_as_naive_on_random_programs() {
        use Ins::*;
        let mut rng = simrng::seeded(2024);
        let mut saved = 0u64;
        for _ in 0..400 {
            let nprocs = 2 + (rng.next_u64() % 2) as usize;
            let progs: Vec<Vec<Ins>> = (0..nprocs)
                .map(|p| {
                    let len = 1 + (rng.next_u64() % 3) as usize;
                    (0..len)
                        .map(|_| {
                            let v = (rng.next_u64() % 3) as usize;
                            match rng.next_u64() % 3 {
                                0 => Inc(v),
                                1 => Write(v, p as i64 + 10),
                                _ => Read(v),
                            }
                        })
                        .collect()
                })
                .collect();
            let (naive, dpor) = both(&progs, 3);
            assert_eq!(naive.finals, dpor.finals, "programs {progs:?}");
            assert_eq!(naive.traces, dpor.traces, "every trace explored: {progs:?}");
            assert!(dpor.executions <= naive.executions);
            saved += naive.executions - dpor.executions;
        }
        assert!(saved > 0);
    }

    #[test]
    fn fully_dependent_system_explores_all_traces() {
        use Ins::*;
        // Every pair conflicts: each interleaving is its own trace.
        let progs = vec![vec![Write(0, 1)], vec![Write(0, 2)], vec![Write(0, 3)]];
        let (naive, dpor) = both(&progs, 1);
        assert_eq!(naive.complete_runs, 6);
        assert_eq!(dpor.complete_runs, 6);
    }

    #[test]
    fn executions_stopped_early_still_terminate_and_cover_the_rest() {
        use Ins::*;
        let progs = vec![vec![Write(0, 1), Write(0, 2)], vec![Write(0, 3)], vec![Read(0)]];
        let mut d: Dpor<Step, fn(&Step, &Step) -> bool> = Dpor::new(dependent);
        let mut traces = BTreeSet::new();
        let mut execution = 0;
        while d.begin_execution() {
            execution += 1;
            let mut pcs = vec![0usize; progs.len()];
            let mut path = Vec::new();
            loop {
                if execution == 2 && path.len() == 1 {
                    break; // the engine gave up on this execution
                }
                let en: Vec<Step> = (0..progs.len())
                    .filter(|&p| pcs[p] < progs[p].len())
                    .map(|p| Step { pid: p, pc: pcs[p], ins: progs[p][pcs[p]] })
                    .collect();
                if en.is_empty() {
                    traces.insert(trace_of(&path));
                    break;
                }
                let Some(i) = d.choose(&en).unwrap() else { break };
                pcs[en[i].pid] += 1;
                path.push(en[i].clone());
            }
            assert!(execution < 100);
        }
        let (naive, _) = both(&progs, 1);
        assert!(traces.len() + 1 >= naive.traces.len(), "{} of {}", traces.len(), naive.traces.len());
    }

    #[test]
    fn replay_divergence_is_reported() {
        let mut d: Dpor<Step, fn(&Step, &Step) -> bool> = Dpor::naive(dependent);
        let a = Step { pid: 0, pc: 0, ins: Ins::Inc(0) };
        let b = Step { pid: 1, pc: 0, ins: Ins::Inc(0) };
        assert!(d.begin_execution());
        assert_eq!(d.choose(&[a.clone(), b.clone()]), Ok(Some(0)));
        assert!(d.begin_execution());
        let err = d.choose(std::slice::from_ref(&b)).unwrap_err();
        assert!(matches!(err, DporError::Diverged { step: 0, .. }));
        assert!(err.to_string().contains("nondeterminism"));
    }

    #[test]
    fn engine_actions_with_default_dependence() {
        use crate::strategy::dependent as engine_dep;
        use engine::strategy::ActionKind::*;
        // Node 0 and node 1 each run twice; they never interact.
        let mut d = Dpor::new(engine_dep);
        let mut runs = 0;
        while d.begin_execution() {
            let mut left = [2u8, 2];
            loop {
                let en: Vec<EnabledAction> = (0..2u16)
                    .filter(|&n| left[n as usize] > 0)
                    .map(|n| EnabledAction::new(actor(n), RunNode, VirtualTime::from_ns(0)))
                    .collect();
                if en.is_empty() {
                    runs += 1;
                    break;
                }
                let Some(i) = d.choose(&en).unwrap() else { break };
                left[usize::from(en[i].node.number())] -= 1;
            }
        }
        assert_eq!(runs, 1);
        assert_eq!(d.current_path().len(), 0);
    }
}
