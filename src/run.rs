//! `simcluster run` and `simcluster replay`: executions, their outputs, and
//! the one JSON line a machine reads at the end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use checker::engine::{self, ExecutionResult, ExecutionSpec, Verdict};
use checker::failure_file::{self, FailureRecord, StrategySpec};
use checker::report;
use checker::trace::EventKind;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::image::{self, Images};

pub use crate::BadInput;

/// Options shared by run and replay.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    pub executions: u64,
    pub time_limit_ns: Option<u64>,
    pub out: PathBuf,
    pub watchdog: Duration,
    pub quiet: bool,
    /// Also keep every execution's pcap files under DIR/execution-I/.
    pub pcap: Option<PathBuf>,
}

/// Default virtual-time limit of one execution.
pub const DEFAULT_TIME_LIMIT_NS: u64 = 600_000_000_000;

/// One scheduling decision, as recorded in failure files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAction {
    /// Virtual time (ns).
    pub t: u64,
    /// 1-based node.
    pub n: u16,
}

/// The summary printed as the last line of `run`.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub executions: u64,
    pub failures: u64,
    pub trace_hash: String,
    pub virtual_seconds: f64,
    pub wall_seconds: f64,
    pub seed: u64,
    pub runtime: &'static str,
    pub nodes: usize,
    pub images_hash: String,
    pub image_build_seconds: f64,
    pub boot_wall_seconds: Option<f64>,
    pub speedup: f64,
    /// Mean PSS of one node's host processes at the end of an execution.
    pub memory_per_node_mib: f64,
    /// netsim's counters for the reported execution.
    pub network: Option<serde_json::Value>,
    pub failure: Option<serde_json::Value>,
    pub failure_file: Option<PathBuf>,
    pub out: PathBuf,
}

