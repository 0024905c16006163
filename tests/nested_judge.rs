//! scripts/test-kvm-nested.sh's pieces that need no L1, run with made-up
//! test binaries and results (the whole step takes minutes under QEMU's
//! emulator): the plan's retry of every test that has not passed (failed, or
//! never ran after a timeout), the verdict per test binary (a test that never
//! passed fails the step; a pass on retry is a flake; a skip is not a pass),
//! and the strict skip.

use std::path::Path;
use std::process::{Command, Output};

fn script() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-kvm-nested.sh")).unwrap()
}

/// The lines of the script from the one starting with `from` to the one
/// starting with `to`, both included.
fn block(from: &str, to: &str) -> String {
    let s = script();
    let lines: Vec<&str> = s.lines().collect();
    let a = lines.iter().position(|l| l.starts_with(from)).unwrap_or_else(|| panic!("no line {from}"));
    let b = a + lines[a..].iter().position(|l| l.starts_with(to)).unwrap_or_else(|| panic!("no line {to}"));
    lines[a..=b].join("\n") + "\n"
}

fn bash(dir: &Path, code: &str) -> Output {
    let out =
        Command::new("bash").arg("-c").arg(code).current_dir(dir).env_remove("SIMCLUSTER_FLAKE_LOG").output().unwrap();
    out
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A made-up libtest binary with tests a, b and c: without --exact it
/// passes a and then stops as a timeout would (exit 124), with --exact it
/// runs the tests named and passes them.
const FAKE_TESTS: &str = r#"#!/bin/sh
if [ "$1" = --exact ]; then
  shift; n=0
  for t in "$@"; do case $t in --*) ;; *) echo "test $t ... ok"; n=$((n + 1)) ;; esac; done
  echo "test result: ok. $n passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s"
  exit 0
fi
echo "running 3 tests"
echo "test a ... ok"
exit 124
"#;

#[test]
fn after_a_timeout_every_test_that_did_not_pass_runs_again() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("r");
    std::fs::create_dir(&r).unwrap();
    std::fs::write(r.join("expect-fake"), "a\nb\nc\n").unwrap();
    let exe = d.path().join("fake");
    std::fs::write(&exe, FAKE_TESTS).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let plan = block("# `step NAME CMD...`", "EOF");
    let plan = plan.trim_end().strip_suffix("EOF").unwrap();
    let code = format!(
        "R={r}\nbinary_timeout=60 ignored=\n{plan}\ntest_step fake {exe} 1\n",
        r = r.display(),
        exe = exe.display()
    );
    let o = Command::new("sh").arg("-c").arg(&code).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let retry = std::fs::read_to_string(r.join("retry-fake-1.out")).unwrap_or_default();
    assert!(retry.contains("test b ... ok") && retry.contains("test c ... ok"), "{}\n{retry}", text(&o));
    assert!(!retry.contains("test a ... ok"), "a passed already: {retry}");
    assert_eq!(std::fs::read_to_string(r.join("test-fake.rc")).unwrap().trim(), "124");
}

/// `judge_test` over results written by `files` (name, contents), with the
/// flake log; returns the output, then "n_passed n_failed retried status".
fn judge(files: &[(&str, &str)]) -> (String, String, String) {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("r");
    std::fs::create_dir(&r).unwrap();
    for (name, body) in files {
        std::fs::write(r.join(name), body).unwrap();
    }
    let flakes = d.path().join("flakes");
    std::fs::write(&flakes, "").unwrap();
    let code = format!(
        "set -uo pipefail\nresults={r}\nretried=0\nexport SIMCLUSTER_FLAKE_LOG={f}\n{h}{j}judge_test fake\necho \"COUNTS $n_passed $n_failed $retried $status\"\n",
        r = r.display(),
        f = flakes.display(),
        h = block("# --- helpers", "# --- end helpers"),
        j = block("# --- judge", "# --- end judge"),
    );
    let o = bash(d.path(), &code);
    let out = text(&o);
    let counts = out.lines().find_map(|l| l.strip_prefix("COUNTS ")).unwrap_or_else(|| panic!("{out}")).to_string();
    (out.clone(), counts, std::fs::read_to_string(&flakes).unwrap())
}

const ALL_OK: &str = "test a ... ok\ntest b ... ok\ntest c ... ok\ntest result: ok. 3 passed; 0 failed\n";

#[test]
fn every_listed_test_passing_is_a_pass_and_a_skip_is_not_counted() {
    let (out, counts, flakes) = judge(&[
        ("expect-fake", "a\nb\nc\n"),
        ("test-fake.out", ALL_OK),
        ("test-fake.rc", "0\n"),
        ("test-fake.secs", "5\n"),
        ("skips", "fake::b\thost\tno vmx/svm\n"),
    ]);
    assert_eq!(counts, "2 0 0 0", "{out}");
    assert!(flakes.is_empty());
}

#[test]
fn a_timeout_whose_retry_runs_the_rest_is_a_flake() {
    let (out, counts, flakes) = judge(&[
        ("expect-fake", "a\nb\nc\n"),
        ("test-fake.out", "test a ... ok\n"),
        ("test-fake.rc", "124\n"),
        ("test-fake.secs", "60\n"),
        ("retry-fake-1.out", "test b ... ok\ntest c ... ok\ntest result: ok. 2 passed; 0 failed\n"),
        ("retry-fake-1.rc", "0\n"),
    ]);
    assert_eq!(counts, "3 0 1 0", "{out}");
    assert!(out.contains("PASSED ON RETRY"), "{out}");
    assert!(flakes.contains("L1 fake") && flakes.contains("b c"), "{flakes}");
}

#[test]
fn a_pass_on_retry_cannot_hide_a_test_that_never_ran() {
    // The first run failed b and timed out before c; the retry ran b only
    // (as a retry of failed tests alone would): c never ran.
    let (out, counts, _) = judge(&[
        ("expect-fake", "a\nb\nc\n"),
        ("test-fake.out", "test a ... ok\ntest b ... FAILED\n"),
        ("test-fake.rc", "124\n"),
        ("test-fake.secs", "60\n"),
        ("retry-fake-1.out", "test b ... ok\ntest result: ok. 1 passed; 0 failed\n"),
        ("retry-fake-1.rc", "0\n"),
    ]);
    assert_eq!(counts, "2 1 0 1", "{out}");
    assert!(out.contains("never passed (failed, or never ran): c"), "{out}");
}

#[test]
fn a_binary_that_never_started_fails_each_of_its_tests() {
    let (out, counts, _) = judge(&[("expect-fake", "a\nb\n")]);
    assert_eq!(counts, "0 2 0 1", "{out}");
    assert!(out.contains("not started"), "{out}");
}

#[test]
fn a_strict_skip_fails_and_a_plain_one_is_not_labelled_host() {
    let d = tempfile::tempdir().unwrap();
    let helpers = block("# --- helpers", "# --- end helpers");
    let log = d.path().join("skips");
    let run = |strict: &str| {
        bash(
            d.path(),
            &format!(
                "export SIMCLUSTER_SKIP_LOG={} SIMCLUSTER_STRICT_SKIPS={strict}\n{helpers}skip 'qemu-system-x86_64 is missing'\n",
                log.display()
            ),
        )
    };
    let o = run("1");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("NESTED-COUNTS 0 1"), "{}", text(&o));
    assert!(!log.exists() || std::fs::read_to_string(&log).unwrap().is_empty());
    let o = run("");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "test-kvm-nested\tmissing\tqemu-system-x86_64 is missing\n");
}
