//! `cluster.toml`: what a cluster directory asks simcluster to build and run.
//!
//! Every table denies unknown keys, so a typo is an error that names the
//! file, the line and the key, never a silently ignored setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::image::kernel::KernelSeries;

mod node_faults;
pub use node_faults::{parse_signed_duration_ns, ClockSection, PauseSection, Range, StrobeSetting, StrobeTable};

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub cluster: ClusterSection,
    #[serde(default)]
    pub image: ImageSection,
    #[serde(default)]
    pub node: NodeSection,
    pub workload: WorkloadSection,
    #[serde(default, rename = "invariant")]
    pub invariants: Vec<InvariantSection>,
    #[serde(default, rename = "liveness")]
    pub liveness: Vec<LivenessSection>,
    #[serde(default)]
    pub run: RunSection,
    #[serde(default)]
    pub explore: ExploreSection,
    /// A data disk per node (absent: nodes have none).
    pub disk: Option<DiskSection>,
    /// Host-side checks.
    #[serde(default)]
    pub check: CheckSection,
    #[serde(default)]
    pub faults: FaultsSection,
    /// `[[expect]]`: what exploration must get to at least once.
    #[serde(default, rename = "expect")]
    pub expects: Vec<ExpectSection>,
}

/// `[[expect]] reached = "NAME"`: some execution of the run must print
/// `@reached NAME` (or `@sometimes NAME`) on a guest console; otherwise
/// the run fails (see `checker::reach`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSection {
    pub reached: String,
}

/// `[faults]`: what may go wrong, and when.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsSection {
    /// Latency, loss, duplication, reordering, bandwidth; `partitions = true`
    /// lets the seed partition the network at random times.
    #[serde(default)]
    pub network: netsim::NetConfig,
    /// Partitions at fixed virtual times.
    #[serde(default)]
    pub partition: Vec<PartitionSection>,
    /// Node crashes (power loss) the strategy may choose.
    #[serde(default)]
    pub crash: CrashSection,
    /// Disks that misbehave (needs `[disk]`).
    #[serde(default)]
    pub disk: DiskFaultsSection,
    /// Start commands paused (SIGSTOP) and resumed by the engine.
    #[serde(default)]
    pub pause: PauseSection,
    /// Clocks off at boot, drifting, bumped or strobed.
    #[serde(default)]
    pub clock: ClockSection,
    /// When faults stop: "workload" (default): when the workload passes,
    /// partitions heal, the network stops losing and reordering, no crash
    /// or disk fault happens, and the invariants run `settle` later on a
    /// calm cluster; "never": faults go on through the checks.
    pub quiet_after: Option<String>,
    /// How long the cluster calms down before the checks (default "5s").
    pub settle: Option<String>,
    /// Faults begin once a guest printed `@reached NAME` (or `@sometimes
    /// NAME`) during the workload, instead of when the workload starts:
    /// the system is set up (a replica streams, a leader is elected) before
    /// anything is done to it. Crashes, pauses, clock jumps and random
    /// partitions; their spans count from there.
    pub start_after: Option<String>,
}

/// `[faults.disk]`: disk faults, each a decision drawn from the seed (see
/// `disksim::faults` for what each does to the disk).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskFaultsSection {
    /// Probability that a flush is acknowledged but its writes stay
    /// volatile (a lying disk: a later crash can lose them).
    pub lost_flush: Option<f64>,
    /// Probability that a read returns its data with a few bits flipped
    /// (transient: the stored data is intact).
    pub corrupt_read: Option<f64>,
    /// Probability that a write fails with an I/O error (EIO in the guest)
    /// and does not land.
    pub write_error: Option<f64>,
    /// Probability that a write is acknowledged but lands at another
    /// sector of the disk.
    pub misdirect: Option<f64>,
}

impl DiskFaultsSection {
    /// Each fault's key and probability as written (absent: 0).
    fn rates(&self) -> [(&'static str, f64); 4] {
        [
            ("lost_flush", self.lost_flush.unwrap_or(0.0)),
            ("corrupt_read", self.corrupt_read.unwrap_or(0.0)),
            ("write_error", self.write_error.unwrap_or(0.0)),
            ("misdirect", self.misdirect.unwrap_or(0.0)),
        ]
    }
}

/// `[faults.crash]`: power loss as an engine action.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashSection {
    /// Crashes per execution at most (default 0: none).
    #[serde(default)]
    pub max: u32,
    /// Nodes that may crash; default every node but the workload's.
    pub nodes: Option<Vec<String>>,
    /// Virtual time a crashed node stays down before it may restart
    /// (default "1s").
    pub restart_after: Option<String>,
    /// Random walk weight of a crash, against 100 for ordinary events
    /// (default 50).
    pub weight: Option<u32>,
    /// Crashes become possible at a virtual time drawn uniformly from the
    /// first `span` of the workload (default "10s"), and then only at
    /// moments when the node has frames in flight or unsynced disk writes.
    pub span: Option<String>,
}

/// `[disk]`: every node gets a virtio-blk data disk (`/dev/vda`), an empty
/// ext4 filesystem built by the image builder, mounted at `mount`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSection {
    /// Size in MiB (at least 16: ext4's journal needs room).
    pub size_mb: u64,
    /// Absolute guest path the disk is mounted at.
    pub mount: String,
    /// Virtual time from a write's or flush's submission to its completion
    /// (default "100us").
    pub latency: Option<String>,
    /// After a crash, multi-sector writes may persist in part (torn at
    /// 512-byte sectors); default false: each write persists whole or not.
    #[serde(default)]
    pub torn_writes: bool,
    /// A crash point with at most this many crash states has every one of
    /// them explored (an execution per state); above it one state is drawn
    /// from the seed. Default 16.
    pub enumerate: Option<u64>,
}

/// `[check]`: properties simcluster checks itself, on the host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSection {
    /// Node whose console prints a client history (JSON lines of
    /// invoke/ok/fail/info events between `@history begin` and
    /// `@history end`); it must be linearizable for a key-value register.
    pub history: Option<String>,
}

/// `[explore]`: how much freedom the strategy has.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExploreSection {
    /// Timers and deliveries due within this window of the earliest event
    /// compete (the strategy may run a later one first); default "0s":
    /// only simultaneous events compete.
    pub window: Option<String>,
}

/// `[[liveness]]`: a predicate that must eventually hold after the workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LivenessSection {
    pub name: String,
    /// Node to evaluate it on (`n1`, ...).
    pub node: String,
    /// Shell command; the property holds once it exits 0.
    pub command: String,
    /// How long (virtual) it may take to hold, e.g. "60s".
    pub within: String,
    /// How often (virtual) it is evaluated; default "1s".
    pub every: Option<String>,
}

/// `[[faults.partition]]`: either `groups` (symmetric) or `from`/`to`
/// (frames from `from` to `to` are cut, the other direction passes).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSection {
    pub at: String,
    pub heal: String,
    #[serde(default)]
    pub groups: Vec<Vec<String>>,
    #[serde(default)]
    pub from: Vec<String>,
    #[serde(default)]
    pub to: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// Number of nodes, named n1..nN.
    pub nodes: u16,
    /// Shown in reports; defaults to the directory's name.
    pub name: Option<String>,
    /// Guest memory per node in MiB.
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u32,
    /// What CPUID tells guest programs (user-mode Linux runtime).
    #[serde(default)]
    pub cpuid: CpuidMode,
    /// The guest kernel (user-mode Linux runtime): "7.2" (default) or
    /// "6.1", the previous one, kept for comparisons.
    #[serde(default)]
    pub kernel: KernelSeries,
    /// How user-mode Linux runs guest processes; default: seccomp where the
    /// kernel has it (7.2), else ptrace. Use [`ClusterSection::userspace`].
    #[serde(default, rename = "userspace")]
    pub userspace_setting: Option<Userspace>,
    /// How nodes and simcluster exchange time: default "shared-memory"
    /// where the kernel has it (7.2), else "messages". For comparisons; the
    /// trace is the same either way.
    #[serde(default, rename = "time_travel")]
    pub time_travel_setting: Option<TimeTravel>,
}

/// `[cluster] time_travel`: the time-travel protocol's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeTravel {
    /// Clock and run requests in a page shared with each node; RUN and WAIT
    /// are the only messages (Linux 6.11+).
    SharedMemory,
    /// Every GET, UPDATE, REQUEST, RUN and WAIT a socket round trip.
    Messages,
}

