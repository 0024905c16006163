//! `simcluster replay` and `simcluster shrink`: re-running a recorded
//! failure from its failure file.
//!
//! A failure file holds the run seed, the execution index and the
//! strategy's decisions (its departures from the default scheduler). With
//! the execution seed (derived from both) and [`Guided`] over the
//! decisions, the engine repeats the execution exactly, whatever strategy
//! found it, exhaustive ones included.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use checker::failure_file::{self, FailureRecord, Shrunk};
use checker::shrink;
use checker::strategy::Guided;
use engine::strategy::Decision;
use engine::{ExecutionResult, ExploreSpec, Failure, HostClass, HostFacts, RuntimeKind};
use serde::Serialize;

use crate::cluster::Cluster;
use crate::image::{self, Images};
use crate::outputs::{write_execution, write_failure, write_pcaps, write_report};
use crate::run::{execute_one, explore_for, failure_line, spec_for, Executed, OpenImages, RunOptions};
use crate::BadInput;

/// A loaded failure file with the cluster and images it needs.
struct Loaded {
    record: FailureRecord<Decision>,
    cluster: Cluster,
    images: Images,
    open: OpenImages,
    explore: ExploreSpec,
    /// The runtime the failure was found on.
    runtime: RuntimeKind,
    /// This host.
    host: HostFacts,
}

fn load(file: &Path, quiet: bool) -> Result<Loaded> {
    let record: FailureRecord<Decision> = failure_file::load(file).map_err(|e| BadInput(e.to_string()))?;
    let cluster = Cluster::load(&record.cluster_dir)
        .map_err(|e| BadInput(format!("{}: the cluster it was recorded on cannot be loaded: {e}", file.display())))?;
    let images = image::build(&cluster, quiet)?;
    let run = &record.run;
    let mut explore = explore_for(&cluster, Some(run.window_ns), Some(run.max_crashes));
    explore.crash_states = run.crash_states.clone();
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
    fn execute(&self, opts: &RunOptions, decisions: &[Decision], label: &str) -> Result<Executed> {
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
        let mut guided = Guided::new(decisions);
        execute_one(&mut spec, &mut guided, label)
    }
}

/// The result of `simcluster replay`.
#[derive(Debug, Serialize)]
pub struct ReplaySummary {
    pub reproduced: bool,
    pub trace_hash: String,
    pub expected_trace_hash: String,
    pub failure: Option<Failure>,
    pub expected_failure: Failure,
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
    pub virtual_seconds: f64,
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
    /// where the schedule departs from the default) got strictly shorter.
    pub shorter: bool,
    pub original_decisions: usize,
    pub decisions: usize,
    pub original_events: usize,
    pub events: usize,
    pub original_virtual_seconds: f64,
    pub virtual_seconds: f64,
    pub executions: u64,
    pub failure: String,
    pub trace_hash: String,
    pub failure_file: PathBuf,
    pub wall_seconds: f64,
}

/// `simcluster shrink FILE`: drops decisions (ddmin) while the execution
/// still fails the same way with a trace no longer than the original, within
/// `max_executions` replays; writes the result under OUT/shrunk/.
pub fn shrink(file: &Path, opts: &RunOptions, max_executions: u64) -> Result<ShrinkSummary> {
    let l = load(file, opts.quiet)?;
    let began = Instant::now();
    let original = l.execute(opts, &l.record.actions, "shrink-original")?;
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
    let Search { smallest, executions } = l.smallest_failing(opts, max_executions, original_events)?;
    let (decisions, shrunk) = smallest.unwrap_or_else(|| (l.record.actions.clone(), original));
    let result: &ExecutionResult = &shrunk.result;
    let record = l.shrunk_record(&decisions, result);
    let extra = vec![format!(
        "Shrunk from {} decisions and {} trace events to {} decisions and {} events ({executions} executions).",
        l.record.actions.len(),
        original_events,
        decisions.len(),
        result.trace.len()
    )];
    let dir = opts.out.join("shrunk");
    let failure_file = write_failure(&dir, &l.cluster, result, &shrunk.pcaps, &record, &extra)?;
    Ok(ShrinkSummary {
        shorter: decisions.len() < l.record.actions.len(),
        original_decisions: l.record.actions.len(),
        decisions: decisions.len(),
        original_events,
        events: result.trace.len(),
        original_virtual_seconds,
        virtual_seconds: result.ended_at.as_ns() as f64 / 1e9,
        executions,
        failure: record.failure.to_string(),
        trace_hash: result.trace_hash.clone(),
        failure_file,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}

/// What the shrink search found.
struct Search {
    /// The smallest subset of the recorded decisions found whose execution
    /// fails the same way, with that execution; `None`: nothing smaller.
    smallest: Option<(Vec<Decision>, Executed)>,
    /// Executions it took, the original's included.
    executions: u64,
}

impl Loaded {
    /// Searches (ddmin, faults first) for the smallest subset of the
    /// recorded decisions whose execution fails the same way in at most
    /// `original_events` trace events, within `max_executions`. A replay
    /// that cannot run at all is an error.
    fn smallest_failing(&self, opts: &RunOptions, max_executions: u64, original_events: usize) -> Result<Search> {
        let want = self.record.failure.kind;
        let mut executions = 1u64;
        let mut best: Option<(Vec<Decision>, Executed)> = None;
        let mut host_error = None;
        let bar = if opts.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new_spinner() };
        // The faults first: a failure needs them far more often than the
        // scheduling choices around them (see shrink_core_first).
        let outcome = shrink::shrink_core_first(
            &self.record.actions,
            |d| d.action.kind.is_fault(),
            |candidate: &[Decision]| {
                if executions >= max_executions || host_error.is_some() {
                    return false;
                }
                executions += 1;
                bar.set_message(format!(
                    "shrinking: execution {executions}, trying {} of {} decisions",
                    candidate.len(),
                    self.record.actions.len()
                ));
                bar.tick();
                match self.execute(opts, candidate, "shrink") {
                    Ok(e) => {
                        let same = e.result.verdict.failure().is_some_and(|f| f.kind == want);
                        let ok = same && e.result.trace.len() <= original_events;
                        let better = best.as_ref().is_none_or(|(d, _)| candidate.len() < d.len());
                        if ok && better {
                            best = Some((candidate.to_vec(), e));
                        }
                        ok
                    }
                    Err(e) => {
                        host_error = Some(e);
                        false
                    }
                }
            },
        );
        bar.finish_and_clear();
        if let Some(e) = host_error {
            return Err(e.context("a shrink replay could not run"));
        }
        Ok(Search { smallest: outcome.ok().and(best), executions })
    }

    /// The failure record of the shrunk execution: `decisions` and what
    /// they gave, marked shrunk (from how many decisions, which trace).
    fn shrunk_record(&self, decisions: &[Decision], result: &ExecutionResult) -> FailureRecord<Decision> {
        FailureRecord {
            format_version: failure_file::FORMAT_VERSION,
            images_hash: self.record.images_hash.clone(),
            cluster_dir: self.record.cluster_dir.clone(),
            seed: self.record.seed,
            strategy: self.record.strategy.clone(),
            run: self.record.run.clone(),
            execution_index: self.record.execution_index,
            actions: decisions.to_vec(),
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
