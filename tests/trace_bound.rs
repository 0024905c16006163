//! The trace is bounded by what guests saw, not by how often the engine let
//! them run.
//!
//! Under time travel, every clock read of a user-mode Linux guest costs it
//! 256 virtual ns, and one that enters the guest kernel (a system call; the
//! vDSO answers most reads without one and the kernel takes a run of them
//! as one wake-up) is a wake-up of its own: a program that polls the clock
//! by the system call gets a grant per read (measured: about 390,000
//! grants for 100 virtual ms). Each grant used to be one
//! `run` event in trace.jsonl (a spinning guest wrote 422 MB for 3 virtual
//! seconds); grants that show nothing to any guest now fold into one `run`
//! event per node with a count (engine::trace), so the trace of this
//! probe stays a few KB while the hash stays the same from run to run and
//! a replay still reproduces it.

mod common;
use common::*;

use std::path::Path;

/// Polls CLOCK_MONOTONIC by the system call (not the vDSO: every read a
/// wake-up) until `argv[1]` virtual ms have passed, prints how many reads
/// that took, and exits 1: the run then records a failure (with its trace
/// beside the failure file) for `replay` to check.
const SPIN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static long long mono(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long long ms = argc > 1 ? atoll(argv[1]) : 100;
	long long end = mono() + ms * 1000000LL;
	unsigned long reads = 0;
	while (mono() < end)
		reads++;
	printf("spin: %lu clock reads in %lld virtual ms\n", reads, ms);
	return 1;
}
"#;

/// Virtual ms the probe spins: enough for a few hundred thousand grants
/// (a minute or so of wall time each run on the 2-core machine here).
const SPIN_MS: u32 = 80;

/// Compiles [`SPIN_C`] as the static binary `dir/spin`; false (with the
/// skip recorded, `testkit`) when the host cannot.
fn build_spin(dir: &Path) -> bool {
    gcc_static(dir, "spin", SPIN_C)
}

/// The grants the `run` events of a trace.jsonl stand for, and its lines.
fn grants_in(trace: &str) -> (u64, usize) {
    let mut grants = 0;
    let mut lines = 0;
    for line in trace.lines() {
        lines += 1;
        let ev: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if ev["event"] == "run" {
            grants += ev.get("grants").map_or(1, |g| g.as_u64().unwrap());
        }
    }
    (grants, lines)
}

#[test]
#[ignore = "full tier: a guest that spins for a minute of wall time; engine::trace unit tests check the folding"]
fn a_spinning_guest_writes_a_small_trace_with_a_stable_hash() {
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 1\nmemory_mb = 128\n\
             [image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/spin\" = \"spin\" }}\n\
             [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/spin {SPIN_MS}\"\n"
        ),
        &[],
    );
    if !build_spin(d.path()) {
        return;
    }
    let mut runs = Vec::new();
    for _ in 0..2 {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &["--seed", "3"]);
        assert_eq!(r.code, 1, "the probe exits 1 to leave a failure to replay: {r:?}");
        let j = r.json();
        assert_eq!(j["failure"]["kind"], "workload", "{r:?}");
        let trace_path = out.path().join("last/trace.jsonl");
        let size = std::fs::metadata(&trace_path).unwrap().len();
        let trace = std::fs::read_to_string(&trace_path).unwrap();
        let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap_or_default();
        assert!(console.contains("clock reads in"), "the probe did not finish:\n{console}");
        let grants = j["grants"].as_u64().unwrap();
        println!("grants {grants}, trace.jsonl {size} bytes, {} events", j["trace_events"]);
        assert!(grants >= 200_000, "the probe should spin for hundreds of thousands of grants: {grants}");
        // One event per grant would be about 43 bytes per grant (over 10 MB here).
        assert!(size <= 1 << 20, "trace.jsonl is {size} bytes for {grants} grants");
        let (counted, lines) = grants_in(&trace);
        assert_eq!(counted, grants, "the folded run events stand for every grant");
        assert_eq!(j["trace_events"].as_u64(), Some(lines as u64));
        assert!((lines as u64) * 100 < grants, "{lines} events for {grants} grants");
        // Boot time counts from the first node's spawn, within the run's wall
        // time (which leaves the image build out).
        let boot = j["boot_wall_seconds"].as_f64().unwrap();
        assert!(boot > 0.0 && boot < j["wall_seconds"].as_f64().unwrap(), "{j}");
        runs.push((j, trace, out));
    }
    let (a, b) = (&runs[0], &runs[1]);
    assert_eq!(a.0["trace_hash"], b.0["trace_hash"], "same seed, different trace hash");
    assert_eq!(a.1, b.1, "same seed, different trace.jsonl");
    assert_eq!(a.0["grants"], b.0["grants"]);

    // The failure replays to the same (folded) trace.
    let (j, _, out) = &runs[0];
    let file = j["failure_file"].as_str().unwrap();
    let rep = run(&["replay", "--quiet", file, "--out", out.path().to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    let rj = rep.json();
    assert_eq!(rj["reproduced"], true, "{rep:?}");
    assert_eq!(rj["trace_hash"], j["trace_hash"]);
    assert!(rj.get("divergence").is_none(), "{rep:?}");
}
