//! `--jobs N`, `--shard K/N` and `simcluster merge`: executions run side by
//! side or on other machines are the same executions, reported the same
//! way, whatever N.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::Path;

/// Runs `cluster` with `args` and each --jobs; asserts the JSON lines (host
/// figures aside) and the failure directories are identical. Returns the
/// first run's JSON.
fn same_for_any_jobs(cluster: &Path, args: &[&str], jobs: &[&str]) -> serde_json::Value {
    let mut first: Option<(serde_json::Value, BTreeMap<String, Vec<u8>>)> = None;
    for j in jobs {
        let out = tempfile::tempdir().unwrap();
        let mut a = args.to_vec();
        a.extend_from_slice(&["--jobs", j]);
        let r = run_cluster(cluster, out.path(), &a);
        assert!(r.code == 0 || r.code == 1, "--jobs {j}: {r:?}");
        let line = r.json();
        assert_eq!(line["jobs"].as_u64().unwrap().to_string(), *j, "{line}");
        let failures = files(&out.path().join("failures"));
        match &first {
            None => first = Some((line, failures)),
            Some((l0, f0)) => {
                assert_same_run(l0, &line, &format!("--jobs {j} vs {}", jobs[0]));
                assert_eq!(failing(l0), failing(&line));
                assert_eq!(
                    f0.keys().collect::<Vec<_>>(),
                    failures.keys().collect::<Vec<_>>(),
                    "--jobs {j}: failure files"
                );
                for (name, bytes) in f0 {
                    assert!(failures[name] == *bytes, "--jobs {j}: {name} differs");
                }
            }
        }
    }
    first.unwrap().0
}

#[test]
fn jobs_do_not_change_results() {
    let Some(ex) = examples() else { return };
    // crash-primary fails in some executions (3 of these 6) and passes in
    // others, so failure files and passes are compared too.
    let j = same_for_any_jobs(&ex.join("crash-primary"), &["--executions", "6", "--seed", "2"], &["1", "2", "3"]);
    assert!(j["failures"].as_u64().unwrap() >= 1, "a failure to compare: {j}");
    assert!(j["failures"].as_u64().unwrap() < 6, "a pass to compare: {j}");
    assert_eq!(j["executions"], 6);
    let listed = failing(&j);
    assert_eq!(listed.len() as u64, j["failures"].as_u64().unwrap());
    assert!(listed.windows(2).all(|w| w[0].0 < w[1].0), "lowest index first: {listed:?}");
    assert_eq!(j["failing_execution"].as_u64(), Some(listed[0].0));
}

#[test]
#[ignore = "full tier: twelve executions under three --jobs values; jobs_do_not_change_results checks --jobs in the short tier"]
fn until_failure_stops_at_the_same_execution_for_any_jobs() {
    let Some(ex) = examples() else { return };
    let j = same_for_any_jobs(
        &ex.join("crash-primary"),
        &["--executions", "12", "--seed", "3", "--until-failure"],
        &["1", "2"],
    );
    let f = j["failing_execution"].as_u64().expect("a failure");
    assert_eq!(j["failures"], 1, "{j}");
    assert!(j["executions"].as_u64().unwrap() > f, "{j}");
}

#[test]
#[ignore = "full tier: dfs and delay-all over many executions"]
fn exhaustive_strategies_split_their_work_deterministically() {
    let Some(ex) = examples() else { return };
    let reorder = ex.join("reorder");
    // dfs: rounds side by side, numbered in round order afterwards.
    let j = same_for_any_jobs(&reorder, &["--executions", "6", "--strategy", "dfs", "--depth", "2"], &["1", "2"]);
    assert_eq!(j["executions"], 6, "{j}");
    // delay-all: every placement once, then exhausted.
    let j = same_for_any_jobs(
        &reorder,
        &["--executions", "50", "--strategy", "delay-all", "--depth", "1", "--horizon", "3"],
        &["1", "2"],
    );
    assert_eq!(j["exhausted"], true, "{j}");
    assert_eq!(j["executions"], 4, "no delay, or one at each of 3 choice points: {j}");
}

