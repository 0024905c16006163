//! Coverage-guided exploration (`--strategy coverage`): keep the executions
//! that reached something new, and start new executions from them.
//!
//! An unguided walk needs about (1/p)^k executions to pass through k rare
//! states in a row, each reached with probability p; a search that keeps
//! what reached a new state and explores on from there needs about k/p.
//!
//! - **Features** ([`features`]): what an execution covered, read from its
//!   trace, each with the virtual time it first appeared: every
//!   `@reached`/`@sometimes` name, its count in power-of-two buckets (1, 2,
//!   3-4, 5-8, ...), each kind of fault injected, a crash while a partition
//!   was in force, and each name first reached after a fault of each kind;
//!   with `[antithesis]`, each SDK assertion's outcome (true, false) and
//!   each `antithesis_guidance` value in power-of-two buckets of how far
//!   it went the way it wants (`checker::antithesis::features`).
//! - **Corpus** ([`Corpus`]): an execution that shows a feature no earlier
//!   execution showed becomes an entry: its execution seed, its decisions
//!   (departures from the default scheduler) and the time of its newest
//!   new feature.
//! - **Plans** ([`plan`]): a new execution either starts fresh (its own
//!   seed, a random walk from the start; one in [`FRESH_ONE_IN`], and always
//!   while the corpus is empty) or picks an entry by energy, replays the
//!   entry's decisions under the entry's seed up to a cut, drawn between
//!   the entry's newest new feature and its end (log-uniform, so mostly
//!   soon after what was new; what made it new is kept), and walks at random from there with a fresh stream: every
//!   choice after the cut, faults included, is new. The engine's own
//!   random streams (network latencies, guest entropy) follow the entry's
//!   seed, as a replay must.
//! - **Energy** ([`Entry::energy`]): an entry's weight grows with the new
//!   coverage its children found and while it (or a child) found some
//!   recently, and shrinks as it is picked.
//!
//! Determinism: a plan is a function of the run seed, the execution index
//! and the corpus as it stood at the start of the execution's generation
//! ([`GENERATION`] executions), and the corpus advances in execution order.
//! The runner starts a generation only once every earlier one is observed,
//! so the sequence of executions and the corpus are the same for any number
//! of jobs.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::strategy::{Decision, EnabledAction, Strategy, StrategySpec};
use engine::trace::{EventKind, Trace};
use rand_core::RngCore;

use super::{below, execution_rng, mix64, Guided, KindWeights, RandomWalk};
use simrng::streams::COVERAGE_PLAN as PLAN_STREAM;

/// Executions per generation: the corpus a plan sees changes once per
/// generation. Larger lets more jobs run at once; smaller follows new
/// coverage sooner.
pub const GENERATION: u64 = 8;

/// One execution in this many starts fresh instead of from the corpus.
pub const FRESH_ONE_IN: u64 = 8;

/// The power-of-two bucket of a count: 1, 2, 3-4, 5-8, ...
fn bucket(count: u64) -> String {
    if count <= 2 {
        return count.to_string();
    }
    let hi = count.next_power_of_two();
    format!("{}-{hi}", hi / 2 + 1)
}

/// What an execution covered: each feature and the virtual time (ns) it
/// first appeared (see the module docs for the features).
pub fn features(trace: &Trace) -> BTreeMap<String, u64> {
    let mut first: BTreeMap<String, u64> = BTreeMap::new();
    let mut note = |name: String, at: u64| {
        first.entry(name).or_insert(at);
    };
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut faults_seen: Vec<&'static str> = Vec::new();
    let mut partitioned = false;
    for e in trace.events() {
        let at = e.time.as_ns();
        let fault = match &e.kind {
            EventKind::Console { text } => {
                if let Some(name) = engine::console::reached_name(text) {
                    let c = counts.entry(name.to_string()).or_insert(0);
                    *c += 1;
                    note(format!("reached {name}"), at);
                    note(format!("reached {name} x{}", bucket(*c)), at);
                    for f in &faults_seen {
                        note(format!("reached {name} after {f}"), at);
                    }
                }
                for feature in checker::antithesis::features(text) {
                    note(feature, at);
                }
                None
            }
            EventKind::Crash { .. } => {
                if partitioned {
                    note("crash during partition".into(), at);
                }
                Some("crash")
            }
            EventKind::Partition { .. } => {
                partitioned = true;
                Some("partition")
            }
            EventKind::Heal => {
                partitioned = false;
                None
            }
            EventKind::Pause { .. } => Some("pause"),
            EventKind::ClockBump { .. } | EventKind::ClockStrobe { .. } => Some("clock jump"),
            EventKind::DiskFault { .. } => Some("disk fault"),
            _ => None,
        };
        if let Some(f) = fault {
            note(format!("fault {f}"), at);
            if !faults_seen.contains(&f) {
                faults_seen.push(f);
            }
        }
    }
    first
}

