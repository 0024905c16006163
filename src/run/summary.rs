//! What a run keeps of each execution, and the one JSON line made from it.
//!
//! A run (or one shard of it) ends with a [`RunRecord`]: who it was (the
//! [`RunIdentity`]: images, seed, strategy, options), one
//! [`ExecutionRecord`] per execution, and its host figures. The summary
//! line is computed from records alone ([`summarize`]), so `simcluster
//! merge` of shard records and an unsharded run give the same line, wall
//! figures aside.

use std::collections::BTreeMap;
use std::path::PathBuf;

use engine::HostFacts;
use serde::{Deserialize, Serialize};

use super::host_cpu::HostCpu;
pub use super::record::{CrashPointSummary, CriticalSummary, ExecutionFigures, ExecutionRecord};

/// Everything that makes two runs' executions the same executions: shards
/// of one run must agree on all of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunIdentity {
    /// Hash of the kernel and root filesystem the nodes booted.
    pub images_hash: String,
    /// The run seed (`--seed`).
    pub seed: u64,
    /// The strategy's name (`random`, `delay-all`, ...).
    pub strategy: String,
    /// The strategy's bound (`--depth`, or its default).
    pub depth: u32,
    /// Choice points over which the strategy places its decisions: given,
    /// the default, or measured on execution 0.
    pub horizon: u64,
    /// The exploration window in virtual nanoseconds (`--window`, else
    /// `[explore] window`).
    pub window_ns: u64,
    /// Crashes per execution at most (`--max-crashes`, else `[faults.crash]
    /// max`).
    pub max_crashes: u32,
    /// An execution's virtual-time limit in nanoseconds, as applied.
    pub time_limit_ns: u64,
    /// The node runtime: `"uml"` or `"kvm"`.
    pub runtime: String,
    /// The user-mode Linux kernel series; null on KVM.
    pub kernel: Option<String>,
    /// The user-mode Linux userspace mode; null on KVM.
    pub userspace: Option<String>,
    /// Nodes in the cluster (`[cluster] nodes`).
    pub nodes: usize,
    /// `--executions` (null: until the time budget ends).
    pub executions: Option<u64>,
    /// `--until-failure`: stop at the first failing execution.
    pub until_failure: bool,
    /// Random walks per probe of a liveness failure's critical-transition
    /// search (`--critical-walks`; 0: no search).
    pub critical_walks: u32,
    /// cluster.toml's `[[expect]] reached` names.
    #[serde(default)]
    pub expect_reached: Vec<String>,
    /// `--warm-start` (fork or cold: the same executions): the run's boot
    /// seed. Absent for an ordinary run, whose executions are others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_seed: Option<u64>,
}

/// Which part of a run's executions a shard ran: `--shard K/N` runs every
/// execution (dfs: every round) whose index is K-1 modulo N.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shard {
    /// K of K/N: 1-based.
    pub index: u64,
    /// N of K/N: how many shards the run is split into.
    pub count: u64,
}

impl Shard {
    /// The whole run.
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// Does this shard run unit `u` (an execution, or a dfs round)?
    pub fn owns(self, u: u64) -> bool {
        u % self.count == self.index - 1
    }

    /// The `p`-th (0-based) unit this shard runs.
    pub fn unit(self, p: u64) -> u64 {
        p * self.count + (self.index - 1)
    }

