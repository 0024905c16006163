//! Exploration that aims (issue 29): coverage-guided search reaches a bug
//! behind several rare states in a row, the same way for any `--jobs`;
//! crash points just after a node sends catch a server that acknowledges
//! before it syncs, whether its data sits on the disk's volatile cache or
//! only in the guest's page cache. (Delay bounding's measured horizon: tests/datagram_order.rs.)
//!
//! Bounds count executions (deterministic for a seed), never wall time.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::Path;

/// Each execution's (index, crash state) -> trace hash, from a run's shard.json.
fn hashes(out: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(out.join("shard.json")).unwrap();
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (format!("{}/{}", e["execution"], e["crash_state"]), e["trace_hash"].as_str().unwrap().to_string()))
        .collect()
}

/// Runs `args` on guest-images/examples/`example` and returns the run's
/// JSON line and its per-execution hashes.
fn explore(example: &str, args: &[&str]) -> Option<(serde_json::Value, BTreeMap<String, String>, tempfile::TempDir)> {
    let dir = examples()?.join(example);
    let out = tempfile::tempdir().unwrap();
    let mut all = vec!["--critical-walks", "0"];
    all.extend_from_slice(args);
    let r = run_cluster(&dir, out.path(), &all);
    assert!(r.code == 0 || r.code == 1, "{example} {args:?}: {r:?}");
    let j = r.json();
    let h = hashes(out.path());
    Some((j, h, out))
}

/// The failure of a run replays: same trace hash.
fn replays(j: &serde_json::Value, out: &Path) {
    let file = j["failure_file"].as_str().expect("a failure file");
    let rep = run(&["replay", "--quiet", file, "--out", out.join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "replay did not reproduce: {rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
}

/// examples/stages hides its bug behind five reversed bursts in a row.
/// Coverage keeps each execution that reached a new stage and explores on
/// from it, and finds the bug within the bound; the failure replays.
#[test]
fn coverage_finds_a_bug_behind_five_rare_states() {
    let bound = "60";
    let Some((j, _, out)) =
        explore("stages", &["--strategy", "coverage", "--executions", bound, "--until-failure", "--seed", "1"])
    else {
        return;
    };
    assert_eq!(j["failures"], 1, "coverage did not reach stage 5 within {bound} executions: {j}");
    let first = j["failing_execution"].as_u64().unwrap() + 1;
    println!("coverage found the stages bug in execution {first}");
    let seen: Vec<&str> =
        j["coverage"]["first_seen"].as_array().unwrap().iter().map(|f| f["feature"].as_str().unwrap()).collect();
    for s in 1..=4 {
        assert!(seen.contains(&format!("reached stage-{s}").as_str()), "{seen:?}");
    }
    replays(&j, out.path());
}

/// The unguided walk does not get there: the same bound of executions of
/// `random` (seed 1) ends with no failure. (Full tier: 100 executions.)
#[test]
#[ignore = "full tier: 100 executions of random on examples/stages"]
fn random_does_not_find_the_five_stage_bug_in_100_executions() {
    let Some((j, _, _)) = explore("stages", &["--strategy", "random", "--executions", "100", "--seed", "1"]) else {
        return;
    };
    assert_eq!(j["failures"], 0, "{j}");
}

/// Coverage's executions depend on earlier ones, yet the run is the same
/// for any --jobs: the same executions (every trace hash) and the same
/// coverage record. Ten executions span two generations.
#[test]
fn coverage_is_the_same_for_any_jobs() {
    let args = |jobs: &'static str| ["--strategy", "coverage", "--executions", "10", "--seed", "2", "--jobs", jobs];
    let Some((one, h1, _)) = explore("stages", &args("1")) else { return };
    let (two, h2, _) = explore("stages", &args("2")).unwrap();
    assert_eq!(h1.len(), 10);
    assert_eq!(h1, h2, "per-execution trace hashes differ between --jobs 1 and 2");
    assert_eq!(one["coverage"], two["coverage"]);
    assert!(one["coverage"]["corpus"].as_u64().unwrap() >= 1, "{one}");
}

/// A store that acknowledges a write while it sits in the page cache
/// loses it at a crash just after the acknowledgement: caught within 12
/// executions with the default crash settings, and replayed.
#[test]
fn acknowledging_before_fsync_is_caught_within_12_executions() {
    let Some((j, _, out)) = explore("ack-unsafe", &["--executions", "12", "--until-failure", "--seed", "1"]) else {
        return;
    };
    assert_eq!(j["failures"], 1, "no acknowledged write lost within 12 executions: {j}");
    println!("ack-unsafe: lost in execution {}", j["failing_execution"]);
    replays(&j, out.path());
}

/// The same store with ext4 committing every 2 minutes (a store that
/// syncs on a timer): the disk never holds a volatile write during the
/// run, so the only place the acknowledged values are at stake is the
/// guest's page cache. The engine sees it there (the guest kernel
/// publishes how many files hold dirty pages), crashes n2 while it
/// holds them, and the loss is found at once and replays. The crash point
/// says what the power took: a file's dirty data, nothing volatile on the disk.
#[test]
fn acknowledging_from_the_page_cache_is_caught_without_a_disk_write() {
    let Some((j, _, out)) = explore("ack-unsafe-lazy", &["--executions", "4", "--until-failure", "--seed", "1"]) else {
        return;
    };
    assert_eq!(j["failures"], 1, "no acknowledged write lost within 4 executions: {j}");
    println!("ack-unsafe-lazy: lost in execution {}", j["failing_execution"]);
    let failing = j["failing_execution"].as_u64().unwrap();
    let point =
        j["crash_points"].as_array().unwrap().iter().find(|p| p["execution"] == failing).expect("a crash point");
    assert!(point["dirty_files"].as_u64().unwrap() > 0, "the crash took no file's dirty data: {point}");
    assert_eq!(point["volatile_writes"], 0, "the disk held something (ext4 committed?): {point}");
    replays(&j, out.path());
}

/// Its twin syncs before acknowledging and passes the same executions.
#[test]
fn syncing_before_acknowledging_passes() {
    let n = testkit::by_tier("4", "12");
    let Some((j, _, _)) = explore("ack-safe", &["--executions", n, "--seed", "1"]) else { return };
    assert_eq!(j["failures"], 0, "{j}");
    assert!(j["crash_states_explored"].as_u64().unwrap() >= 1, "no crash was explored: {j}");
}
