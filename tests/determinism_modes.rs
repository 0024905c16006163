//! The same seed gives the same trace hash run after run, in both userspace
//! modes of the 7.2 kernel (seccomp, the default, and ptrace), on
//! hello-cluster and the examples. (db-cluster, etcd on three nodes, is
//! checked the same way by scripts/determinism-db.sh.)
//!
//! Tiers (`testkit::by_tier`): the short tier runs each cluster twice per
//! mode, hello-cluster and crash-primary (the network, a power loss and a
//! restart; tests/golden.rs runs every example once against its recorded
//! hash); the full tier five times each, every example.

mod common;
use common::*;

use std::path::Path;

const MODES: [&str; 2] = ["seccomp", "ptrace"];

fn runs() -> usize {
    testkit::by_tier(2, 5)
}

fn every_run_the_same(parent: &Path, name: &str) {
    for mode in MODES {
        let (_keep, dir) = with_cluster_keys(parent, name, &format!("userspace = \"{mode}\""));
        println!("{name}, userspace = {mode}");
        same_trace_every_time(&dir, runs(), &["--seed", "2", "--critical-walks", "0"], |r, j| {
            assert!(r.code == 0 || r.code == 1, "{name} ({mode}): {r:?}");
            assert_eq!(j["userspace"], mode, "{name}");
        });
    }
}

#[test]
fn hello_cluster_in_both_modes() {
    every_run_the_same(&repo().join("guest-images"), "hello-cluster");
}

#[test]
fn examples_in_both_modes() {
    let Some(ex) = examples() else { return };
    let all = ["reorder", "partition", "crash-primary", "liveness", "rename-unsafe", "rename-safe"];
    let names: &[&str] = testkit::by_tier(&["crash-primary"], &all);
    for name in names {
        every_run_the_same(&ex, name);
    }
}
