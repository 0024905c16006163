//! The checker's strategies on the example clusters with known bugs
//! (guest-images/examples): each strategy finds each bug within a stated
//! number of executions, replay reproduces what any strategy found, shrink
//! makes a failing trace strictly shorter, a liveness failure gets its
//! critical transition, exhaustive strategies stop, and budgets bound runs.
//!
//! The bounds are what scripts/bench-strategies.sh measured, with slack;
//! the figures are in the README.

mod common;
use common::*;

/// Runs `strategy` on `example` for at most `bound` executions, stopping at
/// the first failure; returns the 1-based execution that failed.
fn executions_to_find(example: &str, strategy: &str, bound: u64, extra: &[&str]) -> u64 {
    let dir = examples().unwrap().join(example);
    let out = tempfile::tempdir().unwrap();
    let b = bound.to_string();
    let mut args = vec!["--strategy", strategy, "--executions", &b, "--until-failure", "--critical-walks", "0"];
    args.extend_from_slice(extra);
    let r = run_cluster(&dir, out.path(), &args);
    assert_eq!(r.code, 1, "{strategy} did not find the bug of {example} within {bound} executions: {r:?}");
    let j = r.json();
    assert_eq!(j["strategy"], strategy);
    let first = j["failing_execution"].as_u64().unwrap() + 1;
    // The failure replays exactly, whatever strategy found it.
    let file = j["failure_file"].as_str().unwrap();
    let rep = run(&["replay", "--quiet", file, "--out", out.path().to_str().unwrap()]);
    if rep.code != 0 {
        // Keep both traces for whoever reads the failure.
        let kept = out.keep();
        panic!("{strategy} on {example}: replay did not reproduce (outputs kept in {}): {rep:?}", kept.display());
    }
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
    println!("{strategy} found the {example} bug in execution {first}");
    first
}

const STRATEGIES: [&str; 4] = ["random", "pct", "delay", "dfs"];

/// Every strategy finds `example`'s bug within `bound` executions. The
/// short tier (`testkit::by_tier`) runs one strategy per example, `short`,
/// a different one for each of the four examples, so every strategy still
/// finds a bug there and is replayed; the full tier runs all four on each.
fn every_strategy_finds(example: &str, bound: u64, short: &str) {
    if examples().is_none() {
        return;
    }
    let strategies: &[&str] = testkit::by_tier(std::slice::from_ref(&short), &STRATEGIES);
    for s in strategies {
        executions_to_find(example, s, bound, &[]);
    }
}

#[test]
fn every_strategy_finds_the_crash_of_the_primary() {
    every_strategy_finds("crash-primary", 12, "random");
}

#[test]
fn every_strategy_finds_the_reorder_bug() {
    every_strategy_finds("reorder", 4, "pct");
}

#[test]
fn every_strategy_finds_the_split_brain_under_partition() {
    every_strategy_finds("partition", 2, "delay");
}

#[test]
fn every_strategy_finds_the_acknowledged_write_lost_by_rename_without_fsync() {
    every_strategy_finds("rename-unsafe", 6, "dfs");
}

