//! Looking around at a moment of a failing execution: `simcluster replay
//! FAILURE --until MOMENT --exec NODE CMD` and `--shell NODE`.
//!
//! On examples/ack-unsafe-lazy (n2 appends each acknowledged value to
//! /data/log and acknowledges from the page cache; a power loss of n2 takes
//! them): before the crash the file holds the acknowledged values, just
//! before the failure it holds only what n2 wrote after its restart. The
//! same moment and command print the same bytes every time.

mod common;
use common::*;

use std::io::Write;
use std::process::Stdio;

/// A failure of ack-unsafe-lazy (seed 1 loses values in execution 0) and
/// the directory holding it.
fn failure() -> Option<(String, serde_json::Value, tempfile::TempDir)> {
    let dir = examples()?.join("ack-unsafe-lazy");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--seed", "1", "--executions", "2", "--until-failure"]);
    assert_eq!(r.code, 1, "ack-unsafe-lazy seed 1 did not fail: {r:?}");
    let j = r.json();
    let file = j["failure_file"].as_str().expect("a failure file").to_string();
    Some((file, j, out))
}

/// The crash of n2 in that execution, in virtual seconds.
fn crash_time(j: &serde_json::Value) -> f64 {
    let points = j["crash_points"].as_array().expect("crash points");
    points.iter().find(|p| p["node"] == "n2").expect("n2 lost power")["virtual_seconds"].as_f64().unwrap()
}

fn exec_at(file: &str, until: &str, node: &str, cmd: &str) -> Run {
    run(&["replay", "--quiet", file, "--until", until, "--exec", node, cmd])
}

/// The lines of n2's log as numbers.
fn values(r: &Run) -> Vec<u32> {
    assert_eq!(r.code, 0, "{r:?}");
    r.stdout.lines().map(|l| l.trim().parse().unwrap_or_else(|_| panic!("not a value: {l:?} in {r:?}"))).collect()
}

#[test]
fn a_file_is_shown_as_it_was_at_each_moment_the_same_every_time() {
    let Some((file, j, _out)) = failure() else { return };
    let crash = crash_time(&j);
    let before = format!("{:.3}s", crash - 0.05);
    let at_before = exec_at(&file, &before, "n2", "cat /data/log");
    let acked = values(&at_before);
    assert!(!acked.is_empty(), "nothing acknowledged 50 ms before the crash at {crash} s: {at_before:?}");
    assert_eq!(acked, (1..=acked.len() as u32).collect::<Vec<_>>(), "{at_before:?}");
    // Same moment, same command: the same bytes.
    let again = exec_at(&file, &before, "n2", "cat /data/log");
    assert_eq!(again.stdout, at_before.stdout, "the same moment printed something else");
    // Just before the failure the power loss has taken them: the first
    // acknowledged value is gone (the violated invariant's cause, in view).
    let at_failure = exec_at(&file, "failure", "n2", "cat /data/log");
    let kept = values(&at_failure);
    assert!(!kept.contains(&1), "value 1 survived the power loss: {at_failure:?}");
    // Several commands run in order, on several nodes; the exit status is
    // the last one's.
    let r = run(&[
        "replay",
        "--quiet",
        &file,
        "--until",
        &before,
        "--exec",
        "n2",
        "wc -l < /data/log",
        "--exec",
        "n1",
        "exit 3",
    ]);
    assert_eq!(r.code, 3, "{r:?}");
    assert_eq!(r.stdout.trim(), acked.len().to_string(), "{r:?}");
}

#[test]
fn a_node_that_is_down_or_unknown_is_a_clear_error() {
    let Some((file, j, _out)) = failure() else { return };
    // n2 is powered off for `restart_after` (1 s) after its crash.
    let down = format!("{:.3}s", crash_time(&j) + 0.5);
    let r = exec_at(&file, &down, "n2", "true");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("n2 cannot run commands") && r.stderr.contains("powered off"), "{r:?}");
    let r = exec_at(&file, "1s", "n7", "true");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no node 'n7'") && r.stderr.contains(&file), "{r:?}");
    let r = run(&["replay", "--quiet", &file, "--until", "soon", "--exec", "n1", "true"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("'soon' is not a moment"), "{r:?}");
}

#[test]
fn the_shell_runs_lines_moves_on_and_goes_back() {
    let Some((file, j, _out)) = failure() else { return };
    let crash = crash_time(&j);
    let start = format!("{:.3}s", crash - 0.3);
    let script = format!(
        "wc -l < /data/log\n:where\n:advance 250ms\nwc -l < /data/log\n:node n1\nhostname\n:goto {start}\n:node n2\n\
         wc -l < /data/log\n:nonsense\n:quit\n"
    );
    let mut child = bin()
        .args(["replay", "--quiet", &file, "--until", &start, "--shell", "n2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}\n{stderr}");
    let (first, later, back): (u32, u32, u32) =
        (lines[0].trim().parse().unwrap(), lines[1].trim().parse().unwrap(), lines[3].trim().parse().unwrap());
    assert!(later >= first, "the log shrank while time went on: {first} -> {later}");
    assert_eq!(lines[2], "n1");
    assert_eq!(back, first, "going back to {start} showed another log: {stdout}");
    assert!(stderr.contains("unknown command :nonsense"), "{stderr}");
    assert!(stderr.contains("n2 at "), "':where' said nothing: {stderr}");
}