    /// How many of units `0..limit` this shard runs.
    pub fn units_below(self, limit: u64) -> u64 {
        let first = self.index - 1;
        if limit <= first {
            0
        } else {
            (limit - first).div_ceil(self.count)
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A `--shard` value that is not K/N.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not K/N with 1 <= K <= N (examples: 1/2, 3/8)")]
pub struct BadShard(String);

impl std::str::FromStr for Shard {
    type Err = BadShard;
    fn from_str(s: &str) -> Result<Shard, BadShard> {
        let bad = || BadShard(s.to_string());
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (u64, u64) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { index: k, count: n })
    }
}

/// A run's (or one shard's) result, written as `shard.json` under --out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`RUN_RECORD_VERSION`].
    pub simcluster_run_record: u32,
    /// What the run was; `merge` refuses shards whose identities differ.
    pub identity: RunIdentity,
    /// Which shard this is ([`Shard::ALL`] for a whole run).
    pub shard: Shard,
    /// In the order a sequential run observes them.
    pub executions: Vec<ExecutionRecord>,
    /// An exhaustive strategy ran out of executions to explore.
    pub exhausted: bool,
    /// The critical transition of this record's first liveness failure,
    /// when it searched one.
    pub critical_transition: Option<CriticalSummary>,
    /// `--strategy coverage`: the corpus and every feature's first
    /// appearance (absent for other strategies and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageSummary>,
    /// Executions it ran side by side.
    pub jobs: usize,
    /// Its wall time.
    pub wall_seconds: f64,
    /// Wall time spent building (or finding) the images.
    pub image_build_seconds: f64,
    /// Host CPU time of the run, its own and its guests'.
    pub host_cpu: HostCpu,
    /// The host it ran on (absent in records written before hosts were).
    #[serde(default)]
    pub host: Option<HostFacts>,
    /// Mean PSS of one node's host processes at the end of an execution.
    pub memory_per_node_mib: f64,
    /// simcluster's storage for one node's data disk at the end of the
    /// last execution (`None` without `[disk]`).
    pub disk_storage_per_node_kib: Option<f64>,
    /// Its `--out` directory.
    pub out: PathBuf,
    /// The failure files it wrote (absent in records written before every
    /// failing execution got one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_files: Option<FailureFiles>,
}

/// The failure files a run wrote: one for every failing execution and
/// crash-state sibling, while their bytes stay within `budget_bytes`
/// (`run --failure-budget`). The first failure's is always written, with
/// its trace, console logs, pcaps and reports; every later one is its
/// failure file alone (it replays to all of those:
/// `simcluster replay OUT --execution I`). A failing execution beyond the
/// budget gets none and is counted in `over_budget`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FailureFiles {
    /// Failure files written.
    pub written: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The budget.
    pub budget_bytes: u64,
    /// Failing executions left without one (the budget was spent).
    pub over_budget: u64,
}

impl FailureFiles {
    /// Several shards' files, as one run's.
    fn add(self, o: FailureFiles) -> FailureFiles {
        FailureFiles {
            written: self.written + o.written,
            bytes: self.bytes + o.bytes,
            budget_bytes: self.budget_bytes.max(o.budget_bytes),
            over_budget: self.over_budget + o.over_budget,
        }
    }
}

/// A run's coverage over time, for the summary: each feature, the
/// execution that first showed it and when.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CoverageSummary {
    /// Executions kept in the corpus.
    pub corpus: usize,
    /// Every feature, in the order first seen.
    pub first_seen: Vec<FirstSeen>,
}

/// A feature's first appearance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FirstSeen {
    /// The feature, as `--strategy coverage` names it.
    pub feature: String,
    /// The execution that first showed it.
    pub execution: u64,
    /// Virtual time into that execution when it showed.
    pub virtual_seconds: f64,
}

/// The version of `shard.json` this simcluster writes and reads.
pub const RUN_RECORD_VERSION: u32 = 1;

/// A failing execution, as the summary lists them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FailingExecution {
    /// Its index in the run (0-based).
    pub execution: u64,
    /// K for the sibling that applied crash state K, null for the
    /// execution itself.
    pub crash_state: Option<u64>,
    /// The execution's own seed.
    pub seed: u64,
    /// The first line of its failure message.
    pub message: String,
    /// Its failure file, where one was written (every failing execution
    /// gets one within the run's failure file budget; records written
    /// before that have the first failure's only).
    pub failure_file: Option<PathBuf>,
}

