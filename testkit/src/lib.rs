//! What simcluster's tests share across crates.
//!
//! Why a crate: the vmm, checker and root crates' tests all skip now and
//! then (no /dev/kvm, no tshark), and `cargo test` hides what a passing test
//! prints, so a skip printed with `println!` is seen by nobody. A skip made
//! through [`skip`] is appended to the file `SIMCLUSTER_SKIP_LOG` names
//! (scripts/test.sh sets it and lists every line in its summary, with a
//! count) and printed on stderr.
//!
//! Two kinds of cause: [`Cause::Host`] is something this machine cannot
//! have (hardware virtualization, a CPU feature); [`Cause::Missing`] is
//! something the project's scripts can install or make. Under
//! `SIMCLUSTER_STRICT_SKIPS=1` (CI) a `Missing` skip fails the test instead:
//! a check that quietly stopped running is a failure there.
//!
//! [`busybox`]: a static busybox and a bare initramfs around it, for the
//! tests that boot a guest without the image builder.
//!
//! [`fuzz`]: a deterministic mutation fuzzer for the trust boundaries.
#![deny(missing_docs)]

use std::io::Write;

pub mod busybox;
pub mod fuzz;
pub mod proc;

/// Why a test cannot run here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The host lacks something no script of ours can give it (vmx/svm,
    /// CPUID faulting, a CPU instruction): always a skip.
    Host,
    /// A package or fixture the project's scripts can provide: a skip on a
    /// developer's machine, a failure under `SIMCLUSTER_STRICT_SKIPS=1`.
    Missing,
}

/// The environment variable naming the file skips are appended to.
pub const SKIP_LOG: &str = "SIMCLUSTER_SKIP_LOG";
/// The environment variable that turns [`Cause::Missing`] skips into failures.
pub const STRICT: &str = "SIMCLUSTER_STRICT_SKIPS";

/// The environment variable `scripts/test.sh --full` sets to `full`.
pub const TIER: &str = "SIMCLUSTER_TEST_TIER";

/// Whether the full tier runs (`SIMCLUSTER_TEST_TIER=full`): tests that
/// repeat a check (determinism over several runs, every example) do it
/// fewer times in the short tier. Whole tests that only the full tier runs
/// are `#[ignore = "full tier: ..."]` instead, so `cargo test` counts them.
pub fn full_tier() -> bool {
    std::env::var(TIER).is_ok_and(|t| t == "full")
}

/// `short` in the short tier, `full` in the full one.
pub fn by_tier<T>(short: T, full: T) -> T {
    if full_tier() {
        full
    } else {
        short
    }
}

/// The running test's name: libtest names each test's thread after it.
pub fn current_test() -> String {
    let binary = std::env::args()
        .next()
        .and_then(|a| std::path::Path::new(&a).file_name().map(|f| f.to_string_lossy().into_owned()))
        .map(|f| strip_hash(&f).to_string())
        .unwrap_or_default();
    let test = std::thread::current().name().unwrap_or("main").to_string();
    if binary.is_empty() {
        test
    } else {
        format!("{binary}::{test}")
    }
}

/// `kvm_node-0123456789abcdef` -> `kvm_node` (cargo's test binary names).
fn strip_hash(file: &str) -> &str {
    match file.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => file,
    }
}

/// The line a skip leaves in the log: `test<TAB>cause<TAB>reason`, one
/// line whatever the reason holds.
pub fn log_line(test: &str, cause: Cause, reason: &str) -> String {
    let cause = match cause {
        Cause::Host => "host",
        Cause::Missing => "missing",
    };
    format!("{test}\t{cause}\t{}\n", reason.replace(['\n', '\t'], " "))
}

/// Reports that the running test skips (the caller then returns). Panics
/// instead for a [`Cause::Missing`] skip under `SIMCLUSTER_STRICT_SKIPS=1`.
pub fn skip(cause: Cause, reason: impl AsRef<str>) {
    skip_named(&current_test(), cause, reason.as_ref());
}

/// [`skip`] with the test's name given (a helper thread's name is not the test's).
pub fn skip_named(test: &str, cause: Cause, reason: &str) {
    if cause == Cause::Missing && std::env::var_os(STRICT).is_some_and(|v| v == "1") {
        panic!(
            "{test} would skip: {reason}. Under {STRICT}=1 (CI) a skip whose cause the project's scripts can remove is a failure"
        );
    }
    eprintln!("SKIP {test}: {reason}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        // One write per line, in append mode: concurrent tests do not interleave.
        let line = log_line(test, cause, reason);
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(mut f) => {
                if let Err(e) = f.write_all(line.as_bytes()) {
                    panic!("{}: cannot record the skip: {e}", std::path::Path::new(&path).display());
                }
            }
            Err(e) => panic!("{}: cannot record the skip: {e}", std::path::Path::new(&path).display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_hashes_are_stripped_from_binary_names() {
        assert_eq!(strip_hash("kvm_node-0123456789abcdef"), "kvm_node");
        assert_eq!(strip_hash("determinism_cpu-89abcdef01234567"), "determinism_cpu");
        assert_eq!(strip_hash("no-hash-here"), "no-hash-here");
        assert_eq!(strip_hash("simcluster"), "simcluster");
    }

    #[test]
    fn a_log_line_is_one_line_of_three_fields() {
        let l = log_line("a::b", Cause::Missing, "no\ttshark\nhere");
        assert_eq!(l, "a::b\tmissing\tno tshark here\n");
        assert_eq!(l.trim_end().split('\t').count(), 3);
    }

    #[test]
    fn the_test_name_is_the_threads() {
        assert!(current_test().ends_with("tests::the_test_name_is_the_threads"), "{}", current_test());
    }
}
