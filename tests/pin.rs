//! `--pin`: simcluster and its nodes share one host CPU by default. It is
//! a host matter only: the trace is the same pinned or spread.

mod common;
use common::*;

#[test]
fn pinned_and_spread_runs_give_the_same_trace() {
    let dir = repo().join("guest-images/hello-cluster");
    let mut seen = Vec::new();
    // A CPU this process may run on (scripts/test.sh runs tests pinned to
    // one CPU of the two, not always CPU 0).
    let cpu = simcluster::pin::allowed().first().expect("this process's affinity mask").to_string();
    for pin in ["auto", "off", cpu.as_str()] {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(&dir, out.path(), &["--seed", "4", "--pin", pin]);
        assert_eq!(r.code, 0, "--pin {pin}: {r:?}");
        let j = r.json();
        let cpu = &j["host_cpu"]["pinned_cpu"];
        match pin {
            "off" => assert!(cpu.is_null(), "--pin off pinned to {cpu}"),
            "auto" => assert!(cpu.is_u64(), "--pin auto did not pin: {j}"),
            n => assert_eq!(cpu.as_u64(), n.parse().ok(), "--pin {n} pinned to {cpu}"),
        }
        seen.push(j["trace_hash"].as_str().unwrap().to_string());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}

#[test]
fn a_cpu_out_of_reach_is_bad_input() {
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&repo().join("guest-images/hello-cluster"), out.path(), &["--pin", "1023"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--pin 1023"), "{}", r.stderr);
    let r = run_cluster(&repo().join("guest-images/hello-cluster"), out.path(), &["--pin", "fast"]);
    assert_eq!(r.code, 2, "{r:?}");
}
