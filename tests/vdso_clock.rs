//! Clock reads in the guest kernel's vDSO (patch
//! `guest-images/kernel/patches/7.2/0004-um-time-travel-vdso-clock.patch`).
//!
//! Under user-mode Linux every clock read of a guest program used to be a
//! system call (a trap, two host context switches) that moved the guest's
//! clock on by 256 virtual ns; Go programs read the clock thousands of
//! times per virtual second. The vDSO now answers from a page of virtual
//! time the kernel publishes at every return to userspace, counting each
//! read there, and the kernel folds the count into its clock at its next
//! entry. What must hold, in both userspace modes:
//! - the vDSO is mapped with its page, and clocks never run backwards
//!   across a system call, a fault or a fork; the clocks agree
//!   (clock_gettime, gettimeofday, time);
//! - reads cost virtual time as before (256 ns each), so a loop that waits
//!   for the clock to move ends, and two processes spinning on the clock
//!   both finish (the read that reaches the kernel's next timer enters the
//!   kernel, which runs the tick and switches);
//! - the reads no longer cost wake-ups: 200,000 reads are a handful of
//!   grants, where with every read a system call
//!   (`SIMCLUSTER_DEBUG_SYSCALL_CLOCK=1`) each is one;
//! - the same seed gives the same trace.

mod common;
use common::*;

/// The probe: checks in the guest, prints what it saw on lines that
/// start with "vdso-probe", and exits 1 on a failed check.
const PROBE_C: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>
#include <sys/wait.h>

static uint64_t ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int mapped(void)
{
	char line[512];
	int vdso = 0, vvar = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		vdso |= strstr(line, "[vdso]") != NULL;
		vvar |= strstr(line, "[vvar]") != NULL;
	}
	fclose(f);
	return vdso && vvar;
}

/* Spins on CLOCK_MONOTONIC for `span` ns; returns the reads it took. */
static unsigned long spin(uint64_t span)
{
	uint64_t end = ns(CLOCK_MONOTONIC) + span;
	unsigned long reads = 0;
	while (ns(CLOCK_MONOTONIC) < end)
		reads++;
	return reads;
}

static int probe(const char *who)
{
	int bad = 0;
	/* Never backwards: across reads, a system call and a fault. */
	uint64_t a = ns(CLOCK_MONOTONIC);
	uint64_t b = ns(CLOCK_MONOTONIC);
	getppid();
	uint64_t c = ns(CLOCK_MONOTONIC);
	static char page[1 << 16];
	page[(b & 15) << 12] = 1; /* a fresh page: a fault into the kernel */
	uint64_t d = ns(CLOCK_MONOTONIC);
	int order = a < b && b < c && c < d;
	/* The clocks agree with each other. */
	struct timeval tv;
	gettimeofday(&tv, NULL);
	uint64_t r = ns(CLOCK_REALTIME);
	time_t t = time(NULL);
	uint64_t tv_ns = (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000;
	int agree = tv_ns <= r && r - tv_ns < 10000 && (uint64_t)t <= r / 1000000000u && r / 1000000000u - t <= 1
		&& ns(CLOCK_BOOTTIME) >= ns(CLOCK_MONOTONIC) - 100000;
	/* 1000 reads cost 256 ns each, as system calls did. */
	uint64_t s0 = ns(CLOCK_MONOTONIC);
	for (int i = 0; i < 1000; i++)
		ns(CLOCK_MONOTONIC);
	uint64_t s1 = ns(CLOCK_MONOTONIC);
	int cost = s1 - s0 >= 1001 * 256;
	int ok = mapped() && order && agree && cost;
	printf("vdso-probe %s: mapped %d order %d agree %d 1001 reads %llu ns %s\n", who, mapped(), order, agree,
	       (unsigned long long)(s1 - s0), ok ? "ok" : "BAD");
	bad |= !ok;
	return bad;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "reads") == 0) {
		/* Many reads and nothing else, for the count of grants. */
		for (int i = 0; i < 200000; i++)
			ns(CLOCK_MONOTONIC);
		printf("vdso-probe reads done\n");
		return 0;
	}
	int bad = probe("parent");
	pid_t pid = fork();
	if (pid == 0) {
		int b = probe("child");
		/* Two processes spinning on the clock at once both finish. */
		unsigned long n = spin(300000000);
		printf("vdso-probe child spun %s\n", n > 0 ? "ok" : "BAD");
		_exit(b || n == 0);
	}
	unsigned long n = spin(300000000);
	printf("vdso-probe parent spun %s\n", n > 0 ? "ok" : "BAD");
	bad |= n == 0;
	int status = 1;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bad = 1;
	printf("vdso-probe result %s\n", bad ? "BAD" : "ok");
	return bad;
}
"#;

