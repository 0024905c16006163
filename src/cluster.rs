//! `cluster.toml`: what a cluster directory asks simcluster to build and run.
//!
//! Every table denies unknown keys, so a typo is an error that names the
//! file, the line and the key, never a silently ignored setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

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
    #[serde(default)]
    pub run: RunSection,
    #[serde(default)]
    pub faults: FaultsSection,
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
}

fn default_memory_mb() -> u32 {
    256
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSection {
    /// Debian packages unpacked into the root filesystem (busybox-static is
    /// always added: the in-guest agent runs on it).
    #[serde(default)]
    pub packages: Vec<String>,
    /// Guest path -> path relative to the cluster directory.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// Shell command run on every node at boot, in the background.
    pub start: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Node that runs the workload (`n1`, ...).
    pub node: String,
    /// Shell command; the execution's workload ends when it exits, and a
    /// non-zero status is a failure.
    pub command: String,
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
    /// 0-based index of the workload node.
    pub workload_node: usize,
    /// (name, 0-based node, command) for every invariant, `all` expanded.
    pub invariants: Vec<(String, usize, String)>,
    pub time_limit_ns: Option<u64>,
    /// `[[faults.partition]]`, checked.
    pub partitions: Vec<checker::engine::ScheduledPartition>,
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
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
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
        let invalid = |message: String| ClusterError::Invalid { path: file.to_path_buf(), message };
        let n = spec.cluster.nodes;
        if n == 0 || n > 254 {
            return Err(invalid(format!("[cluster] nodes = {n}: must be between 1 and 254")));
        }
        if spec.cluster.memory_mb < 128 {
            return Err(invalid(format!(
                "[cluster] memory_mb = {}: a node needs at least 128 MiB",
                spec.cluster.memory_mb
            )));
        }
        let workload_node = parse_node_name(&spec.workload.node, n).ok_or_else(|| {
            invalid(format!(
                "[workload] node = {:?}: no such node (nodes are n1..n{n})",
                spec.workload.node
            ))
        })?;
        if spec.workload.command.trim().is_empty() {
            return Err(invalid("[workload] command is empty".into()));
        }
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
            let nodes_of = |names: &[String]| -> Result<Vec<netsim::NodeId>, ClusterError> {
                names
                    .iter()
                    .map(|name| {
                        parse_node_name(name, n)
                            .and_then(|i| netsim::NodeId::new((i + 1) as u16))
                            .ok_or_else(|| invalid(format!("{what}: {name:?}: no such node (nodes are n1..n{n})")))
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
            partition.validate(n).map_err(|e| invalid(format!("{what}: {e}")))?;
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
            invariants,
            time_limit_ns,
            partitions,
        })
    }

    pub fn node_count(&self) -> usize {
        usize::from(self.spec.cluster.nodes)
    }

    pub fn node_names(&self) -> Vec<String> {
        (1..=self.spec.cluster.nodes).map(|i| format!("n{i}")).collect()
    }
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
