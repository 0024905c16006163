//! `simcluster replay` and `simcluster shrink`: re-running a recorded
//! failure from its failure file.
//!
//! A failure file holds the run seed, the execution index and the
//! strategy's decisions (its departures from the default scheduler). With
//! the execution seed (derived from both) and [`Guided`] over the
//! decisions, the engine repeats the execution exactly, whatever strategy
//! found it, exhaustive ones included.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use engine::strategy::Decision;
use engine::{ExecutionResult, ExploreSpec, Failure, HostClass, HostFacts, RuntimeKind};
use explore::failure_file::{self, FailureRecord, Shrunk};
use explore::shrink;
use explore::strategy::fault_plan::{self, Fault};
use explore::strategy::{FaultPlan, Guided};
use serde::Serialize;

use crate::cluster::Cluster;
use crate::image::{self, Images};
use crate::outputs::{write_execution, write_failure, write_pcaps, write_report};
use crate::run::{execute_one, explore_for, failure_line, spec_for, Executed, OpenImages, RunOptions};
use crate::BadInput;

/// A loaded failure file with the cluster and images it needs.
pub(crate) struct Loaded {
    pub(crate) record: FailureRecord<Decision>,
    pub(crate) cluster: Cluster,
    images: Images,
    open: OpenImages,
    explore: ExploreSpec,
    /// The runtime the failure was found on.
    runtime: RuntimeKind,
    /// This host.
    host: HostFacts,
}

pub(crate) fn load(file: &Path, quiet: bool) -> Result<Loaded> {
    let record: FailureRecord<Decision> = failure_file::load(file).map_err(|e| BadInput(e.to_string()))?;
    let cluster = Cluster::load(&record.cluster_dir)
        .map_err(|e| BadInput(format!("{}: the cluster it was recorded on cannot be loaded: {e}", file.display())))?;
    let images = image::build(&cluster, quiet)?;
    let run = &record.run;
    let mut explore = explore_for(&cluster, Some(run.window_ns), Some(run.max_crashes));
    explore.crash_states = run.crash_states.clone();
    explore.skip_partitions = run.skip_partitions.iter().copied().collect();
    let runtime = run.runtime;
    let host = crate::run::host_facts(&cluster, runtime)?;
    if let Some(recorded) = record.host.as_ref().filter(|r| host.differs_for_replay(r)) {
        // Always said (not progress): it is why a replay may differ.
        eprintln!(
            "note: recorded on {}, replaying on {}: guest programs that read CPUID may see another machine, so the \
             replay may differ",
            recorded.class(),
            host.class()
        );
    }
    if runtime == RuntimeKind::Kvm {
        // Same checks and messages as `run --runtime kvm`.
        crate::run::choose_runtime(Some(runtime), &crate::run::HostVirt::detect())
            .map_err(|e| BadInput(format!("{}: recorded under KVM: {}", file.display(), e.0)))?;
    }
    // Compared as the runtime boots them: under KVM the hash names the KVM kernel.
    let images = crate::run::images_for_runtime(images, runtime, quiet)?;
    if images.hash != record.images_hash && !quiet {
        eprintln!(
            "warning: the images of {} changed since this failure was recorded; the replay may differ",
            cluster.dir.display()
        );
    }
    let open = OpenImages::open(&cluster, &images)?;
    Ok(Loaded { record, cluster, images, open, explore, runtime, host })
}

impl Loaded {
    /// Runs the recorded execution with `decisions` (and the failure
    /// file's fault plan, when shrink wrote one).
    fn execute(&self, opts: &RunOptions, decisions: &[Decision], label: &str) -> Result<Executed> {
        let plan = self.record.run.faults.clone();
        Ok(self.execute_planned(opts, decisions, plan, &self.explore.skip_partitions, label)?.0)
    }

