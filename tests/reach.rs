//! Reachability assertions: `@reached NAME` / `@sometimes NAME` on a guest
//! console are counted over a run, and `[[expect]] reached = "NAME"` fails
//! the run when no execution reaches NAME.

mod common;
use common::*;

/// A one-node cluster whose workload always reaches `always`, reaches
/// `coin` when the guest's first random byte is even (the entropy device's
/// bytes follow the seed), and never reaches `never`.
fn coin_cluster(expects: &[&str]) -> tempfile::TempDir {
    let expect: String = expects.iter().map(|n| format!("[[expect]]\nreached = {n:?}\n")).collect();
    simple(
        1,
        None,
        "echo '@reached always'; echo '@sometimes always'; \
         b=$(head -c1 /dev/urandom | od -An -tu1); [ $((b % 2)) = 0 ] && echo '@reached coin'; true",
        &expect,
    )
}

#[test]
fn names_are_counted_and_an_expected_one_that_shows_passes() {
    let d = coin_cluster(&["always", "coin"]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--executions", "8", "--seed", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["reached"]["always"]["executions"], 8, "{j}");
    assert_eq!(j["reached"]["always"]["hits"], 16, "@reached and @sometimes both count: {j}");
    let coin = j["reached"]["coin"]["executions"].as_u64().unwrap();
    assert!(coin > 0 && coin < 8, "a coin flip per execution, 8 executions: {coin}");
    assert_eq!(j["reached"]["coin"]["hits"], coin);
    assert_eq!(j["unreached"], serde_json::json!([]));
}

#[test]
fn an_expected_name_never_reached_fails_the_run() {
    let d = coin_cluster(&["always", "never"]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--executions", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("NOT REACHED") && r.stderr.contains("\"@reached never\""), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["unreached"], serde_json::json!(["never"]));
    assert_eq!(j["reached"]["never"]["executions"], 0);
    assert_eq!(j["failures"], 0, "no execution failed: the run did");
}

#[test]
fn a_bad_expect_name_is_bad_input() {
    for name in ["", "two words"] {
        let d = coin_cluster(&[name]);
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 2, "{name:?}: {r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("[[expect]]"), "{}", r.stderr);
    }
}
