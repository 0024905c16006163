//! `simcluster run`: executions chosen by a strategy, run side by side,
//! their outputs, and the one JSON line a machine reads at the end.
//!
//! - `execution`: one execution (its spec, scratch directory, strategy).
//! - `parallel`: units of work on `--jobs` workers, observed in order.
//! - `observer`: what the run does with each finished execution.
//! - [`summary`]: the records a run keeps and the summary line.
//! - [`shard`]: `--shard K/N` results and `simcluster merge`.
//! - [`host_facts`]: the host, for the records, and what guests see of
//!   its CPUID.
//! - `critical`, `runtime`, `host_cpu`, [`jobs`]: the rest.

pub mod adaptive;
mod critical;
mod execution;
mod host_cpu;
mod host_facts;
pub mod jobs;
mod observer;
mod parallel;
mod record;
mod runtime;
pub mod shard;
pub mod summary;
mod warm;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use engine::strategy::Strategy;
use engine::RuntimeKind;
use explore::strategy::HybridDfs;
use indicatif::{ProgressBar, ProgressStyle};

pub(crate) use execution::{execute_one, scratch_dir, spec_for, Executed, OpenImages};
pub use execution::{exiting, explore_for, failure_line, mark_exiting, remove_scratch, remove_scratch_now};
pub use host_cpu::HostCpu;
pub use host_facts::{host_facts, HostError};
pub use runtime::{choose_runtime, images_for_runtime, DevKvmError, HostVirt, KVM_KERNEL_ENV};
pub use summary::{CrashPointSummary, CriticalSummary, Shard, Summary};

use crate::cluster::Cluster;
use crate::image;
use crate::outputs::{write_execution, write_pcaps};
use adaptive::Adaptive;
use observer::{Group, Observer, UnitRunner};
use parallel::{Feed, Flow};
use summary::{RunIdentity, RunRecord, RUN_RECORD_VERSION};

pub use crate::BadInput;
use simrng::streams::DFS_ROUND as DFS_ROUND_STREAM;

/// Which exploration strategy: `--strategy`'s values (each variant's doc
/// is its line in `simcluster run --help`), and the name a run's JSON line
/// and failure files record ([`StrategyKind::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyKind {
    /// Weighted random walk over enabled actions (MaceMC): crashes and
    /// partitions rare, ordinary events common.
    Random,
    /// Probabilistic concurrency testing: random priorities per (node, kind)
    /// with depth-1 priority change points.
    Pct,
    /// The default scheduler (earliest first) plus --depth delays at random
    /// choice points.
    Delay,
    /// Every placement of up to --depth delays, by increasing count; stops
    /// when all are explored.
    DelayAll,
    /// Bounded DFS with dynamic partial-order reduction over --depth choice
    /// points, restarted from random prefixes (MODIST's hybrid).
    Dfs,
    /// Coverage-guided: executions that reached something new (a new
    /// @reached/@sometimes name or count, a new kind of fault, a name
    /// reached after a fault) are kept, and new executions replay one of
    /// them up to a point and walk at random from there. The same seed
    /// gives the same executions for any --jobs (they advance in
    /// generations of 8); cannot be sharded.
    Coverage,
}

impl StrategyKind {
    /// The name `--strategy` takes, and the one the JSON line, shard.json
    /// and failure files record (`delay-all`).
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Random => "random",
            StrategyKind::Pct => "pct",
            StrategyKind::Delay => "delay",
            StrategyKind::DelayAll => "delay-all",
            StrategyKind::Dfs => "dfs",
            StrategyKind::Coverage => "coverage",
        }
    }

    /// `--depth` when not given: PCT's bug depth 3, 2 delays for the delay
    /// strategies, 4 choice points for DFS; 0 for the strategies that take
    /// no bound.
    pub fn default_depth(self) -> u32 {
        match self {
            StrategyKind::Random | StrategyKind::Coverage => 0,
            StrategyKind::Pct => 3,
            StrategyKind::Delay | StrategyKind::DelayAll => 2,
            StrategyKind::Dfs => 4,
        }
    }
}

/// How a run explores: the strategy and its bounds (`--strategy`,
/// `--depth`, `--horizon`).
#[derive(Debug, Clone, Copy)]
pub struct StrategyOptions {
    /// The strategy.
    pub kind: StrategyKind,
    /// Its bound: PCT's bug depth, the number of delays, the choice points
    /// DFS explores exhaustively ([`StrategyKind::default_depth`] unless
    /// given).
    pub depth: u32,
    /// Choice points over which PCT change points, delays and DFS prefixes
    /// are placed.
    pub horizon: u64,
    /// Delay bounding measures its horizon on execution 0 instead
    /// (`--horizon` not given; see [`adaptive`]).
    pub measure_horizon: bool,
}

