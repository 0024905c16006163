//! scripts/test-summary.sh, the test suite's closing line, on made-up work
//! directories: a skipped test is not a passed one, and every failed stage,
//! crashed test binary or unbuilt target counts as failed, so a run that
//! exits 1 never says "0 failed".

use std::path::Path;
use std::process::Command;

/// One made-up run: `stages` lines, cargo tasks (name, exit code, log),
/// the skip log and the nested step's log.
struct Run<'a> {
    stages: &'a str,
    tasks: &'a [(&'a str, i32, &'a str)],
    skips: &'a str,
    nested: &'a str,
}

/// The summary's exit code and its last line.
fn summary(run: &Run) -> (i32, String, String) {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::create_dir(w.join("tasks")).unwrap();
    let mut queue = String::new();
    let mut results = String::new();
    for (n, (name, rc, log)) in run.tasks.iter().enumerate() {
        queue += &format!("{name}\n");
        if name.starts_with("cargo:") {
            results += &format!("{name} {rc} 3 2\n");
        }
        std::fs::write(w.join(format!("tasks/{}.log", n + 1)), log).unwrap();
    }
    let cargo_rc = i32::from(run.tasks.iter().any(|t| t.0.starts_with("cargo:") && t.1 != 0));
    let stages = format!("{}cargo-test {cargo_rc} 9 8\n", run.stages);
    for (file, text) in [
        ("stages", stages.as_str()),
        ("queue", &queue),
        ("cargo-results", &results),
        ("skips", run.skips),
        ("flakes", ""),
        ("nested.log", run.nested),
    ] {
        std::fs::write(w.join(file), text).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-summary.sh");
    let out = Command::new("bash").arg(script).arg(w).args(["short", "60"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let last = stdout.lines().last().unwrap_or("").to_string();
    (out.status.code().unwrap_or(-1), last, format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

const OK_LOG: &str = "     Running tests/a.rs (target/debug/deps/a-0123456789abcdef)\n\
running 3 tests\n\
test one ... ok\n\
test two ... ok\n\
test three ... ok\n\
\n\
test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.50s\n";

const GOOD: &str = "packages 0 1 0\nfmt 0 1 1\nbuild 0 40 30\ndeterminism 0 100 90\ngallery-bugs 0 80 70\n";

#[test]
fn a_skipped_test_is_counted_as_skipped_not_passed() {
    let (rc, last, all) = summary(&Run {
        stages: GOOD,
        tasks: &[("cargo:test:a", 0, OK_LOG)],
        skips: "a::two\thost\tno vmx/svm here\n",
        nested: "NESTED-COUNTS 4 0\n",
    });
    assert_eq!(rc, 0, "{all}");
    assert_eq!(last, "total: 6 passed, 0 failed, 1 skipped", "{all}");
}

#[test]
fn a_failed_stage_counts_as_failed() {
    for stage in ["gallery-bugs", "determinism", "fmt", "build", "packages"] {
        let stages = GOOD.replace(&format!("{stage} 0 "), &format!("{stage} 1 "));
        let (rc, last, all) =
            summary(&Run { stages: &stages, tasks: &[("cargo:test:a", 0, OK_LOG)], skips: "", nested: "" });
        assert_eq!(rc, 1, "{stage}: {all}");
        assert_eq!(last, "total: 3 passed, 1 failed, 0 skipped", "{stage}: {all}");
        assert!(all.contains(&format!("FAILED stages: {stage}")), "{all}");
    }
}

#[test]
fn a_crashed_binary_and_an_unbuilt_target_count_as_failed() {
    let crashed = "     Running tests/b.rs (target/debug/deps/b-0123456789abcdef)\n\
running 2 tests\n\
test first ... ok\n\
error: test failed, to rerun pass `--test b`\n\
Caused by:\n  process didn't exit successfully (signal: 6, SIGABRT: process abort signal)\n";
    let unbuilt = "error[E0425]: cannot find value `x` in this scope\n";
    let (rc, last, all) = summary(&Run {
        stages: GOOD,
        tasks: &[("cargo:test:a", 0, OK_LOG), ("cargo:test:b", 101, crashed), ("cargo:test:c", 101, unbuilt)],
        skips: "",
        nested: "",
    });
    assert_eq!(rc, 1, "{all}");
    assert_eq!(last, "total: 3 passed, 2 failed, 0 skipped", "{all}");
    assert!(all.contains("CRASHED test binary (started, no result line): b"), "{all}");
    assert!(all.contains("cargo:test:c"), "{all}");
}

#[test]
fn failed_tests_and_a_failed_nested_step_without_counts() {
    let failing = "     Running tests/a.rs (target/debug/deps/a-0123456789abcdef)\n\
test one ... ok\n\
test two ... FAILED\n\
test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.20s\n";
    let (rc, last, all) = summary(&Run {
        stages: &format!("{GOOD}nested 1 30 20\n"),
        tasks: &[("cargo:test:a", 101, failing)],
        skips: "",
        // The nested step's empty plan: no test ran, and it failed.
        nested: "NESTED-COUNTS 0 0\n",
    });
    assert_eq!(rc, 1, "{all}");
    assert_eq!(last, "total: 1 passed, 2 failed, 0 skipped", "{all}");
}

#[test]
fn a_work_directory_without_stages_is_bad_input() {
    let work = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-summary.sh");
    let out = Command::new("bash").arg(script).arg(work.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stages"));
}

#[test]
fn a_slices_nested_check_counts_its_tests() {
    let nested_log = "test-kvm-nested: hello-cluster: 5 runs, one trace hash\nNESTED-COUNTS 1 0\n";
    let (rc, last, all) = summary(&Run {
        stages: &format!("{GOOD}nested:hello-cluster 0 500 400\n"),
        tasks: &[("cargo:test:a", 0, OK_LOG), ("nested:hello-cluster", 0, nested_log)],
        skips: "",
        nested: "",
    });
    assert_eq!(rc, 0, "{all}");
    assert_eq!(last, "total: 4 passed, 0 failed, 0 skipped", "{all}");
    let failing = "NESTED-COUNTS 0 2\n";
    let (rc, last, all) = summary(&Run {
        stages: &format!("{GOOD}nested:db-cluster 1 500 400\n"),
        tasks: &[("cargo:test:a", 0, OK_LOG), ("nested:db-cluster", 1, failing)],
        skips: "",
        nested: "",
    });
    assert_eq!(rc, 1, "{all}");
    assert_eq!(last, "total: 3 passed, 2 failed, 0 skipped", "{all}");
}
