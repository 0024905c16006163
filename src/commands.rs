//! The subcommands other than `check`: `image build`, `image kernel`,
//! `run`, `merge`, `replay` (and `replay --until`), `shrink`. Each prints
//! its JSON line on stdout and returns its exit code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use engine::RuntimeKind;
use simcluster::replay;
use simcluster::run::{self, RunOptions, StrategyKind, StrategyOptions};
use simcluster::BadInput;

use crate::cli::{lookahead, CommonArgs, InspectArgs, KernelFor, RunArgs, WarmStart};

pub(crate) fn options(c: &CommonArgs) -> RunOptions {
    RunOptions {
        seed: 1,
        executions: Some(1),
        time_budget: None,
        time_limit_ns: c.time_limit,
        out: c.out.clone(),
        watchdog: Duration::from_secs(c.watchdog),
        quiet: c.quiet,
        pcap: c.pcap.clone(),
        strategy: StrategyOptions {
            kind: StrategyKind::Random,
            depth: 0,
            horizon: run::DEFAULT_HORIZON,
            measure_horizon: false,
        },
        until_failure: false,
        warm_start: None,
        window_ns: None,
        max_crashes: None,
        critical_walks: 0,
        // Replays and shrinks take the runtime from the failure file.
        runtime: RuntimeKind::Uml,
        pin: c.pin,
        lookahead: lookahead(c.lookahead),
        jobs: Some(1),
        shard: simcluster::run::Shard::ALL,
        failure_budget_bytes: run::DEFAULT_FAILURE_BUDGET_MIB << 20,
    }
}

/// Applies `--pin` to this thread, so to every node started from it; a CPU
/// this process may not use is bad input.
pub(crate) fn pin(c: &CommonArgs) -> anyhow::Result<Option<usize>> {
    let cpu = simcluster::pin::apply(c.pin).map_err(|e| BadInput(e.to_string()))?;
    if !c.quiet {
        if let Some(cpu) = cpu {
            eprintln!("pinned to host CPU {cpu} with its nodes (--pin off to spread them)");
        }
    }
    Ok(cpu)
}

/// Says which `[[expect]] reached` names no execution reached, and lists
/// the Antithesis SDK's assertions with their counts and verdicts.
pub(crate) fn report_unreached(summary: &simcluster::run::Summary) {
    if !summary.antithesis.is_empty() {
        eprintln!("Antithesis SDK assertions over {} executions:", summary.executions);
    }
    for p in summary.antithesis.values() {
        let c = &p.count;
        let verdict = match p.why {
            None => "passed".to_string(),
            Some(why) => format!("FAILED: {why}"),
        };
        let at = if c.location.is_empty() { String::new() } else { format!(" at {}", c.location) };
        let nodes = if c.nodes.is_empty() { String::new() } else { format!(" on {}", c.nodes.join(",")) };
        let first = c.first_failure.as_deref().map(|f| format!("; first failure {f}")).unwrap_or_default();
        eprintln!(
            "  {verdict}: {}{at}: {} passing, {} failing lines in {} executions{nodes}{first}",
            c.title(),
            c.passes,
            c.fails,
            c.executions
        );
    }
    if !summary.test_composer.is_empty() {
        eprintln!("Test Composer commands over {} executions:", summary.executions);
    }
    for (name, c) in &summary.test_composer {
        let failed = match c.first_failed_status {
            Some(s) => format!(", {} with a non-zero status (first {s})", c.failed),
            None => String::new(),
        };
        eprintln!("  {name}: {} runs{failed}", c.runs);
    }
    for id in &summary.antithesis_unmet {
        let p = &summary.antithesis[id];
        eprintln!(
            "NOT SATISFIED: Antithesis assertion {} {} in {} executions",
            p.count.title(),
            p.why.unwrap_or("failed"),
            summary.executions
        );
    }
    for name in &summary.unreached {
        eprintln!(
            "NOT REACHED: no execution of {} printed \"@reached {name}\" (cluster.toml [[expect]] reached = {name:?}); \
             explore more executions, another strategy, or check that the program prints it",
            summary.executions
        );
    }
}

