//! `[cluster]`: how many nodes, their memory, and the machine they run on
//! (CPUID, kernel, userspace mode, time-travel transport).

use serde::Deserialize;

use super::{Invalid, KeyPath};

/// `[cluster]`: the nodes and the machines they run on.
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
    /// What CPUID tells guest programs (user-mode Linux runtime):
    /// "virtual" (default), "strict" or "host"; see [`CpuidMode`].
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
    /// Client-only nodes: left out of `PEERS` (the servers' list), still
    /// named in every node's /etc/hosts, and out of the crash default.
    #[serde(default)]
    pub clients: Vec<String>,
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

    /// Checks the table; returns the node count.
    pub(super) fn check(&self) -> Result<u16, Invalid> {
        let at = KeyPath::table("cluster");
        let n = self.nodes;
        if n == 0 || n > engine::NodeId::MAX {
            return Err(at.key("nodes").invalid(format!(" = {n}: must be between 1 and {}", engine::NodeId::MAX)));
        }
        if self.userspace_setting == Some(Userspace::Seccomp) && !self.kernel.has_seccomp_userspace() {
            return Err(at.key("userspace").invalid(format!(
                " = \"seccomp\" needs kernel = \"7.2\" (kernel {} has only the ptrace userspace)",
                self.kernel.name()
            )));
        }
        if self.time_travel_setting == Some(TimeTravel::SharedMemory) && !self.kernel.has_shared_clock() {
            return Err(at.key("time_travel").invalid(format!(
                " = \"shared-memory\" needs kernel = \"7.2\" (kernel {} has only messages)",
                self.kernel.name()
            )));
        }
        if self.memory_mb < 128 {
            return Err(at.key("memory_mb").invalid(format!(" = {}: a node needs at least 128 MiB", self.memory_mb)));
        }
        Ok(n)
    }

    /// `clients` as sorted 0-based indices: each a node of the `n`, once,
    /// and at least one node left to serve.
    pub(super) fn client_nodes(&self, n: u16) -> Result<Vec<usize>, Invalid> {
        let key = KeyPath::table("cluster").key("clients");
        let mut v = Vec::new();
        for (k, name) in self.clients.iter().enumerate() {
            let at = key.nth(k);
            let i =
                super::parse_node_name(name, n).ok_or_else(|| at.invalid(super::values::no_such_node(name, n, "")))?;
            if v.contains(&i) {
                return Err(at.invalid(format!(" = {name:?}: named twice")));
            }
            v.push(i);
        }
        if v.len() >= usize::from(n) {
            return Err(key.invalid(" names every node: at least one node must be a server (in PEERS)"));
        }
        v.sort_unstable();
        Ok(v)
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
    /// The value as cluster.toml writes it (`"seccomp"`, `"ptrace"`).
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

/// `[cluster] cpuid`: what CPUID tells guest programs under user-mode
/// Linux. (Under KVM the VMM answers CPUID, whatever this says.) What
/// guests saw is the JSON line's `host.guest_cpuid`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuidMode {
    /// Trapped and answered by the guest kernel from the host's answers
    /// read at boot, without RDRAND, RDSEED, RDPID, TSX and WAITPKG and
    /// with APIC id 0 (the kernel patch): no host randomness, and the same
    /// answers on every host of one cpu model. Costs a trap per CPUID (glibc
    /// asks a few dozen times at every exec); with faulting on for the
    /// guest kernel too, hardly more than native on the 7.2 kernel
    /// (measured: README, Figures). Needs a host cpu that can fault CPUID
    /// (`ARCH_SET_CPUID`); where it cannot, CPUID stays native and the run
    /// says so once on stderr (`host.guest_cpuid` = "host").
    #[default]
    Virtual,
    /// Virtual or nothing: on a host that cannot fault CPUID the run
    /// refuses to start (exit 3) rather than let guest programs see the
    /// host's CPUID.
    Strict,
    /// Native: faster process start-up, but guest programs may read host
    /// randomness (RDRAND) and see which host cpu they run on, so the same
    /// seed may not give the same execution.
    Host,
}

impl CpuidMode {
    /// The value as cluster.toml writes it (`"virtual"`, `"strict"`,
    /// `"host"`).
    pub fn name(self) -> &'static str {
        match self {
            CpuidMode::Virtual => "virtual",
            CpuidMode::Strict => "strict",
            CpuidMode::Host => "host",
        }
    }

    /// Whether the guest kernel traps CPUID (where the host lets it).
    pub fn virtualised(self) -> bool {
        self != CpuidMode::Host
    }
}

fn default_memory_mb() -> u32 {
    256
}

/// Which kernel a cluster's nodes run (`[cluster] kernel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
pub enum KernelSeries {
    /// linux-source-7.2 (trixie-backports), seccomp userspace available.
    #[default]
    #[serde(rename = "7.2")]
    V7_2,
    /// linux-source-6.1 (bookworm): the previous kernel, for comparisons.
    #[serde(rename = "6.1")]
    V6_1,
}

impl KernelSeries {
    /// The series as `[cluster] kernel` writes it (`"7.2"`, `"6.1"`).
    pub fn name(self) -> &'static str {
        match self {
            KernelSeries::V7_2 => "7.2",
            KernelSeries::V6_1 => "6.1",
        }
    }

    /// Whether the series has UML's seccomp userspace (Linux 6.16+).
    pub fn has_seccomp_userspace(self) -> bool {
        self == KernelSeries::V7_2
    }

    /// Whether the series speaks time travel's shared-memory mode (6.11+).
    pub fn has_shared_clock(self) -> bool {
        self == KernelSeries::V7_2
    }

    /// Whether the kernel, trapping its guest programs' CPUID, keeps CPUID
    /// faulting on for its own process too (the 7.2 patch; see its text).
    pub fn faults_cpuid_itself(self) -> bool {
        self == KernelSeries::V7_2
    }
}
