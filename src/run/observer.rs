//! What a run does with its executions: a worker runs a group (an
//! execution and its crash-state siblings, [`UnitRunner`]); the observer
//! takes groups in execution order ([`Observer`]), keeps a record of each,
//! and writes the first failure out (failure file, trace, logs, pcaps,
//! report) and every later one's failure file, within the run's failure
//! file budget ([`FailureFiles`]). In execution order, so which executions
//! get one does not depend on `--jobs`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use engine::strategy::Strategy;
use engine::{DiskSpec, ExecutionResult, ExecutionSpec, FailureKind, HostFacts, Verdict};
use explore::failure_file::{self, FailureRecord, RunParams, StrategySpec};
use explore::strategy::Guided;
use indicatif::ProgressBar;

use super::execution::{execute_one, Executed, Pcaps};
use super::parallel::Flow;
use super::summary::{CrashPointSummary, CriticalSummary, ExecutionFigures, ExecutionRecord, FailureFiles};
use super::warm::WarmBoot;
use super::RunOptions;
use crate::cluster::Cluster;
use crate::image::Images;
use crate::outputs::{write_failure, write_pcaps};

/// One execution of a group, as its worker left it.
pub(crate) struct Done {
    pub spec: ExecutionSpec,
    pub executed: Executed,
    /// (crash number, state) a crash-state sibling applied.
    pub crash_state: Option<(u32, u64)>,
}

/// An execution and its crash-state siblings, in the order a one-job run
/// runs them.
pub(crate) struct Group {
    pub runs: Vec<Done>,
    /// How many executions explored the group's crash point (1 when its
    /// states were sampled, not enumerated).
    pub explored: u64,
}

impl Group {
    pub fn failed(&self) -> bool {
        self.runs.iter().any(|d| d.executed.result.verdict.failure().is_some())
    }
}

/// What a worker needs to run groups.
pub(crate) struct UnitRunner<'a> {
    /// The run's execution spec (its runtime set); each execution gets its
    /// seed, scratch directory and the run's cancel flag.
    pub base: &'a ExecutionSpec,
    pub disk: &'a Option<DiskSpec>,
    pub until_failure: bool,
    /// Set when the run stops: the executions still running end.
    pub cancel: Arc<AtomicBool>,
    /// `--warm-start` (fork): executions fork from the job's boot.
    pub fork: bool,
}

