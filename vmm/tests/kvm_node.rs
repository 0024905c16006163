//! The KVM node runtime ([`vmm::kvm::node::KvmNode`]) as the engine drives it.
//! Runs wherever /dev/kvm opens.

mod kvm_common;

use std::time::{Duration, Instant};

use kvm_common::{guest, kvm_available};
use vmm::kvm::node::KvmNode;
use vmm::kvm::MicroVm;
use vmm::node::{NodeRuntime, OutputStream, RunOutcome};

/// A node of vmm/guests/NAME.S (4 MiB), connected and started at `start` ns.
fn node_of(name: &str, start: u64) -> KvmNode {
    let vm = MicroVm::boot_image(&guest(name), 4).unwrap();
    let mut node = KvmNode::new(1, vm, false, None, 1).unwrap();
    node.wait_connected(start, Duration::from_secs(1)).unwrap();
    node
}

/// A guest spinning without exits is stopped by the wall-clock watchdog and
/// reported as hung, instead of holding the engine forever.
#[test]
fn kvm_node_spinning_guest_is_reported_hung() {
    if !kvm_available("kvm_node_spinning_guest_is_reported_hung") {
        return;
    }
    let mut node = node_of("spin", 0);
    let began = Instant::now();
    let r = node.grant(0, 0, Duration::from_millis(300)).unwrap().outcome;
    assert!(matches!(r, RunOutcome::Hung { .. }), "{r:?}");
    assert!(began.elapsed() < Duration::from_secs(10), "the watchdog took {:?}", began.elapsed());
}

/// hello.S prints, then halts with interrupts off: its output is stamped with
/// virtual time from the node's start time on, and it then waits for the engine.
#[test]
fn kvm_node_output_then_idle() {
    if !kvm_available("kvm_node_output_then_idle") {
        return;
    }
    let mut node = node_of("hello", 5_000);
    assert_eq!(node.requested(), 5_000);
    let mut out = Vec::new();
    let mut outcome = None;
    for _ in 0..100 {
        let g = node.grant(node.requested(), 0, Duration::from_secs(60)).unwrap();
        out.extend(g.output);
        match g.outcome {
            RunOutcome::Waiting { requested } if requested == vmm::kvm::node::IDLE => break,
            RunOutcome::Waiting { .. } => {}
            other => {
                outcome = Some(other);
                break;
            }
        }
    }
    assert_eq!(outcome, None);
    assert_eq!(node.requested(), vmm::kvm::node::IDLE);
    assert!(!node.has_exited());
    let text: String = out
        .iter()
        .filter(|o| o.stream == OutputStream::Console)
        .map(|o| String::from_utf8_lossy(&o.bytes).into_owned())
        .collect();
    assert!(text.contains("hello from a 64-bit guest at t="), "{text}");
    // Stamps start at the node's start time and never decrease.
    assert!(out.first().unwrap().time > 5_000);
    assert!(out.windows(2).all(|w| w[0].time <= w[1].time));
}

/// fault.S triple-faults: the node reports a reset that says so and where, not
/// a poweroff, and is gone.
#[test]
fn kvm_node_triple_fault_is_a_reset() {
    if !kvm_available("kvm_node_triple_fault_is_a_reset") {
        return;
    }
    let mut node = node_of("fault", 0);
    let mut text = String::new();
    let mut outcome = None;
    for _ in 0..100 {
        let g = node.grant(node.requested(), 0, Duration::from_secs(60)).unwrap();
        text.extend(g.output.iter().map(|o| String::from_utf8_lossy(&o.bytes).into_owned()));
        if !matches!(g.outcome, RunOutcome::Waiting { .. }) {
            outcome = Some(g.outcome);
            break;
        }
    }
    assert!(text.contains("about to fault"), "{text}");
    let Some(RunOutcome::Reset { reason }) = outcome else { panic!("not a reset: {outcome:?}") };
    assert!(reason.contains("triple-faulted (KVM_EXIT_SHUTDOWN) at rip 0x"), "{reason}");
    assert!(node.has_exited());
}