impl ClusterSection {
    /// Whether nodes use the shared-memory time-travel page.
    pub fn shared_clock(&self) -> bool {
        match self.time_travel_setting {
            Some(t) => t == TimeTravel::SharedMemory,
            None => self.kernel.has_shared_clock(),
        }
    }

    /// The userspace mode nodes run in: the one set, else the fastest the
    /// kernel has.
    pub fn userspace(&self) -> Userspace {
        self.userspace_setting.unwrap_or(if self.kernel.has_seccomp_userspace() {
            Userspace::Seccomp
        } else {
            Userspace::Ptrace
        })
    }
}

/// `[cluster] userspace`: how the user-mode Linux kernel runs guest
/// processes. Both are deterministic (RDTSC and CPUID are trapped in both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Userspace {
    /// Guest processes run under a seccomp filter and enter the guest
    /// kernel through a signal handler in a stub and a futex in shared
    /// memory: no ptrace stop per system call or page fault (Linux 6.16+).
    /// Upstream calls it insecure: a hostile guest program can reach the
    /// guest kernel's memory through the stub, and from there whatever the
    /// host process may do. For software you trust.
    Seccomp,
    /// Guest processes are ptraced by the guest kernel: several host
    /// context switches per guest system call and page fault, but a guest
    /// program cannot get at the guest kernel's memory.
    Ptrace,
}

impl Userspace {
    pub fn name(self) -> &'static str {
        match self {
            Userspace::Seccomp => "seccomp",
            Userspace::Ptrace => "ptrace",
        }
    }

    /// The kernel command-line word that selects the mode. ptrace is UML's
    /// default, and 6.1 knows no `seccomp=` (it would pass the word on to
    /// init as an environment variable).
    pub fn kernel_arg(self) -> Option<&'static str> {
        match self {
            // "on", not "auto": a host where seccomp cannot work fails the
            // boot loudly instead of running in another mode.
            Userspace::Seccomp => Some("seccomp=on"),
            Userspace::Ptrace => None,
        }
    }
}

/// `[cluster] cpuid`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuidMode {
    /// Trapped and answered by the guest kernel from the host's answers
    /// read at boot, without RDRAND, RDSEED, RDPID, TSX and WAITPKG and
    /// with APIC id 0, so nothing about the host cpu reaches the guest (the
    /// kernel patch). Costs a trap per CPUID (glibc asks a few dozen times
    /// at every exec); with faulting on for the guest kernel too, hardly
    /// more than native on the 7.2 kernel (measured: README, Figures).
    #[default]
    Virtual,
    /// Native: faster process start-up, but guest programs may read host
    /// randomness (RDRAND) and see which host cpu they run on, so the same
    /// seed may not give the same execution.
    Host,
}

fn default_memory_mb() -> u32 {
    256
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSection {
    /// Debian packages for the root filesystem, their dependencies resolved
    /// by apt (busybox-static is always added: the in-guest agent runs on it).
    #[serde(default)]
    pub packages: Vec<String>,
    /// The Debian suite packages come from (default "bookworm").
    pub suite: Option<String>,
    /// Install with maintainer scripts (users, alternatives, directories)
    /// on the suite's Essential set; default: yes when `packages` names
    /// anything besides busybox-static.
    pub maintainer_scripts: Option<bool>,
    /// Shell commands run in the configured image root (chroot), in order,
    /// after the packages are configured: remove generated state, preset
    /// configuration.
    #[serde(default)]
    pub customize: Vec<String>,
    /// Paths (globs, absolute) removed from the image after the packages
    /// are installed: what a node never uses (a JIT compiler's libraries,
    /// locale data) costs guest memory in every node of every execution.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// A container image as the node's root filesystem: an OCI image layout
    /// directory (relative to the cluster directory).
    pub oci: Option<String>,
    /// ... or a `docker save` archive.
    pub docker_archive: Option<String>,
    /// Which image of the layout's index.json (its ref name); needed when
    /// it holds more than one.
    pub tag: Option<String>,
    /// Guest path -> path relative to the cluster directory.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Where the root filesystem lives in a node (default "auto").
    #[serde(default)]
    pub root: RootMode,
}

/// `[image] root`: how a node holds its root filesystem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootMode {
    /// `initramfs` for a root of at most
    /// [`crate::image::INITRAMFS_ROOT_MAX`] bytes, `disk` above.
    #[default]
    Auto,
    /// Unpacked whole into every node's RAM at boot: no device round trips
    /// while the node reads its files, but the guest holds all of it.
    Initramfs,
    /// A read-only squashfs image on a virtio-blk device under a tmpfs
    /// overlay: a node holds only the pages it reads, and the host keeps
    /// one copy in its page cache for every node.
    Disk,
}

impl RootMode {
    /// The setting as written in cluster.toml.
    pub fn name(self) -> &'static str {
        match self {
            RootMode::Auto => "auto",
            RootMode::Initramfs => "initramfs",
            RootMode::Disk => "disk",
        }
    }
}

impl ImageSection {
    /// Whether packages are installed with their maintainer scripts.
    pub fn configured(&self) -> bool {
        self.maintainer_scripts
            .unwrap_or_else(|| self.packages.iter().any(|p| p != crate::image::debs::AGENT_PACKAGE))
    }

    pub fn suite(&self) -> &str {
        self.suite.as_deref().unwrap_or(crate::image::debs::DEFAULT_SUITE)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// Shell command run on every node at boot, in the background.
    pub start: Option<String>,
}

/// `[workload]`: either a shell command in a guest (`node` + `command`), or
/// HTTP requests from the host-side client (`[workload.host]`), never both.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Node that runs the workload (`n1`, ...); empty with `[workload.host]`.
    #[serde(default)]
    pub node: String,
    /// Shell command; the execution's workload ends when it exits, and a
    /// non-zero status is a failure. Empty with `[workload.host]` (the
    /// image builder then writes an empty, never-run workload script).
    #[serde(default)]
    pub command: String,
    /// The workload runs on simcluster's host-side client instead: node
    /// N+1 (`10.0.0.N+1`, `host` in the guests' /etc/hosts), no client VM.
    pub host: Option<HostWorkloadSection>,
}

/// `[workload.host]`: HTTP requests sent from the host-side client, in list
/// order, `repeat` times over, `concurrency` at a time. The workload passes
/// when every response meets its request's expectations; the first that
/// does not (or gets no response) is the workload's failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWorkloadSection {
    pub requests: Vec<HostRequestSection>,
    /// Run the whole list this many times (default 1).
    #[serde(default = "one")]
    pub repeat: u32,
    /// Requests in flight at once (default 1: strictly one after another).
    #[serde(default = "one")]
    pub concurrency: u32,
    /// Virtual time from "every node is ready" to the first request
    /// (default "0s"); servers started in the background may need a moment.
    pub start_after: Option<String>,
    /// A request without a complete response after this long fails
    /// (default "30s"); its TCP handshake gives up after 5 s, or this if
    /// shorter (Linux retries SYNs for minutes; a workload wants to know).
    pub timeout: Option<String>,
}

/// One request of `[workload.host] requests`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRequestSection {
    /// Target guest (`n1`, ...).
    pub node: String,
    pub port: u16,
    /// Default "GET".
    pub method: Option<String>,
    /// Default "/".
    pub path: Option<String>,
    /// Request body (sent with Content-Length).
    pub body: Option<String>,
    /// Default 200.
    pub expect_status: Option<u16>,
    /// The response body must contain this text.
    pub body_contains: Option<String>,
    /// The response body must equal this file (relative to the cluster
    /// directory), byte for byte.
    pub body_file: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvariantSection {
    /// Shown in reports; defaults to `invariant-K`.
    pub name: Option<String>,
    /// Node to run it on (`n1`, ...), or `all`.
    pub node: String,
    /// Shell command that must exit 0 once the workload has finished.
    pub command: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Virtual-time limit of one execution, e.g. "300s" or "10m"; the
    /// command line's --time-limit overrides it.
    pub time_limit: Option<String>,
}

