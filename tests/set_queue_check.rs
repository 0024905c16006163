//! `[check] model = "set" | "queue"` and `simcluster check --model set |
//! queue`: Jepsen's set-full and total-queue checks, so that "every
//! acknowledged write survives" needs no invariant of the cluster's own.
//! The cluster tests boot guest-images/examples/ack-unsafe-set (a store
//! that acknowledges from the page cache and loses values at a crash) and
//! its twin ack-safe-set, and a one-node cluster whose guest prints a
//! queue history; the others check history files, no cluster.
//!
//! Bounds count executions (deterministic for a seed), never wall time.

mod common;
use common::*;

/// Writes `text` as history.jsonl in a temporary directory and runs
/// `simcluster check` on it with `args`.
fn check_text(text: &str, args: &[&str]) -> (tempfile::TempDir, Run) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("history.jsonl");
    std::fs::write(&f, text).unwrap();
    let mut all = vec!["check", f.to_str().unwrap()];
    all.extend_from_slice(args);
    let r = run(&all);
    (d, r)
}

/// An add of `v` acknowledged, then a read of `[1]` at 5 µs (2 was lost)
/// and a read of `[1, 2]` at 3 µs: 2 was seen, then missed.
const SET: &str = r#"{"process":0,"type":"invoke","time":1000,"f":"add","value":1}
{"process":0,"type":"ok","time":1100,"f":"add","value":1}
{"process":0,"type":"invoke","time":1200,"f":"add","value":2}
{"process":0,"type":"ok","time":1300,"f":"add","value":2}
{"process":1,"type":"invoke","time":3000,"f":"read","value":null}
{"process":1,"type":"ok","time":3100,"f":"read","value":[1,2]}
{"process":1,"type":"invoke","time":5000,"f":"read","value":null}
{"process":1,"type":"ok","time":5100,"f":"read","value":[1]}
"#;