/// `simcluster image kernel`: the kernel's path and cache key as one JSON line.
pub(crate) fn image_kernel(runtime: KernelFor, quiet: bool) -> anyhow::Result<ExitCode> {
    use simcluster::image::kernel;
    let began = std::time::Instant::now();
    let k = match runtime {
        KernelFor::Kvm => kernel::ensure_kvm_kernel(quiet)?,
        KernelFor::Uml => kernel::ensure_kernel(kernel::KernelSeries::default(), quiet)?,
    };
    println!(
        "{}",
        serde_json::json!({
            "kernel": k.path,
            "key": k.key,
            "cached": k.cached,
            "source_series": k.series.name(),
            "wall_seconds": began.elapsed().as_secs_f64(),
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// `simcluster image build`: the images' paths and hash as one JSON line.
pub(crate) fn image_build(cluster_dir: &Path, quiet: bool) -> anyhow::Result<ExitCode> {
    let cluster = simcluster::cluster::Cluster::load(cluster_dir)?;
    let images = simcluster::image::build(&cluster, quiet)?;
    println!(
        "{}",
        serde_json::json!({
            "kernel": images.kernel,
            "initrd": images.initrd,
            "root": images.root,
            "images_hash": images.hash,
            "kernel_cached": images.kernel_cached,
            "rootfs_cached": images.rootfs_cached,
            "wall_seconds": images.wall_seconds,
            "cache": simcluster::image::cache_dir(),
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// `simcluster run`: the summary as one JSON line; exit 1 when a property failed.
pub(crate) fn run_command(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let (runtime, why) = run::choose_runtime(args.runtime.asked(), &run::HostVirt::detect())?;
    if !args.common.quiet {
        eprintln!("runtime: {why}");
    }
    let kind = args.strategy;
    let opts = RunOptions {
        seed: args.seed,
        executions: args.executions,
        time_budget: args.time_budget.map(Duration::from_nanos),
        strategy: StrategyOptions {
            kind,
            depth: args.depth.unwrap_or(kind.default_depth()),
            horizon: args.horizon.unwrap_or(run::DEFAULT_HORIZON).max(1),
            measure_horizon: args.horizon.is_none(),
        },
        until_failure: args.until_failure,
        warm_start: args.warm_start.map(|w| match w {
            WarmStart::Fork => run::WarmStartMode::Fork,
            WarmStart::Cold => run::WarmStartMode::Cold,
        }),
        window_ns: args.window,
        max_crashes: args.max_crashes,
        critical_walks: args.critical_walks,
        runtime,
        jobs: args.jobs.map(|j| j as usize),
        shard: args.shard.unwrap_or(simcluster::run::Shard::ALL),
        failure_budget_bytes: args.failure_budget.saturating_mul(1 << 20),
        ..options(&args.common)
    };
    // Checked before the run: a JUnit file that cannot be written is bad
    // input now, not an error after hours of exploring; and the cluster's
    // name and [[expect]] names are those the run starts with, not those
    // of a cluster.toml edited meanwhile.
    let junit = match &args.junit {
        None => None,
        Some(p) => {
            check_writable(p)?;
            Some((p, simcluster::cluster::Cluster::load(&args.images)?))
        }
    };
    let (summary, failed) = run::run(&args.images, &opts)?;
    if let Some((p, cluster)) = junit {
        simcluster::junit::write(p, &summary, &cluster.name, &cluster.expect_reached)?;
    }
    if failed && !opts.quiet {
        if let Some(f) = &summary.figures.failure {
            eprintln!("FAILED: {}", f.message);
        }
        if let Some(p) = &summary.failure_file {
            eprintln!("replay with: simcluster replay {}", p.display());
        }
        let others: Vec<String> = summary
            .failing_executions
            .iter()
            .skip(1)
            .filter(|f| f.failure_file.is_some())
            .map(|f| match f.crash_state {
                None => f.execution.to_string(),
                Some(k) => format!("{} --crash-state {k}", f.execution),
            })
            .collect();
        if !others.is_empty() {
            let more = if others.len() > 8 { ", ..." } else { "" };
            eprintln!(
                "the other failing executions replay with: simcluster replay {} --execution I, I = {}{more}",
                opts.out.display(),
                others[..others.len().min(8)].join(", ")
            );
        }
    }
    report_unreached(&summary);
    println!("{}", serde_json::to_string(&summary)?);
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `simcluster merge`: the shards' summaries as one (written to `out` too).
pub(crate) fn merge(shards: &[PathBuf], out: Option<PathBuf>, junit: Option<&Path>) -> anyhow::Result<ExitCode> {
    if let Some(p) = junit {
        check_writable(p)?;
    }
    let summary = simcluster::run::shard::merge(shards, out.clone().unwrap_or_default())?;
    let line = serde_json::to_string(&summary)?;
    if let Some(p) = junit {
        // No cluster file here: the [[expect]] names known are those unreached.
        simcluster::junit::write(p, &summary, "simcluster", &summary.unreached)?;
    }
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir)?;
        simcluster::outputs::write_atomic(&dir.join("summary.json"), format!("{line}\n").as_bytes())?;
    }
    if let Some(f) = summary.failing_executions.first() {
        eprintln!("FAILED: execution {} of {} failed first: {}", f.execution, summary.executions, f.message);
        if let Some(p) = &f.failure_file {
            eprintln!("replay with: simcluster replay {}", p.display());
        }
    }
    report_unreached(&summary);
    println!("{line}");
    Ok(if summary.failed() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// A file the run will write at its end: its directory must exist, and it
/// must not be a directory.
pub(crate) fn check_writable(path: &Path) -> anyhow::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(BadInput(format!("{}: its directory {} does not exist", path.display(), dir.display())).into());
    }
    if path.is_dir() {
        return Err(BadInput(format!("{}: is a directory, not a file to write", path.display())).into());
    }
    Ok(())
}

/// `simcluster replay`: exit 1, with the first differing trace line, when
/// the execution did not reproduce.
pub(crate) fn replay_command(failure_file: &Path, common: &CommonArgs) -> anyhow::Result<ExitCode> {
    pin(common)?;
    let opts = options(common);
    let r = replay::replay(failure_file, &opts)?;
    if !r.reproduced && !opts.quiet {
        eprintln!("NOT REPRODUCED: trace hash {} (recorded {})", r.trace_hash, r.expected_trace_hash);
        if let Some(d) = &r.divergence {
            eprintln!("first difference at trace line {}:", d.line);
            eprintln!("  recorded: {}", d.expected.as_deref().unwrap_or("(end of trace)"));
            eprintln!("  replayed: {}", d.actual.as_deref().unwrap_or("(end of trace)"));
        }
        if let Some(cause) = &r.likely_cause {
            eprintln!("likely cause: {cause}");
        }
    }
    println!("{}", serde_json::to_string(&r)?);
    Ok(if r.reproduced { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `simcluster replay --until`: exit status the last command's.
pub(crate) fn inspect_command(
    failure_file: &Path,
    until: simcluster::inspect::Moment,
    args: &InspectArgs,
    common: &CommonArgs,
) -> anyhow::Result<ExitCode> {
    pin(common)?;
    let req = simcluster::inspect::InspectRequest {
        until,
        execs: args.exec.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        shell: args.shell.clone(),
        command_limit: Duration::from_nanos(args.command_limit),
    };
    let status = simcluster::inspect::inspect(failure_file, &options(common), &req)?;
    Ok(ExitCode::from(status))
}

/// `simcluster shrink`: exit 1 when nothing could be dropped.
pub(crate) fn shrink(
    failure_file: &Path,
    limits: replay::ShrinkLimits,
    common: &CommonArgs,
) -> anyhow::Result<ExitCode> {
    pin(common)?;
    let r = replay::shrink(failure_file, &options(common), limits)?;
    if !common.quiet {
        eprintln!(
            "shrunk: {} -> {} faults, {} -> {} decisions, {} -> {} trace events{}; written to {}",
            r.original_faults.len(),
            r.faults.len(),
            r.original_decisions,
            r.decisions,
            r.original_events,
            r.events,
            r.stopped.as_deref().map(|s| format!(" (stopped: {s})")).unwrap_or_default(),
            r.failure_file.display()
        );
        for f in &r.faults {
            eprintln!("  needed: {f}");
        }
    }
    println!("{}", serde_json::to_string(&r)?);
    Ok(if r.shorter { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