    /// Runs it with `decisions`, taking only the faults of `plan` (`None`:
    /// any) and skipping the partitions `skip`; also returns the faults
    /// the strategy took.
    fn execute_planned(
        &self,
        opts: &RunOptions,
        decisions: &[Decision],
        plan: Option<Vec<Fault>>,
        skip: &BTreeSet<u32>,
        label: &str,
    ) -> Result<(Executed, Vec<Fault>)> {
        let mut spec = self.spec(opts);
        spec.explore.skip_partitions = skip.clone();
        let mut guided = FaultPlan::new(Guided::new(decisions), plan);
        let executed = execute_one(&mut spec, &mut guided, label)?;
        Ok((executed, guided.taken))
    }

    /// The spec of the recorded execution, as `run` made it.
    pub(crate) fn spec(&self, opts: &RunOptions) -> engine::ExecutionSpec {
        let seed = self.record.run.execution_seed;
        let mut spec = spec_for(
            &self.cluster,
            &self.images,
            &self.open,
            opts.time_limit_ns,
            opts.watchdog,
            self.explore.clone(),
            seed,
        );
        spec.runtime = self.runtime;
        spec.boot_seed = self.record.run.boot_seed;
        spec.lookahead = opts.lookahead;
        spec
    }

    /// The strategy that repeats the recorded execution: its decisions,
    /// within the failure file's fault plan when shrink wrote one.
    pub(crate) fn replayer(&self) -> FaultPlan<Guided> {
        FaultPlan::new(Guided::new(&self.record.actions), self.record.run.faults.clone())
    }
}

/// The result of `simcluster replay`.
#[derive(Debug, Serialize)]
pub struct ReplaySummary {
    /// The same trace hash and the same failure as recorded.
    pub reproduced: bool,
    /// The replay's trace hash.
    pub trace_hash: String,
    /// The recorded one.
    pub expected_trace_hash: String,
    /// The replay's failure (`kind`, `node`, `time`, `message`); null when
    /// it passed.
    pub failure: Option<Failure>,
    /// The recorded failure.
    pub expected_failure: Failure,
    /// The images hash is the recorded one (false: the cluster directory or
    /// the kernel changed since).
    pub images_match: bool,
    /// Where the replayed trace first departs from the recorded one (the
    /// trace.jsonl beside the failure file), when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Divergence>,
    /// This host's class (cpu vendor, CPUID faulting).
    pub host: HostClass,
    /// The recording host's class; null when the failure file records none.
    pub recorded_host: Option<HostClass>,
    /// The two hosts differ in what guests see (see
    /// `HostFacts::differs_for_replay`); false when the recording host is
    /// unknown.
    pub host_differs: bool,
    /// Why a replay that did not reproduce most likely differs (the host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub likely_cause: Option<String>,
    /// The replayed execution's virtual time.
    pub virtual_seconds: f64,
    /// Wall time of the replay.
    pub wall_seconds: f64,
}

/// The first trace event where a replay departs from the recording.
#[derive(Debug, Serialize)]
pub struct Divergence {
    /// 1-based line of trace.jsonl.
    pub line: usize,
    /// The recorded event (None: the recording ended first).
    pub expected: Option<String>,
    /// The replayed event (None: the replay ended first).
    pub actual: Option<String>,
}

/// Compares two traces line by line; None when they are the same.
fn first_divergence(expected: &str, actual: &str) -> Option<Divergence> {
    let (mut e, mut a) = (expected.lines(), actual.lines());
    let mut line = 0;
    loop {
        line += 1;
        match (e.next(), a.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => return Some(Divergence { line, expected: x.map(str::to_owned), actual: y.map(str::to_owned) }),
        }
    }
}

