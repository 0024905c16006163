//! `[faults]`: what may go wrong, and when: crashes (`[faults.crash]`),
//! disks that misbehave (`[faults.disk]`), the quiet period and
//! `start_after`, all checked into the engine's [`ExploreSpec`] and
//! [`DiskFaultRates`]. Pauses and clock faults are in `node_faults`, the
//! network and partitions in `network`.

use std::collections::BTreeMap;
use std::time::Duration;

use engine::{DiskFaultRates, ExploreSpec, ScheduledCrash};
use serde::Deserialize;

use super::network::PartitionSection;
use super::node_faults::{self, ClockSection, KillSection, PauseSection, StrobeSetting};
use super::values::{duration, duration_range, no_such_node, nodes_are, optional_duration};
use super::{parse_duration_ns, parse_node_name, ClusterFile, Invalid, KeyPath};

/// `[faults]`: what may go wrong, and when.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsSection {
    /// Latency, loss, duplication, reordering, bandwidth; `partitions = true`
    /// lets the seed partition the network at random times.
    #[serde(default)]
    pub network: engine::NetConfig,
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
    /// TCP connections reset or stalled by the engine.
    #[serde(default)]
    pub connection: super::conn_faults::ConnectionSection,
    /// Start commands killed (SIGKILL) and started again by the engine.
    #[serde(default)]
    pub kill: KillSection,
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
    /// Each random partition (`[faults.network] partitions`) singles out
    /// the node holding this role (`[roles]`) when it starts: isolates it,
    /// or puts it on the minority side.
    pub partition_target: Option<String>,
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
    /// (default "1s"), or a range ("1s..5s") each crash draws its delay from.
    pub restart_after: Option<String>,
    /// `restart_after` of some nodes: `{ n2 = "10s", n3 = "1s..3s" }`.
    pub restart_after_by_node: Option<BTreeMap<String, String>>,
    /// Random walk weight of a crash, against 100 for ordinary events
    /// (default 50).
    pub weight: Option<u32>,
    /// Crashes become possible at a virtual time drawn uniformly from the
    /// first `span` of the workload (default "10s"), and then only at
    /// moments when the node has frames in flight or unsynced disk writes.
    pub span: Option<String>,
    /// Also offer a coordinated power failure: every node of `nodes` that is
    /// up loses power at one instant (each a crash of `max`), beside single
    /// crashes (default false).
    #[serde(default)]
    pub power_failure: bool,
    /// Crash only a node whose role (`[roles]`) is this one ("kill the
    /// leader"): offered at every step while a node holds it, weighted up.
    pub target: Option<String>,
    /// Crashes at fixed virtual times (`[[faults.crash.schedule]]`).
    #[serde(default)]
    pub schedule: Vec<ScheduledCrashSection>,
}

/// `[[faults.crash.schedule]]`: `nodes` lose power `at` after faults
/// begin, whatever the strategy does.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduledCrashSection {
    /// From the workload's start (or `[faults] start_after`).
    pub at: String,
    /// The nodes (several: together, a coordinated power failure).
    pub nodes: Vec<String>,
}

/// `[faults.crash]`, checked: the parts of [`ExploreSpec`] checked before
/// the rest (see [`Cluster::parse`](super::Cluster::parse) on the order).
pub(super) struct Crashes {
    restart_after_ns: u64,
    /// Per node, the range its restart delay is drawn from; empty: a
    /// fixed `restart_after` for every node.
    restart_ranges: Vec<(Duration, Duration)>,
    /// 0-based nodes that may crash, ascending.
    crashable: Vec<usize>,
    schedule: Vec<ScheduledCrash>,
}

impl CrashSection {
    /// `restart_after` and `nodes` (default: every node but the workload's,
    /// which may not crash, and but the client-only nodes `clients`).
    pub(super) fn check(&self, n: u16, workload_node: usize, clients: &[usize]) -> Result<Crashes, Invalid> {
        let at = KeyPath::table("faults.crash");
        let default = match &self.restart_after {
            None => (1_000_000_000, 1_000_000_000),
            Some(s) => duration_range(&at.key("restart_after"), s)?,
        };
        let crashable = match &self.nodes {
            None => (0..usize::from(n)).filter(|&i| i != workload_node && !clients.contains(&i)).collect(),
            Some(names) => crash_nodes(&at.key("nodes"), names, n, workload_node)?,
        };
        let by_node = self.restart_after_by_node.clone().unwrap_or_default();
        let restart_ranges = if default.0 == default.1 && by_node.is_empty() {
            Vec::new()
        } else {
            let mut v = vec![default; usize::from(n)];
            for (name, s) in &by_node {
                let key = at.key("restart_after_by_node").key(name.clone());
                let i = parse_node_name(name, n)
                    .ok_or_else(|| key.invalid(format!(": {name:?} is no node ({})", nodes_are(n))))?;
                v[i] = duration_range(&key, s)?;
            }
            v.into_iter().map(|(lo, hi)| (Duration::from_nanos(lo), Duration::from_nanos(hi))).collect()
        };
        let mut schedule = Vec::new();
        for (k, e) in self.schedule.iter().enumerate() {
            let at = KeyPath::array("faults.crash.schedule").nth(k);
            let when = duration(&at.key("at"), &e.at)?;
            if e.nodes.is_empty() {
                return Err(at.key("nodes").invalid(" is empty: name the nodes that lose power"));
            }
            let nodes = crash_nodes(&at.key("nodes"), &e.nodes, n, workload_node)?;
            schedule.push(ScheduledCrash {
                at: Duration::from_nanos(when),
                nodes: nodes.into_iter().map(engine::NodeId::at).collect(),
            });
        }
        // By time; entries at the same time stay in the order written.
        schedule.sort_by_key(|e| e.at);
        Ok(Crashes { restart_after_ns: default.0, restart_ranges, crashable, schedule })
    }
}

