//! Frames through the engine between two KVM nodes: node 1 streams frames to node 2
//! (vmm/guests/agent_stream.S: one exit per frame sent; the receiver takes them as
//! they come and re-posts its buffers once per batch), netsim in between (20-80 us
//! per frame), the engine scheduling both. Figures: frames per wall second, the
//! engine's grants per frame and wall time per grant (a grant runs a node until it
//! halts or for 1 ms of virtual time), virtual time against wall time.
//!
//! Run: cargo bench -p explore --bench kvm_engine (harness = false; prints). Skips
//! with a printed reason where /dev/kvm cannot be opened. Exits per second of one
//! node, alone and under grants: cargo bench -p vmm --bench kvm_exits.

use std::path::Path;
use std::time::Duration;

use engine::strategy::Strategy;
use engine::{ExecutionSpec, ExploreSpec, NetworkSpec, NodeId, RuntimeKind, Verdict};
use explore::strategy::{KindWeights, RandomWalk};
use netsim::{Latency, NetConfig};

fn main() {
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        println!("SKIP kvm_engine: cannot open /dev/kvm: {e}");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    for frames in [1_000u64, 10_000] {
        frames_per_second(dir.path(), frames);
    }
}

/// Two nodes running agent_stream.S with `frames` frames; node 2 runs the workload.
fn spec(image: &Path, scratch: &Path, seed: u64) -> ExecutionSpec {
    let config = NetConfig { latency: Latency::Uniform { min: 20_000, max: 80_000 }, ..Default::default() };
    ExecutionSpec {
        kernel: image.to_path_buf(),
        initrd: image.to_path_buf(),
        node_names: vec!["n1".into(), "n2".into()],
        clients: vec![],
        mem_mb: 8,
        workload_node: NodeId::at(1),
        host_workload: None,
        ready_probe: false,
        invariants: vec![],
        liveness: vec![],
        time_limit: simtime::VirtualTime::from_ns(10_000_000_000),
        watchdog: Duration::from_secs(120),
        connect_timeout: Duration::from_secs(10),
        seed,
        boot_seed: None,
        scratch: scratch.to_path_buf(),
        network: Some(NetworkSpec { config, scheduled: vec![], capture: false }),
        history: None,
        disk: None,
        explore: ExploreSpec::default(),
        runtime: RuntimeKind::Kvm,
        uml_args: vec![],
        shared_clock: false,
        root_disk: None,
        kernel_faults_cpuid: false,
        lookahead: engine::Lookahead::On,
        cancel: None,
    }
}

fn frames_per_second(dir: &Path, frames: u64) {
    let dir = dir.join(format!("stream-{frames}"));
    vmm::kvm::asm::assemble_with("agent_stream", &dir, &[("NFRAMES", frames)]).expect("assemble agent_stream.S");
    let image = dir.join("agent_stream.bin");
    let mut strategy = RandomWalk::new(1, KindWeights::default());
    assert!(strategy.begin_execution(0));
    let r = engine::execute(&spec(&image, &dir, 1), &mut strategy).expect("engine");
    assert!(matches!(r.verdict, Verdict::Pass), "{:?}", r.verdict);
    let count = format!("frames {frames:016x}");
    let took = r
        .trace
        .events()
        .iter()
        .any(|e| matches!(&e.kind, engine::trace::EventKind::Console { text } if *text == count));
    assert!(took, "node 2 did not take {frames} frames");
    let dt = r.wall.as_secs_f64();
    println!(
        "virtio-net via netsim through the engine: {frames} frames node 1 -> node 2 in {dt:.3} s = {:.0} frames/s; {} grants, {:.2} per frame, {:.1} us per grant; {:.2} virtual ms ({:.2}x virtual/wall)",
        frames as f64 / dt,
        r.grants,
        r.grants as f64 / frames as f64,
        dt * 1e6 / r.grants as f64,
        r.ended_at.as_ns() as f64 / 1e6,
        r.ended_at.as_secs_f64() / dt
    );
}
