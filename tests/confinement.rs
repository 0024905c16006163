//! User-mode Linux nodes in their jails (jail/src/), end to end:
//! the jail changes nothing a guest sees, and a jail that cannot be made is
//! a host error naming the node and the step. What a jailed process can
//! see and do is tested in the jail crate (`jail::tests`) and vmm (`uml_disk`).

mod common;
use common::*;

use testkit::Cause;

fn hello(extra_env: &[(&str, &str)]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let dir = repo().join("guest-images/hello-cluster");
    let mut cmd = bin();
    cmd.args([
        "run",
        "--quiet",
        "--images",
        dir.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--seed",
        "7",
    ]);
    cmd.args(["--runtime", "uml"]);
    cmd.envs(extra_env.iter().copied());
    run_command(&mut cmd)
}

/// The same seed gives the same trace in a jail and out of it: the jail
/// shows the kernel what it needs to behave the same (its ptys included:
/// UML prints whether they give SIGIO).
#[test]
fn the_jail_changes_no_trace() {
    let jailed = hello(&[("SIMCLUSTER_DEBUG_UNCONFINED", "0")]);
    assert_eq!(jailed.code, 0, "{jailed:?}");
    let free = hello(&[("SIMCLUSTER_DEBUG_UNCONFINED", "1")]);
    assert_eq!(free.code, 0, "{free:?}");
    assert_eq!(jailed.json()["trace_hash"], free.json()["trace_hash"]);
}

/// Root in a user namespace that does not map the node's uid (as in a
/// container): no node can be jailed, and the run says so and exits 3.
#[test]
fn a_jail_that_cannot_be_made_is_a_host_error() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip(Cause::Missing, "needs root (root in a user namespace is the case; the tests run as root)");
        return;
    }
    let ok = std::process::Command::new("unshare").args(["-U", "-r", "true"]).status().is_ok_and(|s| s.success());
    if !ok {
        testkit::skip(Cause::Host, "user namespaces (unshare -U -r) are not available here");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let dir = repo().join("guest-images/hello-cluster");
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["-U", "-r", env!("CARGO_BIN_EXE_simcluster"), "run", "--quiet", "--runtime", "uml", "--images"]);
    cmd.args([dir.to_str().unwrap(), "--out", out.path().to_str().unwrap()]);
    cmd.env_remove("SIMCLUSTER_DEBUG_UNCONFINED");
    let r = run_command(&mut cmd);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("node 1") && r.stderr.contains("SIMCLUSTER_DEBUG_UNCONFINED=1"), "{r:?}");
    assert_eq!(r.stderr.matches("Invalid argument").count(), 1, "the cause, once: {r:?}");
}