/// An execution kept for what it reached first.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The execution that found it (its index in the run).
    pub execution: u64,
    /// Its execution seed: a child replays under it.
    pub seed: u64,
    /// Its departures from the default scheduler.
    pub decisions: Arc<Vec<Decision>>,
    /// When (virtual ns) its newest new feature appeared.
    pub novel_at: u64,
    /// When it ended (virtual ns).
    pub ended: u64,
    /// Times it was a parent.
    pub picks: u64,
    /// Its children that found new coverage.
    pub finds: u64,
    /// The last execution in which it was added or a child of it found
    /// something.
    pub active: u64,
    /// Features its execution showed in all (new or not).
    pub covered: u64,
}

impl Entry {
    /// Its weight in the pick at execution `now`: 64 x (1 + finds) / (2 +
    /// picks), times 8 if it was active (added, or a child found something)
    /// in the last generation, 4 in the one before, 2 within four, times
    /// the square of the features it covered; at least 1. The newest and
    /// the deepest entries are the frontier: what they reached, no earlier
    /// entry did, and an execution that passed through more states gives
    /// its children more to build on (measured on examples/stages: without
    /// the depth factor, picks spread evenly over the five entries and the
    /// bug took 39 to 69 executions). Integers: the same pick on every host.
    pub fn energy(&self, now: u64) -> u64 {
        let age = now.saturating_sub(self.active);
        let recent = match age {
            a if a <= GENERATION => 8,
            a if a <= 2 * GENERATION => 4,
            a if a <= 4 * GENERATION => 2,
            _ => 1,
        };
        let depth = self.covered.clamp(1, 64);
        (64 * (1 + self.finds) * recent * depth * depth / (2 + self.picks)).max(1)
    }
}

/// Where a new execution starts.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Its execution seed.
    pub seed: u64,
    /// The entry it starts from (`None`: fresh).
    pub parent: Option<usize>,
    /// The parent's decisions, replayed before the cut.
    pub decisions: Arc<Vec<Decision>>,
    /// From this virtual time on the walk is new.
    pub cut: u64,
    /// The walk's own seed.
    pub walk_seed: u64,
}

/// The corpus as a generation's plans see it: each entry with its energy.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    entries: Vec<(Entry, u64)>,
}

impl Snapshot {
    /// Entries in the snapshot.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The plan of execution `execution` of a run with seed `run_seed`, from
/// `snapshot` (the corpus at the start of its generation). `fresh_seed` is
/// the seed an execution of its own would have.
pub fn plan(run_seed: u64, execution: u64, fresh_seed: u64, snapshot: &Snapshot) -> Plan {
    let mut rng = execution_rng(run_seed ^ PLAN_STREAM, execution);
    let walk_seed = mix64(rng.next_u64());
    let total: u64 = snapshot.entries.iter().map(|(_, w)| w).sum();
    if total == 0 || below(&mut rng, FRESH_ONE_IN) == 0 {
        return Plan { seed: fresh_seed, parent: None, decisions: Arc::new(Vec::new()), cut: 0, walk_seed };
    }
    let mut pick = below(&mut rng, total);
    let k = snapshot
        .entries
        .iter()
        .position(|(_, w)| {
            if pick < *w {
                true
            } else {
                pick -= w;
                false
            }
        })
        .expect("a pick below the total lands on an entry");
    let e = &snapshot.entries[k].0;
    let cut = e.novel_at + near(&mut rng, e.ended.saturating_sub(e.novel_at));
    Plan { seed: e.seed, parent: Some(k), decisions: e.decisions.clone(), cut, walk_seed }
}

/// A distance in [0, span], log-uniform: a bit length uniform in 0..=the
/// span's, then a value of at most that many bits. Most cuts fall soon
/// after what was new (an execution often idles long after its last
/// event: a uniform cut over its time would mostly land there), some far.
fn near(rng: &mut impl RngCore, span: u64) -> u64 {
    let bits = 64 - span.leading_zeros() as u64;
    let b = below(rng, bits + 1);
    if b == 0 {
        return 0;
    }
    let max = if b >= 64 { u64::MAX } else { (1u64 << b) - 1 };
    (rng.next_u64() & max).min(span)
}

/// Every feature seen so far and the entries that found them.
#[derive(Debug, Default)]
pub struct Corpus {
    entries: Vec<Entry>,
    /// Each feature: the execution that first showed it and when (virtual ns).
    seen: BTreeMap<String, (u64, u64)>,
}

impl Corpus {
    /// An empty corpus.
    pub fn new() -> Corpus {
        Corpus::default()
    }