/// A cluster directory, loaded and checked.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub dir: PathBuf,
    pub file: PathBuf,
    pub name: String,
    pub spec: ClusterFile,
    /// 0-based index of the workload node; with a host workload, the node
    /// count (the host client is node N+1, index N).
    pub workload_node: usize,
    /// `[workload.host]`, checked (`None`: the workload runs in a guest).
    pub host_workload: Option<checker::engine::HostWorkload>,
    /// (name, 0-based node, command) for every invariant, `all` expanded.
    pub invariants: Vec<(String, usize, String)>,
    pub time_limit_ns: Option<u64>,
    /// (name, 0-based node, polling script) for every `[[liveness]]`.
    pub liveness: Vec<(String, usize, String)>,
    /// `[check] history`, 0-based.
    pub history_node: Option<usize>,
    /// `[disk]`, checked: (size MiB, mount path, latency ns, torn, enumerate).
    pub disk: Option<DiskSettings>,
    /// `[faults.crash]` and `[explore]`, checked (`calm_from` is the run's).
    pub explore: checker::engine::ExploreSpec,
    /// `[[faults.partition]]`, checked.
    pub partitions: Vec<checker::engine::ScheduledPartition>,
    /// `[[expect]] reached` names, checked, in file order.
    pub expect_reached: Vec<String>,
    /// `[faults.disk]`, checked (0 for each fault absent).
    pub disk_faults: checker::engine::DiskFaultRates,
}

/// The quiet period's settle time, or `None` for `quiet_after = "never"`.
/// A cluster without faults has nothing to calm: no quiet period, no settle.
fn quiet_settle(spec: &ClusterFile, invalid: &dyn Fn(String) -> ClusterError) -> Result<Option<u64>, ClusterError> {
    let f = &spec.faults;
    let settle = match &f.settle {
        None => 5_000_000_000,
        Some(s) => parse_duration_ns(s)
            .ok_or_else(|| invalid(format!("[faults] settle = {s:?}: not a duration (examples: \"5s\", \"500ms\")")))?,
    };
    let quiet = match f.quiet_after.as_deref() {
        None | Some("workload") => true,
        Some("never") => false,
        Some(other) => {
            return Err(invalid(format!("[faults] quiet_after = {other:?}: expected \"workload\" or \"never\"")));
        }
    };
    // A clock offset or drift is the nodes' hardware: it never calms.
    let node_faults = f.pause.max.is_some_and(|m| m > 0) || f.clock.bump.is_some() || matches!(f.clock.strobe, Some(StrobeSetting::On(_)));
    let any_fault = f.network.has_faults()
        || !f.partition.is_empty()
        || f.crash.max > 0
        || f.disk.rates().iter().any(|&(_, p)| p > 0.0)
        || node_faults;
    Ok((quiet && any_fault).then_some(settle))
}

/// `[disk]` with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSettings {
    pub size_mb: u64,
    pub mount: String,
    pub latency_ns: u64,
    pub torn_writes: bool,
    pub enumerate: u64,
}

/// A problem with the user's input. Always names the file.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}: no such cluster directory")]
    NoDir(PathBuf),
    #[error("{0}: missing (a cluster directory holds a cluster.toml)")]
    NoFile(PathBuf),
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    /// A value the file holds is wrong; `line` is where its key is, when
    /// [`locate_line`] can tell.
    #[error("{path}: {}{message}", line_prefix(*.line))]
    Invalid { path: PathBuf, line: Option<usize>, message: String },
}

fn line_prefix(line: Option<usize>) -> String {
    line.map(|n| format!("line {n}: ")).unwrap_or_default()
}

/// The guest script of a liveness check: evaluate the predicate every
/// `every` ns of virtual time until it holds (exit 0) or `within` ns have
/// passed (exit 1). Guest time is virtual, so the deadline is exact.
fn liveness_script(command: &str, within: u64, every: u64) -> String {
    // Shell built-ins only around the predicate: every fork costs a guest
    // process creation, and this loop may run for minutes of virtual time.
    format!(
        "read up _ < /proc/uptime; deadline=$(( ${{up%.*}} * 100 + 1${{up#*.}} - 100 + {within_cs} ))\n\
         while :; do\n\
         \t{{ {command}\n }} && exit 0\n\
         \tread up _ < /proc/uptime; [ $(( ${{up%.*}} * 100 + 1${{up#*.}} - 100 )) -ge $deadline ] && exit 1\n\
         \tsleep {every_s}\n\
         done\n",
        within_cs = within / 10_000_000,
        every_s = every as f64 / 1e9,
    )
}

/// Node names are n1..nN; returns the 0-based index.
pub fn parse_node_name(name: &str, nodes: u16) -> Option<usize> {
    let n: u16 = name.strip_prefix('n')?.parse().ok()?;
    (n >= 1 && n <= nodes && name == format!("n{n}")).then(|| usize::from(n - 1))
}

/// Parses "250ms", "30s", "10m", "1h" or plain seconds into nanoseconds.
pub fn parse_duration_ns(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let ns = v * scale;
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then_some(ns as u64)
}

impl Cluster {
    pub fn load(dir: &Path) -> Result<Cluster, ClusterError> {
        if !dir.is_dir() {
            return Err(ClusterError::NoDir(dir.to_path_buf()));
        }
        let file = dir.join("cluster.toml");
        if !file.is_file() {
            return Err(ClusterError::NoFile(file));
        }
        let text = std::fs::read_to_string(&file)
            .map_err(|source| ClusterError::Read { path: file.clone(), source })?;
        Cluster::parse(dir, &file, &text)
    }