/// The default horizon: about the number of choice points of one
/// execution of the example clusters (measured; see the README).
pub const DEFAULT_HORIZON: u64 = 2000;

/// Options shared by run, replay and shrink.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The run's seed (`--seed`): execution i's seed is derived from it
    /// and i.
    pub seed: u64,
    /// At most this many executions (`None`: until the time budget ends).
    pub executions: Option<u64>,
    /// Stop starting executions after this much wall time.
    pub time_budget: Option<Duration>,
    /// Stop after the first failing execution.
    pub until_failure: bool,
    /// `--warm-start`: executions begin from a boot drawn from the run's
    /// boot seed (see `engine::ExecutionSpec::boot_seed`).
    pub warm_start: Option<WarmStartMode>,
    /// `--time-limit`: an execution's virtual-time limit in nanoseconds,
    /// over `[run] time_limit` (`None`: that, else 600 s).
    pub time_limit_ns: Option<u64>,
    /// `--out`: where traces, console logs, pcaps, failure files and
    /// shard.json go.
    pub out: PathBuf,
    /// `--watchdog`: wall time a node may compute without letting virtual
    /// time advance before it is reported hung (kind `guest_hang`).
    pub watchdog: Duration,
    /// `--quiet`: no progress on stderr.
    pub quiet: bool,
    /// Also keep every execution's pcap files under DIR/execution-I/.
    pub pcap: Option<PathBuf>,
    /// `--strategy`, `--depth`, `--horizon`.
    pub strategy: StrategyOptions,
    /// Override `[explore] window`.
    pub window_ns: Option<u64>,
    /// Override `[faults.crash] max`.
    pub max_crashes: Option<u32>,
    /// Random walks per critical-transition probe of a liveness failure
    /// (0: do not search).
    pub critical_walks: u32,
    /// The node runtime (see [`choose_runtime`]).
    pub runtime: RuntimeKind,
    /// `--pin`: the CPUs jobs and their nodes run on.
    pub pin: crate::pin::Pin,
    /// `--lookahead`: nodes take their own wake-ups without a round trip
    /// each where nothing else can happen first (`engine::ExecutionSpec::
    /// lookahead`); never changes a trace.
    pub lookahead: engine::Lookahead,
    /// Executions side by side (`None`: as many as cores and memory
    /// allow; see [`jobs::default_jobs`]).
    pub jobs: Option<usize>,
    /// Run only this shard of the executions.
    pub shard: Shard,
    /// `--failure-budget`: bytes of failure files a run writes at most
    /// (see `summary::FailureFiles`).
    pub failure_budget_bytes: u64,
}

impl RunOptions {
    /// The run's boot seed with `--warm-start` (either mode: the same
    /// executions), derived from the run's seed.
    pub fn boot_seed(&self) -> Option<u64> {
        self.warm_start.map(|_| engine::boot_seed(self.seed))
    }
}

/// How a `--warm-start` run gets each execution's boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmStartMode {
    /// Each job boots once and forks every execution from the moment all
    /// agents are ready (`engine::WarmStart`; KVM only).
    Fork,
    /// Each execution boots for itself, as the forked one would have.
    Cold,
}

/// The default `--failure-budget`: 64 MiB of failure files. A gallery
/// failure's is 1.1 to 2.8 MB (7,400 decisions of a 35 s NATS execution,
/// 18,200 of a 68 s etcd-lock one), so 23 to 58 of them.
pub const DEFAULT_FAILURE_BUDGET_MIB: u64 = 64;

/// Default virtual-time limit of one execution.
pub const DEFAULT_TIME_LIMIT_NS: u64 = 600_000_000_000;

/// The seed of every execution of dfs round `round`: one seed per round,
/// so that the executions DPOR compares differ only in its choices.
pub(crate) fn dfs_round_seed(run_seed: u64, round: u64) -> u64 {
    engine::execution_seed(run_seed ^ DFS_ROUND_STREAM, round)
}

/// What a worker runs for one unit: one execution (with its crash-state
/// siblings), or for dfs one round of executions.
struct UnitOutput {
    groups: Vec<Group>,
    /// A coverage execution's plan (where it started from).
    plan: Option<explore::strategy::coverage::Plan>,
    /// An exhaustive strategy has nothing more to explore at this unit.
    exhausted: bool,
}

