//! Ctrl-C (or SIGTERM) during a run takes every node down with simcluster:
//! no guest process outlives it, its scratch directory is gone, and the
//! exit code is 130. Before, the node kernels died with simcluster but the
//! host processes behind their guest programs were left running.

mod common;
use common::*;

use std::time::{Duration, Instant};

/// The processes below `root` (by their parent links): a node's
/// processes, its jail's included. Each with its start time (field 22 of
/// /proc/PID/stat), so that a pid used again later is not taken for one of
/// them.
fn processes_below(root: u32) -> Vec<(u32, u64)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
    let stats: Vec<(u32, u32, u64)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            Some((pid, after.get(1)?.parse().ok()?, after.get(19)?.parse().ok()?))
        })
        .collect();
    let parent = |pid: u32| stats.iter().find(|s| s.0 == pid).map(|s| s.1);
    stats
        .iter()
        .filter(|(pid, _, _)| {
            let mut p = *pid;
            for _ in 0..32 {
                match parent(p) {
                    Some(q) if q == root => return true,
                    Some(q) if q > 1 => p = q,
                    _ => return false,
                }
            }
            false
        })
        .map(|(pid, _, start)| (*pid, *start))
        .collect()
}

/// Those of `processes` that still run.
fn still_running(processes: &[(u32, u64)]) -> Vec<u32> {
    processes
        .iter()
        .filter(|(pid, start)| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            let after: Vec<&str> =
                stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
            after.get(19).and_then(|v| v.parse::<u64>().ok()) == Some(*start) && after.first() != Some(&"Z")
        })
        .map(|(pid, _)| *pid)
        .collect()
}

/// Polls `done` every 50 ms for up to `limit`.
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
        wait_until(Duration::from_secs(60), || processes_below(child.id()).len() >= processes),
        "the nodes did not come up below simcluster ({})",
        child.id()
    );
    std::thread::sleep(Duration::from_secs(2));
    let nodes = processes_below(child.id());
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
            left = still_running(&nodes);
            left.is_empty()
        });
        left
    };
    assert!(left.is_empty(), "{} of {before} processes outlived simcluster: {left:?}", left.len());
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