    pub fn parse(dir: &Path, file: &Path, text: &str) -> Result<Cluster, ClusterError> {
        let spec: ClusterFile = toml::from_str(text).map_err(|e| ClusterError::Syntax {
            path: file.to_path_buf(),
            message: describe_toml_error(text, &e),
        })?;
        let invalid =
            |message: String| ClusterError::Invalid { path: file.to_path_buf(), line: locate_line(text, &message), message };
        let n = spec.cluster.nodes;
        if n == 0 || n > 254 {
            return Err(invalid(format!("[cluster] nodes = {n}: must be between 1 and 254")));
        }
        if spec.cluster.userspace_setting == Some(Userspace::Seccomp) && !spec.cluster.kernel.has_seccomp_userspace() {
            return Err(invalid(format!(
                "[cluster] userspace = \"seccomp\" needs kernel = \"7.2\" (kernel {} has only the ptrace userspace)",
                spec.cluster.kernel.name()
            )));
        }
        if spec.cluster.time_travel_setting == Some(TimeTravel::SharedMemory) && !spec.cluster.kernel.has_shared_clock() {
            return Err(invalid(format!(
                "[cluster] time_travel = \"shared-memory\" needs kernel = \"7.2\" (kernel {} has only messages)",
                spec.cluster.kernel.name()
            )));
        }
        if spec.cluster.memory_mb < 128 {
            return Err(invalid(format!(
                "[cluster] memory_mb = {}: a node needs at least 128 MiB",
                spec.cluster.memory_mb
            )));
        }
        let host_workload = match &spec.workload.host {
            Some(h) => Some(host_workload(h, n, dir).map_err(&invalid)?),
            None => None,
        };
        let workload_node = if host_workload.is_some() {
            if !spec.workload.node.is_empty() || !spec.workload.command.is_empty() {
                return Err(invalid(
                    "[workload]: node + command (a guest runs the workload) and [workload.host] (the host-side \
                     client does) exclude each other; keep one"
                        .into(),
                ));
            }
            usize::from(n)
        } else {
            if spec.workload.node.is_empty() && spec.workload.command.is_empty() {
                return Err(invalid(
                    "[workload]: give node + command (a guest runs the workload) or a [workload.host] table \
                     (simcluster's host-side client sends HTTP requests)"
                        .into(),
                ));
            }
            let node = parse_node_name(&spec.workload.node, n).ok_or_else(|| {
                invalid(format!(
                    "[workload] node = {:?}: no such node (nodes are n1..n{n})",
                    spec.workload.node
                ))
            })?;
            if spec.workload.command.trim().is_empty() {
                return Err(invalid("[workload] command is empty".into()));
            }
            node
        };
        let mut invariants = Vec::new();
        for (k, inv) in spec.invariants.iter().enumerate() {
            let name = inv.name.clone().unwrap_or_else(|| format!("invariant-{}", k + 1));
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(invalid(format!(
                    "[[invariant]] #{}: name {name:?} may hold only letters, digits, '-' and '_'",
                    k + 1
                )));
            }
            if invariants.iter().any(|(other, _, _): &(String, usize, String)| other == &name) {
                return Err(invalid(format!("[[invariant]] name {name:?} is used twice")));
            }
            if inv.node == "all" {
                for i in 0..usize::from(n) {
                    invariants.push((name.clone(), i, inv.command.clone()));
                }
            } else {
                let i = parse_node_name(&inv.node, n).ok_or_else(|| {
                    invalid(format!(
                        "[[invariant]] {name}: node = {:?}: no such node (nodes are n1..n{n}, or \"all\")",
                        inv.node
                    ))
                })?;
                invariants.push((name, i, inv.command.clone()));
            }
        }
        let mut liveness = Vec::new();
        for l in &spec.liveness {
            let what = format!("[[liveness]] {}", l.name);
            if l.name.is_empty() || !l.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(invalid(format!("{what}: the name may hold only letters, digits, '-' and '_'")));
            }
            if invariants.iter().any(|(o, _, _)| o == &l.name) || liveness.iter().any(|(o, _, _): &(String, usize, String)| o == &l.name) {
                return Err(invalid(format!("{what}: the name is used twice")));
            }
            let i = parse_node_name(&l.node, n).ok_or_else(|| {
                invalid(format!("{what}: node = {:?}: no such node (nodes are n1..n{n})", l.node))
            })?;
            let within = parse_duration_ns(&l.within)
                .filter(|&w| w > 0)
                .ok_or_else(|| invalid(format!("{what}: within = {:?} is not a positive duration", l.within)))?;
            let every = match &l.every {
                None => 1_000_000_000,
                Some(e) => parse_duration_ns(e)
                    .filter(|&v| v >= 1_000_000)
                    .ok_or_else(|| invalid(format!("{what}: every = {e:?} is not a duration of at least 1ms")))?,
            };
            liveness.push((l.name.clone(), i, liveness_script(&l.command, within, every)));
        }
        let opt_duration = |key: &str, v: &Option<String>, default: u64| match v {
            None => Ok(default),
            Some(s) => parse_duration_ns(s).ok_or_else(|| invalid(format!("{key} = {s:?} is not a duration"))),
        };
        let window_ns = opt_duration("[explore] window", &spec.explore.window, 0)?;
        let crash = &spec.faults.crash;
        let restart_after_ns = opt_duration("[faults.crash] restart_after", &crash.restart_after, 1_000_000_000)?;
        let crashable = match &crash.nodes {
            None => (0..usize::from(n)).filter(|&i| i != workload_node).collect(),
            Some(names) => {
                let mut v = Vec::new();
                for name in names {
                    let i = parse_node_name(name, n).ok_or_else(|| {
                        invalid(format!("[faults.crash] nodes: {name:?}: no such node (nodes are n1..n{n})"))
                    })?;
                    if i == workload_node {
                        return Err(invalid(format!(
                            "[faults.crash] nodes: {name} runs the workload; a crash would lose the workload itself \
                             (run the workload on a node that does not crash)"
                        )));
                    }
                    v.push(i);
                }
                v.sort_unstable();
                v.dedup();
                v
            }
        };
        let disk = match &spec.disk {
            None => None,
            Some(d) => {
                if !(16..=65536).contains(&d.size_mb) {
                    return Err(invalid(format!("[disk] size_mb = {}: must be between 16 and 65536", d.size_mb)));
                }
                if !d.mount.starts_with('/') || d.mount == "/" || d.mount.split('/').any(|c| c == "..")
                    || d.mount.chars().any(|c| c.is_whitespace() || c == '\'' || c == '"')
                {
                    return Err(invalid(format!(
                        "[disk] mount = {:?}: must be an absolute guest path other than / (no spaces, quotes or '..')",
                        d.mount
                    )));
                }
                if ["/proc", "/sys", "/dev", "/sim", "/tmp", "/run"].iter().any(|p| d.mount == *p || d.mount.starts_with(&format!("{p}/"))) {
                    return Err(invalid(format!("[disk] mount = {:?}: that path is used by the guest's own file systems", d.mount)));
                }
                let latency_ns = opt_duration("[disk] latency", &d.latency, 100_000)?;
                Some(DiskSettings {
                    size_mb: d.size_mb,
                    mount: d.mount.clone(),
                    latency_ns,
                    torn_writes: d.torn_writes,
                    enumerate: d.enumerate.unwrap_or(16),
                })
            }
        };
        let history_node = match &spec.check.history {
            None => None,
            Some(name) => Some(parse_node_name(name, n).ok_or_else(|| {
                invalid(format!("[check] history = {name:?}: no such node (nodes are n1..n{n})"))
            })?),
        };
        let disk_faults = disk_fault_rates(&spec).map_err(&invalid)?;
        let mut expect_reached = Vec::new();
        for (i, e) in spec.expects.iter().enumerate() {
            if !checker::reach::valid_name(&e.reached) {
                return Err(invalid(format!(
                    "[[expect]] #{}: reached = {:?}: a name is one word of printable ASCII, as a guest prints it \
                     after @reached",
                    i + 1,
                    e.reached
                )));
            }
            expect_reached.push(e.reached.clone());
        }
        let faults_after = match &spec.faults.start_after {
            None => None,
            Some(name) if checker::reach::valid_name(name) => Some(name.clone()),
            Some(name) => {
                return Err(invalid(format!(
                    "[faults] start_after = {name:?}: a name is one word of printable ASCII, as a guest prints it \
                     after @reached"
                )))
            }
        };
        // A container image's start command is its Entrypoint and Cmd.
        let has_start = spec.node.start.is_some() || spec.image.oci.is_some() || spec.image.docker_archive.is_some();
        let explore = checker::engine::ExploreSpec {
            window_ns,
            max_crashes: crash.max,
            crashable,
            restart_after_ns,
            calm_from: None,
            crash_states: Default::default(),
            crash_weight: crash.weight.unwrap_or(50),
            crash_span_ns: opt_duration("[faults.crash] span", &crash.span, 10_000_000_000)?,
            quiet_settle_ns: quiet_settle(&spec, &invalid)?,
            faults_after,
            pause: node_faults::pause_spec(&spec.faults.pause, n, has_start).map_err(&invalid)?,
            clock: node_faults::clock_spec(&spec.faults.clock, n).map_err(&invalid)?,
        };
        for (guest, host) in &spec.image.files {
            if !guest.starts_with('/') || guest.split('/').any(|c| c == "..") {
                return Err(invalid(format!(
                    "[image] files: guest path {guest:?} must be absolute and must not contain '..'"
                )));
            }
            if guest.starts_with("/sim/") || guest == "/init" {
                return Err(invalid(format!("[image] files: {guest:?} is reserved for simcluster's agent")));
            }
            let p = dir.join(host);
            if !p.is_file() {
                return Err(invalid(format!(
                    "[image] files: {guest:?} = {host:?}: {} does not exist",
                    p.display()
                )));
            }
        }
        for p in &spec.image.packages {
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric() || "+-.:".contains(c)) {
                return Err(invalid(format!("[image] packages: {p:?} is not a Debian package name")));
            }
        }
        if let Some(s) = &spec.image.suite {
            if s.is_empty() || !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                return Err(invalid(format!("[image] suite: {s:?} is not a Debian suite name (examples: \"bookworm\", \"trixie\")")));
            }
        }
        for g in &spec.image.exclude {
            if !g.starts_with('/') || g.split('/').any(|c| c == "..") || glob::Pattern::new(g).is_err() {
                return Err(invalid(format!("[image] exclude: {g:?} must be an absolute glob without '..'")));
            }
            if g == "/" || g.starts_with("/sim") || g.starts_with("/init") || g.starts_with("/*") {
                return Err(invalid(format!("[image] exclude: {g:?} would remove the root or simcluster's agent")));
            }
        }
        let container = spec.image.oci.as_ref().map(|p| ("oci", p)).or(spec.image.docker_archive.as_ref().map(|p| ("docker_archive", p)));
        if spec.image.oci.is_some() && spec.image.docker_archive.is_some() {
            return Err(invalid("[image] oci and docker_archive: name one container image, not two".into()));
        }
        if let Some((key, path)) = container {
            if spec.image.packages.iter().any(|p| p != crate::image::debs::AGENT_PACKAGE)
                || spec.image.maintainer_scripts == Some(true)
                || !spec.image.customize.is_empty()
            {
                return Err(invalid(format!(
                    "[image] {key}: a container image is the whole root filesystem; packages, maintainer_scripts and customize apply to Debian images only"
                )));
            }
            let p = dir.join(path);
            let exists = if key == "oci" { p.is_dir() } else { p.is_file() };
            if !exists {
                return Err(invalid(format!("[image] {key} = {path:?}: {} does not exist", p.display())));
            }
        } else if spec.image.tag.is_some() {
            return Err(invalid("[image] tag names an image of an OCI layout: it needs [image] oci".into()));
        }
        if !spec.image.customize.is_empty() && !spec.image.configured() {
            return Err(invalid(
                "[image] customize runs in a configured image: it needs maintainer_scripts = true".to_string(),
            ));
        }
        let time_limit_ns = match &spec.run.time_limit {
            None => None,
            Some(s) => Some(parse_duration_ns(s).ok_or_else(|| {
                invalid(format!("[run] time_limit = {s:?}: not a duration (examples: \"90s\", \"10m\")"))
            })?),
        };
        spec.faults.network.validate(n).map_err(|e| invalid(format!("[faults.network] {e}")))?;
        let mut partitions = Vec::new();
        for (k, p) in spec.faults.partition.iter().enumerate() {
            let what = format!("[[faults.partition]] #{}", k + 1);
            let time = |key: &str, v: &str| {
                parse_duration_ns(v).ok_or_else(|| invalid(format!("{what}: {key} = {v:?} is not a duration")))
            };
            let (at, heal) = (time("at", &p.at)?, time("heal", &p.heal)?);
            if heal <= at {
                return Err(invalid(format!("{what}: heal ({}) must come after at ({})", p.heal, p.at)));
            }
            // With a host workload "host" names the host client (node N+1).
            let has_host = host_workload.is_some();
            let nodes_of = |names: &[String]| -> Result<Vec<netsim::NodeId>, ClusterError> {
                names
                    .iter()
                    .map(|name| {
                        let i = if has_host && name == "host" { Some(usize::from(n)) } else { parse_node_name(name, n) };
                        let also = if has_host { ", and host" } else { "" };
                        i.and_then(|i| netsim::NodeId::new((i + 1) as u16))
                            .ok_or_else(|| invalid(format!("{what}: {name:?}: no such node (nodes are n1..n{n}{also})")))
                    })
                    .collect()
            };
            let partition = match (p.groups.is_empty(), p.from.is_empty() && p.to.is_empty()) {
                (false, true) => {
                    let groups = p.groups.iter().map(|g| nodes_of(g)).collect::<Result<Vec<_>, _>>()?;
                    netsim::Partition::symmetric(groups)
                }
                (true, false) if !p.from.is_empty() && !p.to.is_empty() => {
                    netsim::Partition::one_way(nodes_of(&p.from)?, nodes_of(&p.to)?)
                }
                _ => {
                    return Err(invalid(format!(
                        "{what}: give either groups = [[...], [...]] or both from = [...] and to = [...]"
                    )))
                }
            };
            partition.validate(n + u16::from(has_host)).map_err(|e| invalid(format!("{what}: {e}")))?;
            partitions.push(checker::engine::ScheduledPartition { at, heal, partition });
        }
        let name = spec.cluster.name.clone().unwrap_or_else(|| {
            dir.canonicalize()
                .ok()
                .and_then(|d| d.file_name().map(|f| f.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "cluster".into())
        });
        Ok(Cluster {
            dir: dir.to_path_buf(),
            file: file.to_path_buf(),
            name,
            spec,
            workload_node,
            host_workload,
            invariants,
            time_limit_ns,
            liveness,
            history_node,
            disk,
            explore,
            partitions,
            expect_reached,
            disk_faults,
        })
    }

    pub fn node_count(&self) -> usize {
        usize::from(self.spec.cluster.nodes)
    }

    pub fn node_names(&self) -> Vec<String> {
        (1..=self.spec.cluster.nodes).map(|i| format!("n{i}")).collect()
    }
}

