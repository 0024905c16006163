//! `simcluster run`: executions chosen by a strategy, their outputs, and
//! the one JSON line a machine reads at the end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use checker::engine::{self, ExecutionResult, ExecutionSpec, FailureKind, RuntimeKind, Verdict};
use checker::failure_file::{self, FailureRecord};
use checker::strategy::{
    find_critical_transition, DelayBounded, Guided, HybridDfs, KindWeights, Pct, RandomWalk, Strategy,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cluster::{Cluster, CpuidMode};
use crate::image::{self, Images};
use crate::outputs::{write_execution, write_failure, write_pcaps};

pub use crate::BadInput;

/// Which exploration strategy, with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyKind {
    /// Weighted random walk (MaceMC).
    Random,
    /// Probabilistic concurrency testing, `depth` = bug depth d.
    Pct,
    /// Default scheduler plus `depth` delays at random choice points.
    Delay,
    /// Every placement of up to `depth` delays, by increasing count.
    DelayAll,
    /// Bounded DPOR over `depth` choice points after random prefixes.
    Dfs,
}

impl StrategyKind {
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Random => "random",
            StrategyKind::Pct => "pct",
            StrategyKind::Delay => "delay",
            StrategyKind::DelayAll => "delay-all",
            StrategyKind::Dfs => "dfs",
        }
    }

    pub fn default_depth(self) -> u32 {
        match self {
            StrategyKind::Random => 0,
            StrategyKind::Pct => 3,
            StrategyKind::Delay | StrategyKind::DelayAll => 2,
            StrategyKind::Dfs => 4,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct StrategyOptions {
    pub kind: StrategyKind,
    pub depth: u32,
    /// Choice points over which PCT change points, delays and DFS prefixes
    /// are placed.
    pub horizon: u64,
}

/// The default horizon: about the number of choice points of one
/// execution of the example clusters (measured; see the README).
pub const DEFAULT_HORIZON: u64 = 2000;

/// Options shared by run, replay and shrink.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    /// At most this many executions (`None`: until the time budget ends).
    pub executions: Option<u64>,
    /// Stop starting executions after this much wall time.
    pub time_budget: Option<Duration>,
    /// Stop after the first failing execution.
    pub until_failure: bool,
    pub time_limit_ns: Option<u64>,
    pub out: PathBuf,
    pub watchdog: Duration,
    pub quiet: bool,
    /// Also keep every execution's pcap files under DIR/execution-I/.
    pub pcap: Option<PathBuf>,
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
    /// The host CPU simcluster and its nodes were pinned to (`--pin`).
    pub pinned_cpu: Option<usize>,
}

/// What the host offers a KVM runtime.
#[derive(Debug, Clone)]
pub struct HostVirt {
    /// /proc/cpuinfo lists vmx or svm.
    pub vmx_svm: bool,
    /// /dev/kvm opened (or why not).
    pub dev_kvm: std::result::Result<(), String>,
    /// The kernel KVM nodes would boot ([`KVM_KERNEL_ENV`]).
    pub kvm_kernel: Option<PathBuf>,
}

impl HostVirt {
    /// Looks at this host.
    pub fn detect() -> HostVirt {
        let vmx_svm = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
            s.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
        });
        let dev_kvm = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .map(|_| ())
            .map_err(|e| format!("/dev/kvm: {e}"));
        HostVirt { vmx_svm, dev_kvm, kvm_kernel: std::env::var_os(KVM_KERNEL_ENV).map(PathBuf::from) }
    }
}

/// Environment variable naming the kernel (bzImage or vmlinux) KVM nodes boot;
/// the image builder builds only the user-mode Linux kernel.
pub const KVM_KERNEL_ENV: &str = "SIMCLUSTER_KVM_KERNEL";

