//! What one execution needs ([`ExecutionSpec`], [`ExploreSpec`]), the
//! history hook ([`HistoryCheck`]), and how the host can fail it
//! ([`EngineError`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use vmm::node::NodeError;
use vmm::runtime::RuntimeKind;

use crate::disk::DiskSpec;
use crate::faults::{ClockSpec, KillSpec, PauseSpec, ScheduledCrash};
use crate::host::HostWorkload;
use crate::network::NetworkSpec;
use crate::outcome::FailureKind;
use crate::time::NodeId;
use crate::trace;
use simtime::VirtualTime;

/// What the strategy may choose besides the order of events due together.
#[derive(Debug, Clone, Default)]
pub struct ExploreSpec {
    /// Virtual-clock choice: every delivery, disk completion and fault due
    /// within this span of the earliest event is enabled (up to the
    /// earliest time a node asked to run at), so the strategy can let a
    /// later one go first; the earlier one then happens late, never early.
    /// Node timers are never postponed (see `actions::horizon`). 0: only
    /// events due at the same instant compete.
    pub window: Duration,
    /// Crash budget of one execution.
    pub max_crashes: u32,
    /// Nodes that may crash.
    pub crashable: Vec<NodeId>,
    /// `[faults.crash] power_failure`: besides single crashes, a
    /// coordinated power failure (every crashable node that is up loses
    /// power at one instant, each a crash of the budget) is a choice.
    pub power_failure: bool,
    /// A crashed node is enabled to restart this long after its crash.
    pub restart_after: Duration,
    /// Per node (0-based), the range a crashed node's restart delay is
    /// drawn from at each crash (`[faults.crash] restart_after = "1s..5s"`,
    /// `restart_after_by_node`); empty: `restart_after` for every node,
    /// nothing drawn.
    pub restart_ranges: Vec<(Duration, Duration)>,
    /// Crashes at fixed virtual times (`[[faults.crash.schedule]]`), by time.
    pub crash_schedule: Vec<ScheduledCrash>,
    /// From step `.0` on (counting every action, not only choice points),
    /// the execution is a fault-free random
    /// continuation: the engine picks uniformly at random (seeded with
    /// `.1`) instead of asking the strategy, netsim's latency stream is
    /// reseeded, frames are no longer lost, duplicated or reordered,
    /// partitions heal and no crash is enabled. A critical-transition
    /// probe: after a replayed prefix, can the system still reach a live
    /// state if nothing else goes wrong? (MaceMC's probes walk at random with faults; with faults
    /// drawn at the rates of the failing run most walks fail from any
    /// state, so the probe would mostly measure bad luck.)
    pub calm_from: Option<(u64, u64)>,
    /// The quiet period (`[faults] quiet_after = "workload"`): when the
    /// workload passes, every partition heals, the network stops losing,
    /// duplicating and reordering, no crash or disk fault is enabled, and
    /// the invariants start this long after on a calm cluster (a node
    /// down at that moment restarts as usual and runs its checks once
    /// ready). `None`: faults go on through the checks.
    pub quiet_settle: Option<Duration>,
    /// `[faults] start_after`: crashes, pauses, clock jumps and random
    /// partitions begin once a guest printed `@reached NAME` (or
    /// `@sometimes NAME`) while the workload runs, not when it starts;
    /// their spans and the partition timeline count from that moment.
    pub faults_after: Option<String>,
    /// Crash number (1-based) -> index of the disk crash state to apply, for
    /// crash points whose states are enumerated (see [`DiskSpec`]).
    pub crash_states: std::collections::BTreeMap<u32, u64>,
    /// Partition starts (1-based, in the order the timeline reaches them)
    /// that do not start: the timeline reaches them at their time as
    /// usual, and notes them in the trace instead (their heals find no
    /// partition). How `simcluster shrink` removes a partition; empty in
    /// every other execution.
    pub skip_partitions: std::collections::BTreeSet<u32>,
    /// Weight of a crash in random walks (ordinary events weigh 100); the
    /// run builds its strategy with it.
    pub crash_weight: u32,
    /// Crashes become possible at a time drawn uniformly from the first
    /// this span of the workload.
    pub crash_span: Duration,
    /// Process pauses (`[faults.pause]`; see `faults`).
    pub pause: PauseSpec,
    /// Clock offsets, drift, bumps and strobes (`[faults.clock]`).
    pub clock: ClockSpec,
    /// `[roles]` and the faults that target a role.
    pub roles: crate::roles::RoleSpec,
    /// Start commands killed (`[faults.kill]`).
    pub kill: KillSpec,
    /// Connection resets and stalls (`[faults.connection]`).
    pub connection: crate::conn_faults::ConnFaultSpec,
    /// `[antithesis]`: SDK assertions checked, and the workload waits for
    /// `setup_complete`.
    pub antithesis: crate::sdk::AntithesisSpec,
}