#[test]
fn check_model_set_names_the_lost_element_and_the_reads_that_show_it() {
    let (_d, r) = check_text(SET, &["--model", "set"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!((j["valid"].clone(), j["model"].clone()), (serde_json::json!(false), serde_json::json!("set")));
    assert_eq!(j["lost"], serde_json::json!([2]));
    assert_eq!(j["counts"]["lost"], 1);
    assert_eq!(j["stable_count"], 1);
    assert!(
        r.stderr.contains(
            "lost 2:\n  acknowledged by #1 p0 add 2 [1200..1300] ok (line 3)\n  last seen by #2 p1 read -> {1 2} \
             [3000..3100] ok (line 5)\n  missed by #3 p1 read -> {1} [5000..5100] ok (line 7)"
        ),
        "{r:?}"
    );

    // Without the lost element's add, the rest passes; without any read,
    // there is no verdict (exit 4).
    let passing: String = SET
        .lines()
        .filter(|l| !l.contains("\"value\":2") && !l.contains("[1]"))
        .map(|l| l.to_string() + "\n")
        .collect();
    let passing = passing.replace("[1,2]", "[1]");
    let (_d, r) = check_text(&passing, &["--model", "set"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["valid"], true);
    let unread: String = SET.lines().take(4).map(|l| l.to_string() + "\n").collect();
    let (_d, r) = check_text(&unread, &["--model", "set"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert_eq!(r.json()["valid"], serde_json::Value::Null);

    // A queue model on a set history, a set history with a transactional
    // consistency: bad input, naming the file and the line.
    let (_d, r) = check_text(SET, &["--model", "queue"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("history.jsonl: line 1: function \"add\" is not one of this model's"), "{r:?}");
    let (_d, r) = check_text(SET, &["--model", "set", "--consistency", "serializable"]);
    assert_eq!(r.code, 2, "{r:?}");
    let (_d, r) = check_text(SET, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("history line 1: ") && r.stderr.contains("(a set history? add --model set)"), "{r:?}");
}

/// Jepsen's history.edn of a set-full test reads as its JSON lines do.
#[test]
fn check_model_set_reads_jepsens_edn() {
    let edn = r#"{:type :invoke, :f :add, :value 1, :process 0, :time 1000, :index 0}
{:type :ok, :f :add, :value 1, :process 0, :time 1100, :index 1}
{:type :info, :f :kill, :value nil, :process :nemesis, :time 1150, :index 2}
{:type :invoke, :f :add, :value 2, :process 0, :time 1200, :index 3}
{:type :ok, :f :add, :value 2, :process 0, :time 1300, :index 4}
{:type :invoke, :f :read, :value nil, :process 1, :time 3000, :index 5}
{:type :ok, :f :read, :value #{1 2}, :process 1, :time 3100, :index 6}
{:type :invoke, :f :read, :value nil, :process 1, :time 5000, :index 7}
{:type :ok, :f :read, :value #{1}, :process 1, :time 5100, :index 8}
"#;
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("history.edn");
    std::fs::write(&f, edn).unwrap();
    let r = run(&["check", f.to_str().unwrap(), "--model", "set"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["lost"], serde_json::json!([2]));
    assert!(r.stderr.contains("lost 2:\n  acknowledged by #1 p0 add 2 [1200..1300] ok (line 4)"), "{r:?}");
}

#[test]
fn check_model_set_with_linearizable_fails_a_stale_read() {
    // 1 acknowledged at 1.1 µs, missed by a read that began at 2 µs, seen at 4 µs.
    let stale = r#"{"process":0,"type":"invoke","time":1000,"f":"add","value":1}
{"process":0,"type":"ok","time":1100,"f":"add","value":1}
{"process":1,"type":"invoke","time":2000,"f":"read","value":null}
{"process":1,"type":"ok","time":2100,"f":"read","value":[]}
{"process":1,"type":"invoke","time":4000,"f":"read","value":null}
{"process":1,"type":"ok","time":4100,"f":"read","value":[1]}
"#;
    let (_d, r) = check_text(stale, &["--model", "set"]);
    assert_eq!(r.code, 0, "stale reads pass set-full by default: {r:?}");
    assert_eq!(r.json()["stale"], serde_json::json!([1]));
    let (_d, r) = check_text(stale, &["--model", "set", "--consistency", "linearizable"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("stale 1 (visible 0.001 ms after it was known)"), "{r:?}");
}

#[test]
fn check_model_queue_finds_lost_unexpected_duplicated_and_recovered_elements() {
    let q = r#"{"process":0,"type":"invoke","time":10,"f":"enqueue","value":1}
{"process":0,"type":"ok","time":11,"f":"enqueue","value":1}
{"process":0,"type":"invoke","time":20,"f":"enqueue","value":2}
{"process":0,"type":"ok","time":21,"f":"enqueue","value":2}
{"process":0,"type":"invoke","time":30,"f":"enqueue","value":3}
{"process":0,"type":"info","time":31,"f":"enqueue","value":3}
{"process":1,"type":"invoke","time":40,"f":"dequeue","value":null}
{"process":1,"type":"ok","time":41,"f":"dequeue","value":2}
{"process":1,"type":"invoke","time":50,"f":"drain","value":null}
{"process":1,"type":"ok","time":51,"f":"drain","value":[2,3,9]}
"#;
    let (_d, r) = check_text(q, &["--model", "queue"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["model"], "queue");
    assert_eq!(j["counts"], serde_json::json!({"lost": 1, "unexpected": 1, "duplicated": 1, "recovered": 1}));
    assert_eq!(j["lost"], serde_json::json!([{"element": 1, "count": 1}]));
    assert!(r.stderr.starts_with("history fails total-queue: 1 lost (1), 1 unexpected (9)"), "{r:?}");
    assert!(r.stderr.contains("lost 1: acknowledged by\n  #0 p0 enqueue 1 [10..11] ok (line 1)"), "{r:?}");
    let drained = q.replace("[2,3,9]", "[1,3]");
    let (_d, r) = check_text(&drained, &["--model", "queue"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["counts"]["recovered"], 1);
}

/// `[check] model = "queue"` in a cluster run: a guest prints a queue
/// history whose drain misses an acknowledged enqueue; the run fails with
/// kind anomaly, the JSON line counts the lost element, and the message
/// names it with its enqueue.
#[test]
fn a_queue_history_a_guest_prints_is_checked_after_the_execution() {
    let lines = [
        r#"{"process":0,"type":"invoke","time":1000,"f":"enqueue","value":1}"#,
        r#"{"process":0,"type":"ok","time":2000,"f":"enqueue","value":1}"#,
        r#"{"process":0,"type":"invoke","time":3000,"f":"enqueue","value":2}"#,
        r#"{"process":0,"type":"ok","time":4000,"f":"enqueue","value":2}"#,
        r#"{"process":1,"type":"invoke","time":5000,"f":"drain"}"#,
        r#"{"process":1,"type":"ok","time":6000,"f":"drain","value":[2]}"#,
    ];
    let mut cmd = String::from("echo '@history begin'; ");
    for l in lines {
        cmd.push_str(&format!("echo '{l}'; "));
    }
    cmd.push_str("echo '@history end'");
    let d = simple(1, None, &cmd, "[check]\nhistory = \"n1\"\nmodel = \"queue\"\n");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failure"]["kind"], "anomaly", "{j}");
    assert_eq!(j["anomalies"], serde_json::json!({"lost": 1}), "{j}");
    let msg = j["failure"]["message"].as_str().unwrap();
    assert!(
        msg.contains(
            "history fails total-queue: 1 lost (1); 2 enqueues attempted, 2 acknowledged, 1 dequeued\nlost 1: \
             acknowledged by\n  #0 p0 enqueue 1 [1000..2000] ok (line 1)"
        ),
        "{msg}"
    );
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert!(trace.contains(r#""name":"history-total-queue","ok":false"#), "{trace}");
}

/// ack-unsafe-set: n2 acknowledges values from the page cache; a crash
/// loses them, and the set check finds each lost value with its
/// acknowledged add and the read that misses it, as a failure of kind
/// anomaly whose JSON line counts them. `simcluster check` gives the same
/// verdict on the history kept beside the failure file, and the failure
/// replays.
#[test]
fn a_set_history_shows_acknowledged_adds_lost_at_a_crash() {
    let Some(examples) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let args = ["--executions", "4", "--until-failure", "--seed", "1", "--critical-walks", "0"];
    let r = run_cluster(&examples.join("ack-unsafe-set"), out.path(), &args);
    assert_eq!(r.code, 1, "no acknowledged add lost within 4 executions: {r:?}");
    let j = r.json();
    let f = &j["failure"];
    assert_eq!(f["kind"], "anomaly", "{j}");
    let msg = f["message"].as_str().unwrap();
    assert!(msg.starts_with("[check] history on n1: history fails set-full: "), "{msg}");
    assert!(msg.contains("\nlost 1:\n  acknowledged by #0 p0 add 1 ["), "{msg}");
    assert!(msg.contains("  missed by #10 p0 read -> {"), "{msg}");
    let lost = j["anomalies"]["lost"].as_u64().expect("the JSON line counts the lost elements");
    assert!((1..=10).contains(&lost), "{j}");
    let file = j["failure_file"].as_str().unwrap();
    let history = std::path::Path::new(file).with_file_name("history.jsonl");
    let c = run(&["check", history.to_str().unwrap(), "--model", "set"]);
    assert_eq!(c.code, 1, "{c:?}");
    assert_eq!(c.json()["counts"]["lost"], lost);
    let rep = run(&["replay", "--quiet", file, "--out", out.path().join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "replay did not reproduce: {rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
}

/// ack-safe-set: the same workload against the store that syncs before
/// acknowledging passes the same set check through n2's crashes.
#[test]
fn a_set_history_of_a_store_that_syncs_passes() {
    let Some(examples) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let n = testkit::by_tier("4", "12");
    let r = run_cluster(
        &examples.join("ack-safe-set"),
        out.path(),
        &["--executions", n, "--seed", "1", "--critical-walks", "0"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["failures"], 0, "{j}");
    assert!(j["crash_states_explored"].as_u64().unwrap() >= 1, "no crash was explored: {j}");
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert!(
        trace.contains("set-full finds 10 elements added, 10 stable (0 stale), 0 never read, none lost"),
        "{trace}"
    );
}
