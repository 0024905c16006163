//! Instructions that guest programs run natively on the host CPU answer
//! from the simulation, not the host.
//!
//! Under user-mode Linux, guest programs run natively on the host CPU:
//! - RDTSC and RDTSCP read the host's time stamp counter, a different value
//!   in every run, which made Go programs (whose runtime seeds its
//!   per-thread random state from it) take a different path in every run.
//!   The kernel patch (guest-images/kernel/patches/7.2) makes them fault,
//!   and the guest kernel answers with its CLOCK_MONOTONIC.
//! - CPUID offers RDRAND and RDSEED (host randomness, read natively) and
//!   tells the APIC id of whichever host cpu the process runs on. The same
//!   patch makes it fault where the host cpu can, and hides both.
//!
//! Both userspace modes of the 7.2 kernel (seccomp, the default, and
//! ptrace) take the faults through different paths, so every probe runs in
//! both. Each probe prints what it read, so the values are in the trace:
//! two runs with the same seed must agree byte for byte.

mod common;
use common::*;

use std::path::Path;

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

"#;

/// The `main` both probes share: `probe()` in the first process and in a
/// forked one (a new host process for the new address space), then the
/// verdict line; exits 1 if either probe failed.
const PROBE_MAIN_C: &str = r#"
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
	printf("%s result %s\n", PROBE_NAME, bad ? "BAD" : "ok");
	return bad;
}
"#;

/// Compiles probe source `src` (which defines `probe()`) with
/// [`PROBE_MAIN_C`] as the static binary `dir/name`; false (with the
/// skip recorded, `testkit`) when the host cannot.
fn build_static(dir: &Path, name: &str, src: &str) -> bool {
    gcc_static(dir, name, &format!("#define PROBE_NAME \"{name}\"\n{src}{PROBE_MAIN_C}"))
}

fn probe_lines(console: &str) -> Vec<&str> {
    console.lines().filter(|l| l.contains("tsc-probe")).collect()
}

/// The userspace modes of the default kernel, as `[cluster] userspace`.
const USERSPACES: [&str; 2] = ["seccomp", "ptrace"];

#[test]
fn rdtsc_reads_virtual_time_and_the_same_seed_gives_the_same_trace() {
    for mode in USERSPACES {
        println!("userspace = {mode}");
        rdtsc_probe(mode);
    }
}

fn rdtsc_probe(mode: &str) {
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 1\nmemory_mb = 128\nuserspace = \"{mode}\"\n\
             [image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/tsc-probe\" = \"tsc-probe\" }}\n\
             [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/tsc-probe\"\n"
        ),
        &[],
    );
    if !build_static(d.path(), "tsc-probe", PROBE_C) {
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
        assert_eq!(r.json()["userspace"], mode, "{r:?}");
        runs.push((r.json()["trace_hash"].as_str().unwrap().to_string(), lines));
    }
    assert_eq!(runs[0].1, runs[1].1, "{mode}: the counter's values differ between runs");
    assert_eq!(runs[0].0, runs[1].0, "{mode}: trace hashes differ between runs with the same seed");
}

/// Asks CPUID what a program asks before it uses RDRAND, RDSEED, RDPID,
/// TSX (HLE, RTM) or WAITPKG, and which cpu it is on, in a process and in
/// a forked one; exits 1 if any of them is offered or an APIC id is not 0
/// (kernel patch 0003).
const CPUID_PROBE_C: &str = r#"
#include <cpuid.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

static int probe(const char *who)
{
	unsigned int a, b, c, d, max, rdrand, apic, rdseed = 0, rdpid = 0, tsx = 0, waitpkg = 0, x2apic = 0;
	char vendor[13];

	__cpuid(0, max, b, c, d);
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = 0;
	__cpuid(1, a, b, c, d);
	rdrand = (c >> 30) & 1;
	apic = b >> 24;
	if (max >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		rdseed = (b >> 18) & 1;
		rdpid = (c >> 22) & 1;
		tsx = ((b >> 4) & 1) | ((b >> 11) & 1);
		waitpkg = (c >> 5) & 1;
	}
	if (max >= 0xb) {
		__cpuid_count(0xb, 0, a, b, c, d);
		x2apic = d;
	}
	/* Leaves 0 and 1 ignore ECX on real cpus: any ECX, the same answer. */
	unsigned int a0, b0, c0, d0, a1, b1, c1, d1, any_ecx = 1;
	for (unsigned int ecx = 1; ecx < 0x10000; ecx = ecx * 7 + 3) {
		__cpuid_count(0, 0, a0, b0, c0, d0);
		__cpuid_count(0, ecx, a1, b1, c1, d1);
		any_ecx &= a0 == a1 && b0 == b1 && c0 == c1 && d0 == d1;
		__cpuid_count(1, 0, a0, b0, c0, d0);
		__cpuid_count(1, ecx, a1, b1, c1, d1);
		any_ecx &= a0 == a1 && b0 == b1 && c0 == c1 && d0 == d1;
	}
	int ok = vendor[0] && max >= 1 && !rdrand && !rdseed && !rdpid && !tsx && !waitpkg && !apic && !x2apic && any_ecx;
	printf("cpuid-probe %s: vendor %s max leaf %u rdrand %u rdseed %u rdpid %u tsx %u waitpkg %u "
	       "apic id %u x2apic id %u any ecx %u %s\n",
	       who, vendor, max, rdrand, rdseed, rdpid, tsx, waitpkg, apic, x2apic, any_ecx, ok ? "ok" : "BAD");
	return !ok;
}