/// Everything one execution needs; plain data so a failure file can
/// reproduce it.
#[derive(Debug, Clone)]
pub struct ExecutionSpec {
    /// The guest kernel (user-mode Linux binary, or a KVM bzImage/vmlinux).
    pub kernel: PathBuf,
    /// The initramfs: the boot init that mounts [`Self::root_disk`] (or,
    /// without one, the whole root filesystem).
    pub initrd: PathBuf,
    /// The root filesystem image every node mounts read-only (opened once
    /// per run and shared; see `vmm::node::NodeConfig::root_disk`).
    pub root_disk: Option<disksim::BlockStore>,
    /// n1..nN.
    pub node_names: Vec<String>,
    /// The client-only nodes (`[cluster] clients`): left out of every
    /// guest's `PEERS`, still in its /etc/hosts (the `NODES` variable, set
    /// only when there are some).
    pub clients: Vec<NodeId>,
    /// Each node's memory (MiB).
    pub mem_mb: u32,
    /// The workload node (unused with `host_workload`).
    pub workload_node: NodeId,
    /// The workload runs on the host-side client (node N+1) instead of in
    /// a guest; needs `network`.
    pub host_workload: Option<HostWorkload>,
    /// Every node has a readiness probe ([`crate::READY_PROBE`]): it runs
    /// on each node once every agent is ready, and the workload (and with
    /// it the faults) starts once it passed on every node; it runs again on
    /// a node after each restart, before the commands that wait for it. A
    /// probe that gives up fails the execution (`FailureKind::NotReady`).
    pub ready_probe: bool,
    /// (command name, node), in the order they are sent.
    pub invariants: Vec<(String, NodeId)>,
    /// (command name, node) of liveness checks: each polls its
    /// predicate until it holds or its deadline passes (see the image
    /// builder), sent together with the invariants.
    pub liveness: Vec<(String, NodeId)>,
    /// The execution fails if the workload and invariants are not done by
    /// this virtual time.
    pub time_limit: VirtualTime,
    /// Wall-clock time a node may run without yielding before it is
    /// reported as hung.
    pub watchdog: Duration,
    /// Wall-clock time a node may take to connect to the controller.
    pub connect_timeout: Duration,
    /// Seed of this execution (derived from the run seed and index).
    pub seed: u64,
    /// Warm-start mode: the boot (until every agent is ready) is drawn
    /// from this run-level seed alone, not from [`Self::seed`]: the nodes'
    /// device streams and clock hardware, netsim's latencies, and the
    /// order of events due together (the strategy is not asked). No fault
    /// happens in it: random partitions, crashes, pauses and clock jumps
    /// begin with the workload. Then every stream starts again from
    /// [`Self::seed`], so every execution of a run shares one boot and can
    /// be forked from it (KVM: `crate::WarmStart`), and a cold run in this
    /// mode gives the same trace as a forked one. `None`: everything is
    /// drawn from [`Self::seed`] from the start.
    pub boot_seed: Option<u64>,
    /// Directory for per-node sockets and scratch; must exist, and be short
    /// (unix socket paths are limited to 107 bytes).
    pub scratch: PathBuf,
    /// The simulated network; `None`: nodes have loopback only.
    pub network: Option<NetworkSpec>,
    /// The node whose console carries a client history (between
    /// `@history begin` and `@history end`), and the check (linearizability,
    /// or a transactional consistency model) run on it after a passing
    /// execution.
    pub history: Option<HistoryCheck>,
    /// Every node's data disk; `None`: no disks.
    pub disk: Option<DiskSpec>,
    /// What the strategy may choose besides the order of events due together.
    pub explore: ExploreSpec,
    /// The node runtime (user-mode Linux or KVM); the engine drives both the
    /// same way, through [`vmm::node::NodeRuntime`].
    pub runtime: RuntimeKind,
    /// Extra kernel command-line words for user-mode Linux nodes: the
    /// userspace mode (`seccomp=on`) and `host_cpuid` (guest programs
    /// execute CPUID natively: faster process start-up, but they then see
    /// the host's RDRAND/RDSEED and the APIC id of the host cpu they run
    /// on). A KVM guest's CPUID is the VMM's answer either way.
    pub uml_args: Vec<String>,
    /// User-mode Linux nodes speak time travel's shared-memory mode (the
    /// 7.2 kernel; see `vmm::uml::timetravel::SchedShm`).
    pub shared_clock: bool,
    /// The user-mode Linux kernel keeps CPUID faulting on for itself (the
    /// 7.2 kernel with guest CPUID trapped): so does the engine's thread
    /// (see `vmm::uml::host_cpuid`). Speed only.
    pub kernel_faults_cpuid: bool,
    /// Lookahead (`engine::lookahead`): a granted node takes its own
    /// wake-ups up to the earliest time anything else can happen without a
    /// round trip each. The same trace either way; off for comparisons.
    pub lookahead: Lookahead,
    /// Set by another thread to abandon the execution (a parallel run no
    /// longer needs it): the engine checks it between steps, takes its
    /// nodes down and returns [`EngineError::Cancelled`]. Never read for
    /// anything a guest sees.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl ExecutionSpec {
    /// The seed the execution's streams start from: the boot seed in
    /// warm-start mode, else the execution's own.
    pub fn stream_seed(&self) -> u64 {
        self.boot_seed.unwrap_or(self.seed)
    }
}