fn scratch_dir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("simcluster-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

fn spec_for(cluster: &Cluster, images: &Images, opts: &RunOptions, seed: u64, scratch: &Path) -> ExecutionSpec {
    ExecutionSpec {
        kernel: images.kernel.clone(),
        initrd: images.initrd.clone(),
        node_names: cluster.node_names(),
        mem_mb: cluster.spec.cluster.memory_mb,
        workload_node: cluster.workload_node,
        invariants: cluster.invariants.iter().map(|(n, i, _)| (n.clone(), *i)).collect(),
        time_limit_ns: opts.time_limit_ns.or(cluster.time_limit_ns).unwrap_or(DEFAULT_TIME_LIMIT_NS),
        watchdog: opts.watchdog,
        connect_timeout: Duration::from_secs(60),
        seed,
        scratch: scratch.to_path_buf(),
        network: Some(engine::NetworkSpec {
            config: cluster.spec.faults.network.clone(),
            scheduled: cluster.partitions.clone(),
            pcap_dir: Some(scratch.join("pcap")),
        }),
    }
}

/// An execution's result and its traffic captures (node name -> pcap).
struct Executed {
    result: ExecutionResult,
    pcaps: Vec<(String, Vec<u8>)>,
}

/// Runs one execution in its own scratch directory.
fn execute_one(cluster: &Cluster, images: &Images, opts: &RunOptions, index: u64) -> Result<Executed> {
    let scratch = scratch_dir()?.join(format!("e{index}"));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let seed = engine::execution_seed(opts.seed, index);
    let r = engine::execute(&spec_for(cluster, images, opts, seed, &scratch))
        .with_context(|| format!("execution {index} (seed {}) could not run", opts.seed));
    let mut pcaps = Vec::new();
    if let Ok(dir) = std::fs::read_dir(scratch.join("pcap")) {
        let mut names: Vec<_> = dir.flatten().map(|e| e.path()).collect();
        names.sort();
        for p in names {
            if let (Some(name), Ok(bytes)) = (p.file_name(), std::fs::read(&p)) {
                pcaps.push((name.to_string_lossy().into_owned(), bytes));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(Executed { result: r?, pcaps })
}

fn write_pcaps(dir: &Path, pcaps: &[(String, Vec<u8>)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, bytes) in pcaps {
        write_atomic(&dir.join(name), bytes)?;
    }
    Ok(())
}

/// Writes a file atomically: a reader sees the old content or the new one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Per-node console logs, each line prefixed with its virtual time.
fn console_logs(cluster: &Cluster, result: &ExecutionResult) -> Vec<(String, String)> {
    let mut logs: Vec<(String, String)> = cluster.node_names().into_iter().map(|n| (n, String::new())).collect();
    for ev in result.trace.events() {
        if let EventKind::Console { text } = &ev.kind {
            if let Some((_, log)) = logs.get_mut(usize::from(ev.node).wrapping_sub(1)) {
                log.push_str(&format!("[{:>14.6}] {}\n", ev.time as f64 / 1e9, text));
            }
        }
    }
    logs
}

/// Writes an execution's trace and console logs into `dir`.
fn write_execution(dir: &Path, cluster: &Cluster, result: &ExecutionResult) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_atomic(&dir.join("trace.jsonl"), result.trace.to_jsonl().as_bytes())?;
    for (node, log) in console_logs(cluster, result) {
        write_atomic(&dir.join(format!("console-{node}.log")), log.as_bytes())?;
    }
    Ok(())
}

/// The human-readable report of a failing execution: report.html (a
/// space-time diagram and the interleaved console logs) and report.txt.
fn write_report(
    dir: &Path,
    cluster: &Cluster,
    result: &ExecutionResult,
    seed: u64,
    index: u64,
    failure: &str,
) -> Result<()> {
    let meta = report::ReportMeta {
        cluster: cluster.name.clone(),
        seed,
        strategy: "random".into(),
        execution: index,
        trace_hash: result.trace_hash.clone(),
        // The headline only: the console lines that follow it in the
        // failure message are in the report's console log already.
        failure: Some(failure.lines().next().unwrap_or(failure).to_string()),
        node_names: cluster.node_names(),
    };
    let events = result.trace.events();
    write_atomic(&dir.join("report.html"), report::render_html(&meta, events).as_bytes())?;
    write_atomic(&dir.join("report.txt"), report::render_text(&meta, events).as_bytes())?;
    Ok(())
}

fn actions_of(result: &ExecutionResult) -> Vec<RunAction> {
    result
        .trace
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Run))
        .map(|e| RunAction { t: e.time, n: e.node })
        .collect()
}

/// `simcluster run`.
pub fn run(cluster_dir: &Path, opts: &RunOptions) -> Result<(Summary, bool)> {
    let cluster = Cluster::load(cluster_dir)?;
    let images = image::build(&cluster, opts.quiet)?;
    let began = Instant::now();
    let bar = if opts.quiet || opts.executions < 2 {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(opts.executions)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} executions, {msg} [{elapsed_precise}]").unwrap(),
    );
    let mut failures = 0u64;
    let mut last: Option<ExecutionResult> = None;
    let mut failing: Option<(u64, ExecutionResult, PathBuf)> = None;
    let mut virtual_ns_total = 0u64;
    let mut boot_walls = Vec::new();
    for index in 0..opts.executions {
        let Executed { result, pcaps } = execute_one(&cluster, &images, opts, index)?;
        if let Some(dir) = &opts.pcap {
            write_pcaps(&dir.join(format!("execution-{index}")), &pcaps)?;
        }
        if index + 1 == opts.executions {
            write_pcaps(&opts.out.join("last"), &pcaps)?;
        }
        virtual_ns_total += result.virtual_ns;
        if let Some(b) = result.boot_wall {
            boot_walls.push(b.as_secs_f64());
        }
        if let Verdict::Fail(f) = &result.verdict {
            failures += 1;
            if failing.is_none() {
                let dir = opts.out.join("failures").join(format!("execution-{index}"));
                write_execution(&dir, &cluster, &result)?;
                write_pcaps(&dir, &pcaps)?;
                let record = FailureRecord {
                    format_version: failure_file::FORMAT_VERSION,
                    images_hash: images.hash.clone(),
                    cluster_dir: cluster.dir.canonicalize().unwrap_or(cluster.dir.clone()),
                    seed: opts.seed,
                    strategy: StrategySpec { name: "random".into(), params: Default::default() },
                    execution_index: index,
                    actions: actions_of(&result),
                    failure: format!("{:?}: {}", f.kind, f.message),
                    trace_hash: result.trace_hash.clone(),
                };
                let file = dir.join("failure.json");
                failure_file::save(&file, &record)?;
                write_report(&dir, &cluster, &result, opts.seed, index, &record.failure)?;
                failing = Some((index, result.clone(), file));
            }
        }
        let wall = began.elapsed().as_secs_f64();
        bar.set_message(format!(
            "{failures} failures, {:.0}x virtual/wall",
            virtual_ns_total as f64 / 1e9 / wall.max(1e-9)
        ));
        bar.inc(1);
        last = Some(result);
    }
    bar.finish_and_clear();
    let last = last.context("--executions must be at least 1")?;
    write_execution(&opts.out.join("last"), &cluster, &last)?;
    let wall = began.elapsed().as_secs_f64();
    let shown = failing.as_ref().map(|(_, r, _)| r).unwrap_or(&last);
    let summary = Summary {
        executions: opts.executions,
        failures,
        trace_hash: shown.trace_hash.clone(),
        virtual_seconds: shown.virtual_ns as f64 / 1e9,
        wall_seconds: wall,
        seed: opts.seed,
        runtime: "uml",
        nodes: cluster.node_count(),
        images_hash: images.hash.clone(),
        image_build_seconds: images.wall_seconds,
        boot_wall_seconds: (!boot_walls.is_empty()).then(|| boot_walls.iter().sum::<f64>() / boot_walls.len() as f64),
        speedup: virtual_ns_total as f64 / 1e9 / wall.max(1e-9),
        memory_per_node_mib: {
            let m = &last.node_memory_kib;
            m.iter().sum::<u64>() as f64 / 1024.0 / m.len().max(1) as f64
        },
        network: shown.network.clone(),
        failure: shown.verdict.failure().map(|f| serde_json::to_value(f).unwrap()),
        failure_file: failing.as_ref().map(|(_, _, p)| p.clone()),
        out: opts.out.clone(),
    };
    Ok((summary, failures > 0))
}