/// Picks the node runtime and says why: `asked` is `None` for `--runtime
/// auto` (KVM when /proc/cpuinfo has vmx/svm, /dev/kvm opens and a KVM
/// kernel is named by [`KVM_KERNEL_ENV`]; user-mode Linux otherwise). Asking
/// for KVM on a host that cannot run it is bad input (a missing kernel is
/// reported by [`images_for_runtime`]).
pub fn choose_runtime(asked: Option<RuntimeKind>, host: &HostVirt) -> std::result::Result<(RuntimeKind, String), BadInput> {
    let kvm_problem = match (&host.dev_kvm, host.vmx_svm) {
        (Err(e), _) => Some(format!("{e} cannot be opened")),
        (Ok(()), false) => Some(
            "/dev/kvm offers no hardware virtualization (no vmx/svm in /proc/cpuinfo; a PVM or nested \
             host emulates guest kernel code about 1000x slower and cannot boot stock Linux)"
                .to_string(),
        ),
        (Ok(()), true) => None,
    };
    match (asked, kvm_problem) {
        (Some(RuntimeKind::Uml), _) => Ok((RuntimeKind::Uml, "uml (asked for)".into())),
        (Some(RuntimeKind::Kvm), None) => Ok((RuntimeKind::Kvm, "kvm (asked for; /dev/kvm with vmx/svm)".into())),
        (Some(RuntimeKind::Kvm), Some(why)) => {
            Err(BadInput(format!("--runtime kvm: this host cannot run the KVM runtime: {why}; use --runtime uml")))
        }
        (None, None) if host.kvm_kernel.is_none() => Ok((
            RuntimeKind::Uml,
            format!(
                "uml (auto: the host has vmx/svm, but {KVM_KERNEL_ENV} names no kernel for KVM nodes; the image \
                 builder builds only the user-mode Linux kernel)"
            ),
        )),
        (None, None) => Ok((RuntimeKind::Kvm, "kvm (auto: /dev/kvm opens and the CPU has vmx/svm)".into())),
        (None, Some(why)) => Ok((RuntimeKind::Uml, format!("uml (auto: {why})"))),
    }
}

/// The images as `runtime` boots them: KVM nodes boot the kernel named by
/// [`KVM_KERNEL_ENV`] with the same root filesystem.
pub fn images_for_runtime(mut images: Images, runtime: RuntimeKind) -> Result<Images> {
    if runtime == RuntimeKind::Kvm {
        let Some(k) = std::env::var_os(KVM_KERNEL_ENV) else {
            return Err(BadInput(format!(
                "--runtime kvm: set {KVM_KERNEL_ENV} to an x86-64 bzImage or vmlinux (the image builder builds \
                 only the user-mode Linux kernel)"
            ))
            .into());
        };
        let k = PathBuf::from(k);
        if !k.is_file() {
            return Err(BadInput(format!("{KVM_KERNEL_ENV}={}: no such file", k.display())).into());
        }
        images.kernel = k;
    }
    Ok(images)
}

/// Default virtual-time limit of one execution.
pub const DEFAULT_TIME_LIMIT_NS: u64 = 600_000_000_000;