/// `[faults.disk]`, checked: each a probability, and any fault that is on
/// needs `[disk]`. The error is the message (without the file name).
fn disk_fault_rates(spec: &ClusterFile) -> Result<checker::engine::DiskFaultRates, String> {
    let rates = spec.faults.disk.rates();
    for (key, p) in rates {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!("[faults.disk] {key} = {p}: a probability is within [0, 1]"));
        }
        if p > 0.0 && spec.disk.is_none() {
            return Err(format!("[faults.disk] {key} = {p}: the nodes have no disk (add a [disk] table)"));
        }
    }
    let [(_, lost_flush), (_, corrupt_read), (_, write_error), (_, misdirect)] = rates;
    Ok(checker::engine::DiskFaultRates { lost_flush, corrupt_read, write_error, misdirect })
}

/// Checks `[workload.host]` for a cluster of `n` guests in `dir`; the error
/// is the message (without the file name).
fn host_workload(h: &HostWorkloadSection, n: u16, dir: &Path) -> Result<checker::engine::HostWorkload, String> {
    const W: &str = "[workload.host]";
    if n >= netsim::MAX_NODES {
        return Err(format!("{W}: the host client is node N+1, so a cluster with it has at most {} nodes", netsim::MAX_NODES - 1));
    }
    if h.requests.is_empty() {
        return Err(format!("{W} requests is empty (give at least one {{ node = \"n1\", port = 80 }})"));
    }
    if h.repeat == 0 {
        return Err(format!("{W} repeat = 0: must be at least 1"));
    }
    if !(1..=1024).contains(&h.concurrency) {
        return Err(format!("{W} concurrency = {}: must be between 1 and 1024", h.concurrency));
    }
    let duration = |key: &str, v: &Option<String>, default: u64| match v {
        None => Ok(default),
        Some(s) => parse_duration_ns(s).ok_or_else(|| format!("{W} {key} = {s:?} is not a duration")),
    };
    let start_after_ns = duration("start_after", &h.start_after, 0)?;
    let timeout_ns = duration("timeout", &h.timeout, 30_000_000_000)?;
    if timeout_ns < 1_000_000 {
        return Err(format!("{W} timeout = {:?}: must be at least 1ms", h.timeout.as_deref().unwrap_or("")));
    }
    let mut requests = Vec::new();
    for (k, r) in h.requests.iter().enumerate() {
        let what = format!("{W} requests #{}", k + 1);
        let i = parse_node_name(&r.node, n)
            .ok_or_else(|| format!("{what}: node = {:?}: no such node (nodes are n1..n{n})", r.node))?;
        if r.port == 0 {
            return Err(format!("{what}: port = 0 is not a port (1..65535)"));
        }
        let method = r.method.clone().unwrap_or_else(|| "GET".into());
        if method.is_empty() || !method.chars().all(|c| c.is_ascii_uppercase()) {
            return Err(format!("{what}: method = {method:?}: must be an upper-case HTTP method such as GET or POST"));
        }
        let path = r.path.clone().unwrap_or_else(|| "/".into());
        if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{what}: path = {path:?}: must start with '/' and hold no spaces or control characters"));
        }
        let expect_status = r.expect_status.unwrap_or(200);
        if !(100..=599).contains(&expect_status) {
            return Err(format!("{what}: expect_status = {expect_status}: not an HTTP status (100..599)"));
        }
        let body_equals = match &r.body_file {
            None => None,
            Some(f) => {
                let p = dir.join(f);
                Some(std::fs::read(&p).map_err(|e| format!("{what}: body_file = {f:?}: cannot read {}: {e}", p.display()))?)
            }
        };
        requests.push(checker::engine::HostRequest {
            node: (i + 1) as u16,
            port: r.port,
            method,
            path,
            body: r.body.clone().unwrap_or_default().into_bytes(),
            expect_status,
            body_contains: r.body_contains.clone(),
            body_equals,
        });
    }
    Ok(checker::engine::HostWorkload {
        requests,
        repeat: h.repeat,
        concurrency: h.concurrency,
        start_after_ns,
        timeout_ns,
    })
}

