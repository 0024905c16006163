//! Data disks with real guests on ext4: power loss is an engine action, the
//! crash state of the disk is a choice enumerated per crash point, and what
//! a program did right or wrong shows after the restart.
//!
//! guest-images/examples/rename-safe and rename-unsafe: n2 replaces a file
//! (write, fsync, rename, fsync the directory; or write and rename only),
//! acknowledges the update to n1, and may lose power; after the restart n1
//! checks that the acknowledged content survived.

mod common;
use common::*;

use std::path::PathBuf;

#[test]
#[ignore = "full tier: every crash state of four executions; the short tier checks the unsafe rename finds its bug and replays"]
fn a_correct_rename_keeps_old_or_new_content_in_every_crash_state() {
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&ex.join("rename-safe"), out.path(), &["--executions", "4", "--seed", "3"]);
    assert_eq!(r.code, 0, "a crash state broke the correct program: {r:?}");
    let j = r.json();
    let points = j["crash_points"].as_array().unwrap();
    assert!(!points.is_empty(), "no execution crashed the writer: {j}");
    let mut explored = 0;
    for p in points {
        let (states, n) = (p["states"].as_u64().unwrap(), p["explored"].as_u64().unwrap());
        assert!(p["states_exact"].as_bool().unwrap());
        assert!((1..=16).contains(&states), "{p}");
        assert_eq!(n, states, "every crash state of a small crash point is explored: {p}");
        explored += n;
    }
    assert_eq!(j["crash_states_explored"].as_u64().unwrap(), explored);
    assert!(j["executions"].as_u64().unwrap() >= explored, "{j}");
    assert!(j["disk_storage_per_node_kib"].as_f64().unwrap() > 0.0, "{j}");
    // The guest mounted its disk and ext4 replayed its journal after the crash.
    let logs: String = ["n1", "n2"]
        .iter()
        .map(|n| std::fs::read_to_string(out.path().join(format!("last/console-{n}.log"))).unwrap())
        .collect();
    assert!(logs.contains("EXT4-fs (vda): mounted filesystem"), "{logs}");
}