/// `simcluster run`: checks the options, builds the images, runs the
/// units of work on the jobs, and summarises the record it writes.
pub fn run(cluster_dir: &Path, opts: &RunOptions) -> Result<(Summary, bool)> {
    let cluster = Cluster::load(cluster_dir)?;
    // Before anything is built or written: a strict cluster may be refused.
    let host = host_facts(&cluster, opts.runtime)?;
    let plan = Plan::new(&cluster, opts)?;
    let images = images_for_runtime(image::build(&cluster, opts.quiet)?, opts.runtime, opts.quiet)?;
    let explore = explore_for(&cluster, opts.window_ns, opts.max_crashes);
    let open = OpenImages::open(&cluster, &images)?;
    let disk = open.disk.clone();
    let mut base = spec_for(&cluster, &images, &open, opts.time_limit_ns, opts.watchdog, explore.clone(), 0);
    base.runtime = opts.runtime;
    base.boot_seed = opts.boot_seed();
    base.lookahead = opts.lookahead;
    let began = Instant::now();
    let runner = UnitRunner {
        base: &base,
        disk: &disk,
        until_failure: opts.until_failure,
        cancel: Arc::new(AtomicBool::new(false)),
        fork: opts.warm_start == Some(WarmStartMode::Fork),
    };
    let units = Units { opts, plan: &plan, explore: &explore, runner, adaptive: Adaptive::for_run(opts) };
    units.adaptive.prepare(opts, &units.runner)?;
    let bar = progress_bar(opts, if plan.dfs { plan.limit } else { opts.shard.units_below(plan.limit) });
    let mut obs = Observer::new(&cluster, &images, &host, opts, units.failure_strategy_spec(), &bar);
    let exhausted = units.run(&mut obs, &bar, began)?;
    bar.finish_and_clear();
    remove_scratch();
    let observer::Finished { executions, critical, last, files } = obs.finish();
    let (last_result, last_pcaps) = last.ok_or_else(|| anyhow::anyhow!("no execution ran"))?;
    write_pcaps(&opts.out.join("last"), &last_pcaps)?;
    write_execution(&opts.out.join("last"), &cluster, &last_result)?;
    let mut host_cpu = HostCpu::now();
    host_cpu.pinned_cpus = plan.cpus.iter().flatten().copied().collect();
    host_cpu.pinned_cpu = host_cpu.pinned_cpus.first().copied();
    let mean_k = |v: &[u64]| v.iter().sum::<u64>() as f64 / 1024.0 / v.len().max(1) as f64;
    let mut identity = identity(&cluster, opts, &images.hash, &explore, base.time_limit.as_ns());
    identity.horizon = units.adaptive.horizon().unwrap_or(identity.horizon);
    let record = RunRecord {
        simcluster_run_record: RUN_RECORD_VERSION,
        identity,
        coverage: units.adaptive.summary(),
        shard: opts.shard,
        executions,
        exhausted,
        critical_transition: critical,
        jobs: plan.jobs,
        wall_seconds: began.elapsed().as_secs_f64(),
        image_build_seconds: images.wall_seconds,
        host_cpu,
        host: Some(host),
        memory_per_node_mib: mean_k(&last_result.node_memory_kib),
        disk_storage_per_node_kib: disk.as_ref().map(|_| mean_k(&last_result.disk_storage_bytes)),
        out: opts.out.clone(),
        failure_files: Some(files),
    };
    shard::write_record(&opts.out, &record)?;
    let summary =
        summary::summarize(std::slice::from_ref(&record), opts.out.clone()).expect("a run record has executions");
    let failed = summary.failed();
    Ok((summary, failed))
}

/// `--warm-start` needs nodes fork(2) can copy, and (both modes, so that
/// `cold` runs what a forked run runs) a strategy that learns nothing from
/// one execution for the next: a forked child cannot give its strategy
/// back, and a crash-state sibling begins the execution's strategy again.
fn check_warm_start(opts: &RunOptions, mode: WarmStartMode) -> Result<()> {
    if mode == WarmStartMode::Fork && opts.runtime != RuntimeKind::Kvm {
        return Err(BadInput(
            "--warm-start needs the KVM runtime (--runtime kvm, or auto on a host with vmx/svm): a user-mode Linux \
             node is a host process of its own, which fork(2) does not copy"
                .into(),
        )
        .into());
    }
    if matches!(opts.strategy.kind, StrategyKind::Dfs | StrategyKind::DelayAll) {
        return Err(BadInput(format!(
            "--warm-start: strategy {} carries what it learned from one execution to the next, which an execution \
             forked from the boot (or its crash-state sibling) cannot give back; use random, pct or delay",
            opts.strategy.kind.name()
        ))
        .into());
    }
    Ok(())
}

