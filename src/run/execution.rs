//! One execution: its spec from the cluster, its scratch directory, its
//! strategy, and running it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use engine::strategy::Strategy;
use engine::{ExecutionResult, ExecutionSpec, NodeId, RuntimeKind};
use explore::strategy::{CoverageWalk, DelayBounded, HybridDfs, KindWeights, Pct, RandomWalk};
use simtime::VirtualTime;

use super::{StrategyKind, StrategyOptions, DEFAULT_TIME_LIMIT_NS};
use crate::cluster::Cluster;
use crate::image::Images;

/// Traffic captures of an execution: (file name, pcap bytes).
pub(crate) type Pcaps = Vec<(String, Vec<u8>)>;

/// This process's scratch directory: executions' node sockets and run
/// directories live in subdirectories of it.
fn scratch_root() -> PathBuf {
    std::env::temp_dir().join(format!("simcluster-{}", std::process::id()))
}

/// Set when the process is exiting mid-run: no execution starts after.
static EXITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Is the process exiting mid-run (see [`remove_scratch_now`])? Then an
/// error a job meets on the way down is not the run's result.
pub fn exiting() -> bool {
    EXITING.load(std::sync::atomic::Ordering::SeqCst)
}

/// The process is exiting mid-run (a signal): from now on no execution
/// starts and none that ends counts. Call before killing the nodes, so an
/// execution they die under is not taken for a result.
pub fn mark_exiting() {
    EXITING.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Removes this process's scratch directory and everything in it, for a
/// process about to exit mid-execution (its nodes already killed, and no
/// new node can start: see `engine::kill_all_nodes`). Other jobs'
/// threads may still be between an execution's start and its first node,
/// so it looks again for a little while.
pub fn remove_scratch_now() {
    EXITING.store(true, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..10 {
        let _ = std::fs::remove_dir_all(scratch_root());
        std::thread::sleep(std::time::Duration::from_millis(20));
        if !scratch_root().exists() {
            return;
        }
    }
}

/// Removes this process's scratch directory once no execution uses it.
pub fn remove_scratch() {
    let _ = std::fs::remove_dir(scratch_root());
}

pub(crate) fn scratch_dir() -> Result<PathBuf> {
    if EXITING.load(std::sync::atomic::Ordering::SeqCst) {
        anyhow::bail!("simcluster is exiting");
    }
    let d = scratch_root();
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

/// The explore settings of a run: the cluster's, with command-line overrides.
pub fn explore_for(cluster: &Cluster, window_ns: Option<u64>, max_crashes: Option<u32>) -> engine::ExploreSpec {
    let mut e = cluster.explore.clone();
    if let Some(w) = window_ns {
        e.window = Duration::from_nanos(w);
    }
    if let Some(m) = max_crashes {
        e.max_crashes = m;
    }
    e
}

/// The images every node and execution of a run share, opened once
/// (opening an image reads it to compute every block's crc).
pub(crate) struct OpenImages {
    /// The data disks' spec, with their base image.
    pub disk: Option<engine::DiskSpec>,
    /// The root filesystem image.
    pub root: Option<engine::BlockStore>,
}

impl OpenImages {
    pub fn open(cluster: &Cluster, images: &Images) -> Result<OpenImages> {
        let root = match &images.root {
            None => None,
            Some(p) => Some(
                engine::BlockStore::open_image(p)
                    .with_context(|| format!("cannot open the root image {}", p.display()))?,
            ),
        };
        Ok(OpenImages { disk: disk_spec(cluster, images)?, root })
    }
}

/// The data disk spec of a run.
fn disk_spec(cluster: &Cluster, images: &Images) -> Result<Option<engine::DiskSpec>> {
    let (Some(d), Some(path)) = (&cluster.disk, &images.disk) else { return Ok(None) };
    let base = engine::BlockStore::open_image(path)
        .with_context(|| format!("cannot open the disk image {}", path.display()))?;
    Ok(Some(engine::DiskSpec {
        base,
        latency: Duration::from_nanos(d.latency_ns),
        model: if d.torn_writes { engine::CrashModel::TORN } else { engine::CrashModel::ATOMIC },
        enumerate: d.enumerate,
        faults: cluster.disk_faults,
    }))
}

pub(crate) fn spec_for(
    cluster: &Cluster,
    images: &Images,
    open: &OpenImages,
    time_limit_ns: Option<u64>,
    watchdog: Duration,
    explore: engine::ExploreSpec,
    seed: u64,
) -> ExecutionSpec {
    ExecutionSpec {
        kernel: images.kernel.clone(),
        initrd: images.initrd.clone(),
        root_disk: open.root.clone(),
        node_names: cluster.node_names(),
        clients: cluster.clients.iter().map(|&i| engine::NodeId::at(i)).collect(),
        mem_mb: cluster.spec.cluster.memory_mb,
        workload_node: NodeId::at(cluster.workload_node),
        host_workload: cluster.host_workload.clone(),
        ready_probe: cluster.ready_probe.is_some(),
        invariants: cluster.invariants.iter().map(|(n, i, _)| (n.clone(), NodeId::at(*i))).collect(),
        liveness: cluster.liveness.iter().map(|(n, i, _)| (n.clone(), NodeId::at(*i))).collect(),
        time_limit: VirtualTime::from_ns(time_limit_ns.or(cluster.time_limit_ns).unwrap_or(DEFAULT_TIME_LIMIT_NS)),
        watchdog,
        connect_timeout: Duration::from_secs(60),
        seed,
        boot_seed: None,
        // Set per execution by `execute_one`.
        scratch: PathBuf::new(),
        network: Some(engine::NetworkSpec {
            config: cluster.spec.faults.network.clone(),
            scheduled: cluster.partitions.clone(),
            capture: false,
        }),
        disk: open.disk.clone(),
        history: cluster.history_check(),
        explore,
        runtime: RuntimeKind::Uml,
        uml_args: uml_args(&cluster.spec.cluster),
        shared_clock: cluster.spec.cluster.shared_clock(),
        kernel_faults_cpuid: cluster.spec.cluster.kernel.faults_cpuid_itself()
            && cluster.spec.cluster.cpuid.virtualised(),
        lookahead: engine::Lookahead::On,
        cancel: None,
    }
}

/// `SIMCLUSTER_DEBUG_SYSCALL_CLOCK=1`: every clock read of a guest program
/// is a system call, as before the guest kernel's vDSO answered them
/// (patch `7.2/0004-um-time-travel-vdso-clock.patch`), for benchmarks that
/// compare the two side by side. It changes the trace.
pub(crate) const SYSCALL_CLOCK_ENV: &str = "SIMCLUSTER_DEBUG_SYSCALL_CLOCK";

/// The kernel command-line words that carry `[cluster]`'s settings to
/// user-mode Linux nodes.
fn uml_args(c: &crate::cluster::ClusterSection) -> Vec<String> {
    let mut args: Vec<String> = c.userspace().kernel_arg().map(String::from).into_iter().collect();
    if !c.cpuid.virtualised() {
        args.push("host_cpuid".into());
    }
    if std::env::var_os(SYSCALL_CLOCK_ENV).is_some_and(|v| v == "1") {
        args.push("time-travel-vdso-clock=off".into());
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
        // In memory: the outputs write them once, where they keep them.
        n.capture = true;
    }
    let r = engine::execute(spec, strategy).with_context(|| format!("{label} (seed {}) could not run", spec.seed));
    let _ = std::fs::remove_dir_all(&scratch);
    if exiting() {
        // Its nodes were killed under it: not a result.
        anyhow::bail!("simcluster is exiting");
    }
    let mut result = r?;
    let pcaps = std::mem::take(&mut result.pcaps);
    Ok(Executed { result, pcaps })
}

/// A random walk's weights: ordinary events 100, a crash (and a power
/// failure), a pause and a clock jump their configured weights.
pub(crate) fn weights(e: &engine::ExploreSpec) -> KindWeights {
    use engine::strategy::ActionKind;
    KindWeights::default()
        .set(ActionKind::Crash, e.crash_weight)
        .set(ActionKind::PowerFailure, e.crash_weight)
        .set(ActionKind::Pause, e.pause.weight)
        .set(ActionKind::ClockJump, e.clock.weight)
        .set(ActionKind::ConnReset, e.connection.weight)
        .set(ActionKind::ConnStall, e.connection.weight)
        .set(ActionKind::Kill, e.kill.weight)
}

pub(crate) fn make_strategy(o: &StrategyOptions, seed: u64, explore: &engine::ExploreSpec) -> Box<dyn Strategy> {
    let d = o.depth;
    let weights = weights(explore);
    match o.kind {
        StrategyKind::Random => Box::new(RandomWalk::new(seed, weights)),
        StrategyKind::Pct => Box::new(Pct::new(seed, d.max(1), o.horizon)),
        StrategyKind::Delay => Box::new(DelayBounded::sampling(seed, d, o.horizon)),
        StrategyKind::DelayAll => Box::new(DelayBounded::exhaustive(d, o.horizon)),
        StrategyKind::Dfs => Box::new(HybridDfs::new(seed, u64::from(d), o.horizon, weights)),
        // Each execution's own walk comes from its plan (`adaptive`); this
        // one (no parent, no cut) names the strategy in failure files.
        StrategyKind::Coverage => Box::new(CoverageWalk::new(
            &explore::strategy::coverage::Plan {
                seed,
                parent: None,
                decisions: Default::default(),
                cut: 0,
                walk_seed: seed,
            },
            weights,
        )),
    }
}

/// The failure for humans: "Kind: message".
pub fn failure_line(result: &ExecutionResult) -> Option<String> {
    result.verdict.failure().map(|f| f.to_string())
}
