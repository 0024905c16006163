//! The engine over the KVM runtime: a two-node cluster of small microVM guests
//! (vmm/guests/agent.S) run through the same engine, actions and trace as user-mode
//! Linux nodes: the agent's control line (virtio-console over virtio-mmio), frames
//! through netsim (virtio-net), virtual time from the engine. Same seed, same trace
//! hash, five times.
//!
//! Runs wherever /dev/kvm opens (also under PVM without vmx/svm: the guests are a few
//! hundred instructions); skips with a printed reason otherwise.

use std::path::{Path, PathBuf};
use std::time::Duration;

use checker::engine::{self, ExecutionSpec, ExploreSpec, NetworkSpec, RuntimeKind, Verdict};
use checker::strategy::{KindWeights, RandomWalk, Strategy};
use checker::trace::EventKind;

fn kvm_available(test: &str) -> bool {
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP {test}: cannot open /dev/kvm: {e}");
            false
        }
    }
}

fn spec(image: &Path, scratch: &Path, seed: u64) -> ExecutionSpec {
    ExecutionSpec {
        kernel: image.to_path_buf(),
        initrd: image.to_path_buf(),
        node_names: vec!["n1".into(), "n2".into()],
        mem_mb: 8,
        workload_node: 0,
        host_workload: None,
        invariants: vec![],
        liveness: vec![],
        time_limit_ns: 10_000_000_000,
        watchdog: Duration::from_secs(120),
        connect_timeout: Duration::from_secs(10),
        seed,
        scratch: scratch.to_path_buf(),
        network: Some(NetworkSpec { config: Default::default(), scheduled: vec![], pcap_dir: None }),
        disk: None,
        explore: ExploreSpec::default(),
        runtime: RuntimeKind::Kvm,
    }
}

fn image(dir: &Path) -> PathBuf {
    vmm::kvm::asm::assemble("agent", dir).expect("assemble vmm/guests/agent.S");
    dir.join("agent.bin")
}

#[test]
fn kvm_nodes_run_under_the_engine_deterministically() {
    if !kvm_available("kvm_nodes_run_under_the_engine_deterministically") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mut hashes = Vec::new();
    for run in 0..5 {
        let scratch = dir.path().join(format!("run{run}"));
        std::fs::create_dir_all(&scratch).unwrap();
        let mut strategy = RandomWalk::new(11, KindWeights::default());
        assert!(strategy.begin_execution(0));
        let r = engine::execute(&spec(&img, &scratch, 11), &mut strategy).expect("engine");
        if run == 0 {
            eprintln!("{}", r.trace.to_jsonl());
        }
        assert!(matches!(r.verdict, Verdict::Pass), "verdict {:?}", r.verdict);
        let ev = r.trace.events();
        let console = |node: u16, what: &str| {
            ev.iter().any(|e| e.node == node && matches!(&e.kind, EventKind::Console { text } if text.contains(what)))
        };
        assert!(console(1, "got: hello from node 2"), "n1 did not get n2's frame");
        assert!(console(1, "workload done"), "n1 did not finish its workload");
        let delivered = ev.iter().filter(|e| matches!(e.kind, EventKind::Deliver { .. })).count();
        // Both frames went through netsim; the execution passes when n1's workload
        // is done, before n2 runs again to read its frame.
        assert_eq!(delivered, 2, "two frames through netsim");
        assert!(ev.iter().any(|e| matches!(&e.kind, EventKind::CommandDone { name, status: 0 } if name == "workload")));
        hashes.push(r.trace_hash);
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "trace hashes differ: {hashes:?}");
}