impl UnitRunner<'_> {
    /// Runs execution `unit` with `seed` under `strategy` (its
    /// `begin_execution` already called), then, when its crash point has
    /// few enough disk crash states, every other state in a sibling
    /// execution. `label` names its scratch directories (unique in the
    /// run).
    ///
    /// A sibling of an ordinary run replays the execution's decisions up
    /// to the crash (`Guided`) and applies its state. In warm-start mode it
    /// is instead the execution under the same strategy with its state
    /// forced: with `fork` (`--warm-start`) every execution forks from the
    /// job's boot in `warm` (booted at its first execution) and its
    /// siblings fork from its crash point; `--warm-start cold` runs the
    /// same siblings from scratch, the strategy begun again for `unit`.
    pub fn group(
        &self,
        unit: u64,
        seed: u64,
        strategy: &mut dyn Strategy,
        label: &str,
        warm: &mut Option<WarmBoot>,
    ) -> Result<Group> {
        let mut spec = self.base.clone();
        spec.seed = seed;
        spec.cancel = Some(self.cancel.clone());
        if self.fork {
            return self.forked_group(spec, strategy, label, warm);
        }
        let executed = execute_one(&mut spec, strategy, label)?;
        let explored = self.explored(&executed);
        let siblings =
            self.enumerated_crash_point(&executed).and_then(|p| p.chosen.map(|k| (p.crash, k, p.states as u64)));
        let decisions = executed.result.decisions.clone();
        let mut failed = executed.result.verdict.failure().is_some();
        let mut runs = vec![Done { spec: spec.clone(), executed, crash_state: None }];
        if let Some((crash, chosen, states)) = siblings {
            for k in (0..states).filter(|&k| k != chosen) {
                if self.until_failure && failed {
                    break;
                }
                let mut s = spec.clone();
                s.explore.crash_states.insert(crash, k);
                let label = format!("{label}-s{k}");
                let e = if spec.boot_seed.is_some() {
                    strategy.begin_execution(unit);
                    execute_one(&mut s, strategy, &label)?
                } else {
                    execute_one(&mut s, &mut Guided::new(&decisions), &label)?
                };
                failed |= e.result.verdict.failure().is_some();
                runs.push(Done { spec: s, executed: e, crash_state: Some((crash, k)) });
            }
        }
        Ok(Group { runs, explored })
    }

    /// [`Self::group`] with `fork`: the execution `spec` from the job's boot
    /// in `warm` (booted now if it is the job's first), its siblings from its
    /// crash point.
    fn forked_group(
        &self,
        spec: ExecutionSpec,
        strategy: &mut dyn Strategy,
        label: &str,
        warm: &mut Option<WarmBoot>,
    ) -> Result<Group> {
        let w = match warm {
            Some(w) => w,
            None => warm.insert(WarmBoot::boot(self.base, self.cancel.clone())?),
        };
        let (executed, siblings) = w.execute(&spec, strategy, label)?;
        let explored = self.explored(&executed);
        let mut runs = vec![Done { spec: spec.clone(), executed, crash_state: None }];
        for (crash, k, executed) in siblings {
            let mut s = spec.clone();
            s.explore.crash_states.insert(crash, k);
            runs.push(Done { spec: s, executed, crash_state: Some((crash, k)) });
        }
        if self.until_failure {
            // As a cold group stops: after its first failing execution.
            if let Some(first) = runs.iter().position(|d| d.executed.result.verdict.failure().is_some()) {
                runs.truncate(first + 1);
            }
        }
        Ok(Group { runs, explored })
    }

    /// `executed`'s first crash point, if its disk states were enumerated
    /// (few enough): the one whose states its siblings explore.
    fn enumerated_crash_point<'e>(&self, executed: &'e Executed) -> Option<&'e engine::CrashPoint> {
        let d = self.disk.as_ref()?;
        executed.result.crash_points.first().filter(|p| p.enumerable(d.enumerate))
    }

    /// Executions that explored `executed`'s crash point: its crash states
    /// when they were enumerated, else 1.
    fn explored(&self, executed: &Executed) -> u64 {
        self.enumerated_crash_point(executed).map_or(1, |p| p.states as u64)
    }
}

/// What an observer kept of a run.
pub(crate) struct Finished {
    pub executions: Vec<ExecutionRecord>,
    pub critical: Option<CriticalSummary>,
    pub last: Option<(ExecutionResult, Pcaps)>,
    pub files: FailureFiles,
}

/// Takes groups in execution order and keeps the run's records.
pub(crate) struct Observer<'a> {
    cluster: &'a Cluster,
    images: &'a Images,
    /// Recorded in the failure file.
    host: &'a HostFacts,
    opts: &'a RunOptions,
    strategy_spec: StrategySpec,
    bar: &'a ProgressBar,
    records: Vec<ExecutionRecord>,
    virtual_ns_total: u64,
    critical: Option<CriticalSummary>,
    /// Failing executions so far (the first one's files are written).
    failures: u64,
    /// The failure files written so far, against the budget.
    files: FailureFiles,
    last: Option<(ExecutionResult, Pcaps)>,
}

impl<'a> Observer<'a> {
    pub fn new(
        cluster: &'a Cluster,
        images: &'a Images,
        host: &'a HostFacts,
        opts: &'a RunOptions,
        strategy_spec: StrategySpec,
        bar: &'a ProgressBar,
    ) -> Self {
        Observer {
            cluster,
            images,
            host,
            opts,
            strategy_spec,
            bar,
            records: Vec::new(),
            virtual_ns_total: 0,
            critical: None,
            failures: 0,
            files: FailureFiles { budget_bytes: opts.failure_budget_bytes, ..FailureFiles::default() },
            last: None,
        }
    }