/// The host-side check of a client history (`[check] history`), run after
/// a passing execution. The checks themselves (linearizability of
/// registers, transactional consistency) belong to the `checker` crate,
/// which depends on this one: the caller passes the check in as a closure
/// (which carries the model it checks against), so the engine needs no
/// history vocabulary.
#[derive(Clone)]
pub struct HistoryCheck {
    /// The node whose console carries the history.
    pub node: NodeId,
    /// The invariant its verdict goes into the trace as
    /// (`history-linearizable`, `history-serializable`, ...).
    pub invariant: String,
    /// The kind of the failure when the history does not pass.
    pub kind: FailureKind,
    /// Judges the history `node` printed, from the trace's events (given
    /// the node).
    pub check: Arc<HistoryCheckFn>,
}

/// The function of a [`HistoryCheck`].
pub type HistoryCheckFn = dyn Fn(&[trace::Event], NodeId) -> HistoryOutcome + Send + Sync;

impl std::fmt::Debug for HistoryCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryCheck")
            .field("node", &self.node)
            .field("invariant", &self.invariant)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// What a [`HistoryCheck`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryOutcome {
    /// The history passed (linearizable, or free of the anomalies the
    /// consistency model forbids).
    pub ok: bool,
    /// A line for the trace (its first line) and the failure message.
    pub note: String,
    /// The anomalies found that the consistency model forbids, by name
    /// (Elle's: `G-single`, `G2-item`, ...), with how many; empty for the
    /// register model and for a valid history. Reported in the run's JSON
    /// line, never part of the trace.
    pub anomalies: std::collections::BTreeMap<String, u64>,
}

/// Whether a granted node may run ahead (see `engine::lookahead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lookahead {
    /// One round trip per wake-up.
    Off,
    /// Up to the earliest time anything else can happen (the default).
    #[default]
    On,
    /// Debug only: the bound handed to nodes leaves out frames on their
    /// way, so a node can run past a frame due to reach it. The engine
    /// still checks each grant against the true bound and fails with
    /// [`EngineError::RanAhead`]: this mode exists to show that the check
    /// (and the bound) are needed (`SIMCLUSTER_DEBUG_LOOKAHEAD_PAST_FRAMES=1`).
    IgnoringFrames,
}

/// The host failed us (not the guest): a node could not be started, or it
/// broke the time-travel protocol.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A node runtime failed (spawn, connect, protocol).
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The scratch directory or the network's captures could not be set up.
    #[error("cannot prepare {path}: {source}")]
    Scratch {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A crashed node's disk could not be put into its crash state.
    #[error("node {node}: its disk's crash state could not be applied: {source}")]
    Crash {
        /// The node's name.
        node: String,
        /// Why.
        source: disksim::CrashError,
    },
    /// Warm start could not boot or fork (see `crate::WarmStart`).
    #[error("warm start: {0}")]
    Warm(String),
    /// A node ran ahead past the earliest time something else was due:
    /// its wake-ups after that were not grants the engine would have made,
    /// and the execution is no longer the one its seed names.
    #[error(
        "node {} ran ahead to virtual time {last} ns, past {bound} ns, when something else was due: \
         a lookahead bound is wrong (run with --lookahead off to compare)",
        .node.number()
    )]
    RanAhead {
        /// The node.
        node: NodeId,
        /// Its last wake-up.
        last: u64,
        /// The earliest time anything else was due.
        bound: u64,
    },
    /// [`ExecutionSpec::cancel`] was set.
    #[error("the execution was cancelled")]
    Cancelled,
}