/// The result of `simcluster replay`.
#[derive(Debug, Serialize)]
pub struct ReplaySummary {
    pub reproduced: bool,
    pub trace_hash: String,
    pub expected_trace_hash: String,
    pub failure: Option<serde_json::Value>,
    pub expected_failure: String,
    pub images_match: bool,
    pub virtual_seconds: f64,
    pub wall_seconds: f64,
}

/// `simcluster replay FILE`.
pub fn replay(file: &Path, opts: &RunOptions) -> Result<ReplaySummary> {
    let record: FailureRecord<RunAction> = failure_file::load(file).map_err(|e| BadInput(e.to_string()))?;
    let cluster = Cluster::load(&record.cluster_dir).map_err(|e| {
        BadInput(format!("{}: the cluster it was recorded on cannot be loaded: {e}", file.display()))
    })?;
    let images = image::build(&cluster, opts.quiet)?;
    let images_match = images.hash == record.images_hash;
    if !images_match && !opts.quiet {
        eprintln!(
            "warning: the images of {} changed since this failure was recorded; the replay may differ",
            cluster.dir.display()
        );
    }
    let mut o = opts.clone();
    o.seed = record.seed;
    let began = Instant::now();
    let Executed { result, pcaps } = execute_one(&cluster, &images, &o, record.execution_index)?;
    write_pcaps(&opts.out.join("replay"), &pcaps)?;
    let failure = result.verdict.failure().map(|f| format!("{:?}: {}", f.kind, f.message));
    let reproduced = result.trace_hash == record.trace_hash && failure.as_deref() == Some(record.failure.as_str());
    write_execution(&opts.out.join("replay"), &cluster, &result)?;
    Ok(ReplaySummary {
        reproduced,
        trace_hash: result.trace_hash.clone(),
        expected_trace_hash: record.trace_hash,
        failure: result.verdict.failure().map(|f| serde_json::to_value(f).unwrap()),
        expected_failure: record.failure,
        images_match,
        virtual_seconds: result.virtual_ns as f64 / 1e9,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}
