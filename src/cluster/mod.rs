//! `cluster.toml`: what a cluster directory asks simcluster to build and run.
//!
//! Every table denies unknown keys, so a typo is an error that names the
//! file, the line and the key, never a silently ignored setting.
//!
//! One module per part of the file, each with its tables' serde structs
//! and their checks: `cluster_section` (`[cluster]`), `image`, `workload`
//! (`[node]`, `[workload]`), `checks` (`[[invariant]]`, `[[liveness]]`,
//! `[check]`, `[[expect]]`), `disk`, `faults` (`[faults]`, crashes, disk
//! faults), `node_faults` (pauses, clocks), `network` (`[faults.network]`,
//! partitions), `explore` (`[explore]`, `[run]`). A check's error is an
//! [`Invalid`]: a typed [`KeyPath`] to the value and what is wrong there;
//! [`Cluster::parse`] adds the file, and `locate` walks the path in the
//! parsed document to find the line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

mod antithesis;
mod checks;
mod cluster_section;
mod compose_file;
mod conn_faults;
mod disk;
mod error;
mod explore;
mod faults;
mod image;
mod key_path;
mod locate;
mod network;
mod node_faults;
#[cfg(test)]
mod parse_tests;
mod roles;
pub mod schema;
mod values;
mod workload;

pub use antithesis::{runner as test_composer_runner, AntithesisSection, Composer, COMPOSER_END};
pub use checks::{CheckSection, ExpectSection, InvariantSection, LivenessSection};
pub use cluster_section::{ClusterSection, CpuidMode, KernelSeries, TimeTravel, Userspace};
pub use disk::{DiskSection, DiskSettings};
pub use error::ClusterError;
pub use explore::{ExploreSection, RunSection};
pub use faults::{CrashSection, DiskFaultsSection, FaultsSection};
pub use image::{ImageSection, RootMode, AGENT_PACKAGE, DEFAULT_SUITE};
pub use key_path::{Invalid, KeyPath};
pub use network::PartitionSection;
pub use node_faults::{parse_signed_duration_ns, ClockSection, PauseSection, Range, StrobeSetting, StrobeTable};
pub use roles::RolesSection;
pub use values::{parse_duration_ns, parse_node_name};
pub use workload::{HostRequestSection, HostWorkloadSection, NodeSection, WorkloadSection};

use error::describe_toml_error;
use locate::locate_line;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// `[cluster]`: the nodes (required: `nodes` at least).
    pub cluster: ClusterSection,
    /// `[image]`: the root filesystem every node boots.
    #[serde(default)]
    pub image: ImageSection,
    /// `[node]`: what every node runs at boot, and when it is ready.
    #[serde(default)]
    pub node: NodeSection,
    /// `[workload]` (in a guest) or `[workload.host]` (HTTP from the
    /// host): required.
    pub workload: WorkloadSection,
    /// `[[invariant]]`: commands that must pass once the workload has
    /// finished, in file order.
    #[serde(default, rename = "invariant")]
    pub invariants: Vec<InvariantSection>,
    /// `[[liveness]]`: predicates that must eventually hold, in file order.
    #[serde(default, rename = "liveness")]
    pub liveness: Vec<LivenessSection>,
    /// `[run]`: the virtual-time limit of one execution.
    #[serde(default)]
    pub run: RunSection,
    /// `[explore]`: how exploration chooses among enabled actions.
    #[serde(default)]
    pub explore: ExploreSection,
    /// A data disk per node (absent: nodes have none).
    pub disk: Option<DiskSection>,
    /// Host-side checks.
    #[serde(default)]
    pub check: CheckSection,
    /// `[faults]` and its subtables: what goes wrong, and when.
    #[serde(default)]
    pub faults: FaultsSection,
    /// `[[expect]]`: what exploration must get to at least once.
    #[serde(default, rename = "expect")]
    pub expects: Vec<ExpectSection>,
    /// `[roles]`: a probe that tells each node's role (absent: no roles).
    pub roles: Option<RolesSection>,
    /// `[antithesis]`: the Antithesis SDK's output and Test Composer
    /// (absent: neither).
    pub antithesis: Option<AntithesisSection>,
}

/// A cluster directory, loaded and checked.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The cluster directory, as given.
    pub dir: PathBuf,
    /// The file it was read from (cluster.toml, or the compose file):
    /// every message about the cluster names it.
    pub file: PathBuf,
    /// `[cluster] name`, else the directory's name: shown in reports.
    pub name: String,
    /// The file as written (for a compose cluster, as translated), before
    /// the checks below turned it into engine terms.
    pub spec: ClusterFile,
    /// 0-based index of the workload node; with a host workload, the node
    /// count (the host client is node N+1, index N).
    pub workload_node: usize,
    /// The client-only nodes (`[cluster] clients`), 0-based and sorted.
    pub clients: Vec<usize>,
    /// `[workload.host]`, checked (`None`: the workload runs in a guest).
    pub host_workload: Option<engine::HostWorkload>,
    /// (name, 0-based node, command) for every invariant, `all` expanded.
    pub invariants: Vec<(String, usize, String)>,
    /// `[run] time_limit` in virtual nanoseconds (`None`: the file does not
    /// write it). `--time-limit` overrides it; with neither, 600 s.
    pub time_limit_ns: Option<u64>,
    /// (name, 0-based node, polling script) for every `[[liveness]]`.
    pub liveness: Vec<(String, usize, String)>,
    /// `[node] ready`'s polling script (`None`: no readiness probe).
    pub ready_probe: Option<String>,
    /// `[roles] probe`'s guest script (`None`: no roles).
    pub role_probe: Option<String>,
    /// `[check] history`, 0-based.
    pub history_node: Option<usize>,
    /// `[check] model` and `consistency`: what that history is checked
    /// against (the register model unless told).
    pub history_model: checker::history_check::HistoryModel,
    /// `[disk]`, checked: (size MiB, mount path, latency ns, torn, enumerate).
    pub disk: Option<DiskSettings>,
    /// `[faults.crash]` and `[explore]`, checked (`calm_from` is the run's).
    pub explore: engine::ExploreSpec,
    /// `[[faults.partition]]`, checked.
    pub partitions: Vec<engine::ScheduledPartition>,
    /// `[[expect]] reached` names, checked, in file order.
    pub expect_reached: Vec<String>,
    /// `[faults.disk]`, checked (0 for each fault absent).
    pub disk_faults: engine::DiskFaultRates,
    /// `[antithesis] test_composer`: the workload is Test Composer.
    pub composer: Option<Composer>,
    /// A compose cluster: its services, one per node (`None`: cluster.toml
    /// describes the nodes).
    pub compose: Option<compose::Project>,
}

