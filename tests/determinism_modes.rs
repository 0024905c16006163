//! The same seed gives the same trace hash five times, in both userspace
//! modes of the 7.2 kernel (seccomp, the default, and ptrace), on
//! hello-cluster and every example. (db-cluster, etcd on three nodes, is
//! checked the same way by scripts/determinism-db.sh.)

mod common;
use common::*;

use std::path::Path;

const MODES: [&str; 2] = ["seccomp", "ptrace"];
const RUNS: usize = 5;

/// A copy of `parent` (so clusters that take files from a sibling keep
/// them) with `userspace = MODE` in `name`'s [cluster] table.
fn in_mode(parent: &Path, name: &str, mode: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp").arg("-r").arg(format!("{}/.", parent.display())).arg(t.path()).status().unwrap();
    assert!(status.success());
    let dir = t.path().join(name);
    let toml = std::fs::read_to_string(dir.join("cluster.toml")).unwrap();
    assert!(toml.contains("[cluster]\n"), "{name}");
    std::fs::write(dir.join("cluster.toml"), toml.replacen("[cluster]\n", &format!("[cluster]\nuserspace = \"{mode}\"\n"), 1)).unwrap();
    (t, dir)
}

fn five_times(parent: &Path, name: &str) {
    for mode in MODES {
        let (_keep, dir) = in_mode(parent, name, mode);
        println!("{name}, userspace = {mode}");
        same_trace_every_time(&dir, RUNS, &["--seed", "2", "--critical-walks", "0"], |r, j| {
            assert!(r.code == 0 || r.code == 1, "{name} ({mode}): {r:?}");
            assert_eq!(j["userspace"], mode, "{name}");
        });
    }
}

#[test]
fn hello_cluster_in_both_modes() {
    five_times(&repo().join("guest-images"), "hello-cluster");
}

#[test]
fn every_example_in_both_modes() {
    let Some(ex) = examples() else { return };
    for name in ["reorder", "partition", "crash-primary", "liveness", "rename-unsafe", "rename-safe"] {
        five_times(&ex, name);
    }
}