    /// Takes in execution `execution` (observed in execution order), run
    /// under `plan`, that showed `features`: it becomes an entry when some
    /// feature is new. Returns the new features.
    pub fn observe(
        &mut self,
        execution: u64,
        plan: &Plan,
        features: &BTreeMap<String, u64>,
        decisions: &[Decision],
        ended: u64,
    ) -> Vec<String> {
        let new: Vec<(&String, u64)> =
            features.iter().filter(|(f, _)| !self.seen.contains_key(*f)).map(|(f, &t)| (f, t)).collect();
        if let Some(p) = plan.parent.and_then(|k| self.entries.get_mut(k)) {
            p.picks += 1;
            if !new.is_empty() {
                p.finds += 1;
                p.active = execution;
            }
        }
        if new.is_empty() {
            return Vec::new();
        }
        for (f, t) in &new {
            self.seen.insert((*f).clone(), (execution, *t));
        }
        let novel_at = new.iter().map(|(_, t)| *t).max().unwrap_or(0);
        self.entries.push(Entry {
            execution,
            seed: plan.seed,
            decisions: Arc::new(decisions.to_vec()),
            novel_at,
            ended: ended.max(novel_at),
            picks: 0,
            finds: 0,
            active: execution,
            covered: features.len() as u64,
        });
        new.into_iter().map(|(f, _)| f.clone()).collect()
    }

    /// The corpus as the generation starting at execution `next` sees it.
    pub fn snapshot(&self, next: u64) -> Snapshot {
        Snapshot { entries: self.entries.iter().map(|e| (e.clone(), e.energy(next))).collect() }
    }

