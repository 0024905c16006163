//! RDTSC and RDTSCP in guest programs read virtual time.
//!
//! Under user-mode Linux, guest programs run natively on the host CPU, so
//! without kernel patch 0002 (guest-images/kernel/patches) these
//! instructions read the host's time stamp counter: a different value in
//! every run, which made Go programs (whose runtime seeds its per-thread
//! random state from it) take a different path in every run. With the
//! patch they fault and the guest kernel answers with its CLOCK_MONOTONIC.
//! The probe below prints the counter, so its values are in the trace:
//! two runs with the same seed must agree byte for byte.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

/// Reads the counter with both instructions between two reads of
/// CLOCK_MONOTONIC, in the first process and in a forked one (a new host
/// process for the new address space), and spins until the counter moves
/// by 100 us. Checks in the guest that each value lies strictly inside its
/// clock bracket and that RDTSCP reports cpu 0; exits 1 otherwise.
const PROBE_C: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static inline uint64_t rdtscp(uint32_t *aux)
{
	uint32_t lo, hi, c;
	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
	*aux = c;
	return (uint64_t)hi << 32 | lo;
}

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int probe(const char *who)
{
	int bad = 0;
	for (int i = 0; i < 3; i++) {
		uint32_t aux = ~0u;
		uint64_t a = mono();
		uint64_t t = rdtsc();
		uint64_t p = rdtscp(&aux);
		uint64_t b = mono();
		int ok = a < t && t < p && p < b && aux == 0;
		printf("tsc-probe %s %d: mono %llu rdtsc %llu rdtscp %llu aux %u mono %llu %s\n", who, i,
		       (unsigned long long)a, (unsigned long long)t, (unsigned long long)p, aux,
		       (unsigned long long)b, ok ? "ok" : "BAD");
		bad |= !ok;
	}
	/* A loop waiting for the counter to move must end. */
	uint64_t t0 = rdtsc();
	unsigned long reads = 0;
	while (rdtsc() - t0 < 100000)
		reads++;
	printf("tsc-probe %s: %lu reads until the counter moved 100 us\n", who, reads);
	return bad;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	int bad = probe("parent");
	pid_t pid = fork();
	if (pid == 0)
		_exit(probe("child"));
	int status = 1;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bad = 1;
	printf("tsc-probe result %s\n", bad ? "BAD" : "ok");
	return bad;
}
"#;

/// Compiles the probe as a static binary into `dir`; false (with the reason
/// printed) when the host cannot.
fn build_probe(dir: &Path) -> bool {
    let src = dir.join("tsc-probe.c");
    std::fs::write(&src, PROBE_C).unwrap();
    match Command::new("gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(dir.join("tsc-probe"))
        .arg(&src)
        .output()
    {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            println!("skipping: gcc -static failed: {}", String::from_utf8_lossy(&o.stderr));
            false
        }
        Err(e) => {
            println!("skipping: cannot run gcc: {e}");
            false
        }
    }
}

fn probe_lines(console: &str) -> Vec<&str> {
    console.lines().filter(|l| l.contains("tsc-probe")).collect()
}

#[test]
fn rdtsc_reads_virtual_time_and_the_same_seed_gives_the_same_trace() {
    let d = cluster(
        "[cluster]\nnodes = 1\nmemory_mb = 128\n\
         [image]\npackages = [\"busybox-static\"]\n\
         files = { \"/usr/local/bin/tsc-probe\" = \"tsc-probe\" }\n\
         [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/tsc-probe\"\n",
        &[],
    );
    if !build_probe(d.path()) {
        return;
    }
    let mut runs = Vec::new();
    for _ in 0..2 {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
        let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap_or_default();
        assert_eq!(r.code, 0, "{r:?}\n--- console\n{console}");
        let lines: Vec<String> = probe_lines(&console).into_iter().map(String::from).collect();
        // 3 bracketed reads and a spin in each of two processes, and the result.
        assert_eq!(lines.len(), 9, "{console}");
        assert!(lines.iter().all(|l| !l.contains("BAD")), "{console}");
        assert!(lines.last().unwrap().ends_with("tsc-probe result ok"), "{console}");
        runs.push((r.json()["trace_hash"].as_str().unwrap().to_string(), lines));
    }
    assert_eq!(runs[0].1, runs[1].1, "the counter's values differ between runs");
    assert_eq!(runs[0].0, runs[1].0, "trace hashes differ between runs with the same seed");
}
