//! What a run keeps of one execution: its [`ExecutionRecord`] (seed,
//! figures, failure, reached names) and the searches made of a failure
//! ([`CriticalSummary`], [`CrashPointSummary`]). [`super::summary`] makes
//! the run's line from these.

use std::collections::BTreeMap;
use std::path::PathBuf;

use engine::{Failure, FailureKind};
use serde::{Deserialize, Serialize};
use simtime::VirtualTime;

/// MaceMC's answer for a liveness failure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CriticalSummary {
    /// The step (0-based, every engine action counted) after which no
    /// fault-free random walk reached a live state.
    pub step: u64,
    /// Virtual time of that choice point in the failing execution.
    pub virtual_seconds: f64,
    /// What the failing execution did there.
    pub action: Option<String>,
    /// Steps probed in the search (each probe runs `walks_per_probe`
    /// fault-free random walks from a prefix of the failing execution).
    pub probes: u64,
    /// Random walks per probe (`--critical-walks`).
    pub walks_per_probe: u32,
}

/// A disk crash point: how many crash states it has, how many were run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CrashPointSummary {
    /// The execution it happened in (0-based).
    pub execution: u64,
    /// The node that lost power (`n2`).
    pub node: String,
    /// Virtual time of the crash, from boot.
    pub virtual_seconds: f64,
    /// Writes the power loss could still lose: submitted, not yet made
    /// durable by a flush. The crash states are drawn from what of them
    /// persists.
    pub volatile_writes: usize,
    /// Regular files whose data the guest's page cache held dirty, not yet
    /// written to the disk, lost with the power (`None` where the runtime
    /// cannot see it: KVM).
    pub dirty_files: Option<u64>,
    /// How many crash states it has (a lower bound when `states_exact` is
    /// false).
    pub states: u128,
    /// False when counting gave up and `states` is a lower bound.
    pub states_exact: bool,
    /// Executions that applied one of its states (all of them when the
    /// count is at most `[disk] enumerate`, else one sampled state).
    pub explored: u64,
}

/// One execution as the run keeps it: what the summary line, a merge and
/// a person looking for a failure need. Never holds a wall-clock figure
/// except `boot_wall_seconds`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionRecord {
    /// The execution's index in the run (0-based).
    pub execution: u64,
    /// A sibling of execution `execution` that applied disk crash state
    /// `k` at its crash point; `None` for the execution itself.
    pub crash_state: Option<u64>,
    /// The execution's own seed (derived from the run's).
    pub seed: u64,
    /// Its virtual time from boot to its end, in nanoseconds.
    pub virtual_ns: u64,
    /// Wall time from its first node spawn until every node's agent was
    /// ready (`None`: they never all were). With `--warm-start`, the shared
    /// boot's.
    pub boot_wall_seconds: Option<f64>,
    /// The figures the summary line shows when this is the reported
    /// execution (written flat, beside the fields above).
    #[serde(flatten)]
    pub figures: ExecutionFigures,
    /// Its failure file: every failing execution's within the run's
    /// failure file budget (the summary's `failure_files`), else none.
    pub failure_file: Option<PathBuf>,
    /// The execution's first disk crash point (not on siblings).
    pub crash_point: Option<CrashPointSummary>,
    /// `@reached NAME` / `@sometimes NAME` lines its guests printed, by
    /// name (see `checker::reach`).
    #[serde(default)]
    pub reached: BTreeMap<String, u64>,
    /// Antithesis SDK assertions its guests declared or evaluated, by id
    /// (see `checker::antithesis`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub antithesis: BTreeMap<String, checker::antithesis::PropertyCount>,
    /// Test Composer's commands that ended, by name (`[antithesis]
    /// test_composer`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub test_composer: BTreeMap<String, checker::antithesis::CommandCount>,
}

