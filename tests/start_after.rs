//! `[faults] start_after`: faults begin once a guest printed `@reached
//! NAME` in the workload, not when the workload starts, so a system is set
//! up before anything is done to it.

mod common;
use common::*;

/// n2 pings n1 all the time (frames in flight: a crash is possible); the
/// workload on n1 says it is set up after 3 s. A crash of n2 may come
/// within the first 500 ms of the faults.
fn cluster(start_after: &str) -> tempfile::TempDir {
    simple(
        2,
        Some("if [ $NODE_ID = 2 ]; then while true; do ping -c 1 -W 1 n1 >/dev/null; sleep 0.05; done; fi"),
        "sleep 3; echo '@reached set-up'; sleep 3",
        &format!("[faults]\n{start_after}\n[faults.crash]\nmax = 1\nnodes = [\"n2\"]\nspan = \"500ms\"\nrestart_after = \"1s\"\n"),
    )
}

/// Virtual times of the crash events and of the "set-up" line.
fn times(trace: &str) -> (Vec<u64>, Option<u64>) {
    let mut crashes = Vec::new();
    let mut set_up = None;
    for line in trace.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let t = v["time"].as_u64().unwrap();
        match v["event"].as_str().unwrap() {
            "crash" => crashes.push(t),
            "console" if v["text"] == "@reached set-up" => set_up = set_up.or(Some(t)),
            _ => {}
        }
    }
    (crashes, set_up)
}

#[test]
fn faults_wait_for_the_name_and_begin_with_it() {
    for (keys, after) in [("start_after = \"set-up\"", true), ("", false)] {
        let d = cluster(keys);
        let mut crashed = 0;
        for seed in 1..=3 {
            let out = tempfile::tempdir().unwrap();
            let r = run_cluster(d.path(), out.path(), &["--seed", &seed.to_string()]);
            assert_eq!(r.code, 0, "{r:?}");
            let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
            let (crashes, set_up) = times(&trace);
            let set_up = set_up.expect("the workload printed its name");
            crashed += crashes.len();
            if after {
                assert!(trace.contains("faults begin: set-up reached ([faults] start_after)"), "{trace}");
                assert!(crashes.iter().all(|&t| t >= set_up), "a crash before set-up: {crashes:?} < {set_up}");
            } else {
                assert!(crashes.iter().all(|&t| t < set_up), "faults from the workload's start: {crashes:?}");
            }
        }
        assert!(crashed >= 2, "{keys}: n2 crashed in {crashed} of 3 executions");
    }
}

#[test]
fn a_name_that_is_not_one_word_exits_2() {
    let d = cluster("start_after = \"set up\"");
    let r = run(&["run", "--quiet", "--images", d.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("cluster.toml") && r.stderr.contains("start_after") && r.stderr.contains("line"),
        "{r:?}"
    );
}
