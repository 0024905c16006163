//! Every failing execution of a run is replayable: each gets a failure
//! file (within `--failure-budget`), and `simcluster replay OUT --execution
//! I [--crash-state K]` replays it by its index, to the trace hash the run
//! recorded for it. Bad input (no such execution, one that passed, one
//! beyond the budget) exits 2 naming the directory.

mod common;
use common::*;
use std::path::Path;

/// One execution as the run's record (OUT/shard.json) has it.
#[derive(Clone, Debug)]
struct Recorded {
    execution: u64,
    crash_state: Option<u64>,
    trace_hash: String,
    failed: bool,
    failure_file: Option<String>,
}

/// The run's record of each execution.
fn executions(out: &Path) -> Vec<Recorded> {
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("shard.json")).unwrap()).unwrap();
    record["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| Recorded {
            execution: e["execution"].as_u64().unwrap(),
            crash_state: e["crash_state"].as_u64(),
            trace_hash: e["trace_hash"].as_str().unwrap().to_string(),
            failed: !e["failure"].is_null(),
            failure_file: e["failure_file"].as_str().map(str::to_string),
        })
        .collect()
}

fn replay_execution(out: &Path, i: u64, state: Option<u64>, to: &Path) -> Run {
    let (o, to) = (out.to_str().unwrap(), to.to_str().unwrap());
    let i = i.to_string();
    let mut args = vec!["replay", "--quiet", o, "--execution", &i, "--out", to];
    let k = state.map(|k| k.to_string());
    if let Some(k) = &k {
        args.extend(["--crash-state", k]);
    }
    run(&args)
}

#[test]
fn every_failing_execution_replays_by_its_index_whatever_the_jobs() {
    let Some(ex) = examples() else { return };
    let dir = ex.join("reorder");
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let args = |jobs: &'static str| ["--seed", "1", "--executions", "4", "--jobs", jobs];
    let r1 = run_cluster(&dir, one.path(), &args("1"));
    let r2 = run_cluster(&dir, two.path(), &args("2"));
    assert_eq!((r1.code, r2.code), (1, 1), "{r1:?}\n{r2:?}");
    let (j1, j2) = (r1.json(), r2.json());
    let failing = j1["failures"].as_u64().unwrap();
    assert!(failing >= 2, "the case needs several failing executions: {j1}");
    // Every failing execution has its failure file, with either --jobs.
    assert_eq!(j1["failure_files"]["written"], failing, "{j1}");
    assert_eq!(j1["failure_files"]["over_budget"], 0, "{j1}");
    assert_eq!(j1["failure_files"], j2["failure_files"], "the files written do not depend on --jobs");
    let (e1, e2) = (executions(one.path()), executions(two.path()));
    let strip = |e: &[Recorded]| {
        e.iter()
            .map(|r| (r.execution, r.crash_state, r.trace_hash.clone(), r.failed, r.failure_file.is_some()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&e1), strip(&e2));
    for r in &e1 {
        assert_eq!(r.failed, r.failure_file.is_some(), "a failure file for each failing execution only: {r:?}");
        if let Some(f) = &r.failure_file {
            assert!(Path::new(f).is_file(), "{f}");
        }
    }
    assert_eq!(j1["failing_executions"].as_array().unwrap().len() as u64, failing);
    // Replaying a later failing execution (not the first) by its index
    // gives the trace hash the run recorded for it.
    let later = e1.iter().filter(|e| e.failed).nth(1).expect("a second failing execution").clone();
    let replay_out = tempfile::tempdir().unwrap();
    let rep = replay_execution(one.path(), later.execution, None, replay_out.path());
    assert_eq!(rep.code, 0, "{rep:?}");
    let rj = rep.json();
    assert_eq!(rj["reproduced"], true, "{rj}");
    assert_eq!(rj["trace_hash"].as_str().unwrap(), later.trace_hash);
    assert!(replay_out.path().join("replay/trace.jsonl").is_file());

    // Bad input, naming the directory: an execution the run does not have,
    // a directory without --execution, a crash state it never had.
    let o = one.path().to_str().unwrap();
    let rep = replay_execution(one.path(), 99, None, replay_out.path());
    assert_eq!(rep.code, 2, "{rep:?}");
    assert!(rep.stderr.contains(o) && rep.stderr.contains("no execution 99"), "{rep:?}");
    let rep = run(&["replay", "--quiet", o]);
    assert_eq!(rep.code, 2, "{rep:?}");
    assert!(rep.stderr.contains(o) && rep.stderr.contains("--execution"), "{rep:?}");
    let rep = replay_execution(one.path(), later.execution, Some(5), replay_out.path());
    assert_eq!(rep.code, 2, "{rep:?}");
    assert!(rep.stderr.contains("crash state 5") && rep.stderr.contains("no crash-state siblings"), "{rep:?}");
    if let Some(passed) = e1.iter().find(|e| !e.failed) {
        let rep = replay_execution(one.path(), passed.execution, None, replay_out.path());
        assert_eq!(rep.code, 2, "{rep:?}");
        assert!(rep.stderr.contains(o) && rep.stderr.contains("passed"), "{rep:?}");
    } else {
        eprintln!("note: every execution of the run failed; the passing-execution message is checked below");
    }

    // A budget of 0: the first failure is still written whole, the others
    // are counted, and replaying one says why it cannot.
    let none = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, none.path(), &["--seed", "1", "--executions", "4", "--failure-budget", "0"]);
    let j = r.json();
    assert_eq!(j["failure_files"]["written"], 1, "{j}");
    assert_eq!(j["failure_files"]["over_budget"], failing - 1, "{j}");
    assert_eq!(j["failure_files"]["budget_bytes"], 0, "{j}");
    let rep = replay_execution(none.path(), later.execution, None, replay_out.path());
    assert_eq!(rep.code, 2, "{rep:?}");
    assert!(rep.stderr.contains("budget"), "{rep:?}");
}

/// A failing crash-state sibling replays by its execution and state.
#[test]
fn a_failing_crash_state_sibling_replays_by_its_state() {
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&ex.join("rename-unsafe"), out.path(), &["--executions", "3", "--seed", "4", "--jobs", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let all = executions(out.path());
    let sibling = all.iter().find(|e| e.crash_state.is_some() && e.failed).expect("a failing sibling").clone();
    let (i, k) = (sibling.execution, sibling.crash_state.unwrap());
    let file = sibling.failure_file.clone().unwrap_or_default();
    assert!(file.ends_with(&format!("execution-{i}-state{k}/failure.json")), "{sibling:?}");
    let to = tempfile::tempdir().unwrap();
    let rep = replay_execution(out.path(), i, Some(k), to.path());
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"].as_str().unwrap(), sibling.trace_hash);
    if let Some(passed) = all.iter().find(|e| !e.failed) {
        let rep = replay_execution(out.path(), passed.execution, passed.crash_state, to.path());
        assert_eq!(rep.code, 2, "{rep:?}");
        assert!(rep.stderr.contains(out.path().to_str().unwrap()) && rep.stderr.contains("passed"), "{rep:?}");
    }
}