#[test]
fn a_liveness_failure_reports_its_critical_transition() {
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    // Seed 1 loses a token frame (loss = 0.1 per frame).
    let r = run_cluster(&ex.join("liveness"), out.path(), &["--seed", "1", "--critical-walks", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failure"]["kind"], "liveness", "{j}");
    let c = &j["critical_transition"];
    assert!(c.is_object(), "no critical transition: {j}");
    let step = c["step"].as_u64().unwrap();
    assert!(step > 0, "{c}");
    assert!(c["probes"].as_u64().unwrap() >= 2, "{c}");
    // The token frame that was lost left before the critical step: the
    // step is after boot and before the deadline.
    let t = c["virtual_seconds"].as_f64().unwrap();
    assert!(t > 0.0 && t < 61.0, "{c}");
    let report = std::fs::read_to_string(out.path().join("failures/execution-0/report.txt")).unwrap();
    assert!(report.contains("Critical transition"), "{report}");
    // The probes replay a prefix of k steps (lookahead counts the steps a
    // node took by itself) and calm the rest: the same transition, probe
    // for probe, without lookahead.
    let out_off = tempfile::tempdir().unwrap();
    let args = ["--seed", "1", "--critical-walks", "1", "--lookahead", "off"];
    let off = run_cluster(&ex.join("liveness"), out_off.path(), &args).json();
    assert_eq!(off["critical_transition"], *c, "with lookahead: {c}\nwithout: {}", off["critical_transition"]);
    assert_eq!(off["trace_hash"], j["trace_hash"]);
}

#[test]
fn shrink_returns_a_strictly_shorter_failing_trace_that_replays() {
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    // The reorder bug under a random walk with a clock window: many
    // decisions, most of them irrelevant to the failure.
    let r = run_cluster(&ex.join("reorder"), out.path(), &["--window", "2ms"]);
    assert_eq!(r.code, 1, "{r:?}");
    let file = r.json()["failure_file"].as_str().unwrap().to_string();
    let s = run(&["shrink", "--quiet", &file, "--max-executions", "12", "--out", out.path().to_str().unwrap()]);
    assert_eq!(s.code, 0, "{s:?}");
    let j = s.json();
    assert!(j["decisions"].as_u64() < j["original_decisions"].as_u64(), "{j}");
    assert!(j["events"].as_u64() <= j["original_events"].as_u64(), "{j}");
    let shrunk = j["failure_file"].as_str().unwrap();
    assert!(shrunk.ends_with("shrunk/failure.json"));
    let rep = run(&["replay", "--quiet", shrunk, "--out", out.path().to_str().unwrap()]);
    assert_eq!(rep.code, 0, "the shrunk failure does not replay: {rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
}

/// Without --horizon, delay-all measures it on execution 0 (the default
/// schedule, no delay) and places its delays over that many races (choice
/// points a guest can tell apart): the horizon recorded is execution 0's
/// races, far fewer than its choice points, and the executions after it
/// each differ from it.
#[test]
fn delay_all_measures_its_horizon_on_the_default_schedule() {
    // The reorder example: a client and a replica exchanging datagrams (its
    // bug may or may not show in these four executions).
    let Some(ex) = examples() else { return };
    let out = tempfile::tempdir().unwrap();
    let args = ["--strategy", "delay-all", "--depth", "1", "--executions", "4"];
    let r = run_cluster(&ex.join("reorder"), out.path(), &args);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("shard.json")).unwrap()).unwrap();
    let horizon = record["identity"]["horizon"].as_u64().unwrap();
    let executions = record["executions"].as_array().unwrap();
    // One delay over `horizon` races: the default schedule, then one per race.
    assert_eq!(executions.len() as u64, 4.min(1 + horizon), "{record}");
    assert_eq!(horizon, executions[0]["race_points"].as_u64().unwrap().max(1), "{record}");
    assert!(horizon < executions[0]["choice_points"].as_u64().unwrap(), "races are a few choice points: {record}");
    let first = &executions[0]["trace_hash"];
    assert!(executions[1..].iter().any(|e| &e["trace_hash"] != first), "a delay changed nothing");
}

#[test]
fn delay_all_explores_every_placement_then_stops() {
    // One delay over a horizon of 3 choice points: the default schedule
    // plus 3 placements, then the strategy is exhausted.
    let d = simple(2, None, "sleep 1", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(
        d.path(),
        out.path(),
        &["--strategy", "delay-all", "--depth", "1", "--horizon", "3", "--executions", "50"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["executions"], 4, "{j}");
    assert_eq!(j["exhausted"], true, "{j}");
}

/// The time budget, checked by counts rather than by the host's speed: a
/// budget that is spent when the first execution ends (1 ns) stops the run
/// after exactly that one, whatever the host (without --executions the run
/// would go on forever); one that is not spent (1 h) stops nothing before
/// --executions does.
#[test]
fn a_time_budget_bounds_the_run() {
    let d = simple(1, None, "sleep 1", "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--time-budget", "1ns"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["executions"], 1, "a spent budget starts no execution after the first: {j}");
    assert!(j["executions_per_hour"].as_f64().unwrap() > 0.0);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--time-budget", "1h", "--executions", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["executions"], 2, "an unspent budget stops nothing: {}", r.json());
}

#[test]
fn strategies_are_deterministic_per_seed() {
    let Some(ex) = examples() else { return };
    for s in ["pct", "dfs"] {
        let hashes: Vec<String> = (0..2)
            .map(|_| {
                let out = tempfile::tempdir().unwrap();
                let r = run_cluster(&ex.join("crash-primary"), out.path(), &["--strategy", s, "--seed", "4"]);
                r.json()["trace_hash"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(hashes[0], hashes[1], "{s}");
    }
}
