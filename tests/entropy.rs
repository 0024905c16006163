//! Guests have an entropy source: simcluster's virtio-rng device, whose
//! bytes come from the execution seed (vmm/src/virtio/rng.rs, seeds from
//! engine::entropy_seed).
//!
//! Without it a guest program calling getrandom(2) at boot blocks until the
//! guest kernel's jitter-entropy loop has initialised its crng: millions of
//! engine grants (about 6 minutes of wall time per node here). With it the
//! kernel's hwrng thread feeds the pool from the device at boot and
//! getrandom returns at once.
//!
//! Needs a guest kernel with CONFIG_HW_RANDOM_VIRTIO (guest-images/kernel/
//! uml.config has it from linux 7.2 on).

mod common;
use common::*;

use std::path::Path;

/// Calls getrandom(buf, 16, 0) (blocking until the guest crng is ready) and
/// prints the bytes in hex, with the node's current hwrng for diagnosis.
const PROBE_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int main(void)
{
	char rng[64] = "none";
	FILE *f = fopen("/sys/class/misc/hw_random/rng_current", "r");
	if (f) {
		if (!fgets(rng, sizeof rng, f))
			strcpy(rng, "unreadable");
		rng[strcspn(rng, "\n")] = 0;
		fclose(f);
	}
	unsigned char b[16];
	ssize_t n = getrandom(b, sizeof b, 0);
	printf("entropy-probe hwrng %s getrandom %zd ", rng, n);
	for (int i = 0; i < 16; i++)
		printf("%02x", n == 16 ? b[i] : 0);
	printf("\n");
	return n == 16 ? 0 : 1;
}
"#;

/// A generous bound on the grants of one whole execution of the cluster
/// below (two nodes boot, probe, and answer the workload and invariants).
/// Without an entropy source the probe alone costs millions.
const MAX_GRANTS: u64 = 20_000;

fn build_probe(dir: &Path) -> bool {
    gcc_static(dir, "entropy-probe", PROBE_C)
}

/// What one run printed: per node, the probe's hwrng and its 16 bytes in
/// hex; and the run's trace hash.
#[derive(Debug, PartialEq, Eq)]
struct Probed {
    nodes: Vec<(String, String)>,
    trace_hash: String,
}

fn run_probe(dir: &Path, seed: &str) -> Probed {
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(dir, out.path(), &["--seed", seed]);
    let consoles: Vec<String> = ["n1", "n2"]
        .iter()
        .map(|n| std::fs::read_to_string(out.path().join(format!("last/console-{n}.log"))).unwrap_or_default())
        .collect();
    assert_eq!(r.code, 0, "{r:?}\n--- n1\n{}\n--- n2\n{}", consoles[0], consoles[1]);
    let j = r.json();
    let grants = j["grants"].as_u64().expect("the JSON line has grants");
    assert!(grants < MAX_GRANTS, "{grants} grants: getrandom waited for entropy\n{}", r.stdout);
    let mut nodes = Vec::new();
    for console in &consoles {
        let line = console
            .lines()
            .find(|l| l.contains("entropy-probe hwrng"))
            .unwrap_or_else(|| panic!("no probe line:\n{console}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        // ... entropy-probe hwrng NAME getrandom 16 HEX
        let at = words.iter().position(|w| *w == "entropy-probe").unwrap();
        let (hwrng, n, hex) = (words[at + 2], words[at + 4], words[at + 5]);
        assert_eq!(n, "16", "{line}");
        assert!(hwrng.starts_with("virtio_rng"), "the guest's hwrng is not simcluster's device: {line}");
        assert_eq!(hex.len(), 32, "{line}");
        nodes.push((hwrng.to_string(), hex.to_string()));
    }
    Probed { nodes, trace_hash: j["trace_hash"].as_str().unwrap().to_string() }
}

#[test]
fn getrandom_at_boot_returns_at_once_with_bytes_from_the_seed() {
    let wait = "while [ ! -e /tmp/entropy.done ]; do sleep 0.05; done";
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 2\nmemory_mb = 128\n\
             [image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/entropy-probe\" = \"entropy-probe\" }}\n\
             [node]\nstart = \"/usr/local/bin/entropy-probe; touch /tmp/entropy.done\"\n\
             [workload]\nnode = \"n1\"\ncommand = \"{wait}\"\n\
             [[invariant]]\nname = \"probed\"\nnode = \"all\"\ncommand = \"{wait}\"\n"
        ),
        &[],
    );
    if !build_probe(d.path()) {
        return;
    }
    let a = run_probe(d.path(), "5");
    let b = run_probe(d.path(), "5");
    assert_eq!(a, b, "two runs of one seed differ");
    // Each node has its own stream.
    assert_ne!(a.nodes[0].1, a.nodes[1].1, "both nodes read the same bytes: {a:?}");
    let c = run_probe(d.path(), "6");
    assert_ne!(a.nodes[0].1, c.nodes[0].1, "another seed gave the same bytes: {a:?} {c:?}");
    assert_ne!(a.nodes[1].1, c.nodes[1].1, "another seed gave the same bytes: {a:?} {c:?}");
}
