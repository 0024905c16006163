//! Ctrl-C (or SIGTERM) during a run takes every node down with simcluster:
//! no guest process outlives it, its scratch directory is gone, and the
//! exit code is 130. Before, the node kernels died with simcluster but the
//! host processes behind their guest programs were left running.

mod common;
use common::*;

use std::time::{Duration, Instant};

/// Polls `done` every 50 ms for up to `limit`: a watchdog, not a measure.
/// Its expiry fails the test as "no result" (the check never got to run, or
/// never saw its condition), never passes it.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let began = Instant::now();
    while began.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

fn interrupt_a_busy_run(signal: libc::c_int, extra: &[&str], processes: usize) {
    // Two guest programs that spin, so the run is still going when the
    // signal comes.
    let d = simple(2, None, "sh -c 'while :; do :; done' & sh -c 'while :; do :; done'; true", "");
    let out = tempfile::tempdir().unwrap();
    let mut child = bin()
        .args(["run", "--quiet", "--images"])
        .arg(d.path())
        .arg("--out")
        .arg(out.path())
        .args(extra)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let scratch = std::env::temp_dir().join(format!("simcluster-{}", child.id()));
    // The nodes are up, then give the workload's programs time to start
    // (their host processes are the ones that used to be left behind).
    assert!(
        wait_until(Duration::from_secs(60), || testkit::proc::below(child.id()).len() >= processes),
        "no result: the 60 s wall-clock watchdog fired before the nodes came up below simcluster ({})",
        child.id()
    );
    std::thread::sleep(Duration::from_secs(2));
    let nodes = testkit::proc::below(child.id());
    let before = nodes.len();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let left: Vec<u32> = {
        let mut left = vec![];
        // Generous: a loaded 2-core machine reaps slowly; the processes are
        // gone at once when all is well, and this is the only bound.
        wait_until(Duration::from_secs(30), || {
            left = testkit::proc::running(&nodes);
            left.is_empty()
        });
        left
    };
    assert!(
        left.is_empty(),
        "{} of {before} processes outlived simcluster: still running when the 30 s wall-clock watchdog fired: {left:?}",
        left.len()
    );
    assert!(!scratch.exists(), "{} is left behind", scratch.display());
    assert!(!out.path().join("last").exists(), "a half-finished execution was written");
}

#[test]
fn ctrl_c_takes_the_nodes_down() {
    interrupt_a_busy_run(libc::SIGINT, &[], 4);
}

#[test]
fn sigterm_takes_the_nodes_down() {
    interrupt_a_busy_run(libc::SIGTERM, &[], 4);
}

#[test]
fn ctrl_c_takes_down_every_job_of_a_parallel_run() {
    // Two executions side by side: both jobs' nodes are up (two nodes of
    // two processes each, per job) when the signal comes.
    interrupt_a_busy_run(libc::SIGINT, &["--executions", "4", "--jobs", "2", "--pin", "off"], 8);
}