/// A one-node cluster in userspace mode `mode` whose workload is the
/// probe with `args`; None (skip recorded) without a static gcc.
fn probe_cluster(mode: &str, args: &str) -> Option<tempfile::TempDir> {
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 1\nmemory_mb = 128\nuserspace = \"{mode}\"\n\
             [image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/vdso-probe\" = \"vdso-probe\" }}\n\
             [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/vdso-probe {args}\"\n"
        ),
        &[],
    );
    gcc_static(d.path(), "vdso-probe", PROBE_C).then_some(d)
}

fn probe_lines(console: &str) -> Vec<String> {
    console.lines().filter(|l| l.contains("vdso-probe")).map(String::from).collect()
}

#[test]
fn the_vdso_answers_clock_reads_and_spinning_processes_finish() {
    for mode in ["seccomp", "ptrace"] {
        println!("userspace = {mode}");
        let Some(d) = probe_cluster(mode, "") else { return };
        let mut runs = Vec::new();
        for _ in 0..2 {
            let out = tempfile::tempdir().unwrap();
            let r = run_cluster(d.path(), out.path(), &["--seed", "4"]);
            let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap_or_default();
            assert_eq!(r.code, 0, "{mode}: {r:?}\n--- console\n{console}");
            let lines = probe_lines(&console);
            assert!(lines.iter().all(|l| !l.contains("BAD")), "{mode}: {console}");
            assert_eq!(lines.iter().filter(|l| l.ends_with(" ok")).count(), 5, "{mode}: {console}");
            assert!(lines.last().unwrap().ends_with("vdso-probe result ok"), "{mode}: {console}");
            runs.push((r.json()["trace_hash"].as_str().unwrap().to_string(), lines));
        }
        assert_eq!(runs[0], runs[1], "{mode}: two runs of seed 4 differ");
    }
}

#[test]
fn clock_reads_in_the_vdso_are_not_wake_ups() {
    let Some(d) = probe_cluster("seccomp", "reads") else { return };
    let mut grants = Vec::new();
    for syscall_clock in [false, true] {
        let out = tempfile::tempdir().unwrap();
        let mut args = vec!["run", "--quiet", "--images", d.path().to_str().unwrap()];
        args.extend(["--out", out.path().to_str().unwrap(), "--seed", "2"]);
        let mut cmd = bin();
        cmd.args(&args);
        if syscall_clock {
            cmd.env("SIMCLUSTER_DEBUG_SYSCALL_CLOCK", "1");
        }
        let r = run_command(&mut cmd);
        let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap_or_default();
        assert_eq!(r.code, 0, "{r:?}\n--- console\n{console}");
        assert!(console.contains("vdso-probe reads done"), "{console}");
        grants.push(r.json()["grants"].as_u64().unwrap());
    }
    let (vdso, syscall) = (grants[0], grants[1]);
    println!("grants: {vdso} with the vDSO clock, {syscall} with every read a system call");
    assert!(syscall >= 200_000, "every read a system call: {syscall} grants for 200,000 reads");
    assert!(vdso < syscall / 10, "the vDSO clock: {vdso} grants against {syscall}");
}