/// MaceMC's answer for a liveness failure.
#[derive(Debug, Clone, Serialize)]
pub struct CriticalSummary {
    /// The step (0-based, every engine action counted) after which no
    /// fault-free random walk reached a live state.
    pub step: u64,
    /// Virtual time of that choice point in the failing execution.
    pub virtual_seconds: f64,
    /// What the failing execution did there.
    pub action: Option<String>,
    pub probes: u64,
    pub walks_per_probe: u32,
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
    pub strategy: String,
    /// An exhaustive strategy ran out of executions to explore.
    pub exhausted: bool,
    pub executions_per_hour: f64,
    pub runtime: &'static str,
    /// The user-mode Linux guest kernel series ("7.2", "6.1"); null on KVM.
    pub kernel: Option<&'static str>,
    /// Host CPU seconds of the whole run, simcluster's own against its
    /// guests' (the node processes it started and reaped).
    pub host_cpu: HostCpu,
    /// The user-mode Linux userspace mode ("seccomp", "ptrace"); null on KVM.
    pub userspace: Option<&'static str>,
    pub nodes: usize,
    pub images_hash: String,
    pub image_build_seconds: f64,
    /// Mean over the executions of the wall time from an execution's first
    /// node spawn until every node's agent was ready (null: none got
    /// there); image building is `image_build_seconds`, never part of it.
    pub boot_wall_seconds: Option<f64>,
    pub speedup: f64,
    /// Mean PSS of one node's host processes at the end of an execution.
    pub memory_per_node_mib: f64,
    /// simcluster's storage for one node's data disk (overlay of written
    /// blocks, cache view, write log) at the end of the last execution.
    pub disk_storage_per_node_kib: Option<f64>,
    /// Choice points of the reported execution.
    pub choice_points: u64,
    /// Events in the reported execution's trace (trace.jsonl lines): quiet
    /// grants fold (see checker::trace), so this follows what guests saw,
    /// not `grants`.
    pub trace_events: usize,
    /// Grants (times a node was let run) of the reported execution: the
    /// engine's unit of work.
    pub grants: u64,
    /// Crashes in the reported execution.
    pub crashes: u32,
    /// netsim's counters for the reported execution.
    pub network: Option<serde_json::Value>,
    pub failure: Option<serde_json::Value>,
    pub failure_file: Option<PathBuf>,
    /// Which execution (0-based) failed first.
    pub failing_execution: Option<u64>,
    pub critical_transition: Option<CriticalSummary>,
    /// Disk crash states explored, over every crash point of the run.
    pub crash_states_explored: u64,
    /// The first disk crash point of each execution that had one.
    pub crash_points: Vec<CrashPointSummary>,
    pub out: PathBuf,
}

/// A disk crash point: how many crash states it has, how many were run.
#[derive(Debug, Clone, Serialize)]
pub struct CrashPointSummary {
    pub execution: u64,
    pub node: String,
    pub virtual_seconds: f64,
    pub volatile_writes: usize,
    pub states: u128,
    /// False when counting gave up and `states` is a lower bound.
    pub states_exact: bool,
    /// Executions that applied one of its states (all of them when the
    /// count is at most `[disk] enumerate`, else one sampled state).
    pub explored: u64,
}

/// The cluster and images of a run.
struct Ctx<'a> {
    cluster: &'a Cluster,
    images: &'a Images,
}

/// Traffic captures of an execution: (file name, pcap bytes).
type Pcaps = Vec<(String, Vec<u8>)>;

/// Running totals of a run.
#[derive(Default)]
struct Tally {
    executions: u64,
    failures: u64,
    virtual_ns_total: u64,
    boot_walls: Vec<f64>,
    last: Option<(ExecutionResult, Pcaps)>,
    failing: Option<(u64, ExecutionResult, PathBuf)>,
    critical: Option<CriticalSummary>,
    crash_points: Vec<CrashPointSummary>,
}

