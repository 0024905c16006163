//! `simcluster check --model list-append|rw-register`: transactional
//! histories (JSON lines or Jepsen's EDN) checked for the anomalies a
//! consistency model forbids; and the register model's failed compares.
//! No cluster boots here.

mod common;
use common::*;

fn fixture(name: &str) -> String {
    repo().join("tests/histories").join(name).to_str().unwrap().to_string()
}

/// Writes `text` as `name` in a temporary directory and runs `simcluster
/// check` on it with `args`.
fn check_text(name: &str, text: &str, args: &[&str]) -> (tempfile::TempDir, Run) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join(name);
    std::fs::write(&f, text).unwrap();
    let mut all = vec!["check", f.to_str().unwrap()];
    all.extend_from_slice(args);
    let r = run(&all);
    (d, r)
}

/// The G-single's cycle as txncheck prints it, and the reason of each edge.
const CYCLE: &str = "T0 (process 0) -rw x-> T1 (process 1) -wr y-> T0";
const RW: &str = "T0 read x = [], T1 appended 1 to x after that version: rw on x";
const WR: &str = "T1 appended 1 to y, T0 read y = [1]: wr on y";

#[test]
fn a_g_single_is_an_anomaly_under_serializable_and_allowed_under_read_committed() {
    let h = fixture("g-single.jsonl");
    let r = run(&["check", &h, "--model", "list-append"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["valid"], false);
    assert_eq!(j["model"], "list-append");
    assert_eq!(j["consistency"], "serializable", "the default consistency");
    assert_eq!(j["anomalies"], serde_json::json!({"G-single-item": 1}));
    assert_eq!(j["txns"]["total"], 3);
    assert_eq!(j["history"], h.as_str());
    for needle in ["G-single-item (1):", CYCLE, RW, WR] {
        assert!(r.stderr.contains(needle), "stderr lacks {needle:?}: {r:?}");
    }
    assert_eq!(r.stdout.lines().count(), 1, "{r:?}");

    let r = run(&["check", &h, "--model", "list-append", "--consistency", "read-committed"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!((j["valid"].clone(), j["consistency"].clone()), (true.into(), "read-committed".into()));
    assert_eq!(j["anomalies"], serde_json::json!({}));
    assert_eq!(j["also_found"], serde_json::json!({"G-single-item": 1}));
    assert!(r.stderr.contains("also found, allowed by read-committed: G-single-item (1)"), "{r:?}");
    // Snapshot isolation forbids G-single too.
    assert_eq!(run(&["check", &h, "--model", "list-append", "--consistency", "snapshot-isolation"]).code, 1);
}

#[test]
fn jepsens_edn_is_read_by_its_name_or_its_first_character() {
    let edn = fixture("g-single.edn");
    let r = run(&["check", &edn, "--model", "list-append"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["anomalies"], serde_json::json!({"G-single-item": 1}));
    assert!(r.stderr.contains("T0 (process 0) -rw 1-> T1 (process 1) -wr 2-> T0"), "{r:?}");
    // The nemesis op is skipped; the record form is read.
    assert_eq!(r.json()["txns"]["total"], 3);
    // Named otherwise: `{:` says EDN.
    let text = std::fs::read_to_string(&edn).unwrap();
    let (_d, r) = check_text("history.txt", &text, &["--model", "list-append", "--consistency", "read-committed"]);
    assert_eq!(r.code, 0, "{r:?}");
    // The register model reads JSON lines only, and says what to do.
    let r = run(&["check", &edn]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("g-single.edn") && r.stderr.contains("--model list-append"), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
}

#[test]
fn an_rw_register_history_is_checked_with_w_and_r() {
    let text = r#"{"type":"invoke","process":0,"time":1,"f":"txn","value":[["w","x",1]]}
{"type":"ok","process":0,"time":2,"f":"txn","value":[["w","x",1]]}
{"type":"invoke","process":1,"time":3,"f":"txn","value":[["r","x",null]]}
{"type":"ok","process":1,"time":4,"f":"txn","value":[["r","x",1]]}
"#;
    let (_d, r) = check_text("h.jsonl", text, &["--model", "rw-register", "--consistency", "strict-serializable"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["model"], "rw-register");
    assert!(r.stderr.contains("rw-register history, checked for strict-serializable: valid"), "{r:?}");
}

#[test]
fn bad_transactional_input_exits_2_naming_file_and_line() {
    let good = std::fs::read_to_string(fixture("g-single.jsonl")).unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    lines[2] = r#"{"type":"ok","process":0,"time":3,"f":"txn","value":[["r","x",[]],["r","z",[1]]]}"#;
    let (_d, r) = check_text("bad.jsonl", &lines.join("\n"), &["--model", "list-append"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("bad.jsonl: line 3:") && r.stderr.contains("does not match"), "{r:?}");
    assert!(r.stdout.is_empty(), "nothing half-written: {r:?}");

    let (_d, r) = check_text(
        "bad.edn",
        "{:type :invoke, :f :txn, :value [], :time 1, :process 0}\n{:type",
        &["--model", "list-append"],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("bad.edn: line 2:"), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");

    let (_d, r) = check_text("h.jsonl", &good, &["--model", "list-append", "--consistency", "linearizable"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("\"linearizable\"") && r.stderr.contains("strict-serializable"), "{r:?}");
    // A consistency model is for transactions; a txn history needs its model.
    let (_d, r) = check_text("h.jsonl", &good, &["--consistency", "serializable"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--consistency applies to --model list-append"), "{r:?}");
    let (_d, r) = check_text("h.jsonl", &good, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("h.jsonl: history line 1") && r.stderr.contains("add --model list-append"), "{r:?}");
    // A list-append history checked as rw-register: bad input, as --help says.
    let (_d, r) = check_text("h.jsonl", &good, &["--model", "rw-register"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("h.jsonl: line 1: op [r x []] is not rw-register"), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
}

/// What elle-cli's test data looks like (a JSON array, no `f`, no `time`)
/// and Elle's bundled paper example: read as they are, found invalid as
/// elle-cli's own tests expect.
#[test]
fn elle_cli_histories_are_read_and_judged_as_elle_does() {
    let elle = |name: &str| repo().join("txncheck/tests/elle").join(name).to_str().unwrap().to_string();
    for name in ["paper-example.json", "paper-example.edn"] {
        let r = run(&["check", &elle(name), "--model", "list-append", "--consistency", "strict-serializable"]);
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert_eq!(r.json()["anomalies"], serde_json::json!({"G-single-item": 1}), "{name}: {r:?}");
    }
    let r = run(&["check", &elle("rw-register.json"), "--model", "rw-register"]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn a_failed_compare_is_checked_as_a_read_of_another_value() {
    // x is 1 from the write's return on; the cas from 1 cannot have seen
    // anything else.
    let lines = [
        r#"{"process":0,"type":"invoke","time":1000,"f":"write","key":"x","value":1}"#,
        r#"{"process":0,"type":"ok","time":2000,"f":"write","key":"x","value":1}"#,
        r#"{"process":1,"type":"invoke","time":3000,"f":"cas","key":"x","from":1,"to":2}"#,
        r#"{"process":1,"type":"fail","time":4000,"f":"cas","key":"x","from":1,"to":2,"error":"compare-failed"}"#,
    ];
    let (_d, r) = check_text("h.jsonl", &(lines.join("\n") + "\n"), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["linearizable"], false);
    assert!(r.stderr.contains("its compare failed, so the register held something other than 1"), "{r:?}");
    // Without the marker a failed cas never happened (and says nothing).
    let unmarked = lines.join("\n").replace(r#","error":"compare-failed""#, "");
    let (_d, r) = check_text("h.jsonl", &unmarked, &[]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// A cluster whose client prints a transactional history (the G-single
/// fixture) with `[check] model = "list-append"`: the run fails with the
/// anomaly named in the failure, counted in the JSON line's `anomalies`,
/// and passes when the cluster claims only read-committed.
#[test]
fn a_run_reports_the_anomalies_of_its_history() {
    let history = std::fs::read_to_string(fixture("g-single.jsonl")).unwrap();
    let script = format!("#!/bin/sh\necho '@history begin'\ncat <<'H'\n{}H\necho '@history end'\n", history);
    for (consistency, code) in [("serializable", 1), ("read-committed", 0)] {
        let toml = format!(
            "[cluster]\nnodes = 1\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/client\" = \"client\" }}\n[workload]\nnode = \"n1\"\n\
             command = \"/usr/local/bin/client\"\n[check]\nhistory = \"n1\"\nmodel = \"list-append\"\n\
             consistency = \"{consistency}\"\n"
        );
        let dir = cluster(&toml, &[("client", &script)]);
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(dir.path(), out.path(), &["--seed", "1"]);
        assert_eq!(r.code, code, "{consistency}: {r:?}");
        let j = r.json();
        if code == 1 {
            assert_eq!(j["anomalies"], serde_json::json!({"G-single-item": 1}), "{j}");
            let message = j["failure"]["message"].as_str().unwrap();
            assert!(message.contains("history is not serializable (list-append): G-single-item (1)"), "{message}");
            assert!(message.contains(CYCLE), "{message}");
        } else {
            assert!(j.get("anomalies").is_none(), "{j}");
        }
    }
}
