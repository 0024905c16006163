//! A run on an existing cluster engine: a Slurm job array of two tasks,
//! each one shard (scripts/slurm/simcluster-array.sbatch), merged, equals
//! the unsharded run. Needs a Slurm that takes jobs: scripts/test.sh starts
//! one on this machine (scripts/slurm/local.sh); elsewhere the test says
//! why it skips.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::Command;

/// SLURM_CONF of a running Slurm: the environment's, else the local one
/// scripts/slurm/local.sh starts; `None` with the skip recorded.
fn slurm_conf() -> Option<PathBuf> {
    let conf = std::env::var_os("SLURM_CONF").map(PathBuf::from).unwrap_or_else(|| {
        let dir = std::env::var_os("SIMCLUSTER_SLURM_DIR").map_or("/tmp/simcluster-slurm".into(), PathBuf::from);
        dir.join("slurm.conf")
    });
    let up = Command::new("sinfo").args(["-h", "-o", "%t"]).env("SLURM_CONF", &conf).output();
    match up {
        Ok(o)
            if o.status.success()
                && String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.starts_with("idle") || l.starts_with("mix")) =>
        {
            Some(conf)
        }
        Ok(o) => {
            testkit::skip(
                testkit::Cause::Missing,
                format!(
                    "no Slurm node takes jobs ({}: {}); scripts/slurm/local.sh start runs one here",
                    conf.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            );
            None
        }
        Err(e) => {
            testkit::skip(
                testkit::Cause::Missing,
                format!("sinfo cannot run ({e}); scripts/slurm/local.sh start installs and runs Slurm here"),
            );
            None
        }
    }
}

#[test]
fn a_slurm_array_of_two_shards_merged_equals_the_unsharded_run() {
    let Some(conf) = slurm_conf() else { return };
    let Some(ex) = examples() else { return };
    let cluster = ex.join("crash-primary");
    let args = ["--images", cluster.to_str().unwrap(), "--executions", "6", "--seed", "5", "--quiet"];
    let whole = tempfile::tempdir().unwrap();
    // run_cluster gives --images and --quiet itself.
    let mut a = args[2..args.len() - 1].to_vec();
    a.extend_from_slice(&["--jobs", "1"]);
    let unsharded = run_cluster(&cluster, whole.path(), &a).json();

    // Slurm's own processes write the task logs: a directory they can reach.
    let out = tempfile::tempdir().unwrap();
    // sbatch --wait blocks until the array ends; a Slurm that never runs it
    // must fail the test, not hang the suite: coreutils' timeout ends it
    // after 10 minutes (the two tasks take well under one here), and
    // Slurm's own --time limit ends the tasks.
    let sbatch = Command::new("timeout")
        .args(["600", "sbatch", "--time=10"])
        .env("SLURM_CONF", &conf)
        .env("SIMCLUSTER", env!("CARGO_BIN_EXE_simcluster"))
        .arg("--wait")
        .arg("--array=1-2")
        .arg(format!("--output={}/task-%a.log", out.path().display()))
        .arg(repo().join("scripts/slurm/simcluster-array.sbatch"))
        .arg(out.path())
        .args(args)
        .output()
        .expect("sbatch runs");
    let logs: String = (1..=2)
        .map(|k| std::fs::read_to_string(out.path().join(format!("task-{k}.log"))).unwrap_or_default())
        .collect();
    assert!(
        sbatch.status.success(),
        "sbatch: {}\n{}\ntask logs:\n{logs}",
        String::from_utf8_lossy(&sbatch.stdout),
        String::from_utf8_lossy(&sbatch.stderr)
    );
    let shards: Vec<String> = (1..=2).map(|k| out.path().join(format!("shard-{k}")).display().to_string()).collect();
    let r = run(&["merge", &shards[0], &shards[1]]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    let merged = r.json();
    assert_eq!(merged["executions"], 6, "{merged}");
    assert_same_run(&unsharded, &merged, "unsharded vs merged");
    assert_eq!(failing(&unsharded), failing(&merged));
}
