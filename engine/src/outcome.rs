//! What an execution concluded.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::trace::Trace;
use simtime::VirtualTime;

/// Which property failed. A guest that panics or hangs is a finding about
/// the guest, never a simulator crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The workload exited non-zero.
    Workload,
    /// An invariant exited non-zero.
    Invariant,
    /// A node's start command exited non-zero.
    StartCommand,
    /// A node's readiness probe (`[node] ready`) never passed, after boot
    /// or after a restart.
    NotReady,
    /// A guest kernel panicked.
    GuestPanic,
    /// A guest kernel exited without panicking (poweroff, host signal).
    GuestExit,
    /// A guest stopped yielding to the time controller.
    GuestHang,
    /// The virtual-time limit passed first.
    TimeLimit,
    /// A liveness predicate was still false at its deadline.
    Liveness,
    /// The host-side check found the recorded client history not
    /// linearizable (or could not read it).
    Linearizability,
    /// The host-side check found the recorded transactional history to
    /// hold an anomaly its consistency model forbids (or could not read it).
    Anomaly,
    /// An Antithesis SDK assertion (`always` false, `unreachable` reached).
    Assertion,
}

/// A failed execution: what failed, where, when, and the engine's message
/// (part of every failure file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Which property failed.
    pub kind: FailureKind,
    /// The node to blame, by name (`n2`, `host`), if one is. A name, not a
    /// [`crate::NodeId`]: the host client is not a node, and failure
    /// files carry the name.
    pub node: Option<String>,
    /// Virtual time of the failure.
    pub time: VirtualTime,
    /// What happened, for humans (may end with the node's console tail).
    pub message: String,
}

impl FailureKind {
    /// The kind as failure lines and reports name it (`Invariant`,
    /// `GuestPanic`, ...).
    pub fn title(self) -> &'static str {
        match self {
            FailureKind::Workload => "Workload",
            FailureKind::Invariant => "Invariant",
            FailureKind::StartCommand => "StartCommand",
            FailureKind::NotReady => "NotReady",
            FailureKind::GuestPanic => "GuestPanic",
            FailureKind::GuestExit => "GuestExit",
            FailureKind::GuestHang => "GuestHang",
            FailureKind::TimeLimit => "TimeLimit",
            FailureKind::Liveness => "Liveness",
            FailureKind::Linearizability => "Linearizability",
            FailureKind::Anomaly => "Anomaly",
            FailureKind::Assertion => "Assertion",
        }
    }
}

/// The failure line for humans: `Invariant: invariant x failed on n2 ...`.
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.title(), self.message)
    }
}

impl Failure {
    /// The first line of [`Failure`]'s display: kind and the message's
    /// first line (the console lines that may follow it are elsewhere).
    pub fn headline(&self) -> String {
        let first = self.message.lines().next().unwrap_or("");
        format!("{}: {first}", self.kind.title())
    }

    /// A failure of `kind` on `node` at `time`.
    pub fn new(kind: FailureKind, node: Option<String>, time: VirtualTime, message: String) -> Failure {
        Failure { kind, node, time, message }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Every check passed.
    Pass,
    /// A property failed.
    Fail(Failure),
}

impl Verdict {
    /// The failure, if it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Verdict::Pass => None,
            Verdict::Fail(f) => Some(f),
        }
    }
}

/// Everything one execution produced ([`crate::Execution::finish`]).
/// Serializable (a forked warm-start child sends it back whole; the
/// trace travels as its JSON lines and its hash is recomputed).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutionResult {
    /// Pass, or the failure.
    pub verdict: Verdict,
    /// The trace.
    pub trace: Trace,
    /// Its hash (SHA-256 of `trace.jsonl`).
    pub trace_hash: String,
    /// Virtual time at the end.
    pub ended_at: VirtualTime,
    /// Wall time the execution took (statistics only).
    pub wall: Duration,
    /// Wall time from the first node's spawn until every node's agent was
    /// ready (`None`: they never all were).
    pub boot_wall: Option<Duration>,
    /// Number of times a node was let run.
    pub grants: u64,
    /// Grants actually made (round trips to a node and back): `grants`
    /// less the wake-ups nodes took by themselves under lookahead.
    pub round_trips: u64,
    /// Memory (PSS, KiB) of each node's host processes at the end.
    pub node_memory_kib: Vec<u64>,
    /// Bytes simcluster holds for each node's disk at the end (0 without).
    pub disk_storage_bytes: Vec<u64>,
    /// netsim's counters (sent, delivered, dropped by cause, ...); `None`
    /// without a simulated network.
    pub network: Option<netsim::NetStats>,
    /// The traffic captures, (file name, pcap bytes), when
    /// `NetworkSpec::capture` asked for them: the caller writes them once,
    /// where it keeps them.
    pub pcaps: Vec<(String, Vec<u8>)>,
    /// The strategy's choices that differ from the default scheduler's,
    /// by choice step: with the seed, all a replay needs.
    pub decisions: Vec<crate::strategy::Decision>,
    /// Steps at which more than one action was enabled.
    pub choice_points: u64,
    /// Of them, those whose choice a guest can tell apart
    /// ([`crate::strategy::is_race`]): delay bounding's horizon.
    pub race_points: u64,
    /// Every action taken and when it took effect, stretches of quiet node
    /// runs folded (see [`crate::StepLog`]): bounded by what guests saw,
    /// not by the number of grants.
    pub chosen: crate::steps::StepLog,
    /// Nodes crashed by the engine.
    pub crashes: u32,
    /// Coordinated power failures (`[faults.crash] power_failure`); the
    /// nodes each took down are in `crashes` too.
    pub power_failures: u32,
    /// The disk side of each crash (nodes with disks only).
    pub crash_points: Vec<crate::disk::CrashPoint>,
    /// Disk faults that hit requests (`[faults.disk]`), by kind.
    pub disk_faults: crate::disk::DiskFaultCounts,
    /// Pauses and clock faults (`[faults.pause]`, `[faults.clock]`).
    pub node_faults: crate::faults::FaultCounts,
    /// Connection resets and stalls (`[faults.connection]`).
    pub conn_faults: crate::conn_faults::ConnFaultCounts,
    /// The history check's anomalies by name (transactional models), with
    /// counts: what the JSON line's `anomalies` shows.
    pub anomalies: std::collections::BTreeMap<String, u64>,
}