/// How often a reachability name showed over a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReachedCount {
    /// Executions in which it showed at least once.
    pub executions: u64,
    /// Lines that named it, over all executions.
    pub hits: u64,
}

/// The summary printed as the last line of `run` and `merge`.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Executions run, crash-state siblings included.
    pub executions: u64,
    /// Executions that failed.
    pub failures: u64,
    /// The reported execution's virtual time, from boot to its end (not a
    /// sum over the run).
    pub virtual_seconds: f64,
    /// Wall time of the run (merged: the longest shard's).
    pub wall_seconds: f64,
    /// The run seed (`--seed`).
    pub seed: u64,
    /// `random`, `pct`, `delay`, `delay-all`, `dfs` or `coverage`.
    pub strategy: String,
    /// An exhaustive strategy ran out of executions to explore.
    pub exhausted: bool,
    /// `executions` × 3600 / `wall_seconds`.
    pub executions_per_hour: f64,
    /// Executions run side by side (`--jobs`; merged: the largest).
    pub jobs: usize,
    /// "K/N" for one shard, "N shards" merged; null for a whole run.
    pub shard: Option<String>,
    /// `--warm-start`'s boot seed (executions began from a boot drawn from
    /// it); null for an ordinary run.
    pub boot_seed: Option<u64>,
    /// `"uml"` or `"kvm"`.
    pub runtime: String,
    /// The user-mode Linux guest kernel series ("7.2", "6.1"); null on KVM.
    pub kernel: Option<String>,
    /// Host CPU seconds of the whole run, simcluster's own against its
    /// guests' (the node processes it started and reaped).
    pub host_cpu: HostCpu,
    /// The host: cpu vendor and model, CPUID faulting, kernel release,
    /// hardware virtualization, runtime, and what CPUID told guest programs
    /// (`guest_cpuid`: "virtual", "host", "vmm"). Merged shards: the first
    /// shard's.
    pub host: Option<HostFacts>,
    /// The user-mode Linux userspace mode ("seccomp", "ptrace"); null on KVM.
    pub userspace: Option<String>,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Hash of the kernel and root filesystem; failure files record it.
    pub images_hash: String,
    /// Wall time spent building (or finding) the images (merged: the
    /// longest shard's).
    pub image_build_seconds: f64,
    /// Mean over the executions of the wall time from an execution's first
    /// node spawn until every node's agent was ready (null: none got
    /// there); image building is `image_build_seconds`, never part of it.
    pub boot_wall_seconds: Option<f64>,
    /// Virtual seconds of every execution together, divided by
    /// `wall_seconds`.
    pub speedup: f64,
    /// Mean PSS of one node's host processes at the end of an execution.
    pub memory_per_node_mib: f64,
    /// simcluster's storage for one node's data disk (overlay of written
    /// blocks, cache view, write log) at the end of the last execution.
    pub disk_storage_per_node_kib: Option<f64>,
    /// The reported execution's figures (its `trace_hash` is the run's).
    #[serde(flatten)]
    pub figures: ExecutionFigures,
    /// The first failing execution's failure.json (null: none failed, or
    /// it got none).
    pub failure_file: Option<PathBuf>,
    /// The failure files written, their bytes and budget, and the failing
    /// executions left without one (null for records of older runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_files: Option<FailureFiles>,
    /// Which execution (0-based) failed first.
    pub failing_execution: Option<u64>,
    /// Every failing execution, lowest index first.
    pub failing_executions: Vec<FailingExecution>,
    /// The first failure's critical transition, when it is a liveness
    /// failure that was searched (`--critical-walks`).
    pub critical_transition: Option<CriticalSummary>,
    /// Disk crash states explored, over every crash point of the run.
    pub crash_states_explored: u64,
    /// The first disk crash point of each execution that had one.
    pub crash_points: Vec<CrashPointSummary>,
    /// Every reachability name guests printed (`@reached NAME`,
    /// `@sometimes NAME`), and every `[[expect]] reached` name, with how
    /// often it showed.
    pub reached: BTreeMap<String, ReachedCount>,
    /// `[[expect]] reached` names no execution showed: the run fails.
    pub unreached: Vec<String>,
    /// Antithesis SDK assertions over every execution, by id, each with
    /// its verdict (`[antithesis]`; absent without assertions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub antithesis: BTreeMap<String, SdkProperty>,
    /// Ids of SDK assertions that must be shown at least once and never
    /// were (`sometimes` never true, `reachable` or `always` never
    /// reached): the run fails.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub antithesis_unmet: Vec<String>,
    /// Test Composer's commands over every execution, by name: runs that
    /// ended, how many with a non-zero status, the first such status.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub test_composer: BTreeMap<String, checker::antithesis::CommandCount>,
    /// `--strategy coverage`: coverage over time (each feature, the
    /// execution that first showed it and when).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageSummary>,
    /// The `--out` directory.
    pub out: PathBuf,
}