impl Tally {
    /// Counts a finished execution; the run's first failure is written out
    /// (failure file, trace, logs, pcaps, report).
    #[allow(clippy::too_many_arguments)]
    fn observe(
        &mut self,
        ctx: &Ctx,
        opts: &RunOptions,
        spec: &ExecutionSpec,
        executed: Executed,
        index: u64,
        strategy_spec: &checker::failure_file::StrategySpec,
        crash_state: Option<(u32, u64)>,
        bar: &ProgressBar,
    ) -> Result<()> {
        let Executed { result, pcaps } = executed;
        self.executions += 1;
        let label = match crash_state {
            None => format!("execution-{index}"),
            Some((_, k)) => format!("execution-{index}-state{k}"),
        };
        if let Some(dir) = &opts.pcap {
            write_pcaps(&dir.join(&label), &pcaps)?;
        }
        self.virtual_ns_total += result.virtual_ns;
        if let Some(b) = result.boot_wall {
            self.boot_walls.push(b.as_secs_f64());
        }
        if let Verdict::Fail(f) = &result.verdict {
            self.failures += 1;
            if self.failing.is_none() {
                let mut strategy = strategy_spec.clone();
                if !spec.explore.crash_states.is_empty() {
                    strategy.params.insert("crash_states".into(), crash_states_value(&spec.explore.crash_states));
                }
                let record = FailureRecord {
                    format_version: failure_file::FORMAT_VERSION,
                    images_hash: ctx.images.hash.clone(),
                    cluster_dir: ctx.cluster.dir.canonicalize().unwrap_or(ctx.cluster.dir.clone()),
                    seed: opts.seed,
                    strategy,
                    execution_index: index,
                    actions: result.decisions.clone(),
                    failure: failure_line(&result).unwrap_or_default(),
                    trace_hash: result.trace_hash.clone(),
                };
                let mut extra = Vec::new();
                if f.kind == FailureKind::Liveness && opts.critical_walks > 0 {
                    bar.set_message("searching for the critical transition".to_string());
                    self.critical = critical_transition(spec, &result, &record, opts.critical_walks, bar)?;
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
                let dir = opts.out.join("failures").join(&label);
                let file = write_failure(&dir, ctx.cluster, &result, &pcaps, &record, &extra)?;
                self.failing = Some((index, result.clone(), file));
            }
        }
        self.last = Some((result, pcaps));
        Ok(())
    }
}

/// `{"1": 3}`: crash number -> enumerated state index, as failure files
/// store it.
fn crash_states_value(m: &std::collections::BTreeMap<u32, u64>) -> serde_json::Value {
    serde_json::Value::Object(m.iter().map(|(c, k)| (c.to_string(), (*k).into())).collect())
}

/// The forced crash states of a failure file's strategy parameters.
pub(crate) fn crash_states_param(s: &checker::failure_file::StrategySpec) -> std::collections::BTreeMap<u32, u64> {
    s.params
        .get("crash_states")
        .and_then(|v| v.as_object())
        .map(|o| o.iter().filter_map(|(c, k)| Some((c.parse().ok()?, k.as_u64()?))).collect())
        .unwrap_or_default()
}

/// This process's scratch directory: executions' node sockets and run
/// directories live in subdirectories of it.
fn scratch_root() -> PathBuf {
    std::env::temp_dir().join(format!("simcluster-{}", std::process::id()))
}

/// Removes this process's scratch directory and everything in it, for a
/// process about to exit mid-execution (its nodes already killed).
pub fn remove_scratch_now() {
    let _ = std::fs::remove_dir_all(scratch_root());
}

/// Removes this process's scratch directory once no execution uses it.
pub fn remove_scratch() {
    let _ = std::fs::remove_dir(scratch_root());
}

fn scratch_dir() -> Result<PathBuf> {
    let d = scratch_root();
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

/// The explore settings of a run: the cluster's, with command-line overrides.
pub fn explore_for(cluster: &Cluster, window_ns: Option<u64>, max_crashes: Option<u32>) -> engine::ExploreSpec {
    let mut e = cluster.explore.clone();
    if let Some(w) = window_ns {
        e.window_ns = w;
    }
    if let Some(m) = max_crashes {
        e.max_crashes = m;
    }
    e
}

/// The data disk spec of a run: the base image opened once (reading it
/// computes every block's crc) and shared by every node and execution.
pub(crate) fn disk_spec(cluster: &Cluster, images: &Images) -> Result<Option<engine::DiskSpec>> {
    let (Some(d), Some(path)) = (&cluster.disk, &images.disk) else { return Ok(None) };
    let base = disksim::BlockStore::open_image(path).with_context(|| format!("cannot open the disk image {}", path.display()))?;
    Ok(Some(engine::DiskSpec {
        base,
        latency_ns: d.latency_ns,
        model: if d.torn_writes { disksim::CrashModel::TORN } else { disksim::CrashModel::ATOMIC },
        enumerate: d.enumerate,
    }))
}

pub(crate) fn spec_for(
    cluster: &Cluster,
    images: &Images,
    disk: &Option<engine::DiskSpec>,
    time_limit_ns: Option<u64>,
    watchdog: Duration,
    explore: engine::ExploreSpec,
    seed: u64,
) -> ExecutionSpec {
    ExecutionSpec {
        kernel: images.kernel.clone(),
        initrd: images.initrd.clone(),
        node_names: cluster.node_names(),
        mem_mb: cluster.spec.cluster.memory_mb,
        workload_node: cluster.workload_node,
        host_workload: cluster.host_workload.clone(),
        invariants: cluster.invariants.iter().map(|(n, i, _)| (n.clone(), *i)).collect(),
        liveness: cluster.liveness.iter().map(|(n, i, _)| (n.clone(), *i)).collect(),
        time_limit_ns: time_limit_ns.or(cluster.time_limit_ns).unwrap_or(DEFAULT_TIME_LIMIT_NS),
        watchdog,
        connect_timeout: Duration::from_secs(60),
        seed,
        // Set per execution by `execute_one`.
        scratch: PathBuf::new(),
        network: Some(engine::NetworkSpec {
            config: cluster.spec.faults.network.clone(),
            scheduled: cluster.partitions.clone(),
            pcap_dir: None,
        }),
        disk: disk.clone(),
        history_node: cluster.history_node,
        explore,
        runtime: RuntimeKind::Uml,
        uml_args: uml_args(&cluster.spec.cluster),
        shared_clock: cluster.spec.cluster.shared_clock(),
        kernel_faults_cpuid: cluster.spec.cluster.kernel.faults_cpuid_itself() && cluster.spec.cluster.cpuid == CpuidMode::Virtual,
    }
}

/// Host CPU time (getrusage), in seconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct HostCpu {
    /// simcluster's own threads: the engine, its devices, the controller.
    pub simcluster_user: f64,
    pub simcluster_system: f64,
    /// The node processes (guest kernels and the host processes behind
    /// guest programs) that have ended and been reaped.
    pub guests_user: f64,
    pub guests_system: f64,
    /// simcluster's share of all of it.
    pub simcluster_share: f64,
    /// The CPU simcluster and its nodes shared (`--pin`); null: spread.
    pub pinned_cpu: Option<usize>,
}

impl HostCpu {
    pub fn now() -> HostCpu {
        fn usage(who: libc::c_int) -> (f64, f64) {
            // SAFETY: getrusage fills the zeroed struct we pass.
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::getrusage(who, &mut u) };
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            (secs(u.ru_utime), secs(u.ru_stime))
        }
        let (su, ss) = usage(libc::RUSAGE_SELF);
        let (gu, gs) = usage(libc::RUSAGE_CHILDREN);
        HostCpu {
            simcluster_user: su,
            simcluster_system: ss,
            guests_user: gu,
            guests_system: gs,
            simcluster_share: (su + ss) / (su + ss + gu + gs).max(1e-9),
            pinned_cpu: None,
        }
    }
}