#[test]
fn two_shards_merged_equal_the_unsharded_run() {
    let Some(ex) = examples() else { return };
    let cluster = ex.join("crash-primary");
    let args = ["--executions", "6", "--seed", "3", "--jobs", "1"];
    let whole = tempfile::tempdir().unwrap();
    let unsharded = run_cluster(&cluster, whole.path(), &args).json();
    let shards: Vec<tempfile::TempDir> = (1..=2).map(|_| tempfile::tempdir().unwrap()).collect();
    for (k, d) in shards.iter().enumerate() {
        let mut a = args.to_vec();
        let s = format!("{}/2", k + 1);
        a.extend_from_slice(&["--shard", &s]);
        let r = run_cluster(&cluster, d.path(), &a);
        let j = r.json();
        assert_eq!(j["shard"], s.as_str(), "{r:?}");
        assert_eq!(j["executions"], 3, "shard {s} runs every other execution: {j}");
        assert!(d.path().join("shard.json").is_file());
    }
    let merged_out = tempfile::tempdir().unwrap();
    let r = run(&[
        "merge",
        shards[1].path().to_str().unwrap(),
        shards[0].path().to_str().unwrap(),
        "--out",
        merged_out.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, if unsharded["failures"] == 0 { 0 } else { 1 }, "{r:?}");
    let merged = r.json();
    assert_eq!(merged["shard"], "2 shards");
    assert_same_run(&unsharded, &merged, "unsharded vs merged");
    assert_eq!(failing(&unsharded), failing(&merged));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged_out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(written, merged);
    // The merged run's first failure replays alone, from its shard's files.
    let file = merged["failure_file"].as_str().expect("crash-primary fails in one of 6 executions");
    let replay_out = tempfile::tempdir().unwrap();
    let r = run(&["replay", "--quiet", "--out", replay_out.path().to_str().unwrap(), file]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["trace_hash"], merged["trace_hash"]);
}

#[test]
fn shards_that_do_not_belong_together_are_rejected() {
    let d = simple(1, None, "true", "");
    let shard = |k: &str, seed: &str| {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &["--executions", "2", "--seed", seed, "--shard", k]);
        assert_eq!(r.code, 0, "{r:?}");
        out
    };
    let (a, b, other_seed) = (shard("1/2", "1"), shard("2/2", "1"), shard("2/2", "9"));
    let path = |t: &tempfile::TempDir| t.path().to_str().unwrap().to_string();
    let merge = |dirs: &[String]| {
        let mut args = vec!["merge"];
        args.extend(dirs.iter().map(String::as_str));
        run(&args)
    };
    assert_eq!(merge(&[path(&a), path(&b)]).code, 0);
    let r = merge(&[path(&a), path(&other_seed)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains(&path(&other_seed)) && r.stderr.contains("seed"), "{}", r.stderr);
    let r = merge(&[path(&a), path(&a)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("already given"), "{}", r.stderr);
    let r = merge(&[path(&a)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("2/2 missing"), "{}", r.stderr);
    let not_a_shard = tempfile::tempdir().unwrap();
    std::fs::write(not_a_shard.path().join("shard.json"), "{\"half\": ").unwrap();
    let r = merge(&[path(&a), path(&not_a_shard)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("shard.json") && r.stderr.contains("not a shard result"), "{}", r.stderr);
}

#[test]
fn bad_shards_and_jobs_are_bad_input() {
    let d = simple(1, None, "true", "");
    let out = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["--shard", "3/2"][..], "K/N"),
        (&["--shard", "x"][..], "K/N"),
        (&["--jobs", "0"][..], "jobs"),
        (&["--executions", "2", "--shard", "3/4"][..], "none for shard 3"),
        (&["--executions", "4", "--strategy", "dfs", "--shard", "1/2"][..], "dfs cannot be sharded"),
        (&["--warm-start", "--runtime", "uml"][..], "--warm-start needs the KVM runtime"),
        (&["--warm-start", "lukewarm"][..], "fork"),
    ] {
        let r = run_cluster(d.path(), out.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    assert!(!out.path().join("shard.json").exists(), "nothing written for bad input");
}

/// The Kubernetes Indexed Job's entry point (deploy/k8s/shard-entry.sh),
/// run as its two pods would run it (JOB_COMPLETION_INDEX 0 and 1), merged,
/// equals the unsharded run; the manifest keeps completions, parallelism
/// and SHARDS equal.
#[test]
#[ignore = "full tier: shards as Kubernetes pods; two_shards_merged_equal_the_unsharded_run and tests/slurm.rs check shards in the short tier"]
fn an_indexed_jobs_pods_merged_equal_the_unsharded_run() {
    let Some(ex) = examples() else { return };
    let cluster = ex.join("crash-primary");
    let whole = tempfile::tempdir().unwrap();
    let unsharded = run_cluster(&cluster, whole.path(), &["--executions", "4", "--seed", "7", "--jobs", "1"]).json();
    let root = tempfile::tempdir().unwrap();
    let pod = |index: &str, shards: &str| {
        std::process::Command::new(repo().join("deploy/k8s/shard-entry.sh"))
            .env("JOB_COMPLETION_INDEX", index)
            .env("SHARDS", shards)
            .env("OUT_ROOT", root.path())
            .env("JOBS", "1")
            .env("SIMCLUSTER", env!("CARGO_BIN_EXE_simcluster"))
            .args(["--images", cluster.to_str().unwrap(), "--executions", "4", "--seed", "7", "--quiet"])
            .output()
            .unwrap()
    };
    for index in ["0", "1"] {
        let o = pod(index, "2");
        assert!(o.status.success(), "pod {index}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let shards: Vec<String> = (1..=2).map(|k| root.path().join(format!("shard-{k}")).display().to_string()).collect();
    let r = run(&["merge", &shards[0], &shards[1]]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    assert_same_run(&unsharded, &r.json(), "unsharded vs the Indexed Job's pods");
    let o = pod("2", "2");
    assert_eq!(o.status.code(), Some(2), "an index past SHARDS: {}", String::from_utf8_lossy(&o.stderr));

    let manifest = std::fs::read_to_string(repo().join("deploy/k8s/indexed-job.yaml")).unwrap();
    let value = |key: &str| -> String {
        let line = manifest.lines().find(|l| l.trim_start().starts_with(key)).unwrap_or_else(|| panic!("no {key}"));
        line.split_once(':').unwrap().1.trim().trim_matches('"').to_string()
    };
    assert_eq!(value("completionMode"), "Indexed");
    let shards_env = manifest.lines().skip_while(|l| !l.contains("name: SHARDS")).nth(1).unwrap();
    let shards_env = shards_env.split_once(':').unwrap().1.trim().trim_matches('"').to_string();
    assert_eq!(value("completions"), shards_env);
    assert_eq!(value("parallelism"), shards_env);
}