impl Summary {
    /// A property failed in some execution, or an expected name was never
    /// reached.
    pub fn failed(&self) -> bool {
        self.failures > 0 || !self.unreached.is_empty() || !self.antithesis_unmet.is_empty()
    }
}

/// One SDK assertion over a run: its counts and verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SdkProperty {
    /// What the SDKs declared and evaluated of it over every execution
    /// (written flat: `display_type`, `message`, `passes`, ...).
    #[serde(flatten)]
    pub count: checker::antithesis::PropertyCount,
    /// `passed`, or `failed` with `why`.
    pub verdict: &'static str,
    /// Why it failed: `was false`, `was reached`, `was never true` or `was
    /// never reached` (absent when it passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'static str>,
}

/// The summary line of one run, or of shards of one run (already checked
/// to match: see `shard::merge`). The reported execution is the first
/// failing one in sequential order, else the last; wall figures: the
/// longest record's wall time (shards ran side by side).
pub fn summarize(records: &[RunRecord], out: PathBuf) -> Option<Summary> {
    let first = records.first()?;
    let mut all: Vec<&ExecutionRecord> = records.iter().flat_map(|r| &r.executions).collect();
    all.sort_by_key(|e| e.order_key());
    let failing: Vec<&ExecutionRecord> = all.iter().copied().filter(|e| e.figures.failure.is_some()).collect();
    let shown = failing.first().copied().or(all.last().copied())?;
    let id = &first.identity;
    let wall = records.iter().map(|r| r.wall_seconds).fold(0.0, f64::max);
    let virtual_total: f64 = all.iter().map(|e| e.virtual_ns as f64 / 1e9).sum();
    let mean = |xs: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = xs.collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // The record whose executions hold the reported one gives the
    // critical transition (only a run's first failure is searched).
    let critical = failing
        .first()
        .and_then(|f| records.iter().find(|r| r.executions.iter().any(|e| e.order_key() == f.order_key())))
        .and_then(|r| r.critical_transition.clone());
    let crash_points: Vec<CrashPointSummary> = all.iter().filter_map(|e| e.crash_point.clone()).collect();
    let mut reached: BTreeMap<String, ReachedCount> =
        id.expect_reached.iter().map(|n| (n.clone(), ReachedCount { executions: 0, hits: 0 })).collect();
    for e in &all {
        for (name, hits) in &e.reached {
            let c = reached.entry(name.clone()).or_insert(ReachedCount { executions: 0, hits: 0 });
            c.executions += 1;
            c.hits += hits;
        }
    }
    let unreached = id.expect_reached.iter().filter(|n| reached[n.as_str()].executions == 0).cloned().collect();
    let mut sdk = BTreeMap::new();
    let mut test_composer = BTreeMap::new();
    for e in &all {
        checker::antithesis::add(&mut sdk, &e.antithesis);
        checker::antithesis::add_commands(&mut test_composer, &e.test_composer);
    }
    // Unmet: failing with no violation to show for it (a violation failed
    // its execution already).
    let antithesis_unmet = sdk
        .iter()
        .filter(|(_, p)| p.failure().is_some_and(|w| w.contains("never")))
        .map(|(id, _)| id.clone())
        .collect();
    let antithesis = sdk
        .into_iter()
        .map(|(id, count)| {
            let why = count.failure();
            (id, SdkProperty { verdict: if why.is_some() { "failed" } else { "passed" }, why, count })
        })
        .collect();
    Some(Summary {
        executions: all.len() as u64,
        failures: failing.len() as u64,
        virtual_seconds: shown.virtual_ns as f64 / 1e9,
        wall_seconds: wall,
        seed: id.seed,
        strategy: id.strategy.clone(),
        exhausted: records.iter().any(|r| r.exhausted),
        executions_per_hour: all.len() as f64 * 3600.0 / wall.max(1e-9),
        jobs: records.iter().map(|r| r.jobs).max().unwrap_or(1),
        shard: match records {
            [one] if one.shard == Shard::ALL => None,
            [one] => Some(one.shard.to_string()),
            many => Some(format!("{} shards", many.len())),
        },
        boot_seed: id.boot_seed,
        runtime: id.runtime.clone(),
        kernel: id.kernel.clone(),
        host_cpu: HostCpu::sum(records.iter().map(|r| &r.host_cpu)),
        host: records.iter().find_map(|r| r.host.clone()),
        userspace: id.userspace.clone(),
        nodes: id.nodes,
        images_hash: id.images_hash.clone(),
        image_build_seconds: records.iter().map(|r| r.image_build_seconds).fold(0.0, f64::max),
        boot_wall_seconds: mean(&mut all.iter().filter_map(|e| e.boot_wall_seconds)),
        speedup: virtual_total / wall.max(1e-9),
        memory_per_node_mib: mean(&mut records.iter().map(|r| r.memory_per_node_mib)).unwrap_or(0.0),
        disk_storage_per_node_kib: mean(&mut records.iter().filter_map(|r| r.disk_storage_per_node_kib)),
        figures: shown.figures.clone(),
        failure_file: failing.first().and_then(|f| f.failure_file.clone()),
        failure_files: records.iter().filter_map(|r| r.failure_files).reduce(FailureFiles::add),
        failing_execution: failing.first().map(|f| f.execution),
        failing_executions: failing
            .iter()
            .map(|f| FailingExecution {
                execution: f.execution,
                crash_state: f.crash_state,
                seed: f.seed,
                message: f
                    .figures
                    .failure
                    .as_ref()
                    .and_then(|failure| failure.message.lines().next())
                    .unwrap_or("")
                    .to_string(),
                failure_file: f.failure_file.clone(),
            })
            .collect(),
        critical_transition: critical,
        crash_states_explored: crash_points.iter().map(|p| p.explored).sum(),
        crash_points,
        reached,
        unreached,
        antithesis,
        antithesis_unmet,
        test_composer,
        coverage: records.iter().find_map(|r| r.coverage.clone()),
        out,
    })
}