/// How a run splits its work, decided before anything is built.
struct Plan {
    dfs: bool,
    /// Executions to run (`u64::MAX`: until the time budget ends).
    limit: u64,
    jobs: usize,
    /// Each job's CPU (`--pin`).
    cpus: Vec<Option<usize>>,
}

impl Plan {
    /// Checks `--shard` against the strategy and the execution count, and
    /// picks the jobs and their CPUs (saying so unless quiet).
    fn new(cluster: &Cluster, opts: &RunOptions) -> Result<Plan> {
        let dfs = opts.strategy.kind == StrategyKind::Dfs;
        if dfs && opts.shard.count > 1 {
            return Err(BadInput(format!(
                "--shard {}: dfs cannot be sharded: its executions are numbered across rounds whose sizes are known \
                 only after they run; run dfs on one machine (--jobs uses every core), or shard random, pct, delay \
                 or delay-all",
                opts.shard
            ))
            .into());
        }
        if opts.strategy.kind == StrategyKind::Coverage && opts.shard.count > 1 {
            return Err(BadInput(format!(
                "--shard {}: coverage cannot be sharded: each execution starts from the corpus of the executions \
                 before it, which another machine does not have; run it on one machine (--jobs uses every core)",
                opts.shard
            ))
            .into());
        }
        if let Some(mode) = opts.warm_start {
            check_warm_start(opts, mode)?;
        }
        let limit = opts.executions.unwrap_or(if opts.time_budget.is_some() { u64::MAX } else { 1 });
        let units = opts.shard.units_below(limit);
        if units == 0 {
            let (s, k) = (opts.shard, opts.shard.index);
            return Err(BadInput(format!("--shard {s}: a run of {limit} executions has none for shard {k}")).into());
        }
        let jobs = opts.jobs.unwrap_or_else(|| jobs::default_jobs(cluster)).max(1);
        // Never more jobs than executions to run.
        let jobs = if dfs || limit == u64::MAX { jobs } else { jobs.min(usize::try_from(units).unwrap_or(usize::MAX)) };
        let cpus = crate::pin::plan(opts.pin, jobs).map_err(|e| BadInput(e.to_string()))?;
        if !opts.quiet {
            let pinned: Vec<String> = cpus.iter().flatten().map(|c| c.to_string()).collect();
            let on = if pinned.is_empty() {
                String::new()
            } else {
                format!(", pinned to host CPU {} (--pin off to spread)", pinned.join(","))
            };
            let shard = if opts.shard == Shard::ALL { String::new() } else { format!(", shard {}", opts.shard) };
            eprintln!("{jobs} job{}{on}{shard}", if jobs == 1 { "" } else { "s" });
        }
        Ok(Plan { dfs, limit, jobs, cpus })
    }
}

/// The run's identity: what shards of one run share.
fn identity(
    cluster: &Cluster,
    opts: &RunOptions,
    images_hash: &str,
    explore: &engine::ExploreSpec,
    time_limit_ns: u64,
) -> RunIdentity {
    let uml = opts.runtime == RuntimeKind::Uml;
    RunIdentity {
        images_hash: images_hash.to_string(),
        seed: opts.seed,
        strategy: opts.strategy.kind.name().to_string(),
        depth: opts.strategy.depth,
        horizon: opts.strategy.horizon,
        window_ns: simtime::span_ns(explore.window),
        max_crashes: explore.max_crashes,
        time_limit_ns,
        runtime: opts.runtime.name().to_string(),
        kernel: uml.then(|| cluster.spec.cluster.kernel.name().to_string()),
        userspace: uml.then(|| cluster.spec.cluster.userspace().name().to_string()),
        nodes: cluster.node_count(),
        executions: opts.executions,
        until_failure: opts.until_failure,
        critical_walks: opts.critical_walks,
        expect_reached: cluster.expect_reached.clone(),
        boot_seed: opts.boot_seed(),
    }
}

/// A job's own state: its strategy, and with `--warm-start` its boot.
struct Worker {
    strategy: Box<dyn Strategy>,
    /// The measured horizon its strategy was made with (`None`: the
    /// options' own); made again once when the run measures it.
    horizon: Option<u64>,
    warm: Option<warm::WarmBoot>,
}

/// The units of a run and how to run one.
struct Units<'a> {
    opts: &'a RunOptions,
    plan: &'a Plan,
    explore: &'a engine::ExploreSpec,
    runner: UnitRunner<'a>,
    /// What the strategy keeps between executions.
    adaptive: Adaptive,
}