/// The node names at `key` that may crash -> sorted 0-based indices (the
/// workload's node may not).
fn crash_nodes(key: &KeyPath, names: &[String], n: u16, workload_node: usize) -> Result<Vec<usize>, Invalid> {
    let mut v = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let at = key.nth(k);
        let i = parse_node_name(name, n).ok_or_else(|| at.invalid(no_such_node(name, n, "")))?;
        if i == workload_node {
            return Err(at.invalid(format!(
                " = {name:?} runs the workload; a crash would lose the workload itself \
                 (run the workload on a node that does not crash)"
            )));
        }
        v.push(i);
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

impl CrashSection {
    /// Whether crashes happen at all: a budget or a schedule.
    fn any(&self) -> bool {
        self.max > 0 || !self.schedule.is_empty()
    }
}

/// `[faults] start_after`, checked.
fn faults_after(f: &FaultsSection) -> Result<Option<String>, Invalid> {
    match &f.start_after {
        None => Ok(None),
        Some(name) if checker::reach::valid_name(name) => Ok(Some(name.clone())),
        Some(name) => Err(KeyPath::table("faults").key("start_after").invalid(format!(
            " = {name:?}: a name is one word of printable ASCII, as a guest prints it after @reached"
        ))),
    }
}

/// What the engine explores: `[explore] window` (checked: `window_ns`),
/// `crashes`, and the rest of `[faults]`: `start_after`, the crash span,
/// the quiet period, pauses and clock faults, checked in that order. The
/// run sets `calm_from` and the crash states.
pub(super) fn explore_spec(spec: &ClusterFile, window_ns: u64, crashes: Crashes) -> Result<ExploreSpec, Invalid> {
    let (f, n) = (&spec.faults, spec.cluster.nodes);
    let faults_after = faults_after(f)?;
    // A container image's start command is its Entrypoint and Cmd.
    let has_start = spec.node.start.is_some() || spec.image.oci.is_some() || spec.image.docker_archive.is_some();
    Ok(ExploreSpec {
        window: std::time::Duration::from_nanos(window_ns),
        max_crashes: f.crash.max,
        crashable: crashes.crashable.into_iter().map(engine::NodeId::at).collect(),
        power_failure: f.crash.power_failure,
        restart_after: std::time::Duration::from_nanos(crashes.restart_after_ns),
        restart_ranges: crashes.restart_ranges,
        crash_schedule: crashes.schedule,
        calm_from: None,
        crash_states: Default::default(),
        skip_partitions: Default::default(),
        crash_weight: f.crash.weight.unwrap_or(50),
        crash_span: std::time::Duration::from_nanos(optional_duration(
            &KeyPath::table("faults.crash").key("span"),
            &f.crash.span,
            10_000_000_000,
        )?),
        quiet_settle: quiet_settle(spec)?.map(std::time::Duration::from_nanos),
        faults_after,
        antithesis: Default::default(),
        pause: node_faults::pause_spec(&f.pause, n, has_start)?,
        clock: node_faults::clock_spec(&f.clock, n)?,
        connection: super::conn_faults::conn_spec(&f.connection)?,
        kill: node_faults::kill_spec(&f.kill, n, has_start)?,
        // Checked after the rest of [faults] (`roles::role_spec`).
        roles: Default::default(),
    })
}

/// The quiet period's settle time, or `None` for `quiet_after = "never"`.
/// A cluster without faults has nothing to calm: no quiet period, no settle.
fn quiet_settle(spec: &ClusterFile) -> Result<Option<u64>, Invalid> {
    let f = &spec.faults;
    let at = KeyPath::table("faults");
    let settle = match &f.settle {
        None => 5_000_000_000,
        Some(s) => parse_duration_ns(s).ok_or_else(|| {
            at.key("settle").invalid(format!(" = {s:?}: not a duration (examples: \"5s\", \"500ms\")"))
        })?,
    };
    let quiet = match f.quiet_after.as_deref() {
        None | Some("workload") => true,
        Some("never") => false,
        Some(other) => {
            return Err(at.key("quiet_after").invalid(format!(" = {other:?}: expected \"workload\" or \"never\"")));
        }
    };
    // A clock offset or drift is the nodes' hardware: it never calms.
    let node_faults = f.pause.max.is_some_and(|m| m > 0)
        || f.kill.max.is_some_and(|m| m > 0)
        || f.clock.bump.is_some()
        || matches!(f.clock.strobe, Some(StrobeSetting::On(_)));
    let any_fault = f.network.has_faults()
        || !f.partition.is_empty()
        || f.crash.any()
        || f.disk.rates().iter().any(|&(_, p)| p > 0.0)
        || node_faults
        || f.connection.on();
    Ok((quiet && any_fault).then_some(settle))
}

/// `[faults.disk]`, checked: each a probability, and any fault that is on
/// needs `[disk]`.
pub(super) fn disk_fault_rates(spec: &ClusterFile) -> Result<DiskFaultRates, Invalid> {
    let rates = spec.faults.disk.rates();
    for (key, p) in rates {
        let at = KeyPath::table("faults.disk").key(key);
        if !(0.0..=1.0).contains(&p) {
            return Err(at.invalid(format!(" = {p}: a probability is within [0, 1]")));
        }
        if p > 0.0 && spec.disk.is_none() {
            return Err(at.invalid(format!(" = {p}: the nodes have no disk (add a [disk] table)")));
        }
    }
    let [(_, lost_flush), (_, corrupt_read), (_, write_error), (_, misdirect)] = rates;
    Ok(DiskFaultRates { lost_flush, corrupt_read, write_error, misdirect })
}
