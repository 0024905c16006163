//! `simcluster shrink` removes whole faults: of a pause that kills a
//! strict heartbeat and a kill of a bystander's process, it keeps the
//! pause alone, lists it as the fault set that is needed, and the shrunk
//! failure file replays on its own to the same trace hash.
//!
//! The guest program is `tests/probes/faults_probe.c` (see its header).

mod common;
use common::*;

const PROBE: &str = include_str!("probes/faults_probe.c");

/// n1 pings n2's UDP server every 100 ms and gives it up after 500 ms
/// without an answer; n2's server pauses for 1-2 s (what fails), n3 runs
/// a server nobody talks to, whose process is killed once (what does not
/// matter). `None` when this host cannot build the probe.
fn cluster_with_a_bystander() -> Option<tempfile::TempDir> {
    probe_cluster_with(
        "[faults.pause]\nmax = 1\nnodes = [\"n2\"]\nlength = { min = \"1s\", max = \"2s\" }\nspan = \"2s\"\n\
         [faults.kill]\nmax = 1\nnodes = [\"n3\"]\nspan = \"1s\"\nrestart_after = \"1s\"\n",
    )
}

/// Three nodes running the probe's UDP server, n1's workload the strict
/// heartbeat to n2, and the `faults` tables given.
fn probe_cluster_with(faults: &str) -> Option<tempfile::TempDir> {
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 3\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/probe\" = \"probe\" }}\n\
             [node]\nstart = \"/usr/local/bin/probe server 7000\"\n\
             [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/probe heartbeat 10.0.0.2 7000 30 strict\"\n{faults}"
        ),
        &[],
    );
    gcc_static(d.path(), "probe", PROBE).then_some(d)
}

#[test]
fn shrink_removes_the_fault_the_failure_does_not_need() {
    let Some(d) = cluster_with_a_bystander() else {
        eprintln!("skipped: gcc cannot build the static probe on this host");
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1", "--executions", "4", "--until-failure"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert!(j["failure"]["message"].as_str().unwrap().contains("the server is dead"), "{r:?}");
    assert_eq!((j["pauses"].as_u64(), j["kills"].as_u64()), (Some(1), Some(1)), "both faults in the failure: {j}");
    let file = j["failure_file"].as_str().unwrap().to_string();
    let to = out.path().join("shrink");
    let sh = run(&["shrink", &file, "--out", to.to_str().unwrap()]);
    assert_eq!(sh.code, 0, "{sh:?}");
    let s = sh.json();
    let list = |k: &str| s[k].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (before, after) = (list("original_faults"), list("faults"));
    assert_eq!(before.len(), 2, "{s}");
    assert!(before.iter().any(|f| f.starts_with("Kill n3")) && before.iter().any(|f| f.starts_with("Pause n2")), "{s}");
    assert_eq!(after.len(), 1, "{s}");
    assert!(after[0].starts_with("Pause n2"), "{s}");
    assert_eq!(s["stopped"], serde_json::Value::Null, "{s}");
    // Progress: a line per replay on stderr, with the faults and decisions kept.
    assert!(sh.stderr.contains("shrink [faults]: replay 2: 1 of 2 faults"), "{sh:?}");
    assert!(sh.stderr.contains("  needed: Pause n2"), "{sh:?}");
    let shrunk = to.join("shrunk");
    let trace = std::fs::read_to_string(shrunk.join("trace.jsonl")).unwrap();
    assert!(trace.contains("\"event\":\"pause\"") && !trace.contains("\"event\":\"kill\""), "the kill is gone");
    let report = std::fs::read_to_string(shrunk.join("report.txt")).unwrap();
    assert!(report.contains("to 1 faults") && report.contains("needed: Pause n2"), "{report}");
    // The shrunk failure file carries its fault plan and replays alone.
    let f = shrunk.join("failure.json");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains("\"faults\""), "{text}");
    let rep = run(&["replay", "--quiet", f.to_str().unwrap(), "--out", out.path().to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], s["trace_hash"]);

    // A time budget already spent: the search stops at once, keeps the
    // recorded failure as the best, and says why.
    let to = out.path().join("budget");
    let sh = run(&["shrink", "--quiet", &file, "--time-budget", "1s", "--out", to.to_str().unwrap()]);
    assert_eq!(sh.code, 1, "nothing removed: {sh:?}");
    let s = sh.json();
    assert!(s["stopped"].as_str().is_some_and(|w| w.starts_with("time budget")), "{s}");
    assert!(sh.stderr.is_empty() || !sh.stderr.contains("shrink ["), "quiet: no progress lines: {sh:?}");
}

/// Partitions come from the network's timeline, not from a decision: shrink
/// removes them by not starting them (a note in the trace says so), and the
/// shrunk failure file, which records the partitions it skips, replays alone.
#[test]
fn shrink_removes_partitions_the_failure_does_not_need() {
    // Partitions of 100-200 ms isolate one node: shorter than the 500 ms
    // the heartbeat waits, so only the pause kills it.
    let Some(d) = probe_cluster_with(
        "[faults.pause]\nmax = 1\nnodes = [\"n2\"]\nlength = { min = \"1s\", max = \"2s\" }\nspan = \"2s\"\n\
         [faults.network]\npartitions = true\npartition_gap = { min = \"300ms\", max = \"600ms\" }\n\
         partition_length = { min = \"100ms\", max = \"200ms\" }\npartition_shapes = [\"isolate-one\"]\n",
    ) else {
        eprintln!("skipped: gcc cannot build the static probe on this host");
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1", "--executions", "4", "--until-failure"]);
    assert_eq!(r.code, 1, "{r:?}");
    let file = r.json()["failure_file"].as_str().unwrap().to_string();
    let to = out.path().join("shrink");
    let sh = run(&["shrink", "--quiet", &file, "--out", to.to_str().unwrap()]);
    assert_eq!(sh.code, 0, "{sh:?}");
    let s = sh.json();
    let before = s["original_faults"].as_array().unwrap();
    assert!(before.iter().filter(|f| f.as_str().unwrap().starts_with("Partition ")).count() >= 1, "{s}");
    let after: Vec<&str> = s["faults"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(after.len() == 1 && after[0].starts_with("Pause n2"), "{s}");
    let shrunk = to.join("shrunk");
    let trace = std::fs::read_to_string(shrunk.join("trace.jsonl")).unwrap();
    assert!(trace.contains("not started: removed by shrink") && !trace.contains("\"event\":\"partition\""), "{trace}");
    let text = std::fs::read_to_string(shrunk.join("failure.json")).unwrap();
    assert!(text.contains("\"skip_partitions\""), "{text}");
    let rep = run(&[
        "replay",
        "--quiet",
        shrunk.join("failure.json").to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], s["trace_hash"]);
}
