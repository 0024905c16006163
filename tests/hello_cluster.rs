//! hello-cluster end to end: boots, runs 60 virtual seconds (idle time skipped), prints
//! from every node, and is deterministic.

mod common;
use common::*;

#[test]
fn hello_cluster_runs_sixty_virtual_seconds_skipping_idle_time() {
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&repo().join("guest-images/hello-cluster"), out.path(), &["--seed", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["executions"], 1);
    assert_eq!(j["failures"], 0);
    // --runtime auto: user-mode Linux unless the host can run KVM nodes.
    let runtime = j["runtime"].as_str().unwrap();
    assert!(runtime == "uml" || vmm::kvm::host::has_hardware_virt(), "runtime {runtime}");
    let v = j["virtual_seconds"].as_f64().unwrap();
    assert!(v >= 60.0, "virtual time {v} < 60 s");
    // Fast by construction, counted rather than timed: the nodes' idle
    // time (60 s of sleep) is skipped, not stepped through, so the three
    // nodes take far fewer grants than one per virtual millisecond (2351
    // for 60,160 ms at seed 3; a slow host changes none of it).
    let grants = j["grants"].as_u64().unwrap();
    assert!((grants as f64) < v * 1000.0, "{grants} grants for {v} virtual s: idle time was stepped through");
    assert_eq!(j["trace_hash"].as_str().unwrap().len(), 64);
    for n in ["n1", "n2", "n3"] {
        let log = std::fs::read_to_string(out.path().join(format!("last/console-{n}.log"))).unwrap();
        assert!(log.contains(&format!("hello from {n} (node")), "{n} did not print:\n{log}");
        assert!(log.contains("of n1,n2,n3"), "PEERS missing on {n}");
    }
    let n1 = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap();
    let line = n1.lines().find(|l| l.contains("workload done on n1")).expect("workload line");
    // The guest's own clock agrees with the engine's: 60 s of sleep.
    let uptime: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((60.0..61.0).contains(&uptime), "{line}");
    // The trace holds the console output with virtual timestamps.
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert!(trace.lines().any(|l| l.contains("\"event\":\"console\"") && l.contains("workload done on n1")));
    assert!(trace.lines().any(|l| l.contains("\"event\":\"invariant\"") && l.contains("every-node-said-hello")));
}

#[test]
fn same_seed_gives_the_same_trace_hash_five_times() {
    let dir = repo().join("guest-images/hello-cluster");
    let mut hashes = Vec::new();
    for _ in 0..5 {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(&dir, out.path(), &["--seed", "11"]);
        assert_eq!(r.code, 0, "{r:?}");
        hashes.push(r.json()["trace_hash"].as_str().unwrap().to_string());
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "trace hashes differ across runs: {hashes:#?}");
}

#[test]
fn different_seeds_explore_different_schedules() {
    let dir = repo().join("guest-images/hello-cluster");
    let mut hashes = std::collections::BTreeSet::new();
    for seed in ["1", "2", "3"] {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(&dir, out.path(), &["--seed", seed]);
        assert_eq!(r.code, 0, "{r:?}");
        hashes.insert(r.json()["trace_hash"].as_str().unwrap().to_string());
    }
    assert!(hashes.len() > 1, "three seeds gave one trace: the seed decides nothing");
}

#[test]
fn several_executions_are_counted() {
    let out = tempfile::tempdir().unwrap();
    let d = simple(2, None, "sleep 1", "");
    let r = run_cluster(d.path(), out.path(), &["--executions", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["executions"], 3);
    assert_eq!(r.json()["failures"], 0);
}
