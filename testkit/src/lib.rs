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
//! A `Host` skip is expected only where [`EXPECTED_HOST_SKIPS`] lists the
//! test for a kind of host ([`HostKind`]) that this host is, checked when
//! the test skips: no CPUID faulting (AMD here), no vmx/svm, no /dev/kvm,
//! and so on. Any other `Host` skip is unexpected: a failure under
//! `SIMCLUSTER_STRICT_SKIPS=1`, and logged as `host-unexpected` otherwise
//! (scripts/test.sh's summary lists it). Not being root is never a host
//! skip: the project's tests run as root (README), so it is `Missing`.
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

/// A kind of host on which some tests cannot run, each checked on the host
/// itself when a test skips for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// The cpu cannot fault CPUID in user mode (no `cpuid_fault` in
    /// /proc/cpuinfo, e.g. AMD before Zen 4 and AMD under most hypervisors),
    /// or `SIMCLUSTER_DEBUG_NO_CPUID_FAULTING=1` acts as if: user-mode Linux
    /// guests then see the host's CPUID.
    NoCpuidFaulting,
    /// No vmx or svm in /proc/cpuinfo: stock Linux cannot boot on this
    /// host's /dev/kvm (a PVM host has one for the small guests only).
    NoHardwareVirt,
    /// /dev/kvm cannot be opened for reading and writing.
    NoKvm,
    /// The cpu has no RDRAND for a guest to see.
    NoRdrand,
    /// The host has vmx or svm: the runtime's no-virtualization path cannot be seen.
    HardwareVirt,
    /// `unshare -U -r true` fails: no user namespaces for the jail's tests.
    NoUserNamespaces,
    /// /sim/agent exists: this machine is itself a simcluster guest.
    SimclusterGuest,
    /// `SIMCLUSTER_DEBUG_UNCONFINED=1` is set (nodes run without their jail).
    DebugUnconfined,
}

impl HostKind {
    /// Whether this host is of this kind.
    pub fn holds(self) -> bool {
        let flags = || {
            let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            let line = info.lines().find(|l| l.starts_with("flags")).unwrap_or("").to_string();
            line.split_whitespace().map(String::from).collect::<Vec<_>>()
        };
        let has = |f: &str| flags().iter().any(|x| x == f);
        let env_is_1 = |v: &str| std::env::var_os(v).is_some_and(|v| v == "1");
        match self {
            HostKind::NoCpuidFaulting => !has("cpuid_fault") || env_is_1("SIMCLUSTER_DEBUG_NO_CPUID_FAULTING"),
            HostKind::NoHardwareVirt => !has("vmx") && !has("svm"),
            HostKind::NoKvm => std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err(),
            HostKind::NoRdrand => !has("rdrand"),
            HostKind::HardwareVirt => has("vmx") || has("svm"),
            HostKind::NoUserNamespaces => !std::process::Command::new("unshare")
                .args(["-U", "-r", "true"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            HostKind::SimclusterGuest => std::path::Path::new("/sim/agent").exists(),
            HostKind::DebugUnconfined => env_is_1("SIMCLUSTER_DEBUG_UNCONFINED"),
        }
    }
}

/// The host skips the project expects: a test (`BINARY::TEST`, `*` matching
/// any run of characters) may skip for [`Cause::Host`] on a host of the
/// kind named, and why. A test may be listed for more than one kind.
pub const EXPECTED_HOST_SKIPS: &[(&str, HostKind, &str)] = &[
    (
        "vmm::uml::host_cpuid::tests::cpuid_in_a_faulting_thread_answers_as_the_host",
        HostKind::NoCpuidFaulting,
        "faulting cannot be turned on",
    ),
    (
        "determinism_cpu::cpuid_hides_host_randomness_and_the_host_cpu",
        HostKind::NoCpuidFaulting,
        "guests see the host's CPUID, RDRAND included",
    ),
    ("determinism_cpu::cpuid_host_mode_is_the_native_instruction", HostKind::NoRdrand, "no RDRAND to see"),
    ("host_facts::with_faulting_forced_off_guest_programs_see_the_host_cpuid", HostKind::NoRdrand, "no RDRAND to see"),
    ("kvm_kernel::*", HostKind::NoHardwareVirt, "stock Linux on KVM needs vmx/svm (the nested step runs it in L1)"),
    ("kvm_kernel::*", HostKind::NoKvm, "no /dev/kvm"),
    ("kvm_linux_boot::*", HostKind::NoHardwareVirt, "stock Linux on KVM needs vmx/svm (the nested step runs it in L1)"),
    ("kvm_*::*", HostKind::NoKvm, "the KVM runtime's tests need /dev/kvm (the nested step runs them in L1)"),
    (
        "bad_input::runtime_kvm_without_hardware_virtualization_says_why",
        HostKind::HardwareVirt,
        "the no-virtualization path needs a host without vmx/svm",
    ),
    (
        "simcluster::image::clock_helper::tests::outside_a_guest_it_reads_but_never_sets_the_clock",
        HostKind::SimclusterGuest,
        "inside a guest the helper may set the clock",
    ),
    ("confinement::a_jail_that_cannot_be_made_is_a_host_error", HostKind::NoUserNamespaces, "needs user namespaces"),
    ("jail::tests::*", HostKind::NoUserNamespaces, "needs user namespaces"),
    ("uml_disk::*", HostKind::DebugUnconfined, "a debugging switch turns the jail off"),
];

/// Whether `pattern` (`*` matching any run of characters) matches `name`.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else { return false };
            (0..=tail.len()).filter(|&i| tail.is_char_boundary(i)).any(|i| glob(rest, &tail[i..]))
        }
    }
}