    /// Each feature seen, with the execution that first showed it and when.
    pub fn seen(&self) -> &BTreeMap<String, (u64, u64)> {
        &self.seen
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The strategy of one coverage execution: the parent's decisions until the
/// cut, a weighted random walk of its own after.
pub struct CoverageWalk {
    prefix: Guided,
    cut: u64,
    exploring: bool,
    walk: RandomWalk,
    parent: Option<usize>,
}

impl CoverageWalk {
    /// The strategy for `plan`, walking with `weights` after the cut.
    pub fn new(plan: &Plan, weights: KindWeights) -> CoverageWalk {
        let mut walk = RandomWalk::new(plan.walk_seed, weights);
        walk.begin_execution(0);
        CoverageWalk {
            prefix: Guided::new(&plan.decisions),
            cut: plan.cut,
            exploring: plan.cut == 0,
            walk,
            parent: plan.parent,
        }
    }
}

impl Strategy for CoverageWalk {
    fn spec(&self) -> StrategySpec {
        let mut params = BTreeMap::from([("cut_ns".to_string(), self.cut.into())]);
        if let Some(p) = self.parent {
            params.insert("parent".to_string(), p.into());
        }
        StrategySpec { name: "coverage".into(), params }
    }

    fn begin_execution(&mut self, _execution: u64) -> bool {
        true
    }

    fn choose(&mut self, step: u64, enabled: &[EnabledAction]) -> usize {
        // Up to the cut the execution is the parent's, so its choice steps
        // and times are too: the first step whose earliest action is due
        // after the cut starts the new walk. (Strictly after: the step at
        // the cut itself may be the one that made the parent new, such as
        // the delivery that completed a reordering, and is replayed.)
        if !self.exploring && enabled.iter().map(|e| e.time.as_ns()).min().is_some_and(|t| t > self.cut) {
            self.exploring = true;
        }
        if self.exploring {
            self.walk.choose(step, enabled)
        } else {
            self.prefix.choose(step, enabled)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use engine::strategy::{default_choice, ActionKind::*};
    use simtime::VirtualTime;

    fn trace(lines: &[(u64, EventKind)]) -> Trace {
        let mut t = Trace::new();
        for (at, k) in lines {
            t.push(VirtualTime::from_ns(*at), engine::NodeId::new(1).unwrap(), k.clone());
        }
        t
    }

    fn console(text: &str) -> EventKind {
        EventKind::Console { text: text.into() }
    }

    #[test]
    fn features_name_reached_states_counts_and_faults_with_their_first_time() {
        let t = trace(&[
            (10, console("@reached a")),
            (20, console("@reached a")),
            (25, EventKind::Partition { description: "n1 | n2".into() }),
            (30, EventKind::Crash { detail: String::new() }),
            (40, console("@sometimes a")),
            (50, console("not a reach line")),
        ]);
        let f = features(&t);
        let want = [
            ("reached a", 10),
            ("reached a x1", 10),
            ("reached a x2", 20),
            ("reached a x3-4", 40),
            ("fault partition", 25),
            ("fault crash", 30),
            ("crash during partition", 30),
            ("reached a after partition", 40),
            ("reached a after crash", 40),
        ];
        assert_eq!(f, want.iter().map(|(n, t)| (n.to_string(), *t)).collect());
        assert_eq!([1, 2, 3, 4, 5, 8, 9].map(bucket), ["1", "2", "3-4", "3-4", "5-8", "5-8", "9-16"]);
    }

    fn fresh(seed: u64) -> Plan {
        Plan { seed, parent: None, decisions: Arc::new(Vec::new()), cut: 0, walk_seed: 1 }
    }

    #[test]
    fn only_new_features_make_an_entry_and_a_parent_is_credited() {
        let mut c = Corpus::new();
        let f1 = BTreeMap::from([("reached a".to_string(), 5)]);
        assert_eq!(c.observe(0, &fresh(100), &f1, &[], 50), vec!["reached a"]);
        assert!(c.observe(1, &fresh(101), &f1, &[], 50).is_empty(), "nothing new: no entry");
        assert_eq!(c.len(), 1);
        let child = Plan { parent: Some(0), seed: 100, ..fresh(100) };
        let f2 = BTreeMap::from([("reached a".to_string(), 5), ("reached b".to_string(), 30)]);
        assert_eq!(c.observe(2, &child, &f2, &[], 60), vec!["reached b"]);
        assert_eq!((c.entries[0].picks, c.entries[0].finds), (1, 1));
        assert_eq!((c.entries[1].seed, c.entries[1].novel_at, c.entries[1].ended), (100, 30, 60));
        assert_eq!(c.seen()["reached b"], (2, 30));
    }

    #[test]
    fn plans_are_a_function_of_seed_execution_and_snapshot() {
        let mut c = Corpus::new();
        let f = BTreeMap::from([("reached a".to_string(), 40)]);
        c.observe(0, &fresh(100), &f, &[], 90);
        let s = c.snapshot(8);
        let plans: Vec<Plan> = (8..200).map(|i| plan(7, i, 1000 + i, &s)).collect();
        let again: Vec<Plan> = (8..200).map(|i| plan(7, i, 1000 + i, &s)).collect();
        assert!(plans
            .iter()
            .zip(&again)
            .all(|(a, b)| (a.seed, a.parent, a.cut, a.walk_seed) == (b.seed, b.parent, b.cut, b.walk_seed)));
        let children = plans.iter().filter(|p| p.parent == Some(0)).count();
        assert!(children > 140 && children < 192, "about 7 in 8 start from the entry: {children}");
        for p in plans.iter().filter(|p| p.parent.is_some()) {
            assert_eq!(p.seed, 100, "a child replays under its parent's seed");
            assert!((40..=90).contains(&p.cut), "the cut keeps what was new: {}", p.cut);
        }
        let soon = plans.iter().filter(|p| p.parent.is_some() && p.cut < 56).count();
        assert!(soon * 2 > children, "most cuts fall in the first third after the new feature: {soon} of {children}");
        assert!(plans.iter().filter(|p| p.parent.is_none()).all(|p| p.seed >= 1000));
        assert!(plan(7, 3, 5, &Snapshot::default()).parent.is_none(), "an empty corpus: fresh");
    }

    #[test]
    fn energy_favours_recent_finds_and_fades_with_picks() {
        let e = Entry {
            execution: 0,
            seed: 0,
            decisions: Arc::new(Vec::new()),
            novel_at: 0,
            ended: 0,
            picks: 0,
            finds: 0,
            active: 0,
            covered: 1,
        };
        assert!(e.energy(1) > e.energy(100), "recently active");
        assert!(Entry { covered: 4, ..e.clone() }.energy(100) == 16 * e.energy(100), "deeper");
        let found = Entry { finds: 3, ..e.clone() };
        assert!(found.energy(100) > e.energy(100));
        let picked = Entry { picks: 30, ..e };
        assert_eq!(picked.energy(100), 2);
        assert!(picked.energy(1) > picked.energy(100));
    }

    #[test]
    fn the_walk_replays_the_parent_until_the_cut() {
        let set = |t: u64| {
            vec![
                EnabledAction::new(actor(1), RunNode, VirtualTime::from_ns(t)),
                EnabledAction::new(actor(2), RunNode, VirtualTime::from_ns(t + 1)),
            ]
        };
        let parent =
            vec![Decision { step: 0, action: EnabledAction::new(actor(2), RunNode, VirtualTime::from_ns(11)) }];
        let p = Plan { seed: 1, parent: Some(0), decisions: Arc::new(parent), cut: 1000, walk_seed: 9 };
        let mut w = CoverageWalk::new(&p, KindWeights::uniform());
        assert_eq!(w.choose(0, &set(10)), 1, "the parent's decision");
        assert_eq!(w.choose(1, &set(20)), default_choice(&set(20)), "the parent took the default here");
        // After the cut, a uniform walk: both choices come up.
        let picks: Vec<usize> = (2..66).map(|s| w.choose(s, &set(1001 + s))).collect();
        assert!(picks.contains(&0) && picks.contains(&1), "{picks:?}");
        assert_eq!(w.spec().params["parent"], 0);
    }
}