    /// Counts execution `index`'s group. Stops the run after a failure
    /// when the run stops at the first.
    pub fn observe(&mut self, index: u64, group: Group) -> Result<Flow> {
        let explored = group.explored;
        for done in group.runs {
            let Done { spec, executed: Executed { result, pcaps }, crash_state } = done;
            let names = self.cluster.node_names();
            let mut record = ExecutionRecord {
                execution: index,
                crash_state: crash_state.map(|(_, k)| k),
                seed: spec.seed,
                virtual_ns: result.ended_at.as_ns(),
                boot_wall_seconds: result.boot_wall.map(|b| b.as_secs_f64()),
                figures: ExecutionFigures {
                    trace_hash: result.trace_hash.clone(),
                    choice_points: result.choice_points,
                    race_points: result.race_points,
                    trace_events: result.trace.len(),
                    grants: result.grants,
                    round_trips: result.round_trips,
                    crashes: result.crashes,
                    power_failures: result.power_failures,
                    conn_resets: result.conn_faults.resets,
                    conn_stalls: result.conn_faults.stalls,
                    lost_flushes: result.disk_faults.lost_flushes,
                    corrupt_reads: result.disk_faults.corrupt_reads,
                    write_errors: result.disk_faults.write_errors,
                    misdirected_writes: result.disk_faults.misdirected_writes,
                    pauses: result.node_faults.pauses,
                    kills: result.node_faults.kills,
                    clock_bumps: result.node_faults.clock_bumps,
                    clock_strobes: result.node_faults.clock_strobes,
                    clock_offsets: result.node_faults.clock_offsets,
                    clock_drifts: result.node_faults.clock_drifts,
                    anomalies: result.anomalies.clone(),
                    network: result.network,
                    failure: result.verdict.failure().cloned(),
                },
                failure_file: None,
                crash_point: result.crash_points.first().filter(|_| crash_state.is_none()).map(|p| CrashPointSummary {
                    execution: index,
                    node: p.node.clone(),
                    virtual_seconds: p.time.as_secs_f64(),
                    volatile_writes: p.volatile_writes,
                    dirty_files: p.dirty_files,
                    states: p.states,
                    states_exact: p.states_exact,
                    explored,
                }),
                reached: checker::reach::reached(&result.trace),
                antithesis: checker::antithesis::properties(&result.trace, |a| {
                    // Console lines come from nodes only (the engine would be its number, 0).
                    let name = |id: engine::NodeId| names.get(id.index()).cloned().unwrap_or_else(|| id.to_string());
                    a.node().map_or_else(|| a.number().to_string(), name)
                }),
                test_composer: checker::antithesis::composer_commands(result.trace.events()),
            };
            if let Some(dir) = &self.opts.pcap {
                write_pcaps(&dir.join(record.label()), &pcaps)?;
            }
            self.virtual_ns_total += result.ended_at.as_ns();
            if matches!(result.verdict, Verdict::Fail(_)) {
                record.failure_file = if self.failures == 0 {
                    Some(self.write_first_failure(&spec, &result, &pcaps, &record)?)
                } else {
                    self.write_later_failure(&spec, &result, &record)?
                };
                self.failures += 1;
            }
            let failed = record.figures.failure.is_some();
            self.records.push(record);
            self.last = Some((result, pcaps));
            if failed && self.opts.until_failure {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }

    /// The failure file's record of a failing execution.
    fn failure_record(
        &self,
        spec: &ExecutionSpec,
        result: &ExecutionResult,
        record: &ExecutionRecord,
    ) -> FailureRecord<engine::strategy::Decision> {
        let verdict = result.verdict.failure().expect("only a failing execution is written as a failure");
        FailureRecord {
            format_version: failure_file::FORMAT_VERSION,
            images_hash: self.images.hash.clone(),
            cluster_dir: self.cluster.dir.canonicalize().unwrap_or(self.cluster.dir.clone()),
            seed: self.opts.seed,
            strategy: self.strategy_spec.clone(),
            // From the spec the execution ran with: its seed (dfs seeds by
            // round, see dfs_round_seed), explore settings and runtime.
            run: RunParams {
                execution_seed: spec.seed,
                window_ns: simtime::span_ns(spec.explore.window),
                max_crashes: spec.explore.max_crashes,
                runtime: spec.runtime,
                crash_states: spec.explore.crash_states.clone(),
                boot_seed: spec.boot_seed,
                ..RunParams::default()
            },
            execution_index: record.execution,
            actions: result.decisions.clone(),
            failure: verdict.clone(),
            trace_hash: result.trace_hash.clone(),
            shrunk: None,
            host: Some(self.host.clone()),
        }
    }

    /// Counts a failure file of `bytes` against the budget: false (and
    /// said once, unless quiet) when it does not fit.
    fn fits(&mut self, bytes: u64, label: &str) -> bool {
        if self.files.over_budget == 0 && self.files.bytes + bytes <= self.files.budget_bytes {
            self.files.written += 1;
            self.files.bytes += bytes;
            return true;
        }
        if self.files.over_budget == 0 && !self.opts.quiet {
            self.bar.suspend(|| {
                eprintln!(
                    "note: the failure file budget ({} MiB, --failure-budget) is spent: {label} and later failing \
                     executions get no failure file (the JSON line counts them in failure_files.over_budget)",
                    self.files.budget_bytes >> 20
                )
            });
        }
        self.files.over_budget += 1;
        false
    }

    /// A later failing execution: its failure file alone, in
    /// OUT/failures/LABEL/, when the budget has room for it.
    fn write_later_failure(
        &mut self,
        spec: &ExecutionSpec,
        result: &ExecutionResult,
        record: &ExecutionRecord,
    ) -> Result<Option<PathBuf>> {
        let failure = self.failure_record(spec, result, record);
        let bytes = failure_file::encode(&failure)?.len() as u64;
        if !self.fits(bytes, &record.label()) {
            return Ok(None);
        }
        let dir = self.opts.out.join("failures").join(record.label());
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("failure.json");
        failure_file::save(&file, &failure).with_context(|| format!("cannot write {}", file.display()))?;
        Ok(Some(file))
    }

    /// Writes the run's first failure: its failure file (what replays it),
    /// and for a liveness failure the critical transition. Always written;
    /// its failure file counts against the budget.
    fn write_first_failure(
        &mut self,
        spec: &ExecutionSpec,
        result: &ExecutionResult,
        pcaps: &Pcaps,
        record: &ExecutionRecord,
    ) -> Result<PathBuf> {
        let failure = self.failure_record(spec, result, record);
        let bytes = failure_file::encode(&failure)?.len() as u64;
        self.files.written += 1;
        self.files.bytes += bytes;
        let mut extra = Vec::new();
        let liveness = result.verdict.failure().is_some_and(|f| f.kind == FailureKind::Liveness);
        if liveness && self.opts.critical_walks > 0 {
            self.bar.set_message("searching for the critical transition".to_string());
            self.critical =
                super::critical::critical_transition(spec, result, &failure, self.opts.critical_walks, self.bar)?;
            if let Some(c) = &self.critical {
                extra.push(format!(
                    "Critical transition (MaceMC): step {} at {:.6} s virtual ({}); \
                     from the state before it fault-free random walks still reached a live state, \
                     from the state after it none of {} did ({} probes).",
                    c.step,
                    c.virtual_seconds,
                    c.action.as_deref().unwrap_or("?"),
                    c.walks_per_probe,
                    c.probes
                ));
            }
        }
        let dir = self.opts.out.join("failures").join(record.label());
        write_failure(&dir, self.cluster, result, pcaps, &failure, &extra)
    }

    /// The progress bar's figures so far.
    pub fn progress(&self, wall: f64) -> String {
        let failures = self.failures;
        format!(
            "{failures} failed, {:.0}x virtual/wall, {:.0} executions/hour",
            self.virtual_ns_total as f64 / 1e9 / wall.max(1e-9),
            self.records.len() as f64 * 3600.0 / wall.max(1e-9)
        )
    }

    /// The records, the critical transition, the last execution with its
    /// pcaps, and the failure files written.
    pub fn finish(self) -> Finished {
        Finished { executions: self.records, critical: self.critical, last: self.last, files: self.files }
    }
}
