//! Golden trace hashes: hello-cluster and every example, one execution at
//! seed 1, must give the trace hashes recorded in tests/golden/trace-hashes.json.
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
//! images too, which the image builder makes reproducibly from pinned
//! inputs; the file records the images hash of each cluster, and a
//! mismatch there is reported as such (the inputs changed), not as a
//! behaviour change.

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

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug, Clone)]
struct Golden {
    images_hash: String,
    trace_hash: String,
}

#[test]
fn trace_hashes_are_the_recorded_ones() {
    if examples().is_none() {
        return;
    }
    let bless = std::env::var_os("SIMCLUSTER_BLESS").is_some();
    let path = repo().join(FILE);
    let recorded: BTreeMap<String, Golden> = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).expect("tests/golden/trace-hashes.json parses"),
        Err(_) if bless => BTreeMap::new(),
        Err(e) => panic!("{}: {e} (record it with SIMCLUSTER_BLESS=1)", path.display()),
    };
    let mut now = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, dir) in clusters() {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(&repo().join(dir), out.path(), &["--seed", "1", "--executions", "1"]);
        assert!(r.code == 0 || r.code == 1, "{name}: {r:?}");
        let j = r.json();
        let g = Golden {
            images_hash: j["images_hash"].as_str().unwrap().to_string(),
            trace_hash: j["trace_hash"].as_str().unwrap().to_string(),
        };
        match recorded.get(name) {
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
        std::fs::write(&path, serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
        println!("recorded {} trace hashes in {}", now.len(), path.display());
        return;
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
