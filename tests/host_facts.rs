//! Host facts and replay across hosts (issue 27): the JSON line and the
//! failure file record the host; a run with CPUID faulting forced off
//! (`SIMCLUSTER_DEBUG_NO_CPUID_FAULTING=1`, the switch that makes a host
//! with faulting act as one without) gives the same trace for a cluster
//! whose programs do not read CPUID; `cpuid = "strict"` refuses such a
//! host; replay compares the recorded host class with its own.

mod common;
use common::*;

const FORCE_OFF: &str = "SIMCLUSTER_DEBUG_NO_CPUID_FAULTING";
const NOTE: &str = "note: this host cannot fault CPUID";

/// `simcluster ARGS` with CPUID faulting forced off.
fn run_forced_off(args: &[&str]) -> Run {
    run_command(bin().args(args).env(FORCE_OFF, "1"))
}

fn run_args<'a>(dir: &'a std::path::Path, out: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["run", "--quiet", "--runtime", "uml", "--images", dir.to_str().unwrap(), "--out"];
    a.push(out.to_str().unwrap());
    a.extend_from_slice(extra);
    a
}

#[test]
fn forcing_cpuid_faulting_off_keeps_hello_clusters_trace() {
    let dir = repo().join("guest-images/hello-cluster");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let normal = run(&run_args(&dir, a.path(), &["--seed", "1"]));
    let forced = run_forced_off(&run_args(&dir, b.path(), &["--seed", "1"]));
    assert_eq!(normal.code, 0, "{normal:?}");
    assert_eq!(forced.code, 0, "{forced:?}");
    let (n, f) = (normal.json(), forced.json());
    let faulting = n["host"]["cpuid_faulting"].as_bool().unwrap_or_else(|| panic!("no host.cpuid_faulting: {n}"));
    println!("this host: {}", n["host"]);
    assert_eq!(n["host"]["cpuid_faulting_forced_off"], false, "{n}");
    assert_eq!(n["host"]["guest_cpuid"], if faulting { "virtual" } else { "host" }, "{n}");
    assert_eq!(n["host"]["runtime"], "uml", "{n}");
    assert_eq!(f["host"]["cpuid_faulting"], false, "{f}");
    assert_eq!(f["host"]["cpuid_faulting_forced_off"], true, "{f}");
    assert_eq!(f["host"]["guest_cpuid"], "host", "{f}");
    // Said once on stderr where guests see the host's CPUID, never else.
    assert_eq!(forced.stderr.matches(NOTE).count(), 1, "{forced:?}");
    assert!(forced.stderr.contains(FORCE_OFF), "{forced:?}");
    assert_eq!(normal.stderr.matches(NOTE).count(), usize::from(!faulting), "{normal:?}");
    // hello-cluster reads no CPUID: the same execution either way, and no
    // host fact in the trace.
    assert_eq!(n["trace_hash"], f["trace_hash"], "CPUID faulting changed the trace:\n{n}\n{f}");
    let trace = std::fs::read_to_string(b.path().join("last/trace.jsonl")).unwrap();
    assert!(!trace.contains("ARCH_SET_CPUID") && !trace.contains("host's CPUID"), "a host fact in the trace");
    // The shard record keeps it too.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.path().join("shard.json")).unwrap()).unwrap();
    assert_eq!(record["host"], f["host"]);
}

#[test]
fn a_strict_cluster_refuses_a_host_without_cpuid_faulting() {
    // Refused before anything is built: no kernel needed.
    let d = simple(1, None, "true", "");
    let toml = std::fs::read_to_string(d.path().join("cluster.toml")).unwrap();
    std::fs::write(d.path().join("cluster.toml"), toml.replacen("[cluster]\n", "[cluster]\ncpuid = \"strict\"\n", 1))
        .unwrap();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("out");
    let r = run_forced_off(&run_args(d.path(), &out, &[]));
    assert_eq!(r.code, 3, "a host error: {r:?}");
    for want in ["cpuid = \"strict\"", "CPUID faulting", FORCE_OFF, "cluster.toml"] {
        assert!(r.stderr.contains(want), "{want:?} missing: {r:?}");
    }
    assert!(!out.exists(), "nothing is written under --out");
}

/// A compose cluster's `cpuid = "strict"` is refused the same way, and the
/// message names the file the setting is in: the compose file's
/// `x-simcluster` block, or a cluster.toml beside it.
#[test]
fn a_strict_compose_cluster_names_the_file_its_setting_is_in() {
    let d = tempfile::tempdir().unwrap();
    let services = "services:\n  web:\n    image: oci:.\n";
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("out");
    std::fs::write(d.path().join("compose.yaml"), format!("{services}x-simcluster:\n  cluster:\n    cpuid: strict\n"))
        .unwrap();
    let r = run_forced_off(&run_args(d.path(), &out, &[]));
    assert_eq!(r.code, 3, "a host error: {r:?}");
    assert!(r.stderr.contains("compose.yaml: [cluster] cpuid = \"strict\""), "{r:?}");
    std::fs::write(d.path().join("compose.yaml"), services).unwrap();
    std::fs::write(d.path().join("cluster.toml"), "[cluster]\ncpuid = \"strict\"\n").unwrap();
    let r = run_forced_off(&run_args(d.path(), &out, &[]));
    assert_eq!(r.code, 3, "a host error: {r:?}");
    assert!(r.stderr.contains("cluster.toml: [cluster] cpuid = \"strict\""), "{r:?}");
    assert!(!out.exists(), "nothing is written under --out");
}

