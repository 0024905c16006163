//! What users see when something goes wrong: each kind of failure gets a
//! clear message and the documented exit code (1: a property failed).

mod common;
use common::*;

fn failure_of(r: &Run) -> serde_json::Value {
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failures"], 1, "{r:?}");
    j["failure"].clone()
}

#[test]
fn a_panicking_guest_is_reported_as_a_guest_panic() {
    // n2 exhausts its memory with panic_on_oom set: a genuine kernel panic.
    let d = simple(
        2,
        Some("if [ $NODE_ID = 2 ]; then echo 1 > /proc/sys/vm/panic_on_oom; tail /dev/zero; fi"),
        "sleep 30",
        "",
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    let f = failure_of(&r);
    assert_eq!(f["kind"], "guest_panic", "{r:?}");
    assert_eq!(f["node"], "n2");
    assert!(f["message"].as_str().unwrap().contains("Kernel panic"), "{r:?}");
}

#[test]
fn a_missing_start_command_is_reported() {
    let d = simple(2, Some("no-such-program --serve"), "sleep 5", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    let f = failure_of(&r);
    assert_eq!(f["kind"], "start_command", "{r:?}");
    assert!(f["message"].as_str().unwrap().contains("status 127 (command not found)"), "{r:?}");
}

#[test]
fn a_missing_program_path_is_bad_input() {
    let d = simple(2, Some("/usr/local/bin/not-in-image"), "sleep 5", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("cluster.toml")
            && r.stderr.contains("/usr/local/bin/not-in-image does not exist in the image"),
        "{r:?}"
    );
}

#[test]
fn a_workload_that_never_ends_hits_the_virtual_time_limit() {
    let d = simple(2, None, "sleep 100000", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--time-limit", "45s"]);
    let f = failure_of(&r);
    assert_eq!(f["kind"], "time_limit", "{r:?}");
    assert!(f["message"].as_str().unwrap().contains("workload did not finish"), "{r:?}");
    let j = r.json();
    // The limit is virtual time: exactly 45 s of it, whatever the host's speed.
    assert_eq!(j["virtual_seconds"].as_f64().unwrap(), 45.0);
}

#[test]
fn a_failing_workload_and_a_failing_invariant_are_reported() {
    let d = simple(2, None, "echo about to fail; exit 3", "");
    let out = tempfile::tempdir().unwrap();
    let f = failure_of(&run_cluster(d.path(), out.path(), &[]));
    assert_eq!(f["kind"], "workload");
    assert!(f["message"].as_str().unwrap().contains("status 3"));
    assert!(f["message"].as_str().unwrap().contains("about to fail"), "console tail missing: {f}");

    let d =
        simple(2, None, "true", "[[invariant]]\nname = \"file-exists\"\nnode = \"n2\"\ncommand = \"test -f /nope\"\n");
    let f = failure_of(&run_cluster(d.path(), out.path(), &[]));
    assert_eq!(f["kind"], "invariant");
    assert_eq!(f["node"], "n2");
    assert!(f["message"].as_str().unwrap().contains("file-exists"));
}

#[test]
fn a_guest_busy_loop_is_reported_as_a_hang() {
    let d = simple(1, None, "while :; do :; done", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--watchdog", "3"]);
    let f = failure_of(&r);
    assert_eq!(f["kind"], "guest_hang", "{r:?}");
    assert!(f["message"].as_str().unwrap().contains("without letting virtual time advance"));
}

#[test]
fn a_failure_replays_with_the_same_trace_hash() {
    let d = simple(3, Some("sleep 2; echo up"), "sleep 3; exit 7", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
    failure_of(&r);
    let j = r.json();
    let file = j["failure_file"].as_str().unwrap().to_string();
    let dir = std::path::Path::new(&file).parent().unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Space-time diagram") && html.contains("status 7"), "report lacks the failure");
    assert!(dir.join("trace.jsonl").is_file() && dir.join("console-n1.log").is_file());
    let rep = run(&["replay", "--quiet", &file, "--out", out.path().to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    let rj = rep.json();
    assert_eq!(rj["reproduced"], true);
    assert_eq!(rj["trace_hash"], j["trace_hash"]);

    // A corrupted failure file is bad input, named in the message.
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = out.path().join("bad.json");
    std::fs::write(&bad, text.replacen("\"seed\": 5", "\"seed\": 6", 1)).unwrap();
    let rep = run(&["replay", "--quiet", bad.to_str().unwrap()]);
    assert_eq!(rep.code, 2, "{rep:?}");
    assert!(rep.stderr.contains("bad.json") && rep.stderr.contains("checksum"), "{rep:?}");
}