#[cfg(test)]
mod tests {
    use engine::{Failure, FailureKind};

    use super::super::record::failure_keys_sorted;
    use super::*;

    /// A run's record and the summary `merge` made of it, both written by
    /// simcluster before the record's network counters and failure were
    /// typed (they were `serde_json::Value`s then): `simcluster run
    /// --images guest-images/examples/reorder --seed 1 --executions 3`
    /// (three failing executions, with network counters), then `simcluster
    /// merge` of its --out.
    const SHARD_JSON: &str = include_str!("../../tests/summaries/reorder-shard.json");
    const SUMMARY_JSON: &str = include_str!("../../tests/summaries/reorder-summary.json");

    /// The typed record reads those files and writes the same bytes, and
    /// the summary line made from it is the one the Value-based code wrote.
    #[test]
    fn typed_record_and_summary_are_the_bytes_written_before() {
        let record: RunRecord = serde_json::from_str(SHARD_JSON).unwrap();
        let failing = &record.executions[0].figures;
        let (failure, network) = (failing.failure.as_ref().unwrap(), failing.network.unwrap());
        assert_eq!((failure.kind, failure.node.as_deref()), (FailureKind::Invariant, Some("n1")));
        assert!(failure.message.starts_with("invariant replica-holds-last-write failed on n1"), "{failure:?}");
        assert_eq!((network.sent, network.reordered, network.dropped.loss), (62, 13, 0));

        let mut written = serde_json::to_vec_pretty(&record).unwrap();
        written.push(b'\n');
        assert_eq!(String::from_utf8(written).unwrap(), SHARD_JSON);

        // The --out that merge was given (the line names it).
        let summary = summarize(std::slice::from_ref(&record), "/tmp/typed-baseline/merge-reorder".into()).unwrap();
        assert_eq!(format!("{}\n", serde_json::to_string(&summary).unwrap()), SUMMARY_JSON);
        assert_eq!(
            summary.failing_executions[0].message,
            "invariant replica-holds-last-write failed on n1 (exit status 1)"
        );
    }