#[test]
fn a_rename_without_fsync_loses_an_acknowledged_update_and_replays() {
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&ex.join("rename-unsafe"), out.path(), &["--executions", "6", "--until-failure"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    let msg = j["failure"]["message"].as_str().unwrap();
    assert!(msg.contains("PROPERTY VIOLATED"), "{msg}");
    assert!(j["crashes"].as_u64().unwrap() == 1, "{j}");
    let file = j["failure_file"].as_str().unwrap();
    let trace = std::fs::read_to_string(PathBuf::from(file).with_file_name("trace.jsonl")).unwrap();
    assert!(trace.contains("\"event\":\"crash\"") && trace.contains("crash state"), "the crash state is in the trace");
    assert!(trace.contains("\"event\":\"disk\"") && trace.contains("\"op\":\"flush\""));
    for _ in 0..2 {
        let rep = run(&["replay", "--quiet", file, "--out", out.path().to_str().unwrap()]);
        assert_eq!(rep.code, 0, "{rep:?}");
        assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
    }
}

/// `--warm-start cold` (warm-start mode, each execution and crash-state sibling
/// booted for itself: what a forked run runs, on any runtime): the boot is drawn
/// from the run's boot seed and ends in the trace; each execution's crash point
/// has its sibling (the execution's strategy begun again, the other state
/// forced); the failure file records the boot seed, and its replay reproduces the
/// failure, hash for hash. The run's hashes are not an ordinary run's.
#[test]
#[ignore = "full tier: two runs of three executions (warm start is checked in L1 too)"]
fn a_warm_start_cold_run_finds_the_lost_update_and_replays() {
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let args = ["--executions", "3", "--seed", "4", "--warm-start", "cold", "--jobs", "1"];
    let r = run_cluster(&ex.join("rename-unsafe"), out.path(), &args);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["crash_states_explored"].as_u64(), Some(6), "{j}");
    let file = j["failure_file"].as_str().unwrap();
    let record = std::fs::read_to_string(file).unwrap();
    assert!(record.contains("\"boot_seed\""), "the failure file records the boot seed: {record}");
    let trace = std::fs::read_to_string(PathBuf::from(file).with_file_name("trace.jsonl")).unwrap();
    assert!(trace.contains("boot ends: every agent ready"), "no boot end in the trace");
    let rep = run(&["replay", "--quiet", file, "--out", out.path().join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
    let plain = tempfile::tempdir().unwrap();
    let p = run_cluster(&ex.join("rename-unsafe"), plain.path(), &["--executions", "3", "--seed", "4", "--jobs", "1"])
        .json();
    assert_ne!(p["trace_hash"], j["trace_hash"], "warm-start mode runs other executions than an ordinary run");
}

#[test]
fn crashes_and_crash_states_are_deterministic() {
    let Some(ex) = examples() else { return };
    same_trace_every_time(&ex.join("rename-safe"), 5, &["--seed", "5"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(j["crashes"], 1, "{j}");
    });
}

#[test]
fn a_guest_sees_a_synced_file_on_its_disk() {
    // No crash: data written and synced is read back through the page
    // cache, and the disk is the size cluster.toml asked for.
    let d = simple(
        1,
        None,
        "echo hello > /data/x && sync && test \"$(cat /data/x)\" = hello && df -m /data | tail -1",
        "[disk]\nsize_mb = 32\nmount = \"/data\"\n",
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let log = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap();
    assert!(log.contains("/dev/vda"), "{log}");
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert!(trace.contains("\"op\":\"write\"") && trace.contains("\"op\":\"flush\""), "sync reached the disk");
}

#[test]
fn bad_disk_and_crash_settings_are_rejected() {
    for (extra, needle) in [
        ("[disk]\nsize_mb = 1\nmount = \"/data\"\n", "size_mb"),
        ("[disk]\nsize_mb = 32\nmount = \"data\"\n", "mount"),
        ("[disk]\nsize_mb = 32\nmount = \"/proc/x\"\n", "mount"),
        ("[disk]\nsize_mb = 32\nmount = \"/data\"\nlatency = \"soon\"\n", "latency"),
        ("[faults.crash]\nmax = 1\nnodes = [\"n1\"]\n", "workload"),
        ("[faults.crash]\nmax = 1\nnodes = [\"n9\"]\n", "n9"),
        ("[faults.crash]\nmax = 1\nrestart_after = \"x\"\n", "restart_after"),
    ] {
        let d = simple(2, None, "true", extra);
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 2, "{extra}: {r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains(needle), "{extra}: {}", r.stderr);
        assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing written");
    }
}

#[test]
#[ignore = "full tier: several executions with torn writes"]
fn torn_writes_multiply_crash_states_and_a_large_crash_point_is_sampled() {
    let Some(ex) = examples() else { return };
    // rename-safe with torn writes: a crash during a 4 KiB write leaves any
    // subset of its 8 sectors, 2^8 states, more than [disk] enumerate (16),
    // so one is drawn from the seed. ext4's journal copes: still correct.
    let d = tempfile::tempdir().unwrap();
    let toml = std::fs::read_to_string(ex.join("rename-safe/cluster.toml"))
        .unwrap()
        .replace("\"../rename-safe/safefile\"", &format!("{:?}", ex.join("rename-safe/safefile").display().to_string()))
        .replace("mount = \"/data\"", "mount = \"/data\"\ntorn_writes = true");
    std::fs::write(d.path().join("cluster.toml"), toml).unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--executions", "3", "--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let points = j["crash_points"].as_array().unwrap();
    let big: Vec<_> = points.iter().filter(|p| p["states"].as_u64().unwrap() > 16).collect();
    assert!(!big.is_empty(), "no crash during a multi-sector write: {j}");
    for p in big {
        assert_eq!(p["explored"], 1, "{p}");
        assert_eq!(p["states"].as_u64().unwrap().count_ones(), 1, "2^sectors states: {p}");
    }
}

/// A node restarted after a power loss reads the same wall clock as the
/// others: the cluster's date plus virtual time, not the cluster's date
/// again (its clock would then be as far behind as the restart is late).
#[test]
#[ignore = "full tier: several restarts"]
fn a_restarted_node_keeps_the_cluster_date() {
    let Some(ex) = examples() else { return };
    let (_keep, dir) = edited_copy(&ex, "rename-safe", |toml| {
        toml.replacen("start = \"", "start = \"echo boot-date $NODE_NAME $(date +%s); ", 1)
    });
    // 2026-01-01T00:00:00Z, the cluster's date at virtual time 0.
    const EPOCH_S: f64 = 1_767_225_600.0;
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--seed", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert!(trace.contains("\"event\":\"restart\""), "seed 5 no longer restarts n2; pick another seed");
    let mut seen = 0;
    for line in trace.lines().filter(|l| l.contains("boot-date")) {
        let ev: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = ev["text"].as_str().unwrap();
        let date: f64 = text.rsplit(' ').next().unwrap().parse().unwrap();
        let virtual_s = ev["time"].as_u64().unwrap() as f64 / 1e9;
        assert!((date - (EPOCH_S + virtual_s)).abs() <= 1.0, "{text} at virtual {virtual_s} s");
        seen += 1;
    }
    // Two nodes at boot, and n2 again after its restart.
    assert_eq!(seen, 3, "{trace}");
}

/// Crash points fall where data is at risk: on db-cluster (etcd, which
/// fsyncs before it answers) a crash is offered only while the node holds
/// volatile writes, so its crash points have several crash states. Before,
/// most had none (crashes were also offered whenever frames were in flight,
/// which in etcd is always).
#[test]
#[ignore = "full tier: db-cluster with crashes (minutes); the short tier finds and replays a lost update on the examples"]
fn db_cluster_crash_points_have_volatile_writes_and_several_states() {
    let dir = repo().join("guest-images/db-cluster");
    match std::process::Command::new("sh").arg(dir.join("build.sh")).output() {
        Ok(o) if o.status.success() => {}
        other => {
            testkit::skip(
                testkit::Cause::Missing,
                format!("guest-images/db-cluster/build.sh could not build db-cluster's client: {other:?}"),
            );
            return;
        }
    }
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--executions", "3", "--seed", "2"]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    let j = r.json();
    let points = j["crash_points"].as_array().unwrap();
    assert!(points.len() >= 2, "db-cluster crashes a node in most executions: {j}");
    let at_risk = points
        .iter()
        .filter(|p| p["volatile_writes"].as_u64().unwrap() > 0 && p["states"].as_u64().unwrap() > 1)
        .count();
    assert!(at_risk * 2 > points.len(), "most crash points must have volatile writes and several states: {points:?}");
    assert!(j["crash_states_explored"].as_u64().unwrap() > points.len() as u64, "{j}");
}