"#;

/// A one-node cluster that runs the CPUID probe, with `cluster_extra`
/// added to its [cluster] table; None (skip recorded, `testkit`) without gcc.
fn cpuid_cluster(cluster_extra: &str) -> Option<tempfile::TempDir> {
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 1\nmemory_mb = 128\n{cluster_extra}\n\
             [image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/cpuid-probe\" = \"cpuid-probe\" }}\n\
             [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/cpuid-probe\"\n"
        ),
        &[],
    );
    build_static(d.path(), "cpuid-probe", CPUID_PROBE_C).then_some(d)
}

/// The host cpu's vendor string from /proc/cpuinfo.
fn host_vendor() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("vendor_id"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_default()
}

/// The host cpu's feature flags from /proc/cpuinfo.
fn host_flags() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines().find(|l| l.starts_with("flags")).unwrap_or("").to_string()
}

#[test]
fn cpuid_hides_host_randomness_and_the_host_cpu() {
    // Whether guest programs can have virtual CPUID is a fact of the host,
    // read before any run (hostfacts, as `simcluster run` reads it): a run
    // that then fails is a failure, never a skip.
    let facts = hostfacts::HostFacts::probe(vmm::runtime::RuntimeKind::Uml, true);
    if facts.guest_cpuid == hostfacts::GuestCpuid::Host {
        testkit::skip(testkit::Cause::Host, "this host cpu cannot fault CPUID in user mode; guests see its answers");
        return;
    }
    for mode in USERSPACES {
        println!("userspace = {mode}");
        cpuid_probe(mode);
    }
}

fn cpuid_probe(mode: &str) {
    let Some(d) = cpuid_cluster(&format!("userspace = \"{mode}\"")) else { return };
    let flags = host_flags();
    println!("host offers rdrand: {}, rdseed: {}", flags.contains(" rdrand"), flags.contains(" rdseed"));
    let mut lines = Vec::new();
    for _ in 0..2 {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
        let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap_or_default();
        assert_eq!(r.code, 0, "{r:?}\n--- console\n{console}");
        // The run's host facts agree with the probe above.
        assert_eq!(r.json()["host"]["guest_cpuid"], "virtual", "{r:?}");
        let probe: Vec<String> = console.lines().filter(|l| l.contains("cpuid-probe")).map(String::from).collect();
        assert_eq!(probe.len(), 3, "{console}");
        // The host's own vendor string, as the guest kernel read it at boot.
        let vendor = host_vendor();
        assert!(
            probe[..2].iter().all(|l| l.contains(&format!("vendor {vendor} "))),
            "host vendor {vendor}:\n{console}"
        );
        assert!(probe.last().unwrap().ends_with("cpuid-probe result ok"), "{console}");
        lines.push((r.json()["trace_hash"].as_str().unwrap().to_string(), probe));
    }
    assert_eq!(lines[0], lines[1], "{mode}: two runs of one seed differ");
}

#[test]
fn seccomp_userspace_needs_the_72_kernel() {
    let d = cluster(
        "[cluster]\nnodes = 1\nkernel = \"6.1\"\nuserspace = \"seccomp\"\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n",
        &[],
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("cluster.toml") && r.stderr.contains("seccomp") && r.stderr.contains("7.2"),
        "{}",
        r.stderr
    );
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing is written for bad input");
}

/// `[cluster] cpuid = "host"` lets the native instruction through: on a
/// host cpu with RDRAND, the probe sees it (and fails, as it should).
#[test]
fn cpuid_host_mode_is_the_native_instruction() {
    if !host_flags().contains(" rdrand") {
        testkit::skip(testkit::Cause::Host, "this host cpu has no rdrand for the guest to see");
        return;
    }
    let Some(d) = cpuid_cluster("cpuid = \"host\"") else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
    let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap_or_default();
    assert_eq!(r.code, 1, "the probe should have failed: {r:?}\n{console}");
    assert!(console.contains("cpuid-probe parent: vendor") && console.contains("rdrand 1"), "{console}");
}

#[test]
fn an_unknown_cpuid_mode_is_rejected() {
    let d = cluster("[cluster]\nnodes = 1\ncpuid = \"fast\"\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n", &[]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("fast"), "{}", r.stderr);
}
