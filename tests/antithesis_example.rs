//! guest-images/antithesis-etcd, the worked example of docs/antithesis.md:
//! Antithesis's etcd Test Composer example as a compose directory (three
//! etcd members and a client, images built from Debian packages by its
//! build.sh, the Python SDK from PyPI) runs with a seed and exits 0, its
//! SDK assertions each seen and passing, its Test Composer commands run,
//! and the same seed replays to the same trace and the same verdicts.

mod common;
use common::*;

/// The example's directory with its images built, or `None` with the skip
/// recorded (no network for Debian's mirror or PyPI, or no root to install
/// mmdebstrap, umoci and skopeo).
fn example() -> Option<std::path::PathBuf> {
    let dir = repo().join("guest-images/antithesis-etcd");
    let out = std::process::Command::new(dir.join("build.sh")).output().unwrap();
    if !out.status.success() {
        testkit::skip(
            testkit::Cause::Missing,
            format!(
                "guest-images/antithesis-etcd/build.sh could not build the images: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return None;
    }
    Some(dir)
}

/// The assertions of the example's Python programs, each of which must be
/// seen passing in one execution (the unreachable one must not be reached,
/// so it is not listed: the SDK writes nothing for it until it is).
const ASSERTIONS: &[&str] = &[
    "The cluster has the three members of the compose file",
    "A write succeeds before any fault",
    "A value read back is the value written",
    "Client can make successful put requests",
    "Client can make successful get requests",
    "Performing health check on the etcd cluster",
    "Every etcd member is healthy once faults stop",
    "Every member answers a read at the end",
    "Every acknowledged put is in the database",
    "Some put was acknowledged during the drivers",
    "The database holds exactly the six keys just written",
];

const COMMANDS: &[&str] = &[
    "first_check_members.py",
    "parallel_driver_generate_traffic.py",
    "eventually_health_check.py",
    "finally_db_consistent.py",
];

#[test]
#[ignore = "full tier (slice 7): builds two Debian images from the network (about 2.5 minutes cold); tests/antithesis.rs and tests/compose.rs check the SDK, Test Composer and compose paths in the short tier"]
fn the_etcd_example_passes_and_replays_by_seed() {
    let Some(dir) = example() else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let props = &j["antithesis"];
    for a in ASSERTIONS {
        assert_eq!(props[a]["verdict"], "passed", "{a}: {props}");
        assert!(props[a]["passes"].as_u64() > Some(0), "{a}: {props}");
        assert_eq!(props[a]["fails"], 0, "{a}: {props}");
    }
    assert!(j["antithesis_unmet"].as_array().is_none_or(|u| u.is_empty()), "{r:?}");
    // The SDK's lines came from the client's container, and the template's
    // commands ran there by Test Composer's rules.
    assert_eq!(props["A value read back is the value written"]["nodes"], serde_json::json!(["client"]), "{props}");
    let commands = &j["test_composer"];
    for c in COMMANDS {
        assert!(commands[c]["runs"].as_u64() >= Some(1), "{c}: {commands}");
        assert_eq!(commands[c]["failed"], 0, "{c}: {commands}");
    }
    assert_eq!(commands["first_check_members.py"]["runs"], 1, "{commands}");

    // The same seed: the same trace, the same verdicts.
    let again = tempfile::tempdir().unwrap();
    let r2 = run_cluster(&dir, again.path(), &["--seed", "1"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let j2 = r2.json();
    assert_eq!(j2["trace_hash"], j["trace_hash"], "{r2:?}");
    assert_eq!(j2["antithesis"], j["antithesis"], "{r2:?}");
    assert_eq!(j2["test_composer"], j["test_composer"], "{r2:?}");
}
