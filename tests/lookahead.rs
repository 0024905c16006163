//! Lookahead's bound is what keeps traces the same (see `engine::lookahead`).
//!
//! tests/golden.rs runs hello-cluster and every example with lookahead on
//! and off against the same recorded hashes, and scripts/determinism-db.sh
//! does db-cluster both ways. This file shows the other side: a bound that
//! leaves out the frames on their way lets a node run past a frame due to
//! reach it, and the engine catches that instead of tracing something the
//! seed does not name.

mod common;
use common::*;

#[test]
fn a_node_running_past_a_frame_on_its_way_is_caught() {
    let Some(examples) = examples() else { return };
    // reorder: a client and two replicas exchanging datagrams all the time,
    // so a frame is in flight at nearly every grant.
    let out = tempfile::tempdir().unwrap();
    let dir = examples.join("reorder");
    let mut cmd = bin();
    cmd.args(["run", "--quiet", "--seed", "1", "--executions", "1", "--runtime", "uml", "--images"])
        .arg(&dir)
        .arg("--out")
        .arg(out.path())
        .env("SIMCLUSTER_DEBUG_LOOKAHEAD_PAST_FRAMES", "1");
    let r = run_command(&mut cmd);
    assert_eq!(r.code, 3, "a broken bound is the simulator's failure, exit 3: {r:?}");
    assert!(r.stderr.contains("ran ahead") && r.stderr.contains("a lookahead bound is wrong"), "{r:?}");
    assert!(!out.path().join("failures").exists(), "no verdict was reached, so no failure file: {r:?}");

    // The true bound on the same execution: it runs to its verdict.
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--seed", "1", "--executions", "1", "--runtime", "uml"]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    let j = r.json();
    assert!(j["round_trips"].as_u64().unwrap() < j["grants"].as_u64().unwrap(), "{r:?}");
}