/// `simcluster replay FILE`.
pub fn replay(file: &Path, opts: &RunOptions) -> Result<ReplaySummary> {
    let l = load(file, opts.quiet)?;
    let began = Instant::now();
    let Executed { result, pcaps } = l.execute(opts, &l.record.actions, "replay")?;
    write_pcaps(&opts.out.join("replay"), &pcaps)?;
    let reproduced = result.trace_hash == l.record.trace_hash && result.verdict.failure() == Some(&l.record.failure);
    write_execution(&opts.out.join("replay"), &l.cluster, &result)?;
    // report.txt and report.html of the replayed execution, as `run` writes
    // them for a failure.
    let said = format!(
        "replay of {}: {}",
        file.display(),
        if reproduced { "reproduced (same trace hash, same failure)" } else { "NOT reproduced" }
    );
    write_report(&opts.out.join("replay"), &l.cluster, &result, &l.record, &[said])?;
    // The recording's trace, if it is still beside the failure file, says
    // where a non-reproducing replay went its own way.
    let divergence = match std::fs::read_to_string(file.with_file_name("trace.jsonl")) {
        Ok(recorded) if result.trace_hash != l.record.trace_hash => {
            first_divergence(&recorded, &result.trace.to_jsonl())
        }
        _ => None,
    };
    let recorded_host = l.record.host.as_ref();
    let host_differs = recorded_host.is_some_and(|r| l.host.differs_for_replay(r));
    let likely_cause = (host_differs && result.trace_hash != l.record.trace_hash).then(|| {
        let r = recorded_host.expect("host_differs needs a recorded host");
        format!(
            "the host: recorded on {}, replayed on {} (guest programs that read CPUID saw another machine)",
            r.class(),
            l.host.class()
        )
    });
    Ok(ReplaySummary {
        reproduced,
        trace_hash: result.trace_hash.clone(),
        expected_trace_hash: l.record.trace_hash.clone(),
        failure: result.verdict.failure().cloned(),
        expected_failure: l.record.failure.clone(),
        images_match: l.images.hash == l.record.images_hash,
        divergence,
        host: l.host.class(),
        recorded_host: recorded_host.map(HostFacts::class),
        host_differs,
        likely_cause,
        virtual_seconds: result.ended_at.as_ns() as f64 / 1e9,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}

/// The result of `simcluster shrink`.
#[derive(Debug, Serialize)]
pub struct ShrinkSummary {
    /// The failing execution's replayable trace (its decisions: the actions
    /// where the schedule departs from the default) got strictly shorter,
    /// or it kept fewer faults.
    pub shorter: bool,
    /// Decisions of the recorded execution.
    pub original_decisions: usize,
    /// Decisions of the shrunk one.
    pub decisions: usize,
    /// The faults of the recorded execution (a crash, a power failure, a
    /// partition, a pause, a clock jump, a kill, a connection reset or
    /// stall; "Crash n2 at 19.150000 s"), in time order.
    pub original_faults: Vec<String>,
    /// The faults of the shrunk execution: the smallest set found that
    /// still fails (every other one removed with its interval).
    pub faults: Vec<String>,
    /// Trace events of the recorded execution.
    pub original_events: usize,
    /// Trace events of the shrunk one.
    pub events: usize,
    /// Virtual time of the recorded execution.
    pub original_virtual_seconds: f64,
    /// Virtual time of the shrunk one.
    pub virtual_seconds: f64,
    /// Replays run, the original's included.
    pub executions: u64,
    /// Why the search stopped before it was done ("time budget",
    /// "max executions"); null when it ran to the end (every single fault
    /// and decision left is needed, as far as it could tell).
    pub stopped: Option<String>,
    /// The shrunk execution's failure, as one line.
    pub failure: String,
    /// The shrunk execution's trace hash.
    pub trace_hash: String,
    /// The shrunk failure file (under OUT/shrunk/).
    pub failure_file: PathBuf,
    /// Wall time of the whole search.
    pub wall_seconds: f64,
}

/// `simcluster shrink`'s limits.
#[derive(Debug, Clone, Copy)]
pub struct ShrinkLimits {
    /// Replays to spend at most, the original's included.
    pub max_executions: u64,
    /// Wall time to spend at most (`None`: no limit); the search stops
    /// with the best execution found so far.
    pub time_budget: Option<Duration>,
}

/// `simcluster shrink FILE`: removes whole faults first (each with its
/// interval: a crash and its restart, a partition and its heal, a pause
/// and its resume), then drops decisions (ddmin), while the execution
/// still fails the same way with a trace no longer than the original,
/// within `limits`; writes the result under OUT/shrunk/. Progress on
/// stderr, one line per replay (none with --quiet).
pub fn shrink(file: &Path, opts: &RunOptions, limits: ShrinkLimits) -> Result<ShrinkSummary> {
    let l = load(file, opts.quiet)?;
    let began = Instant::now();
    let names = l.cluster.node_names();
    let plan = l.record.run.faults.clone();
    let (original, taken) =
        l.execute_planned(opts, &l.record.actions, plan, &l.explore.skip_partitions, "shrink-original")?;
    let original_events = original.result.trace.len();
    let original_virtual_seconds = original.result.ended_at.as_ns() as f64 / 1e9;
    if original.result.verdict.failure() != Some(&l.record.failure) {
        return Err(BadInput(format!(
            "{}: the recorded failure does not reproduce (got {:?}); replay it to see how it differs",
            file.display(),
            failure_line(&original.result)
        ))
        .into());
    }
    let original_faults = fault_plan::faults_of(&taken, original.result.trace.events());
    let best = Best {
        faults: original_faults.clone(),
        decisions: l.record.actions.clone(),
        executed: original,
        actual_faults: original_faults.clone(),
        plan: l.record.run.faults.clone(),
        skip: l.explore.skip_partitions.clone(),
    };
    let mut search = Search {
        l: &l,
        opts,
        limits,
        began,
        original_events,
        all_faults: original_faults.clone(),
        best,
        executions: 1,
        stopped: None,
        host_error: None,
        answers: Default::default(),
    };
    search.say(&format!(
        "shrink: the recorded failure reproduces ({} faults, {} decisions); removing faults first",
        original_faults.len(),
        l.record.actions.len()
    ));
    search.remove_faults()?;
    search.say(&format!(
        "shrink: {} of {} faults needed; dropping decisions",
        search.best.faults.len(),
        original_faults.len()
    ));
    search.drop_decisions()?;
    let Search { best, executions, stopped, .. } = search;
    let result: &ExecutionResult = &best.executed.result;
    let record = l.shrunk_record(&best, result);
    let describe = |fs: &[Fault]| fs.iter().map(|f| f.describe(&names)).collect::<Vec<_>>();
    let (faults, original_list) = (describe(&best.actual_faults), describe(&original_faults));
    let mut extra = vec![format!(
        "Shrunk from {} faults, {} decisions and {} trace events to {} faults, {} decisions and {} events ({executions} \
         executions{}).",
        original_faults.len(),
        l.record.actions.len(),
        original_events,
        faults.len(),
        best.decisions.len(),
        result.trace.len(),
        stopped.as_deref().map(|s| format!("; stopped: {s}")).unwrap_or_default()
    )];
    extra.extend(faults.iter().map(|f| format!("  needed: {f}")));
    let dir = opts.out.join("shrunk");
    let failure_file = write_failure(&dir, &l.cluster, result, &best.executed.pcaps, &record, &extra)?;
    Ok(ShrinkSummary {
        shorter: best.decisions.len() < l.record.actions.len() || faults.len() < original_list.len(),
        original_decisions: l.record.actions.len(),
        decisions: best.decisions.len(),
        original_faults: original_list,
        faults,
        original_events,
        events: result.trace.len(),
        original_virtual_seconds,
        virtual_seconds: result.ended_at.as_ns() as f64 / 1e9,
        executions,
        stopped,
        failure: record.failure.to_string(),
        trace_hash: result.trace_hash.clone(),
        failure_file,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}

/// The smallest failing execution found so far.
struct Best {
    /// The faults it may take (its plan): a subset of the original's.
    faults: Vec<Fault>,
    /// Its decisions: a subset of the original's.
    decisions: Vec<Decision>,
    executed: Executed,
    /// The faults it took.
    actual_faults: Vec<Fault>,
    /// The plan it ran with (`None`: any fault, the original's way).
    plan: Option<Vec<Fault>>,
    /// The partitions it skipped.
    skip: BTreeSet<u32>,
}

/// The shrink search: its replays, limits and best execution so far.
struct Search<'a> {
    l: &'a Loaded,
    opts: &'a RunOptions,
    limits: ShrinkLimits,
    began: Instant,
    original_events: usize,
    /// Every fault of the original, in time order (what plans index).
    all_faults: Vec<Fault>,
    best: Best,
    executions: u64,
    stopped: Option<String>,
    host_error: Option<anyhow::Error>,
    /// Answers so far, by (faults kept, decisions' steps): no candidate is
    /// replayed twice, whichever pass asks.
    answers: std::collections::BTreeMap<(Vec<usize>, Vec<u64>), bool>,
}

impl Search<'_> {
    /// A progress line on stderr, unless quiet.
    fn say(&self, line: &str) {
        if !self.opts.quiet {
            eprintln!("{line} [{}]", elapsed(self.began.elapsed()));
        }
    }

    /// May another replay run? Says why not, once.
    fn may_run(&mut self) -> bool {
        if self.host_error.is_some() {
            return false;
        }
        let why = if self.executions >= self.limits.max_executions {
            Some(format!("max executions ({})", self.limits.max_executions))
        } else if self.limits.time_budget.is_some_and(|b| self.began.elapsed() >= b) {
            Some(format!("time budget ({})", elapsed(self.limits.time_budget.unwrap_or_default())))
        } else {
            None
        };
        if let Some(why) = why {
            if self.stopped.is_none() {
                self.say(&format!("shrink: stopping ({why}); keeping the best so far"));
                self.stopped = Some(why);
            }
            return false;
        }
        true
    }

    /// Replays with `faults` allowed (partitions not among them skipped)
    /// and `decisions`: does it fail the same way, no longer? Keeps it
    /// when it is smaller than the best.
    fn still_fails(&mut self, faults: &[Fault], decisions: &[Decision], phase: &str) -> bool {
        let key = (
            faults.iter().filter_map(|f| self.all_faults.iter().position(|a| a == f)).collect(),
            decisions.iter().map(|d| d.step).collect(),
        );
        if let Some(&answer) = self.answers.get(&key) {
            return answer;
        }
        if !self.may_run() {
            return false;
        }
        self.executions += 1;
        let kept: BTreeSet<u32> = faults.iter().filter_map(|f| f.partition).collect();
        let mut skip = self.l.explore.skip_partitions.clone();
        skip.extend(self.all_faults.iter().filter_map(|f| f.partition).filter(|p| !kept.contains(p)));
        let plan = Some(faults.to_vec());
        let r = self.l.execute_planned(self.opts, decisions, plan.clone(), &skip, "shrink");
        let (e, taken) = match r {
            Ok(x) => x,
            Err(e) => {
                self.host_error = Some(e);
                return false;
            }
        };
        let want = self.l.record.failure.kind;
        let same = e.result.verdict.failure().is_some_and(|f| f.kind == want);
        let ok = same && e.result.trace.len() <= self.original_events;
        self.answers.insert(key, ok);
        let smaller = (faults.len(), decisions.len()) < (self.best.faults.len(), self.best.decisions.len());
        if ok && smaller {
            let actual_faults = fault_plan::faults_of(&taken, e.result.trace.events());
            self.best =
                Best { faults: faults.to_vec(), decisions: decisions.to_vec(), executed: e, actual_faults, plan, skip };
        }
        self.say(&format!(
            "shrink [{phase}]: replay {}: {} of {} faults, {} of {} decisions: {}; best: {} faults, {} decisions",
            self.executions,
            faults.len(),
            self.all_faults.len(),
            decisions.len(),
            self.l.record.actions.len(),
            if ok { "fails the same way" } else { "does not" },
            self.best.faults.len(),
            self.best.decisions.len()
        ));
        ok
    }

    /// Removes whole faults, the recorded decisions kept: each kind at
    /// once (all the partitions, all the pauses...), then ddmin over the
    /// faults left.
    fn remove_faults(&mut self) -> Result<()> {
        let decisions = self.l.record.actions.clone();
        let mut kinds: Vec<engine::strategy::ActionKind> = self.all_faults.iter().map(|f| f.kind).collect();
        kinds.sort();
        kinds.dedup();
        if kinds.len() > 1 {
            for kind in kinds {
                let without: Vec<Fault> = self.best.faults.iter().filter(|f| f.kind != kind).cloned().collect();
                if without.len() < self.best.faults.len() {
                    self.still_fails(&without, &decisions, "faults");
                }
            }
        }
        let start = self.best.faults.clone();
        let known = start.len();
        // The list it starts from is known to fail: not replayed again.
        let _ = shrink::ddmin(&start, |c: &[Fault]| c.len() == known || self.still_fails(c, &decisions, "faults"));
        self.host_error.take().map_or(Ok(()), |e| Err(e.context("a shrink replay could not run")))
    }

    /// Drops decisions (ddmin, the fault decisions first) with the faults
    /// found kept.
    fn drop_decisions(&mut self) -> Result<()> {
        let faults = self.best.faults.clone();
        let start = self.best.decisions.clone();
        let known = start.len();
        let _ = shrink::shrink_core_first(
            &start,
            |d| d.action.kind.is_fault(),
            |c: &[Decision]| c.len() == known || self.still_fails(&faults, c, "decisions"),
        );
        self.host_error.take().map_or(Ok(()), |e| Err(e.context("a shrink replay could not run")))
    }
}

/// "1m05s", "42s".
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Loaded {
    /// The failure record of the shrunk execution: its decisions, the
    /// faults it may take, and what they gave, marked shrunk (from how
    /// many decisions, which trace).
    fn shrunk_record(&self, best: &Best, result: &ExecutionResult) -> FailureRecord<Decision> {
        let mut run = self.record.run.clone();
        // As it ran: a replay with the same plan and skipped partitions
        // gives the same execution.
        run.faults = best.plan.as_ref().map(|p| p.iter().filter(|f| f.partition.is_none()).cloned().collect());
        run.skip_partitions = best.skip.iter().copied().collect();
        FailureRecord {
            format_version: failure_file::FORMAT_VERSION,
            images_hash: self.record.images_hash.clone(),
            cluster_dir: self.record.cluster_dir.clone(),
            seed: self.record.seed,
            strategy: self.record.strategy.clone(),
            run,
            execution_index: self.record.execution_index,
            actions: best.decisions.clone(),
            // A candidate is kept only when it fails with the recorded kind.
            failure: result.verdict.failure().cloned().unwrap_or_else(|| self.record.failure.clone()),
            trace_hash: result.trace_hash.clone(),
            shrunk: Some(Shrunk {
                original_decisions: self.record.actions.len() as u64,
                original_trace_hash: self.record.trace_hash.clone(),
            }),
            // The shrunk execution ran here.
            host: Some(self.host.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::first_divergence;

    #[test]
    fn divergence_names_the_first_differing_line() {
        assert!(first_divergence("a\nb\n", "a\nb\n").is_none());
        let d = first_divergence("a\nb\nc\n", "a\nx\nc\n").unwrap();
        assert_eq!((d.line, d.expected.as_deref(), d.actual.as_deref()), (2, Some("b"), Some("x")));
        let d = first_divergence("a\n", "a\nb\n").unwrap();
        assert_eq!((d.line, d.expected, d.actual.as_deref()), (2, None, Some("b")));
    }
}
