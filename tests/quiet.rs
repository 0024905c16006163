//! The quiet period: when the workload passes, faults stop and the checks
//! run `settle` later on a calm cluster; `quiet_after = "never"` keeps the
//! faults going through the checks.

mod common;
use common::*;

/// Partitions almost all the time (gaps of 50-100 ms, 2-4 s long); the
/// invariant on n1 needs both peers to answer a ping.
fn partitioned_cluster(faults_keys: &str) -> tempfile::TempDir {
    simple(
        3,
        None,
        "sleep 3",
        &format!(
            "[[invariant]]\nname = \"all-reachable\"\nnode = \"n1\"\n\
             command = \"ping -c 1 -W 1 n2 && ping -c 1 -W 1 n3\"\n\
             [faults]\n{faults_keys}\n\
             [faults.network]\npartitions = true\npartition_gap = {{ min = \"50ms\", max = \"100ms\" }}\n\
             partition_length = {{ min = \"2s\", max = \"4s\" }}\npartition_shapes = [\"isolate-one\", \"halves\"]\n"
        ),
    )
}

#[test]
fn checks_run_on_a_calm_cluster_after_the_workload() {
    let d = partitioned_cluster("settle = \"1s\"");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--executions", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["failures"], 0, "{r:?}");
    // The quiet period is in the trace, once per execution.
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert_eq!(trace.matches("quiet period: faults stop").count(), 1, "{trace}");
}

#[test]
fn without_a_quiet_period_partitions_reach_the_checks() {
    let d = partitioned_cluster("quiet_after = \"never\"");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--executions", "4"]);
    let j = r.json();
    assert!(j["failures"].as_u64().unwrap() > 0, "partitions during the checks never failed them: {r:?}");
    assert_eq!(j["failure"]["kind"], "invariant", "{r:?}");
}

#[test]
fn bad_quiet_keys_exit_2() {
    for (keys, needle) in [("quiet_after = \"later\"", "quiet_after"), ("settle = \"soon\"", "settle")] {
        let d = partitioned_cluster(keys);
        let r = run(&["run", "--quiet", "--images", d.path().to_str().unwrap()]);
        assert_eq!(r.code, 2, "{keys}: {r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains(needle), "{keys}: {r:?}");
    }
}