/// What the summary line reports of one execution (the first failing one,
/// else the last), as its record keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionFigures {
    /// SHA-256 of its trace.jsonl, in hex: equal hashes, equal executions.
    pub trace_hash: String,
    /// Choice points of the execution.
    pub choice_points: u64,
    /// Of them, races a guest can tell apart (delay bounding's horizon).
    /// Absent in records written before it was counted, and when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub race_points: u64,
    /// Events in its trace (trace.jsonl lines): quiet grants fold (see
    /// engine::trace), so this follows what guests saw, not `grants`.
    pub trace_events: usize,
    /// Grants (times a node was let run): the engine's unit of work.
    pub grants: u64,
    /// Grants actually made, each a round trip to a node and back: fewer
    /// than `grants` by the wake-ups nodes took by themselves under
    /// lookahead (`--lookahead`). Host-side: never part of the trace.
    #[serde(default)]
    pub round_trips: u64,
    /// Power losses (`[faults.crash]`), a power failure's nodes included.
    pub crashes: u32,
    /// Coordinated power failures (`[faults.crash] power_failure`); the
    /// nodes each took down are in `crashes`. Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub power_failures: u32,
    /// TCP connections reset (`[faults.connection]`). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub conn_resets: u32,
    /// TCP connections stalled. Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub conn_stalls: u32,
    /// Flushes acknowledged but not made durable (`[faults.disk] lost_flush`).
    #[serde(default)]
    pub lost_flushes: u32,
    /// Reads returned with flipped bits (`[faults.disk] corrupt_read`).
    #[serde(default)]
    pub corrupt_reads: u32,
    /// Writes failed with an I/O error (`[faults.disk] write_error`).
    #[serde(default)]
    pub write_errors: u32,
    /// Writes landed elsewhere (`[faults.disk] misdirect`).
    #[serde(default)]
    pub misdirected_writes: u32,
    /// Start commands paused (`[faults.pause]`).
    #[serde(default)]
    pub pauses: u32,
    /// Wall-clock bumps (`[faults.clock] bump`).
    #[serde(default)]
    pub clock_bumps: u32,
    /// Wall-clock strobes (`[faults.clock] strobe`).
    #[serde(default)]
    pub clock_strobes: u32,
    /// Boots with a clock offset (`[faults.clock] offset`).
    #[serde(default)]
    pub clock_offsets: u32,
    /// Boots with a clock drift (`[faults.clock] drift`).
    #[serde(default)]
    pub clock_drifts: u32,
    /// Start commands killed (`[faults.kill]`). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub kills: u32,
    /// The history check's anomalies (transactional models), by name,
    /// with counts; absent when there are none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub anomalies: std::collections::BTreeMap<String, u64>,
    /// netsim's counters; null without a simulated network.
    pub network: Option<engine::NetStats>,
    /// The failure (kind, message, node, time) as the engine reported it;
    /// its keys in the order `failure_keys_sorted` writes them.
    #[serde(serialize_with = "failure_keys_sorted")]
    pub failure: Option<Failure>,
}

/// Writes an execution's failure with its keys in alphabetical order
/// (`kind`, `message`, `node`, `time`). The summary line and `shard.json`
/// held the failure as a `serde_json::Value` map, which sorts its keys,
/// before they held it typed, and their bytes stay what they were; a
/// failure file writes the engine's own order (kind, node, time, message).
/// Reading takes either order.
pub(super) fn failure_keys_sorted<S: serde::Serializer>(failure: &Option<Failure>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Sorted<'a> {
        kind: FailureKind,
        message: &'a str,
        node: Option<&'a str>,
        time: VirtualTime,
    }
    // Destructured, so that a field added to `Failure` does not go
    // unwritten here unnoticed.
    let sorted = failure.as_ref().map(|Failure { kind, node, time, message }| Sorted {
        kind: *kind,
        message,
        node: node.as_deref(),
        time: *time,
    });
    sorted.serialize(s)
}

impl ExecutionRecord {
    /// The order a sequential run observes executions in: an execution,
    /// then its crash-state siblings by state.
    pub fn order_key(&self) -> (u64, u64) {
        (self.execution, self.crash_state.map_or(0, |k| k + 1))
    }

    /// "execution-3", or "execution-3-state1" for a crash-state sibling.
    pub fn label(&self) -> String {
        match self.crash_state {
            None => format!("execution-{}", self.execution),
            Some(k) => format!("execution-{}-state{k}", self.execution),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}
