//! The same seed gives the same trace hash five times, in both userspace
//! modes of the 7.2 kernel (seccomp, the default, and ptrace), on
//! hello-cluster and every example. (db-cluster, etcd on three nodes, is
//! checked the same way by scripts/determinism-db.sh.)

mod common;
use common::*;

use std::path::Path;

const MODES: [&str; 2] = ["seccomp", "ptrace"];
const RUNS: usize = 5;

fn five_times(parent: &Path, name: &str) {
    for mode in MODES {
        let (_keep, dir) = with_cluster_keys(parent, name, &format!("userspace = \"{mode}\""));
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