/// A failure recorded with faulting as the host has it, replayed with
/// faulting forced off: where the host has faulting the classes differ
/// (said up front, in the JSON), and since the cluster reads no CPUID the
/// replay still reproduces; where it has none, the classes are the same
/// and nothing is said. A failure file without a host says nothing either.
#[test]
fn replay_compares_the_recorded_host_class() {
    let d = simple(1, None, "sleep 1; exit 3", "");
    let out = tempfile::tempdir().unwrap();
    let r = run(&run_args(d.path(), out.path(), &["--seed", "4"]));
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    let file = j["failure_file"].as_str().unwrap().to_string();
    let recorded: explore::failure_file::FailureRecord = explore::failure_file::load(file.as_ref()).unwrap();
    let host = recorded.host.clone().expect("the failure file records the host");
    assert_eq!(serde_json::to_value(&host).unwrap(), j["host"]);

    let replay_out = tempfile::tempdir().unwrap();
    let args = ["replay", "--quiet", "--out", replay_out.path().to_str().unwrap(), file.as_str()];
    let r = run_forced_off(&args);
    assert_eq!(r.code, 0, "a cluster that reads no CPUID replays on either class: {r:?}");
    let rj = r.json();
    assert_eq!(rj["host"]["cpuid_faulting"], false, "{rj}");
    assert_eq!(rj["recorded_host"]["cpuid_faulting"], host.cpuid_faulting, "{rj}");
    assert_eq!(rj["host_differs"], host.cpuid_faulting, "{rj}");
    assert_eq!(r.stderr.contains("note: recorded on"), host.cpuid_faulting, "{r:?}");
    assert!(rj.get("likely_cause").is_none(), "reproduced: no cause to name: {rj}");

    // The same file without a host: nothing said, nothing compared.
    let mut old = recorded;
    old.host = None;
    explore::failure_file::save(file.as_ref(), &old).unwrap();
    let r = run_forced_off(&args);
    assert_eq!(r.code, 0, "{r:?}");
    let rj = r.json();
    assert!(!r.stderr.contains("note: recorded on"), "{r:?}");
    assert_eq!((rj["recorded_host"].is_null(), &rj["host_differs"]), (true, &serde_json::json!(false)), "{rj}");
}

/// Prints whether CPUID leaf 1 advertises RDRAND (ECX bit 30), which the
/// guest kernel hides where it answers CPUID.
const RDRAND_PROBE_C: &str = r#"
#include <cpuid.h>
#include <stdio.h>
int main(void) {
	unsigned a, b, c, d;
	__cpuid(1, a, b, c, d);
	printf("rdrand-probe %u\n", (c >> 30) & 1);
	return 0;
}
"#;

/// The forced-off switch reaches the nodes: on a host whose cpu has RDRAND
/// guest programs see it advertised (native CPUID) with faulting forced off,
/// and not where the host faults CPUID for them.
#[test]
fn with_faulting_forced_off_guest_programs_see_the_host_cpuid() {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if !flags.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "rdrand")) {
        testkit::skip(testkit::Cause::Host, "this host cpu has no RDRAND to see");
        return;
    }
    let d = cluster(
        "[cluster]\nnodes = 1\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n\
         files = { \"/usr/local/bin/rdrand-probe\" = \"rdrand-probe\" }\n\
         [workload]\nnode = \"n1\"\ncommand = \"/usr/local/bin/rdrand-probe\"\n",
        &[],
    );
    if !gcc_static(d.path(), "rdrand-probe", RDRAND_PROBE_C) {
        return;
    }
    let seen = |forced: bool| {
        let out = tempfile::tempdir().unwrap();
        let args = run_args(d.path(), out.path(), &["--seed", "2"]);
        let r = if forced { run_forced_off(&args) } else { run(&args) };
        assert_eq!(r.code, 0, "{r:?}");
        let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap();
        let line = console.lines().find(|l| l.contains("rdrand-probe ")).unwrap_or_else(|| panic!("{console}"));
        (line.trim_end().ends_with('1'), r.json()["host"]["cpuid_faulting"].as_bool().unwrap())
    };
    let (normal, faulting) = seen(false);
    assert_eq!(normal, !faulting, "RDRAND advertised: {normal}, host faults CPUID: {faulting}");
    assert_eq!(seen(true), (true, false), "forced off: native CPUID, RDRAND advertised");
}
