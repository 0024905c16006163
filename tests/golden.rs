//! Golden trace hashes: hello-cluster and every example, one execution at
//! seed 1, must give the trace hashes recorded in tests/golden/trace-hashes.json,
//! with lookahead (the default) and without (`--lookahead off`).
//!
//! Why: a refactor must not change what simcluster does. Every decision the
//! engine takes, every draw, every byte a guest sees ends up in the trace,
//! so an unchanged hash is the strongest cheap evidence that behaviour is
//! unchanged. A change that is meant to alter behaviour (a new default, a
//! new draw) re-records them:
//!
//!     SIMCLUSTER_BLESS=1 cargo test --test golden
//!
//! and says so in its commit. The hashes depend on the guest kernel and
//! images too. The image builder makes them from pinned inputs, and the
//! file records each cluster's images hash (a key of those inputs): a
//! mismatch there is reported as such (the inputs changed), not as a
//! behaviour change. It also records the kernel binary's SHA-256: a kernel
//! built from the same inputs by another compiler may print other bytes at
//! boot, so where the binary differs the hashes are not comparable: the
//! test records a skip (`testkit`), which fails under CI's strict skips.
//!
//! The hashes do not depend on the host: nothing the host kind decides
//! (CPUID faulting, the CPU model) reaches the console or the trace, so the
//! same file holds on an AMD host without CPUID faulting and an Intel host
//! with it (tests/host_facts.rs runs hello-cluster with faulting forced off
//! and compares).

mod common;
use common::*;
use std::collections::BTreeMap;

const FILE: &str = "tests/golden/trace-hashes.json";

/// (name, cluster directory relative to the repository).
fn clusters() -> Vec<(&'static str, &'static str)> {
    vec![
        ("hello-cluster", "guest-images/hello-cluster"),
        ("reorder", "guest-images/examples/reorder"),
        ("partition", "guest-images/examples/partition"),
        ("crash-primary", "guest-images/examples/crash-primary"),
        ("liveness", "guest-images/examples/liveness"),
        ("rename-unsafe", "guest-images/examples/rename-unsafe"),
        ("rename-safe", "guest-images/examples/rename-safe"),
    ]
}

/// The clusters the short tier also runs with `--lookahead off`: the boot
/// alone, message reordering, a partition, a power loss.
const WITHOUT_LOOKAHEAD_SHORT: &[&str] = &["hello-cluster", "reorder", "partition", "crash-primary"];

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug, Clone)]
struct Golden {
    images_hash: String,
    trace_hash: String,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Default)]
struct GoldenFile {
    /// SHA-256 of the guest kernel the hashes were recorded with.
    kernel_sha256: String,
    clusters: BTreeMap<String, Golden>,
}

/// The guest kernel's SHA-256, as the image builder builds it here.
fn kernel_sha256() -> String {
    let b = run(&["image", "build", repo().join("guest-images/hello-cluster").to_str().unwrap()]);
    assert_eq!(b.code, 0, "{b:?}");
    sha256(b.json()["kernel"].as_str().unwrap())
}

#[test]
fn trace_hashes_are_the_recorded_ones() {
    if examples().is_none() {
        return;
    }
    let bless = std::env::var_os("SIMCLUSTER_BLESS").is_some();
    let path = repo().join(FILE);
    let recorded: GoldenFile = match std::fs::read_to_string(&path) {
        Ok(text) => match serde_json::from_str(&text) {
            Ok(file) => file,
            Err(_) if bless => GoldenFile::default(),
            Err(e) => panic!("{}: {e}", path.display()),
        },
        Err(_) if bless => GoldenFile::default(),
        Err(e) => panic!("{}: {e} (record it with SIMCLUSTER_BLESS=1)", path.display()),
    };
    let kernel = kernel_sha256();
    if !bless && kernel != recorded.kernel_sha256 {
        // The kernel build is reproducible (pinned source, fixed KBUILD_*,
        // the build directory mapped out of the debug info), so on a machine
        // of the project's kind the binary is the recorded one: a mismatch
        // there means the inputs or the toolchain changed, and CI
        // (SIMCLUSTER_STRICT_SKIPS=1) fails rather than compare nothing.
        testkit::skip(
            testkit::Cause::Missing,
            format!(
                "the guest kernel built here ({kernel}) is not the one the hashes were recorded with ({}): \
                 its boot messages may differ, so the hashes are not comparable (another compiler? \
                 a changed patch or config? re-record with SIMCLUSTER_BLESS=1 cargo test --test golden)",
                recorded.kernel_sha256
            ),
        );
        return;
    }
    let mut now = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, dir) in clusters() {
        // Recorded under user-mode Linux; `--runtime auto` would pick KVM on a
        // host with vmx/svm. Lookahead (the default) must not change a
        // trace: the same hash with it off, where every wake-up is a round
        // trip of its own (the short tier checks that on hello-cluster and the
        // clusters with a network fault and a crash; the full tier on all).
        let modes: &[&str] =
            if testkit::by_tier(WITHOUT_LOOKAHEAD_SHORT.contains(&name), true) { &["on", "off"] } else { &["on"] };
        let runs: Vec<Golden> = modes
            .iter()
            .map(|&lookahead| {
                let out = tempfile::tempdir().unwrap();
                let args = ["--seed", "1", "--executions", "1", "--runtime", "uml", "--lookahead", lookahead];
                let r = run_cluster(&repo().join(dir), out.path(), &args);
                assert!(r.code == 0 || r.code == 1, "{name} (lookahead {lookahead}): {r:?}");
                let j = r.json();
                let (grants, round_trips) = (j["grants"].as_u64().unwrap(), j["round_trips"].as_u64().unwrap());
                if lookahead == "off" {
                    assert_eq!(round_trips, grants, "{name}: without lookahead every grant is a round trip");
                } else {
                    assert!(round_trips < grants, "{name}: lookahead saved no round trip ({grants} grants)");
                }
                Golden {
                    images_hash: j["images_hash"].as_str().unwrap().to_string(),
                    trace_hash: j["trace_hash"].as_str().unwrap().to_string(),
                }
            })
            .collect();
        let g = runs[0].clone();
        if let Some(off) = runs.get(1).filter(|off| **off != g) {
            problems.push(format!(
                "{name}: trace hash {} with lookahead, {} without: lookahead changed what happened",
                g.trace_hash, off.trace_hash
            ));
        }
        match recorded.clusters.get(name) {
            Some(old) if old == &g => {}
            Some(old) if old.images_hash != g.images_hash => problems.push(format!(
                "{name}: its images changed (images hash {} -> {}): the inputs changed, re-record",
                old.images_hash, g.images_hash
            )),
            Some(old) => problems.push(format!(
                "{name}: trace hash {} -> {} with the same images: behaviour changed",
                old.trace_hash, g.trace_hash
            )),
            None => problems.push(format!("{name}: no recorded hash")),
        }
        now.insert(name.to_string(), g);
    }
    if bless {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = GoldenFile { kernel_sha256: kernel, clusters: now };
        std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap() + "\n").unwrap();
        println!("recorded {} trace hashes in {}", file.clusters.len(), path.display());
        return;
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
