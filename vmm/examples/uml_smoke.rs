//! Boots one UML node under the time controller and prints what it does;
//! writes a line to its control line once it says "@ready".
//! Usage: uml_smoke KERNEL INITRD
use std::time::Duration;

use simtime::VirtualTime;
use vmm::node::{NodeConfig, NodeRuntime, OutputStream, RunOutcome};
use vmm::uml::UmlNode;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let dir = std::env::temp_dir().join(format!("uml-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = NodeConfig {
        kernel: a[1].clone().into(),
        initrd: a[2].clone().into(),
        mem_mb: 128,
        node_id: simtime::NodeId::new(1).unwrap(),
        run_dir: dir,
        init_env: vec![("NODE_ID".into(), "1".into())],
        extra_args: vec![],
        net: false,
        entropy_seed: 1,
        read_faults: Default::default(),
        shared_clock: false,
        root_disk: None,
        kernel_faults_cpuid: false,
    };
    let t0 = std::time::Instant::now();
    let mut n = UmlNode::spawn(&cfg).unwrap();
    let mut out = n.wait_connected(VirtualTime::ZERO, Duration::from_secs(10)).unwrap();
    let mut grants = 0;
    let mut sent = false;
    loop {
        let g = n.grant(n.requested(), 1_700_000_000_000_000_000, Duration::from_secs(20)).unwrap();
        out.extend(g.output);
        let r = g.outcome;
        grants += 1;
        let mut ready = false;
        for o in out.drain(..) {
            print!("[{:>14}] {:?} {}", o.time.as_ns(), o.stream, String::from_utf8_lossy(&o.bytes));
            ready |= o.stream == OutputStream::Control && o.bytes.starts_with(b"@ready");
        }
        if ready && !sent {
            n.send_control(VirtualTime::ZERO, b"run workload\n", Duration::from_secs(5)).unwrap();
            sent = true;
        }
        match r {
            RunOutcome::Waiting { .. } => {}
            other => {
                println!("\n{other:?} after {grants} grants, {:?} wall", t0.elapsed());
                break;
            }
        }
    }
}