/// The kind of host, among those [`EXPECTED_HOST_SKIPS`] lists for `test`,
/// that this host is: `None` when a host skip of `test` is unexpected here.
pub fn expected_host_skip(test: &str) -> Option<HostKind> {
    EXPECTED_HOST_SKIPS.iter().filter(|(p, _, _)| glob(p, test)).map(|&(_, k, _)| k).find(|k| k.holds())
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
/// line whatever the reason holds; the cause is `host`, `missing`, or
/// `host-unexpected` (a host skip [`EXPECTED_HOST_SKIPS`] does not expect here).
pub fn log_line(test: &str, cause: Cause, reason: &str) -> String {
    let cause = match cause {
        Cause::Host if expected_host_skip(test).is_none() => "host-unexpected",
        Cause::Host => "host",
        Cause::Missing => "missing",
    };
    format!("{test}\t{cause}\t{}\n", reason.replace(['\n', '\t'], " "))
}

/// Reports that the running test skips (the caller then returns). Panics
/// instead under `SIMCLUSTER_STRICT_SKIPS=1` for a [`Cause::Missing`] skip
/// and for a [`Cause::Host`] skip that [`EXPECTED_HOST_SKIPS`] does not
/// expect on this host.
pub fn skip(cause: Cause, reason: impl AsRef<str>) {
    skip_named(&current_test(), cause, reason.as_ref());
}

/// [`skip`] with the test's name given (a helper thread's name is not the test's).
pub fn skip_named(test: &str, cause: Cause, reason: &str) {
    let strict = std::env::var_os(STRICT).is_some_and(|v| v == "1");
    if cause == Cause::Missing && strict {
        panic!(
            "{test} would skip: {reason}. Under {STRICT}=1 (CI) a skip whose cause the project's scripts can remove is a failure"
        );
    }
    if cause == Cause::Host && strict && expected_host_skip(test).is_none() {
        panic!(
            "{test} would skip for the host: {reason}. testkit::EXPECTED_HOST_SKIPS does not list this test for any \
             kind of host this one is; under {STRICT}=1 (CI) an unexpected host skip is a failure"
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
    fn an_unlisted_host_skip_is_unexpected() {
        assert!(log_line("a::b", Cause::Host, "r").starts_with("a::b\thost-unexpected\t"));
        assert_eq!(expected_host_skip("nobody::lists_this"), None);
    }

    #[test]
    fn a_listed_host_skip_is_expected_only_on_its_kind_of_host() {
        // Exactly one of the two holds on any host: the listed test is
        // expected to skip on one kind and not on the other.
        let t = "bad_input::runtime_kvm_without_hardware_virtualization_says_why";
        assert_eq!(expected_host_skip(t).is_some(), HostKind::HardwareVirt.holds());
        assert_ne!(HostKind::HardwareVirt.holds(), HostKind::NoHardwareVirt.holds());
        assert_eq!(
            expected_host_skip("kvm_linux_boot::kvm_linux_boots_to_console").is_some(),
            HostKind::NoHardwareVirt.holds() || HostKind::NoKvm.holds()
        );
    }

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob("kvm_*::*", "kvm_node::kvm_node_spinning_guest_is_reported_hung"));
        assert!(glob("vmm::uml::jail::tests::*", "vmm::uml::jail::tests::x"));
        assert!(!glob("kvm_*::*", "determinism_cpu::kvm_x"));
        assert!(glob("a", "a") && !glob("a", "ab") && glob("a*", "a"));
    }

    #[test]
    fn the_test_name_is_the_threads() {
        assert!(current_test().ends_with("tests::the_test_name_is_the_threads"), "{}", current_test());
    }
}