    /// The failure and the counters are written as the old code wrote them
    /// (`serde_json::to_value` of the engine's values, whose maps sort their
    /// keys), a failure without a node and a record without either too.
    #[test]
    fn failure_and_network_are_written_as_their_json_values_were() {
        let failure = Failure::new(
            FailureKind::TimeLimit,
            None,
            simtime::VirtualTime::from_ns(120_000_000_000),
            "a \"quoted\"\nline".into(),
        );
        let mut typed = Vec::new();
        failure_keys_sorted(&Some(failure.clone()), &mut serde_json::Serializer::new(&mut typed)).unwrap();
        let old = serde_json::to_value(&failure).unwrap().to_string();
        assert_eq!(String::from_utf8(typed).unwrap(), old);
        let record: RunRecord = serde_json::from_str(SHARD_JSON).unwrap();
        let mut figures = record.executions[0].figures.clone();
        figures.failure = Some(failure);
        let stats = figures.network.unwrap();
        let line = serde_json::to_string(&figures).unwrap();
        let failure_at = line.find("\"failure\":").unwrap();
        assert!(line[failure_at..].starts_with(&format!("\"failure\":{old}")), "{line}");
        let network = serde_json::to_value(stats).unwrap().to_string();
        assert!(line.contains(&format!("\"network\":{network},\"failure\":")), "{line}");
        // Read back, in the order written or in the engine's own order.
        let back: ExecutionFigures = serde_json::from_str(&line).unwrap();
        assert_eq!(back, figures);
        let engine_order = serde_json::to_string(figures.failure.as_ref().unwrap()).unwrap();
        assert!(engine_order.starts_with("{\"kind\":\"time_limit\",\"node\":null,"), "{engine_order}");
        let line_in_engine_order = line.replace(&old, &engine_order);
        assert_eq!(serde_json::from_str::<ExecutionFigures>(&line_in_engine_order).unwrap(), figures);
        figures.failure = None;
        figures.network = None;
        let line = serde_json::to_string(&figures).unwrap();
        assert!(line.ends_with("\"network\":null,\"failure\":null}"), "{line}");
        assert_eq!(serde_json::from_str::<ExecutionFigures>(&line).unwrap(), figures);
    }

    #[test]
    fn shards_split_units_by_residue() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!((0..10).filter(|&u| s.owns(u)).collect::<Vec<_>>(), vec![1, 4, 7]);
        assert_eq!((0..3).map(|p| s.unit(p)).collect::<Vec<_>>(), vec![1, 4, 7]);
        assert_eq!(s.units_below(10), 3);
        assert_eq!(s.units_below(8), 3);
        assert_eq!(s.units_below(7), 2);
        assert_eq!(s.units_below(1), 0);
        assert_eq!(Shard::ALL.units_below(5), 5);
        for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