/// The line (1-based) of `text` that a [`ClusterError::Invalid`] message is
/// about. Every message of [`Cluster::parse`] starts with the table it is
/// about, `[section.sub]` or `[[array]]`, then which element of an array
/// (`#K`, 1-based, or the element's name), then the key (`key = value: why`,
/// `key: why`, `key is ...`; a key path such as netsim's
/// `faults.network.links."n1-n2".loss` too, and `key #K: ...` for an element
/// of an array-valued key). The answer is the line of the deepest of those
/// found in the file: the key, else the element's or the table's header (an
/// array's first, when its element cannot be told); `None` when the file
/// does not write the table. Messages written later with the same prefix
/// get lines without any change here.
fn locate_line(text: &str, message: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let (path, mut rest) = table_prefix(message)?;
    let mut cur = doc.as_item();
    let mut at = None;
    // The last key reached: an array's name, for default element names.
    let mut name = path.last().cloned().unwrap_or_default();
    for seg in &path {
        cur = cur.as_table_like()?.get(seg)?;
        at = cur.span().map(|s| s.start).or(at);
    }
    // Owned from here: an element of an inline array is a `Value`.
    let mut cur = cur.clone();
    loop {
        rest = rest.trim_start();
        if let Some(elements) = array_elements(&cur) {
            let Some((k, after)) = pick_element(&elements, &name, rest) else { break };
            cur = elements[k].clone();
            at = cur.span().map(|s| s.start).or(at);
            rest = after.trim_start().strip_prefix(':').unwrap_or(after);
            continue;
        }
        let Some((mut keys, after)) = key_path(rest) else { break };
        if keys.starts_with(&path) {
            keys.drain(..path.len());
        }
        let mut found = false;
        for k in &keys {
            let Some((key, item)) = cur.as_table_like().and_then(|t| t.get_key_value(k)) else { break };
            at = key.span().map(|s| s.start).or(at);
            let item = item.clone();
            cur = item;
            name.clone_from(k);
            found = true;
        }
        rest = after.trim_start();
        if !found || !rest.starts_with('#') {
            break;
        }
    }
    at.map(|offset| 1 + text[..offset.min(text.len())].matches('\n').count())
}

/// `[a.b] rest` or `[[a.b]] rest` at the start of a message: the table's
/// path and the rest.
fn table_prefix(message: &str) -> Option<(Vec<String>, &str)> {
    let (inner, rest) = match message.strip_prefix("[[") {
        Some(m) => m.split_once("]]")?,
        None => message.strip_prefix('[')?.split_once(']')?,
    };
    let path: Vec<String> = inner.split('.').map(|s| s.trim().to_string()).collect();
    path.iter().all(|s| !s.is_empty()).then_some((path, rest))
}

/// The elements of an array of tables or of an inline array.
fn array_elements(item: &toml_edit::Item) -> Option<Vec<toml_edit::Item>> {
    match item {
        toml_edit::Item::ArrayOfTables(a) => Some(a.iter().map(|t| toml_edit::Item::Table(t.clone())).collect()),
        toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
            Some(a.iter().map(|v| toml_edit::Item::Value(v.clone())).collect())
        }
        _ => None,
    }
}

/// Which element of array `array` `rest` is about, and the rest after what
/// named it: `#K` (1-based), else a first word that is an element's `name`
/// (the last such: a name used twice is reported at its second use) or the
/// default name of the K-th, `ARRAY-K` (`invariant-2`), else `key "value"` /
/// `key = "value"` matching an element's key (the last such, nothing
/// consumed), else the only element.
fn pick_element<'m>(elements: &[toml_edit::Item], array: &str, rest: &'m str) -> Option<(usize, &'m str)> {
    if let Some(digits) = rest.strip_prefix('#') {
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        let k: usize = digits[..end].parse().ok()?;
        return (1..=elements.len()).contains(&k).then(|| (k - 1, &digits[end..]));
    }
    let string_of = |e: &toml_edit::Item, key: &str| e.as_table_like()?.get(key)?.as_str().map(str::to_string);
    let last_with = |key: &str, value: &str| elements.iter().rposition(|e| string_of(e, key).as_deref() == Some(value));
    let word_end = rest.find(|c: char| c == ':' || c.is_whitespace()).unwrap_or(rest.len());
    let word = &rest[..word_end];
    let default_name = word.strip_prefix(array).and_then(|w| w.strip_prefix('-')).and_then(|k| k.parse::<usize>().ok());
    let unnamed = |k: usize| elements.get(k).is_some_and(|e| string_of(e, "name").is_none());
    if let Some(k) = last_with("name", word).or(default_name.filter(|&k| k >= 1 && unnamed(k - 1)).map(|k| k - 1)) {
        return Some((k, &rest[word_end..]));
    }
    if let Some(([key], after)) = key_path(rest).as_ref().map(|(k, a)| (k.as_slice(), *a)) {
        let after = after.trim_start();
        let after = after.strip_prefix('=').unwrap_or(after).trim_start();
        if let Some(value) = after.strip_prefix('"').and_then(|v| v.split_once('"')).map(|(v, _)| v) {
            if let Some(k) = last_with(key, value) {
                return Some((k, rest));
            }
        }
    }
    (elements.len() == 1).then_some((0, rest))
}

