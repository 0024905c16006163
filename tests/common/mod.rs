//! Helpers for end-to-end tests of the `simcluster` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simcluster"))
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Result of one invocation.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The last stdout line as JSON.
    pub fn json(&self) -> serde_json::Value {
        let last = self.stdout.lines().last().unwrap_or_else(|| panic!("no stdout; stderr:\n{}", self.stderr));
        serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {last}\nstderr:\n{}", self.stderr))
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

pub fn run(args: &[&str]) -> Run {
    run_command(bin().args(args))
}

/// Runs `cmd` (a [`bin`] with its arguments and environment) to its end.
pub fn run_command(cmd: &mut Command) -> Run {
    let out: Output = cmd.output().expect("run simcluster");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `simcluster run --images DIR --out OUT --quiet EXTRA...`
pub fn run_cluster(dir: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--quiet", "--images", dir.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args)
}

/// A cluster directory in a temp dir with the given cluster.toml and files.
pub fn cluster(toml: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("cluster.toml"), toml).unwrap();
    for (name, body) in files {
        let p = d.path().join(name);
        std::fs::write(&p, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    d
}

/// A minimal cluster with the given workload and extra TOML.
pub fn simple(nodes: u16, start: Option<&str>, workload: &str, extra: &str) -> tempfile::TempDir {
    let start = start.map(|s| format!("[node]\nstart = {s:?}\n")).unwrap_or_default();
    cluster(
        &format!(
            "[cluster]\nnodes = {nodes}\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n{start}[workload]\nnode = \"n1\"\ncommand = {workload:?}\n{extra}"
        ),
        &[],
    )
}

/// Runs the cluster `n` times with the same arguments, checks each run with
/// `check` (which sees the JSON line) and asserts every trace hash is equal.
pub fn same_trace_every_time(dir: &Path, n: usize, args: &[&str], check: impl Fn(&Run, &serde_json::Value)) {
    let mut hashes = Vec::new();
    for _ in 0..n {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(dir, out.path(), args);
        let j = r.json();
        check(&r, &j);
        hashes.push(j["trace_hash"].as_str().unwrap().to_string());
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:#?}");
}

/// guest-images/examples with its C programs built (once per test binary);
/// `None`, with the running test's skip recorded (`testkit`), when they
/// cannot be built here.
pub fn examples() -> Option<PathBuf> {
    // What build.sh said when it failed (once per test binary).
    static BUILD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dir = repo().join("guest-images/examples");
    let said = BUILD.get_or_init(|| match Command::new("sh").arg(dir.join("build.sh")).output() {
        Ok(o) if !o.status.success() => format!("it failed: {}", String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => format!("it could not run: {e}"),
        Ok(_) => String::new(),
    });
    let built = [
        "crash-primary/pbkv",
        "rename-safe/safefile",
        "reorder/regkv",
        "partition/leader",
        "liveness/token",
        "ack-safe/ackstore",
        "stages/stages",
    ];
    if built.iter().all(|b| dir.join(b).is_file()) {
        Some(dir)
    } else {
        testkit::skip(
            testkit::Cause::Missing,
            format!(
                "guest-images/examples/build.sh did not build the example programs (it needs gcc with a static \
                 libc: apt-get install gcc libc6-dev); {said}"
            ),
        );
        None
    }
}

/// Compiles C source `src` as the static binary `dir/name` (guest probes);
/// false, with the skip recorded (`testkit`), when this host cannot (no
/// gcc, no static libc): the calling test then returns.
#[allow(dead_code)] // not every test binary builds probes
pub fn gcc_static(dir: &Path, name: &str, src: &str) -> bool {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    match Command::new("gcc").args(["-static", "-O2", "-Wall", "-o"]).arg(dir.join(name)).arg(&c).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            testkit::skip(
                testkit::Cause::Missing,
                format!(
                    "gcc -static failed (a static libc: apt-get install libc6-dev): {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
            );
            false
        }
        Err(e) => {
            testkit::skip(testkit::Cause::Missing, format!("cannot run gcc ({e}): apt-get install gcc libc6-dev"));
            false
        }
    }
}

/// A copy of cluster `parent/name` in a temp dir, with `edit` applied to
/// its cluster.toml. The whole of `parent` is copied, so a cluster that
/// takes files from a sibling (`../rename-safe/safefile`) keeps them.
/// Returns the temp dir (keep it alive) and the copied cluster's path.
#[allow(dead_code)] // not every test binary edits clusters
pub fn edited_copy(parent: &Path, name: &str, edit: impl FnOnce(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let status = Command::new("cp").arg("-r").arg(format!("{}/.", parent.display())).arg(t.path()).status().unwrap();
    assert!(status.success(), "copying {}", parent.display());
    let dir = t.path().join(name);
    let toml = std::fs::read_to_string(dir.join("cluster.toml")).unwrap();
    let edited = edit(&toml);
    assert_ne!(edited, toml, "{name}: the edit changed nothing");
    std::fs::write(dir.join("cluster.toml"), edited).unwrap();
    (t, dir)
}

/// [`edited_copy`] with `keys` added at the top of the [cluster] table.
#[allow(dead_code)]
pub fn with_cluster_keys(parent: &Path, name: &str, keys: &str) -> (tempfile::TempDir, PathBuf) {
    edited_copy(parent, name, |toml| {
        assert!(toml.contains("[cluster]\n"), "{name} has no [cluster] table");
        toml.replacen("[cluster]\n", &format!("[cluster]\n{keys}\n"), 1)
    })
}

/// The keys of the JSON line that measure the host (wall time, CPU time,
/// memory), where output directories appear, or that say how the run was
/// split; everything else must not depend on --jobs or --shard.
pub const HOST_FIGURES: &[&str] = &[
    "wall_seconds",
    "executions_per_hour",
    "speedup",
    "image_build_seconds",
    "boot_wall_seconds",
    "host_cpu",
    "host",
    "memory_per_node_mib",
    "jobs",
    "shard",
    "out",
    "failure_file",
    "failing_executions",
];

pub fn without_host_figures(mut j: serde_json::Value) -> serde_json::Value {
    let o = j.as_object_mut().unwrap();
    for k in HOST_FIGURES {
        assert!(o.remove(*k).is_some(), "the JSON line has no {k}");
    }
    j
}

/// The failing executions listed, without their failure file paths.
pub fn failing(j: &serde_json::Value) -> Vec<(u64, String)> {
    j["failing_executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["execution"].as_u64().unwrap(), f["message"].as_str().unwrap().to_string()))
        .collect()
}

/// Asserts two runs' JSON lines are equal but for host figures, naming
/// the keys that differ.
pub fn assert_same_run(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
    let (a, b) = (without_host_figures(a.clone()), without_host_figures(b.clone()));
    let differ: Vec<String> = a
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| b.get(k.as_str()) != Some(v))
        .map(|(k, v)| format!("{k}: {v} vs {}", b.get(k.as_str()).unwrap_or(&serde_json::Value::Null)))
        .collect();
    assert!(differ.is_empty() && a == b, "{what}: the runs differ in\n{}", differ.join("\n"));
}

/// The SHA-256 of a file, hex (sha256sum's answer).
pub fn sha256(path: &str) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

/// Every file under `dir` (none if it does not exist), by path relative to
/// it, with its bytes.
pub fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(d) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}