impl Cluster {
    /// Reads and checks cluster directory `dir`: its compose file when it
    /// has one (with a cluster.toml beside it as settings), else its
    /// cluster.toml.
    pub fn load(dir: &Path) -> Result<Cluster, ClusterError> {
        if !dir.is_dir() {
            return Err(ClusterError::NoDir(dir.to_path_buf()));
        }
        let file = dir.join("cluster.toml");
        if let Some(compose_file) = compose::find(dir)? {
            return compose_file::load(dir, &compose_file, &file);
        }
        if !file.is_file() {
            return Err(ClusterError::NoFile(file));
        }
        let text =
            std::fs::read_to_string(&file).map_err(|source| ClusterError::Read { path: file.clone(), source })?;
        Cluster::parse(dir, &file, &text)
    }

    /// Reads `text` (the contents of `file` in cluster directory `dir`) and
    /// checks it section by section.
    pub fn parse(dir: &Path, file: &Path, text: &str) -> Result<Cluster, ClusterError> {
        let mut spec: ClusterFile = toml::from_str(text)
            .map_err(|e| ClusterError::Syntax { path: file.to_path_buf(), message: describe_toml_error(text, &e) })?;
        let invalid = |problem: Invalid| ClusterError::Invalid {
            path: file.to_path_buf(),
            line: locate_line(text, &problem.at),
            problem,
        };
        // A file with several mistakes gets the first in this order; keep it
        // when adding checks, so the same file keeps getting the same error.
        let n = spec.cluster.check().map_err(&invalid)?;
        let composer = antithesis::composer(&mut spec).map_err(&invalid)?;
        let (workload_node, host_workload) = workload::check(&spec.workload, n, dir).map_err(&invalid)?;
        let mut invariants = checks::invariants(&spec.invariants, n).map_err(&invalid)?;
        if composer.is_some() {
            invariants.push((COMPOSER_END.to_string(), workload_node, antithesis::END_COMMAND.to_string()));
        }
        let liveness = checks::liveness(&spec.liveness, n, &invariants).map_err(&invalid)?;
        let ready_probe = spec.node.ready_probe().map_err(&invalid)?;
        let role_probe = roles::role_probe(spec.roles.as_ref()).map_err(&invalid)?;
        let window_ns = spec.explore.window_ns().map_err(&invalid)?;
        let clients = spec.cluster.client_nodes(n).map_err(&invalid)?;
        let crashes = spec.faults.crash.check(n, workload_node, &clients).map_err(&invalid)?;
        let disk = spec.disk.as_ref().map(DiskSection::settings).transpose().map_err(&invalid)?;
        let history_node = spec.check.history_node(n).map_err(&invalid)?;
        let history_model = spec.check.history_model().map_err(&invalid)?;
        let disk_faults = faults::disk_fault_rates(&spec).map_err(&invalid)?;
        let expect_reached = checks::expect_reached(&spec.expects).map_err(&invalid)?;
        let mut explore = faults::explore_spec(&spec, window_ns, crashes).map_err(&invalid)?;
        explore.roles = roles::role_spec(&spec).map_err(&invalid)?;
        antithesis::explore(&spec, composer.is_some(), &mut explore);
        spec.image.check(dir).map_err(&invalid)?;
        let time_limit_ns = spec.run.time_limit_ns().map_err(&invalid)?;
        let partitions = network::partitions(&spec.faults.network, &spec.faults.partition, n, host_workload.is_some())
            .map_err(&invalid)?;
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
            clients,
            invariants,
            time_limit_ns,
            liveness,
            ready_probe,
            role_probe,
            history_node,
            history_model,
            disk,
            explore,
            partitions,
            expect_reached,
            disk_faults,
            composer,
            compose: None,
        })
    }

    /// The engine's hook for `[check] history`, checked against
    /// `[check] model` and `consistency`; `None` without `[check] history`.
    pub fn history_check(&self) -> Option<engine::HistoryCheck> {
        self.history_node.map(|n| checker::history_check::hook_for(engine::NodeId::at(n), self.history_model))
    }

    /// `[cluster] nodes`: guests only, not the host client.
    pub fn node_count(&self) -> usize {
        usize::from(self.spec.cluster.nodes)
    }

    /// What reports call each node, in node order: `n1`..`nN`, or a
    /// compose cluster's service names.
    pub fn node_names(&self) -> Vec<String> {
        if let Some(p) = &self.compose {
            return p.node_names();
        }
        engine::NodeId::all(self.spec.cluster.nodes).map(|n| n.to_string()).collect()
    }
}
