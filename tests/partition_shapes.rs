//! `[faults.network] partition_shapes`: random partitions drawn from the
//! shapes Jepsen's partitioner knows. The shapes' own properties (every
//! node of a majorities ring sees a different majority, a bridge joins two
//! halves) are unit tests in checker's engine; here, the cluster.toml
//! surface, the trace, and determinism.

mod common;
use common::*;

fn five_nodes(shapes: &str, nodes: u16) -> tempfile::TempDir {
    simple(
        nodes,
        None,
        "sleep 6",
        &format!(
            "[faults.network]\npartitions = true\npartition_gap = {{ min = \"1s\", max = \"2s\" }}\n\
             partition_length = {{ min = \"1s\", max = \"2s\" }}\npartition_shapes = {shapes}\n"
        ),
    )
}

#[test]
fn shaped_partitions_show_in_the_trace_and_replay_the_same() {
    let d = five_nodes("[\"majorities-ring\"]", 5);
    same_trace_every_time(d.path(), 3, &["--seed", "3"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(j["failures"], 0);
    });
    let out = tempfile::tempdir().unwrap();
    run_cluster(d.path(), out.path(), &["--seed", "3"]);
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    let partitions: Vec<&str> = trace.lines().filter(|l| l.contains("\"event\":\"partition\"")).collect();
    assert!(!partitions.is_empty(), "no partition in 6 s with a 1-2 s gap");
    for p in &partitions {
        // A five-node majorities ring cuts each node from two others.
        let cut = p.split("links ").nth(1).unwrap_or_else(|| panic!("not a link cut: {p}"));
        assert_eq!(cut.split_whitespace().filter(|w| w.contains('-')).count(), 5, "{p}");
    }
}

#[test]
fn bad_shapes_are_bad_input() {
    for (shapes, nodes, says) in [
        ("[\"pentagon\"]", 5, "pentagon"),
        ("[]", 5, "at least one shape"),
        ("[\"majorities-ring\"]", 3, "at least 4 nodes"),
    ] {
        let d = five_nodes(shapes, nodes);
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 2, "{shapes}: {r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains(says), "{shapes}: {}", r.stderr);
        assert!(r.stderr.contains("partition_shapes"), "{shapes}: names the key: {}", r.stderr);
    }
}
