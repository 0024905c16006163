//! The time-travel transport: the 7.2 guest kernel keeps its clock and its
//! run requests in a page shared with simcluster (only RUN and WAIT cross
//! the socket), the 6.1 protocol sends every GET, UPDATE and REQUEST as a
//! message. The transport must not change what guests see: the same seed
//! gives the same execution either way.

mod common;
use common::*;

use std::path::Path;

/// hello-cluster with `extra` added to its [cluster] table.
fn hello_with(extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    with_cluster_keys(&repo().join("guest-images"), "hello-cluster", extra)
}

/// The trace, less UML's boot complaint that it cannot poll the console
/// file: it names a host descriptor number, which the shared page's
/// descriptors (received, mapped, closed) move by one. Nothing else may
/// differ.
fn trace_without_host_fd_numbers(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("last/trace.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.contains("epollctl add err fd"))
        .map(String::from)
        .collect()
}

#[test]
fn shared_memory_and_messages_give_the_same_execution() {
    let mut traces = Vec::new();
    for transport in ["shared-memory", "messages"] {
        let (_keep, d) = hello_with(&format!("time_travel = \"{transport}\""));
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(&d, out.path(), &["--seed", "3"]);
        assert_eq!(r.code, 0, "{transport}: {r:?}");
        let t = trace_without_host_fd_numbers(out.path());
        assert!(t.len() > 100, "{transport}: a trace of {} events", t.len());
        traces.push((transport, r.json()["grants"].clone(), t));
    }
    assert_eq!(traces[0].1, traces[1].1, "grant counts differ");
    for (i, (a, b)) in traces[0].2.iter().zip(&traces[1].2).enumerate() {
        assert_eq!(a, b, "trace line {} differs between the transports", i + 1);
    }
    assert_eq!(traces[0].2.len(), traces[1].2.len());
}

#[test]
fn shared_memory_is_deterministic_and_the_default() {
    same_trace_every_time(&repo().join("guest-images/hello-cluster"), 3, &["--seed", "11"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(j["kernel"], "7.2");
        assert_eq!(j["userspace"], "seccomp");
    });
}

#[test]
fn shared_memory_needs_the_72_kernel() {
    let (_keep, d) = hello_with("kernel = \"6.1\"\ntime_travel = \"shared-memory\"");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&d, out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("shared-memory"), "{}", r.stderr);
}

#[test]
fn an_unknown_transport_is_rejected() {
    let (_keep, d) = hello_with("time_travel = \"carrier-pigeon\"");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&d, out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("carrier-pigeon"), "{}", r.stderr);
}