/// The kernel command-line words that carry `[cluster]`'s settings to
/// user-mode Linux nodes.
fn uml_args(c: &crate::cluster::ClusterSection) -> Vec<String> {
    let mut args: Vec<String> = c.userspace().kernel_arg().map(String::from).into_iter().collect();
    if c.cpuid == CpuidMode::Host {
        args.push("host_cpuid".into());
    }
    args
}

/// An execution's result and its traffic captures (file name -> pcap).
pub(crate) struct Executed {
    pub result: ExecutionResult,
    pub pcaps: Pcaps,
}

/// Runs one execution in its own scratch directory.
pub(crate) fn execute_one(spec: &mut ExecutionSpec, strategy: &mut dyn Strategy, label: &str) -> Result<Executed> {
    let scratch = scratch_dir()?.join(label);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    spec.scratch = scratch.clone();
    if let Some(n) = spec.network.as_mut() {
        n.pcap_dir = Some(scratch.join("pcap"));
    }
    let r = engine::execute(spec, strategy).with_context(|| format!("{label} (seed {}) could not run", spec.seed));
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

fn make_strategy(o: &StrategyOptions, seed: u64, crash_weight: u32) -> Box<dyn Strategy> {
    let d = o.depth;
    let weights = KindWeights::default().set(checker::strategy::ActionKind::Crash, crash_weight);
    match o.kind {
        StrategyKind::Random => Box::new(RandomWalk::new(seed, weights)),
        StrategyKind::Pct => Box::new(Pct::new(seed, d.max(1), o.horizon)),
        StrategyKind::Delay => Box::new(DelayBounded::sampling(seed, d, o.horizon)),
        StrategyKind::DelayAll => Box::new(DelayBounded::exhaustive(d, o.horizon)),
        StrategyKind::Dfs => Box::new(HybridDfs::new(seed, u64::from(d), o.horizon, weights)),
    }
}

/// The failure as recorded and compared by replay: "Kind: message".
pub fn failure_line(result: &ExecutionResult) -> Option<String> {
    result.verdict.failure().map(|f| format!("{:?}: {}", f.kind, f.message))
}

/// `simcluster run`.
pub fn run(cluster_dir: &Path, opts: &RunOptions) -> Result<(Summary, bool)> {
    let cluster = Cluster::load(cluster_dir)?;
    let images = images_for_runtime(image::build(&cluster, opts.quiet)?, opts.runtime)?;
    let explore = explore_for(&cluster, opts.window_ns, opts.max_crashes);
    let disk = disk_spec(&cluster, &images)?;
    let ctx = Ctx { cluster: &cluster, images: &images };
    let mut strategy = make_strategy(&opts.strategy, opts.seed, explore.crash_weight);
    let mut strategy_spec = strategy.spec();
    strategy_spec.params.insert("window_ns".into(), explore.window_ns.into());
    strategy_spec.params.insert("max_crashes".into(), explore.max_crashes.into());
    if opts.runtime != RuntimeKind::Uml {
        // Replays run on the runtime the failure was found on (absent: UML).
        strategy_spec.params.insert("runtime".into(), opts.runtime.name().into());
    }
    let began = Instant::now();
    let limit = opts.executions.unwrap_or(if opts.time_budget.is_some() { u64::MAX } else { 1 });
    let bar = progress_bar(opts, limit);
    let mut t = Tally::default();
    let mut exhausted = false;
    for index in 0..limit {
        if opts.time_budget.is_some_and(|b| began.elapsed() >= b) && index > 0 {
            break;
        }
        if opts.until_failure && t.failing.is_some() {
            break;
        }
        if !strategy.begin_execution(index) {
            exhausted = true;
            break;
        }
        let seed = engine::execution_seed(opts.seed, index);
        let mut spec = spec_for(&cluster, &images, &disk, opts.time_limit_ns, opts.watchdog, explore.clone(), seed);
        spec.runtime = opts.runtime;
        let executed = execute_one(&mut spec, strategy.as_mut(), &format!("e{index}"))?;
        // A crash point with few enough disk crash states: explore every
        // other state too, each in a sibling execution that replays this
        // one's decisions up to the crash and applies that state.
        let siblings = executed
            .result
            .crash_points
            .first()
            .filter(|p| disk.as_ref().is_some_and(|d| p.enumerable(d.enumerate)))
            .and_then(|p| p.chosen.map(|k| (p.crash, k, p.states as u64)));
        let decisions = executed.result.decisions.clone();
        if let Some(p) = executed.result.crash_points.first() {
            t.crash_points.push(CrashPointSummary {
                execution: index,
                node: p.node.clone(),
                virtual_seconds: p.time as f64 / 1e9,
                volatile_writes: p.volatile_writes,
                states: p.states,
                states_exact: p.states_exact,
                explored: siblings.map_or(1, |(_, _, n)| n),
            });
        }
        t.observe(&ctx, opts, &spec, executed, index, &strategy_spec, None, &bar)?;
        if let Some((crash, chosen, states)) = siblings {
            for k in (0..states).filter(|&k| k != chosen) {
                if opts.until_failure && t.failing.is_some() {
                    break;
                }
                let mut s = spec.clone();
                s.explore.crash_states.insert(crash, k);
                let mut guided = Guided::new(&decisions);
                let e = execute_one(&mut s, &mut guided, &format!("e{index}-state{k}"))?;
                t.observe(&ctx, opts, &s, e, index, &strategy_spec, Some((crash, k)), &bar)?;
            }
        }
        let wall = began.elapsed().as_secs_f64();
        bar.set_message(format!(
            "{} failed, {:.0}x virtual/wall, {:.0} executions/hour",
            t.failures,
            t.virtual_ns_total as f64 / 1e9 / wall.max(1e-9),
            t.executions as f64 * 3600.0 / wall.max(1e-9)
        ));
        bar.inc(1);
        if index + 1 == limit || opts.time_budget.is_some_and(|b| began.elapsed() >= b) {
            if let Some((_, pcaps)) = &t.last {
                write_pcaps(&opts.out.join("last"), pcaps)?;
            }
        }
    }
    bar.finish_and_clear();
    remove_scratch();
    let Tally { executions: done, failures, last, failing, critical, virtual_ns_total, boot_walls, crash_points, .. } = t;
    let (last, _) = last.context("no execution ran")?;
    write_execution(&opts.out.join("last"), &cluster, &last)?;
    let wall = began.elapsed().as_secs_f64();
    let shown = failing.as_ref().map(|(_, r, _)| r).unwrap_or(&last);
    let summary = Summary {
        executions: done,
        failures,
        trace_hash: shown.trace_hash.clone(),
        virtual_seconds: shown.virtual_ns as f64 / 1e9,
        wall_seconds: wall,
        seed: opts.seed,
        strategy: opts.strategy.kind.name().to_string(),
        exhausted,
        executions_per_hour: done as f64 * 3600.0 / wall.max(1e-9),
        runtime: opts.runtime.name(),
        kernel: (opts.runtime == RuntimeKind::Uml).then(|| cluster.spec.cluster.kernel.name()),
        host_cpu: HostCpu { pinned_cpu: opts.pinned_cpu, ..HostCpu::now() },
        userspace: (opts.runtime == RuntimeKind::Uml).then(|| cluster.spec.cluster.userspace().name()),
        nodes: cluster.node_count(),
        images_hash: images.hash.clone(),
        image_build_seconds: images.wall_seconds,
        boot_wall_seconds: (!boot_walls.is_empty()).then(|| boot_walls.iter().sum::<f64>() / boot_walls.len() as f64),
        speedup: virtual_ns_total as f64 / 1e9 / wall.max(1e-9),
        memory_per_node_mib: {
            let m = &last.node_memory_kib;
            m.iter().sum::<u64>() as f64 / 1024.0 / m.len().max(1) as f64
        },
        disk_storage_per_node_kib: disk.as_ref().map(|_| {
            let d = &last.disk_storage_bytes;
            d.iter().sum::<u64>() as f64 / 1024.0 / d.len().max(1) as f64
        }),
        choice_points: shown.choice_points,
        trace_events: shown.trace.len(),
        grants: shown.grants,
        crashes: shown.crashes,
        network: shown.network.clone(),
        failure: shown.verdict.failure().map(|f| serde_json::to_value(f).unwrap()),
        failure_file: failing.as_ref().map(|(_, _, p)| p.clone()),
        failing_execution: failing.as_ref().map(|(i, _, _)| *i),
        critical_transition: critical,
        crash_states_explored: crash_points.iter().map(|p| p.explored).sum(),
        crash_points,
        out: opts.out.clone(),
    };
    Ok((summary, failures > 0))
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

/// MaceMC's critical-transition search over the choice points of a failing
/// liveness execution. Probe k replays the first k choice points (the
/// recorded decisions, the same network randomness) and then walks at
/// random `walks` times, fault-free (see `ExploreSpec::calm_from`); the
/// prefix is live if any walk satisfies every liveness check.
fn critical_transition(
    spec: &ExecutionSpec,
    failed: &ExecutionResult,
    record: &FailureRecord<checker::strategy::Decision>,
    walks: u32,
    bar: &ProgressBar,
) -> Result<Option<CriticalSummary>> {
    let steps = usize::try_from(failed.chosen.steps()).unwrap_or(usize::MAX);
    let mut host_error = None;
    let mut probe_no = 0u64;
    let found = find_critical_transition(steps, |k| {
        probe_no += 1;
        for w in 0..walks {
            let walk_seed = engine::execution_seed(spec.seed ^ 0x6372_6974, (k as u64) << 8 | u64::from(w));
            let mut s = spec.clone();
            s.explore.calm_from = Some((k as u64, walk_seed));
            let mut g = Guided::new(&record.actions);
            bar.set_message(format!("critical transition: probe {probe_no} (prefix of {k} steps), walk {}", w + 1));
            match execute_one(&mut s, &mut g, &format!("probe{k}-{w}")) {
                Ok(e) => {
                    let live = e.result.verdict.failure().is_none_or(|f| f.kind != FailureKind::Liveness);
                    if live {
                        return true;
                    }
                }
                Err(e) => {
                    host_error.get_or_insert(e);
                    return true;
                }
            }
        }
        false
    });
    if let Some(e) = host_error {
        return Err(e.context("a critical-transition probe could not run"));
    }
    let Ok(c) = found else { return Ok(None) };
    let at = failed.chosen.at(c.index as u64);
    Ok(Some(CriticalSummary {
        step: c.index as u64,
        // Inside a folded quiet stretch only its first and last times are
        // kept: the stretch's first time stands for the step's.
        virtual_seconds: at.map_or(0.0, |s| s.time as f64 / 1e9),
        action: at.map(describe_span),
        probes: c.probes,
        walks_per_probe: walks,
    }))
}

/// What a step of the step log did: its action, or for a step inside a
/// folded stretch of quiet node runs, the stretch.
fn describe_span(s: &checker::engine::StepSpan) -> String {
    if s.steps == 1 {
        return describe_action(&s.action);
    }
    let nodes: Vec<String> = s.nodes.iter().map(|n| format!("n{n}")).collect();
    format!(
        "one of {} quiet runs of {} (steps {}..={}, {:.6}..{:.6} s virtual), none of which showed anything to a guest",
        s.steps,
        nodes.join(", "),
        s.first,
        s.first + s.steps - 1,
        s.time as f64 / 1e9,
        s.until as f64 / 1e9
    )
}

/// "DeliverFrame to n2 from n1", "Crash of n3", "RunNode n1".
pub fn describe_action(a: &checker::strategy::EnabledAction) -> String {
    use checker::strategy::ActionKind::*;
    match (a.kind, a.peer) {
        (DeliverFrame, Some(p)) => format!("frame delivery to n{} from n{p}", a.node),
        (RunNode, _) => format!("n{} runs", a.node),
        (Crash, _) => format!("crash of n{}", a.node),
        (Restart, _) => format!("restart of n{}", a.node),
        (Partition, _) => "partition starts".into(),
        (Heal, _) => "partition heals".into(),
        (CompleteDisk, _) => format!("disk request of n{} completes", a.node),
        (k, _) => format!("{} on n{}", k.name(), a.node),
    }
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    fn host(vmx_svm: bool, opens: bool) -> HostVirt {
        HostVirt {
            vmx_svm,
            dev_kvm: if opens { Ok(()) } else { Err("/dev/kvm: No such file or directory".into()) },
            kvm_kernel: Some("bzImage".into()),
        }
    }

    #[test]
    fn auto_picks_kvm_only_with_hardware_virtualization() {
        let (k, why) = choose_runtime(None, &host(true, true)).unwrap();
        assert_eq!(k, RuntimeKind::Kvm);
        assert!(why.starts_with("kvm (auto"), "{why}");
        let (k, why) = choose_runtime(None, &host(false, true)).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains("no vmx/svm"), "{why}");
        let (k, why) = choose_runtime(None, &host(true, false)).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains("/dev/kvm"), "{why}");
        let no_kernel = HostVirt { kvm_kernel: None, ..host(true, true) };
        let (k, why) = choose_runtime(None, &no_kernel).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains(KVM_KERNEL_ENV), "{why}");
    }

    #[test]
    fn kvm_without_hardware_virtualization_is_bad_input() {
        let e = choose_runtime(Some(RuntimeKind::Kvm), &host(false, true)).unwrap_err();
        assert!(e.0.contains("--runtime kvm") && e.0.contains("vmx/svm"), "{}", e.0);
        assert_eq!(choose_runtime(Some(RuntimeKind::Kvm), &host(true, true)).unwrap().0, RuntimeKind::Kvm);
        assert_eq!(choose_runtime(Some(RuntimeKind::Uml), &host(false, false)).unwrap().0, RuntimeKind::Uml);
    }
}
