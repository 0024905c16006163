//! Message order as a choice point: datagrams in flight on one link may be
//! delivered in any order, without any fault configured, and every
//! strategy sees that order as a choice. The case: the reorder example's
//! client writes each key twice back to back over UDP, and its replica
//! applies updates in arrival order. With no `[faults.network]` at all, an
//! in-order network hides the bug; the strategies must find it.

mod common;
use common::*;

/// The reorder example with its `[faults.network]` table removed, and
/// `extra` appended.
fn reorder_without_faults(ex: &std::path::Path, extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    edited_copy(ex, "reorder", |toml| {
        let cut = toml.find("[faults.network]").expect("the example configures its fault");
        let head = &toml[..toml[..cut].rfind("\n\n").unwrap_or(cut)];
        format!("{head}\n{extra}")
    })
}

#[test]
#[ignore = "full tier: five strategies over many executions (over a minute); tests/strategies.rs checks each strategy in the short tier"]
fn every_strategy_finds_a_datagram_reordering_without_any_fault() {
    let Some(ex) = examples() else { return };
    let (_keep, dir) = reorder_without_faults(&ex, "");
    for strategy in ["random", "pct", "delay", "dfs"] {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(
            &dir,
            out.path(),
            &["--strategy", strategy, "--executions", "20", "--until-failure", "--seed", "1"],
        );
        assert_eq!(r.code, 1, "{strategy} did not find the reordering within 20 executions: {r:?}");
        let j = r.json();
        assert!(j["failing_execution"].as_u64().unwrap() < 20, "{j}");
        assert_eq!(j["network"]["reordered"], 0, "netsim reordered nothing: the strategy did");
        assert!(j["failure"]["message"].as_str().unwrap().contains("replica-holds-last-write"), "{j}");
        // The decision names which datagram went first (alike deliveries
        // differ in their place behind the link's head): it replays.
        let replay_out = tempfile::tempdir().unwrap();
        let file = j["failure_file"].as_str().unwrap();
        let r = run(&["replay", "--quiet", "--out", replay_out.path().to_str().unwrap(), file]);
        assert_eq!(r.code, 0, "{strategy}: the reordering did not replay: {r:?}");
    }
}

#[test]
fn fifo_datagram_order_keeps_every_link_in_order() {
    let Some(ex) = examples() else { return };
    let (_keep, dir) = reorder_without_faults(&ex, "[faults.network]\ndatagram_order = \"fifo\"\n");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--executions", "6", "--seed", "1"]);
    assert_eq!(r.code, 0, "an in-order network hides the bug: {r:?}");
    let (_keep2, bad) = reorder_without_faults(&ex, "[faults.network]\ndatagram_order = \"sometimes\"\n");
    let r = run_cluster(&bad, out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("datagram_order"), "{}", r.stderr);
}

/// `delay` measures its horizon on execution 0 (the default schedule), so
/// its delays land inside this short execution (about 450 choice points;
/// the fixed default of 2000 put most of them after its end): it finds
/// the reordering within 20 executions for seeds 1 to 3 (the short tier:
/// seed 1), and the failure replays.
#[test]
fn delay_with_a_measured_horizon_finds_the_reordering() {
    let Some(ex) = examples() else { return };
    let (_keep, dir) = reorder_without_faults(&ex, "");
    for seed in testkit::by_tier(&["1"][..], &["1", "2", "3"][..]) {
        let out = tempfile::tempdir().unwrap();
        let args = ["--strategy", "delay", "--executions", "20", "--until-failure", "--seed", seed];
        let r = run_cluster(&dir, out.path(), &args);
        assert_eq!(r.code, 1, "delay (seed {seed}) did not find the reordering within 20 executions: {r:?}");
        let j = r.json();
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("shard.json")).unwrap()).unwrap();
        let horizon = record["identity"]["horizon"].as_u64().unwrap();
        assert!(horizon < 2000, "the horizon was measured, not the default: {horizon}");
        println!("delay seed {seed}: found in execution {} (horizon {horizon})", j["failing_execution"]);
        let file = j["failure_file"].as_str().unwrap();
        let replay_out = tempfile::tempdir().unwrap();
        let r = run(&["replay", "--quiet", "--out", replay_out.path().to_str().unwrap(), file]);
        assert_eq!(r.code, 0, "delay seed {seed}: the reordering did not replay: {r:?}");
    }
}
