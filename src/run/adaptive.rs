//! Strategies whose executions depend on earlier ones, and what they keep
//! between executions.
//!
//! - **Delay bounding with a measured horizon** (`delay`, `delay-all`
//!   without `--horizon`): execution 0 is the default schedule (no
//!   delays: delay bounding's first placement anyway), and its number of
//!   races (choice points a guest can tell apart, `engine::strategy::is_race`)
//!   is the horizon of every later execution, so that delays land inside
//!   the execution instead of after its end. A shard that does not run execution 0 runs it
//!   first on its own, unreported: every shard measures the same horizon.
//! - **Coverage** (`coverage`): a corpus of executions kept for what they
//!   reached first (`explore::strategy::coverage`), advanced in execution
//!   order one generation at a time.
//!
//! Either way the runner gates the units (`Gate`): a unit starts only
//! once the units it depends on were observed, so what it sees of them does
//! not depend on `--jobs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Result;
use engine::strategy::Strategy;
use explore::strategy::coverage::{self, Corpus, CoverageWalk, Plan, Snapshot};
use explore::strategy::DelayBounded;

use super::execution::weights;
use super::observer::{Group, UnitRunner};
use super::parallel::Gate;
use super::summary::{CoverageSummary, FirstSeen};
use super::{RunOptions, StrategyKind};

/// What a run keeps between its executions.
pub(crate) enum Adaptive {
    /// Executions are independent.
    None,
    /// Delay bounding: the horizon measured on execution 0.
    Horizon(OnceLock<u64>),
    /// Coverage: the corpus, and each generation's view of it.
    Coverage(Mutex<CoverageRun>),
}

pub(crate) struct CoverageRun {
    corpus: Corpus,
    /// The corpus as each generation's plans see it, by generation.
    snapshots: BTreeMap<u64, Arc<Snapshot>>,
}

impl Adaptive {
    pub fn for_run(opts: &RunOptions) -> Adaptive {
        match opts.strategy.kind {
            StrategyKind::Delay | StrategyKind::DelayAll if opts.strategy.measure_horizon => {
                Adaptive::Horizon(OnceLock::new())
            }
            StrategyKind::Coverage => Adaptive::Coverage(Mutex::new(CoverageRun {
                corpus: Corpus::new(),
                snapshots: BTreeMap::from([(0, Arc::new(Snapshot::default()))]),
            })),
            _ => Adaptive::None,
        }
    }

    /// How the run's units wait for each other.
    pub fn gate(&self) -> Gate {
        match self {
            Adaptive::None => Gate::None,
            // A shard that measured it before its units waits for nothing.
            Adaptive::Horizon(h) if h.get().is_some() => Gate::None,
            Adaptive::Horizon(_) => Gate::First,
            Adaptive::Coverage(_) => Gate::Generations(coverage::GENERATION),
        }
    }

    /// Before the units: a shard without execution 0 measures the horizon
    /// on it alone (the execution is not part of its results).
    pub fn prepare(&self, opts: &RunOptions, runner: &UnitRunner) -> Result<()> {
        if let Adaptive::Horizon(h) = self {
            if opts.shard.unit(0) != 0 {
                let mut first = default_schedule(opts.seed);
                let g = runner.group(0, engine::execution_seed(opts.seed, 0), &mut first, "horizon", &mut None)?;
                let _ = h.set(race_points(&g));
            }
        }
        Ok(())
    }

    /// The measured horizon, once known.
    pub fn horizon(&self) -> Option<u64> {
        match self {
            Adaptive::Horizon(h) => h.get().copied(),
            _ => None,
        }
    }

    /// Unit `unit`'s own strategy and execution seed, and for coverage its
    /// plan (`None`: the worker's strategy runs it, under the unit's seed).
    pub fn unit_strategy(
        &self,
        opts: &RunOptions,
        explore: &engine::ExploreSpec,
        unit: u64,
    ) -> Option<(Box<dyn Strategy>, u64, Option<Plan>)> {
        let seed = engine::execution_seed(opts.seed, unit);
        match self {
            Adaptive::None => None,
            // Execution 0 before the horizon is known: the default
            // schedule, which measures it. After, the worker's own strategy
            // (made again with the horizon) runs every unit.
            Adaptive::Horizon(h) => {
                h.get().is_none().then(|| (Box::new(default_schedule(opts.seed)) as Box<dyn Strategy>, seed, None))
            }
            Adaptive::Coverage(c) => {
                let snapshot = {
                    let c = c.lock().unwrap();
                    c.snapshots
                        .get(&(unit / coverage::GENERATION))
                        .cloned()
                        .expect("the runner starts a generation after its snapshot is taken")
                };
                let plan = coverage::plan(opts.seed, unit, seed, &snapshot);
                let s = Box::new(CoverageWalk::new(&plan, weights(explore)));
                Some((s, plan.seed, Some(plan)))
            }
        }
    }

    /// Takes in unit `unit`'s outcome, in unit order, before the observer
    /// does.
    pub fn observe(&self, unit: u64, group: &Group, plan: Option<&Plan>) {
        match self {
            Adaptive::None => {}
            Adaptive::Horizon(h) => {
                if unit == 0 {
                    let _ = h.set(race_points(group));
                }
            }
            Adaptive::Coverage(c) => {
                let Some(plan) = plan else { return };
                let Some(first) = group.runs.first() else { return };
                let r = &first.executed.result;
                let mut c = c.lock().unwrap();
                c.corpus.observe(unit, plan, &coverage::features(&r.trace), &r.decisions, r.ended_at.as_ns());
                let next = unit + 1;
                if next.is_multiple_of(coverage::GENERATION) {
                    let s = Arc::new(c.corpus.snapshot(next));
                    c.snapshots.insert(next / coverage::GENERATION, s);
                    // A generation's plans read only their own snapshot.
                    c.snapshots.retain(|&g, _| g + 1 >= next / coverage::GENERATION);
                }
            }
        }
    }

    /// Coverage over the run, for the record.
    pub fn summary(&self) -> Option<CoverageSummary> {
        let Adaptive::Coverage(c) = self else { return None };
        let c = c.lock().unwrap();
        let mut seen: Vec<(u64, u64, &String)> = c.corpus.seen().iter().map(|(f, &(e, at))| (e, at, f)).collect();
        seen.sort();
        let first_seen = seen
            .into_iter()
            .map(|(execution, at, f)| FirstSeen { feature: f.clone(), execution, virtual_seconds: at as f64 / 1e9 })
            .collect();
        Some(CoverageSummary { corpus: c.corpus.len(), first_seen })
    }
}

/// Execution 0 of a measured-horizon run: delay bounding with no delay,
/// the default schedule.
fn default_schedule(seed: u64) -> DelayBounded {
    DelayBounded::sampling(seed, 0, 1)
}

/// The races of a group's execution (at least 1: a horizon).
fn race_points(group: &Group) -> u64 {
    group.runs.first().map_or(1, |d| d.executed.result.race_points.max(1))
}