/// A key path at the start of `s`: dot-separated bare (`A-Za-z0-9_-`) or
/// double-quoted segments, followed by the end, a space, ':' or '='.
fn key_path(s: &str) -> Option<(Vec<String>, &str)> {
    let mut keys = Vec::new();
    let mut rest = s;
    loop {
        let (seg, after) = match rest.strip_prefix('"') {
            Some(q) => q.split_once('"')?,
            None => {
                let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if seg.is_empty() {
            return None;
        }
        keys.push(seg.to_string());
        match after.strip_prefix('.') {
            Some(next) => rest = next,
            None => {
                rest = after;
                break;
            }
        }
    }
    (rest.is_empty() || rest.starts_with([' ', ':', '='])).then_some((keys, rest))
}

/// toml's own message already carries line, column and a caret; keep it but
/// make it one readable paragraph.
fn describe_toml_error(_text: &str, e: &toml::de::Error) -> String {
    e.to_string().trim_end().replace("TOML parse error at ", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app"), "x").unwrap();
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), text)
    }

    const GOOD: &str = r#"
[cluster]
nodes = 3
[image]
packages = ["busybox-static"]
files = { "/usr/local/bin/app" = "app" }
[node]
start = "/usr/local/bin/app"
[workload]
node = "n1"
command = "sleep 30; echo done"
[[invariant]]
node = "n1"
command = "test -f /tmp/ok"
[[invariant]]
name = "everywhere"
node = "all"
command = "true"
"#;

    #[test]
    fn the_documented_example_parses() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.node_count(), 3);
        assert_eq!(c.workload_node, 0);
        assert_eq!(c.invariants.len(), 4);
        assert_eq!(c.invariants[0].0, "invariant-1");
        assert_eq!(c.invariants[3], ("everywhere".into(), 2, "true".into()));
    }

    #[test]
    fn a_typo_names_the_key_and_line() {
        let e = parse(&GOOD.replace("command = \"sleep", "comand = \"sleep")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cluster.toml"), "{msg}");
        assert!(msg.contains("comand"), "{msg}");
        assert!(msg.contains("line 11"), "{msg}");
    }

    #[test]
    fn unknown_nodes_and_files_are_rejected() {
        let e = parse(&GOOD.replace("node = \"n1\"\ncommand = \"sleep", "node = \"n4\"\ncommand = \"sleep")).unwrap_err();
        assert!(e.to_string().contains("\"n4\": no such node"), "{e}");
        let e = parse(&GOOD.replace("= \"app\"", "= \"missing\"")).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = parse(&GOOD.replace("nodes = 3", "nodes = 0")).unwrap_err();
        assert!(e.to_string().contains("nodes = 0"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("90s"), Some(90_000_000_000));
        assert_eq!(parse_duration_ns("250ms"), Some(250_000_000));
        assert_eq!(parse_duration_ns("2m"), Some(120_000_000_000));
        assert_eq!(parse_duration_ns("7"), Some(7_000_000_000));
        assert_eq!(parse_duration_ns("7 parsecs"), None);
        assert_eq!(parse_duration_ns("-1s"), None);
    }

    #[test]
    fn node_names() {
        assert_eq!(parse_node_name("n1", 3), Some(0));
        assert_eq!(parse_node_name("n3", 3), Some(2));
        assert_eq!(parse_node_name("n4", 3), None);
        assert_eq!(parse_node_name("n01", 3), None);
        assert_eq!(parse_node_name("x1", 3), None);
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    fn parse(extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 3\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    #[test]
    fn network_faults_and_partitions_parse() {
        let c = parse(
            "[faults.network]\nloss = 0.2\nreorder = 0.1\npartitions = true\n\
             [[faults.partition]]\nat = \"5s\"\nheal = \"15s\"\ngroups = [[\"n1\"], [\"n2\", \"n3\"]]\n\
             [[faults.partition]]\nat = \"20s\"\nheal = \"30s\"\nfrom = [\"n1\"]\nto = [\"n2\"]\n",
        )
        .unwrap();
        assert_eq!(c.spec.faults.network.loss, 0.2);
        assert_eq!(c.partitions.len(), 2);
        assert_eq!(c.partitions[0].at, 5_000_000_000);
        assert!(c.partitions[1].partition.blocks(netsim::NodeId::new(1).unwrap(), netsim::NodeId::new(2).unwrap()));
        assert!(!c.partitions[1].partition.blocks(netsim::NodeId::new(2).unwrap(), netsim::NodeId::new(1).unwrap()));
    }

    #[test]
    fn bad_fault_settings_are_named() {
        let e = parse("[faults.network]\nloss = 1.5\n").unwrap_err().to_string();
        assert!(e.contains("loss") && e.contains("1.5"), "{e}");
        let e = parse("[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\"], [\"n9\"]]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"n9\": no such node"), "{e}");
        let e = parse("[[faults.partition]]\nat = \"3s\"\nheal = \"2s\"\ngroups = [[\"n1\"]]\n").unwrap_err().to_string();
        assert!(e.contains("heal"), "{e}");
    }
}

#[cfg(test)]
mod node_fault_tests {
    use super::*;

    fn parse(extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 3\n[node]\nstart = \"sleep 100\"\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    #[test]
    fn pauses_and_clock_faults_are_off_by_default() {
        let c = parse("").unwrap();
        assert_eq!(c.explore.pause.max, 0);
        assert!(!c.explore.clock.jumps() && c.explore.clock.offset_ns.is_none() && c.explore.clock.drift_ppm.is_none());
        assert!(!c.spec.faults.clock.needs_helper());
        assert_eq!(c.explore.quiet_settle_ns, None, "no fault, no quiet period");
    }

    #[test]
    fn pause_and_clock_tables_parse_with_their_defaults() {
        let c = parse("[faults.pause]\nmax = 2\n[faults.clock]\nbump = { min = \"-3s\", max = \"+250ms\" }\nstrobe = true\n").unwrap();
        let p = &c.explore.pause;
        assert_eq!((p.max, p.nodes.clone(), p.length_ns, p.span_ns, p.weight), (2, vec![0, 1, 2], (1_000_000_000, 5_000_000_000), 10_000_000_000, 50));
        let k = &c.explore.clock;
        assert_eq!(k.bump_ns, Some((-3_000_000_000, 250_000_000)));
        assert_eq!(k.strobe, Some(checker::engine::StrobeSpec { delta_ns: 200_000_000, period_ns: 10_000_000, length_ns: 1_000_000_000 }));
        assert_eq!((k.max, k.nodes.clone(), k.weight), (1, vec![0, 1, 2], 50));
        assert!(c.spec.faults.clock.needs_helper());
        assert!(c.explore.quiet_settle_ns.is_some(), "pauses and jumps calm down before the checks");

        let c = parse("[faults.clock]\noffset = \"-2s\"\ndrift_ppm = { min = -100, max = 100000 }\nnodes = [\"n3\", \"n2\"]\n").unwrap();
        let k = &c.explore.clock;
        assert_eq!((k.offset_ns, k.drift_ppm, k.max, k.nodes.clone()), (Some((-2_000_000_000, -2_000_000_000)), Some((-100, 100_000)), 0, vec![1, 2]));
        assert_eq!(c.explore.quiet_settle_ns, None, "offsets and drift never calm");
        let c = parse("[faults.clock]\nstrobe = { delta = \"-1s\", period = \"50ms\", length = \"2s\" }\nmax = 4\n").unwrap();
        assert_eq!(c.explore.clock.strobe.unwrap().delta_ns, -1_000_000_000);
    }

    #[test]
    fn bad_pause_and_clock_values_name_their_key() {
        for (toml, needle) in [
            ("[faults.pause]\nmax = -1\n", "[faults.pause] max = -1"),
            ("[faults.pause]\nmax = 1\nlength = { min = \"-1s\", max = \"2s\" }\n", "[faults.pause] length: min = \"-1s\""),
            ("[faults.pause]\nmax = 1\nlength = { min = \"3s\", max = \"2s\" }\n", "[faults.pause] length: min = \"3s\" is above max"),
            ("[faults.pause]\nmax = 1\nnodes = [\"n7\"]\n", "[faults.pause] nodes: \"n7\": no such node"),
            ("[faults.pause]\nmax = 1\nweight = -5\n", "[faults.pause] weight = -5"),
            ("[faults.pause]\nmax = 1\nspan = \"soon\"\n", "[faults.pause] span = \"soon\""),
            ("[faults.clock]\noffset = { min = \"1s\", max = \"-1s\" }\n", "[faults.clock] offset: min = \"1s\" is above max"),
            ("[faults.clock]\nbump = \"2 fortnights\"\n", "[faults.clock] bump: min = \"2 fortnights\""),
            ("[faults.clock]\ndrift_ppm = 200000\n", "[faults.clock] drift_ppm"),
            ("[faults.clock]\ndrift_ppm = { min = 5, max = 1 }\n", "[faults.clock] drift_ppm: min = 5 is above max = 1"),
            ("[faults.clock]\nmax = 2\n", "[faults.clock] max = 2: nothing to jump"),
            ("[faults.clock]\nbump = \"1s\"\nnodes = [\"x\"]\n", "[faults.clock] nodes: \"x\""),
            ("[faults.clock]\nstrobe = { delta = \"0s\" }\n", "[faults.clock] strobe: delta"),
            ("[faults.clock]\nstrobe = { period = \"1s\", length = \"10ms\" }\n", "[faults.clock] strobe: length"),
        ] {
            let e = parse(toml).unwrap_err().to_string();
            assert!(e.contains("cluster.toml") && e.contains(needle), "{toml}: {e}");
        }
        for (toml, key) in [
            ("[faults.pause]\nmaxx = 1\n", "maxx"),
            ("[faults.pause]\nlength = { min = \"1s\", mx = \"2s\" }\n", "mx"),
            ("[faults.clock]\nstrobe = { delta = \"1s\", perod = \"1s\" }\n", "perod"),
            ("[faults.clock]\nbumps = \"1s\"\n", "bumps"),
        ] {
            let e = parse(toml).unwrap_err().to_string();
            assert!(e.contains("cluster.toml") && e.contains(key) && e.contains("line"), "{toml}: {e}");
        }
        // Nothing to pause without a start command.
        let dir = tempfile::tempdir().unwrap();
        let text = "[cluster]\nnodes = 2\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n[faults.pause]\nmax = 1\n";
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), text).unwrap_err().to_string();
        assert!(e.contains("[faults.pause] max = 1: the nodes have no start command"), "{e}");
    }
}

#[cfg(test)]
mod host_workload_tests {
    use super::*;

    fn parse(workload: &str, extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("want.txt"), "1\n2\n").unwrap();
        let text = format!("[cluster]\nnodes = 2\n{workload}\n{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    #[test]
    fn a_host_workload_parses_with_defaults() {
        let c = parse(
            "[workload.host]\nrequests = [ { node = \"n2\", port = 8080, path = \"/data\", body_contains = \"2\" },\n\
             { node = \"n1\", port = 80, method = \"POST\", body = \"x\", expect_status = 201, body_file = \"want.txt\" } ]\n\
             repeat = 3\nconcurrency = 2\nstart_after = \"1s\"\n",
            "",
        )
        .unwrap();
        let w = c.host_workload.as_ref().unwrap();
        assert_eq!(c.workload_node, 2, "the host client is node N+1");
        assert_eq!((w.repeat, w.concurrency, w.start_after_ns, w.timeout_ns), (3, 2, 1_000_000_000, 30_000_000_000));
        assert_eq!((w.requests[0].node, w.requests[0].method.as_str(), w.requests[0].expect_status), (2, "GET", 200));
        assert_eq!(w.requests[1].body_equals.as_deref(), Some(&b"1\n2\n"[..]));
        assert_eq!(w.requests[1].body, b"x");
        // Crashes may hit every guest: none runs the workload.
        assert_eq!(c.explore.crashable, vec![0, 1]);
    }

    #[test]
    fn host_workload_mistakes_are_named() {
        let req = |r: &str| format!("[workload.host]\nrequests = [ {{ {r} }} ]\n");
        let e = parse(&req("node = \"n3\", port = 80"), "").unwrap_err().to_string();
        assert!(e.contains("cluster.toml") && e.contains("requests #1") && e.contains("\"n3\": no such node"), "{e}");
        let e = parse(&req("node = \"n1\", port = 0"), "").unwrap_err().to_string();
        assert!(e.contains("port = 0"), "{e}");
        let e = parse(&req("node = \"n1\", port = 80, path = \"data\""), "").unwrap_err().to_string();
        assert!(e.contains("path"), "{e}");
        let e = parse(&req("node = \"n1\", port = 80, body_file = \"nope\""), "").unwrap_err().to_string();
        assert!(e.contains("body_file") && e.contains("nope"), "{e}");
        let e = parse(&req("node = \"n1\", prot = 80"), "").unwrap_err().to_string();
        assert!(e.contains("prot"), "{e}");
        let e = parse("[workload.host]\nrequests = []\n", "").unwrap_err().to_string();
        assert!(e.contains("requests is empty"), "{e}");
        let e = parse("[workload]\nnode = \"n1\"\ncommand = \"true\"\n[workload.host]\nrequests = [ { node = \"n1\", port = 80 } ]\n", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exclude each other"), "{e}");
        let e = parse("[workload]\n", "").unwrap_err().to_string();
        assert!(e.contains("[workload.host]"), "{e}");
    }

    #[test]
    fn partitions_may_name_the_host_only_with_a_host_workload() {
        let host = "[workload.host]\nrequests = [ { node = \"n1\", port = 80 } ]\n";
        let cut = "[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\", \"host\"], [\"n2\"]]\n";
        let c = parse(host, cut).unwrap();
        let (n1, host_id) = (netsim::NodeId::new(1).unwrap(), netsim::NodeId::new(3).unwrap());
        assert!(!c.partitions[0].partition.blocks(host_id, n1));
        assert!(c.partitions[0].partition.blocks(host_id, netsim::NodeId::new(2).unwrap()));
        let e = parse("[workload]\nnode = \"n1\"\ncommand = \"true\"\n", cut).unwrap_err().to_string();
        assert!(e.contains("\"host\": no such node"), "{e}");
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    const HEAD: &str = "[cluster]\nnodes = 3\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n";

    /// The error for HEAD + `extra`, and the 1-based line of the first line of
    /// `extra` that contains `needle`.
    fn error_at(extra: &str, needle: &str) -> (String, usize) {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{HEAD}{extra}");
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap_err();
        assert!(matches!(e, ClusterError::Invalid { .. }), "{e}");
        let line = 1 + text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} in {text}"));
        (e.to_string(), line)
    }

    #[test]
    fn a_bad_value_names_file_line_and_key() {
        let (e, line) = error_at("[disk]\nsize_mb = 16\nmount = \"/data\"\n[faults.disk]\n\nlost_flush = 1.5\n", "lost_flush");
        assert_eq!(line, 11);
        assert!(
            e.ends_with("cluster.toml: line 11: [faults.disk] lost_flush = 1.5: a probability is within [0, 1]"),
            "{e}"
        );
        let (e, line) = error_at("[faults.disk]\nmisdirect = 0.5\n", "misdirect");
        assert!(e.contains(&format!("cluster.toml: line {line}: [faults.disk] misdirect = 0.5: the nodes have no disk")), "{e}");
        // The key wherever the table is written: dotted keys, inline tables.
        let dir = tempfile::tempdir().unwrap();
        let text = format!("faults.disk.write_error = -1\n{HEAD}");
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap_err().to_string();
        assert!(e.contains("line 1: [faults.disk] write_error = -1"), "{e}");
        let (e, line) = error_at("[faults]\ndisk = { corrupt_read = 2 }\n", "corrupt_read");
        assert!(e.contains(&format!("line {line}: [faults.disk] corrupt_read = 2")), "{e}");
        let (e, line) = error_at("[disk]\nsize_mb = 8\nmount = \"/data\"\n", "size_mb");
        assert!(e.contains(&format!("line {line}: [disk] size_mb = 8")), "{e}");
        let (e, line) = error_at("[run]\ntime_limit = \"soon\"\n", "time_limit");
        assert!(e.contains(&format!("line {line}: [run] time_limit")), "{e}");
    }

    #[test]
    fn array_elements_are_found_by_number_name_or_value() {
        let parts = "[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\"], [\"n2\"]]\n\
                     [[faults.partition]]\nat = \"5s\"\nheal = \"4s\"\ngroups = [[\"n1\"], [\"n2\"]]\n";
        let (e, line) = error_at(parts, "heal = \"4s\"");
        assert!(e.contains(&format!("line {line}: [[faults.partition]] #2: heal")), "{e}");
        let live = "[[liveness]]\nname = \"a\"\nnode = \"n1\"\ncommand = \"true\"\nwithin = \"1s\"\n\
                    [[liveness]]\nname = \"b\"\nnode = \"n1\"\ncommand = \"true\"\nwithin = \"never\"\n";
        let (e, line) = error_at(live, "never");
        assert!(e.contains(&format!("line {line}: [[liveness]] b: within")), "{e}");
        // A name used twice: its second use.
        let inv = "[[invariant]]\nname = \"x\"\nnode = \"n1\"\ncommand = \"true\"\n\
                   [[invariant]]\nname = \"y\"\nnode = \"n1\"\ncommand = \"true\"\n\
                   [[invariant]]\nname = \"x\"\nnode = \"n2\"\ncommand = \"true\"\n";
        let (e, _) = error_at(inv, "name = \"x\"");
        assert!(e.contains("line 15: [[invariant]] name \"x\" is used twice"), "{e}");
        // An unnamed invariant goes by its default name.
        let inv = "[[invariant]]\nnode = \"n1\"\ncommand = \"true\"\n[[invariant]]\nnode = \"n7\"\ncommand = \"true\"\n";
        let (e, line) = error_at(inv, "n7");
        assert!(e.contains(&format!("line {line}: [[invariant]] invariant-2: node = \"n7\"")), "{e}");
    }

    #[test]
    fn key_paths_and_elements_of_array_values() {
        let (e, line) = error_at("[faults.network.links.\"n1-n2\"]\nloss = 1.5\n", "loss");
        assert!(e.contains(&format!("line {line}: [faults.network] faults.network.links.\"n1-n2\".loss")), "{e}");
        let host = "[workload.host]\nrequests = [\n  { node = \"n1\", port = 80 },\n  { node = \"n9\", port = 80 },\n]\n";
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 2\n{host}");
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap_err().to_string();
        assert!(e.contains("line 6: [workload.host] requests #2: node = \"n9\""), "{e}");
    }

    #[test]
    fn the_header_or_nothing_when_no_key_is_found() {
        // About the table as a whole: its header.
        let dir = tempfile::tempdir().unwrap();
        let text = "[cluster]\nnodes = 2\n\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n[workload.host]\nrequests = [ { node = \"n1\", port = 80 } ]\n";
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), text).unwrap_err().to_string();
        assert!(e.contains("cluster.toml: line 4: [workload]: node + command"), "{e}");
        // An element no one can tell: the array's (first) header.
        let two = format!("{HEAD}[[invariant]]\nnode = \"n1\"\ncommand = \"a\"\n[[invariant]]\nnode = \"n1\"\ncommand = \"b\"\n");
        assert_eq!(locate_line(&two, "[[invariant]] somewhere: it broke"), Some(6));
        // A table the file does not write, a message about no table: no line.
        assert_eq!(locate_line(HEAD, "[nosuch] key = 1: why"), None);
        assert_eq!(locate_line(HEAD, "[disk] size_mb = 8: too small"), None);
        assert_eq!(locate_line(&two, "no table at all"), None);
        let e = ClusterError::Invalid { path: "c/cluster.toml".into(), line: None, message: "[x] y: z".into() };
        assert_eq!(e.to_string(), "c/cluster.toml: [x] y: z");
    }
}