impl Units<'_> {
    fn strategy(&self) -> Box<dyn Strategy> {
        let mut o = self.opts.strategy;
        o.horizon = self.adaptive.horizon().unwrap_or(o.horizon);
        execution::make_strategy(&o, self.opts.seed, self.explore)
    }

    /// The strategy as a failure file records it (its own parameters; the
    /// run's are taken from each execution's spec).
    fn failure_strategy_spec(&self) -> explore::failure_file::StrategySpec {
        self.strategy().spec()
    }

    /// Runs every unit on the jobs and lets `obs` observe them in order.
    /// Returns whether an exhaustive strategy ran out of work.
    fn run(&self, obs: &mut Observer, bar: &ProgressBar, began: Instant) -> Result<bool> {
        let (opts, plan) = (self.opts, self.plan);
        let feed = Feed {
            shard: opts.shard,
            end: (!plan.dfs && plan.limit != u64::MAX).then(|| opts.shard.units_below(plan.limit)),
            budget: opts.time_budget.map(|b| (began, b)),
            lookahead: 2 * plan.jobs as u64,
            gate: self.adaptive.gate(),
        };
        let mut exhausted = false;
        let mut next_index = 0u64;
        parallel::run_in_order(
            &plan.cpus,
            feed,
            &self.runner.cancel,
            || Worker { strategy: self.strategy(), horizon: self.adaptive.horizon(), warm: None },
            |w, u| self.unit(w, u),
            |unit, out| {
                if out.exhausted {
                    exhausted = true;
                    return Ok(Flow::Stop);
                }
                for g in out.groups {
                    let index = if plan.dfs { next_index } else { unit };
                    self.adaptive.observe(index, &g, out.plan.as_ref());
                    next_index += 1;
                    let flow = obs.observe(index, g)?;
                    bar.set_message(obs.progress(began.elapsed().as_secs_f64()));
                    bar.inc(1);
                    if flow == Flow::Stop || (plan.dfs && next_index >= plan.limit) {
                        return Ok(Flow::Stop);
                    }
                }
                Ok(Flow::Continue)
            },
        )?;
        Ok(exhausted)
    }

    /// One unit, on a worker: execution `unit` under the worker's
    /// `strategy`, or for dfs round `unit` under a strategy of its own.
    fn unit(&self, worker: &mut Worker, unit: u64) -> Result<UnitOutput> {
        let runner = &self.runner;
        if !self.plan.dfs {
            let label = format!("e{unit}");
            if let Some((mut own, seed, plan)) = self.adaptive.unit_strategy(self.opts, self.explore, unit) {
                // A strategy of the unit's own (the default schedule, a
                // coverage plan): never exhausted.
                own.begin_execution(unit);
                let groups = vec![runner.group(unit, seed, own.as_mut(), &label, &mut worker.warm)?];
                return Ok(UnitOutput { groups, plan, exhausted: false });
            }
            if worker.horizon != self.adaptive.horizon() {
                worker.strategy = self.strategy();
                worker.horizon = self.adaptive.horizon();
            }
            let Worker { strategy, warm, .. } = worker;
            if !strategy.begin_execution(unit) {
                return Ok(UnitOutput { groups: Vec::new(), plan: None, exhausted: true });
            }
            let seed = engine::execution_seed(self.opts.seed, unit);
            return Ok(UnitOutput {
                groups: vec![runner.group(unit, seed, strategy.as_mut(), &label, warm)?],
                plan: None,
                exhausted: false,
            });
        }
        let (o, d) = (self.opts, &self.opts.strategy);
        let mut round =
            HybridDfs::one_round(o.seed, u64::from(d.depth), d.horizon, execution::weights(self.explore), unit);
        let seed = dfs_round_seed(o.seed, unit);
        let mut groups = Vec::new();
        // A round never needs more executions than the run.
        while (groups.len() as u64) < self.plan.limit && round.begin_execution(0) {
            let g = runner.group(unit, seed, &mut round, &format!("r{unit}.{}", groups.len()), &mut worker.warm)?;
            let failed = g.failed();
            groups.push(g);
            if failed && o.until_failure {
                break;
            }
        }
        Ok(UnitOutput { groups, plan: None, exhausted: false })
    }
}

fn progress_bar(opts: &RunOptions, limit: u64) -> ProgressBar {
    if opts.quiet || limit < 2 {
        return ProgressBar::hidden();
    }
    if limit == u64::MAX {
        let b = ProgressBar::new_spinner();
        b.set_style(ProgressStyle::with_template("{spinner} {pos} executions, {msg} [{elapsed_precise}]").unwrap());
        b.enable_steady_tick(Duration::from_millis(200));
        return b;
    }
    let b = ProgressBar::new(limit);
    b.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} executions, {msg} [{elapsed_precise}]").unwrap());
    b
}
