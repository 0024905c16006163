//! The KVM node runtime ([`vmm::kvm::node::KvmNode`]) as the engine drives it.
//! Runs wherever /dev/kvm opens.

mod kvm_common;

use std::time::{Duration, Instant};

use kvm_common::{guest, in_child, kvm_available};
use simtime::VirtualTime;
use vmm::kvm::node::KvmNode;
use vmm::kvm::MicroVm;
use vmm::node::{NodeRuntime, OutputStream, RunOutcome};

/// A node of vmm/guests/NAME.S (4 MiB), connected and started at `start` ns.
fn node_of(name: &str, start: u64) -> KvmNode {
    let vm = MicroVm::boot_image(&guest(name), 4).unwrap();
    let mut node = KvmNode::new(simtime::NodeId::new(1).unwrap(), vm, false, None, 1).unwrap();
    node.wait_connected(VirtualTime::from_ns(start), Duration::from_secs(1)).unwrap();
    node
}

/// Grants `node` until it stops waiting (exits, resets, hangs) or has had `max`
/// grants: what it printed (newlines as '|') and how it ended (`None`: it still
/// waits).
fn grant_until_end(node: &mut KvmNode, max: usize) -> (String, Option<RunOutcome>) {
    let mut text = String::new();
    for _ in 0..max {
        let g = node.grant(node.requested(), 0, Duration::from_secs(60)).unwrap();
        text.extend(g.output.iter().map(|o| String::from_utf8_lossy(&o.bytes).replace('\n', "|")));
        if !matches!(g.outcome, RunOutcome::Waiting { .. }) {
            return (text, Some(g.outcome));
        }
    }
    (text, None)
}

/// [`grant_until_end`] as one line, with the VM's virtual time and trace hash.
fn grant_out(node: &mut KvmNode, max: usize) -> String {
    let (text, end) = grant_until_end(node, max);
    let end = end.map_or("grants left".to_string(), |o| format!("{o:?}"));
    format!("{end} t={} trace={} out={text}", node.vm().now().as_ns(), node.vm().trace_hash_hex())
}

/// A guest spinning without exits is stopped by the wall-clock watchdog and
/// reported as hung, instead of holding the engine forever.
#[test]
fn kvm_node_spinning_guest_is_reported_hung() {
    if !kvm_available() {
        return;
    }
    let mut node = node_of("spin", 0);
    // The grant returning Hung is the check (a watchdog that never fires
    // never returns: no result, never a pass); how soon it fires depends
    // on the host, so it is not asserted.
    let r = node.grant(VirtualTime::ZERO, 0, Duration::from_millis(300)).unwrap().outcome;
    assert!(matches!(r, RunOutcome::Hung { .. }), "{r:?}");
}

/// hello.S prints, then halts with interrupts off: its output is stamped with
/// virtual time from the node's start time on, and it then waits for the engine.
#[test]
fn kvm_node_output_then_idle() {
    if !kvm_available() {
        return;
    }
    let mut node = node_of("hello", 5_000);
    assert_eq!(node.requested(), VirtualTime::from_ns(5_000));
    let mut out = Vec::new();
    let mut outcome = None;
    for _ in 0..100 {
        let g = node.grant(node.requested(), 0, Duration::from_secs(60)).unwrap();
        out.extend(g.output);
        match g.outcome {
            RunOutcome::Waiting { requested } if requested == VirtualTime::IDLE => break,
            RunOutcome::Waiting { .. } => {}
            other => {
                outcome = Some(other);
                break;
            }
        }
    }
    assert_eq!(outcome, None);
    assert_eq!(node.requested(), VirtualTime::IDLE);
    assert!(!node.has_exited());
    let text: String = out
        .iter()
        .filter(|o| o.stream == OutputStream::Console)
        .map(|o| String::from_utf8_lossy(&o.bytes).into_owned())
        .collect();
    assert!(text.contains("hello from a 64-bit guest at t="), "{text}");
    // Stamps start at the node's start time and never decrease.
    assert!(out.first().unwrap().time > VirtualTime::from_ns(5_000));
    assert!(out.windows(2).all(|w| w[0].time <= w[1].time));
}

/// fault.S triple-faults: the node reports a reset that says so and where, not
/// a poweroff, and is gone.
#[test]
fn kvm_node_triple_fault_is_a_reset() {
    if !kvm_available() {
        return;
    }
    let mut node = node_of("fault", 0);
    let (text, outcome) = grant_until_end(&mut node, 100);
    assert!(text.contains("about to fault"), "{text}");
    let Some(RunOutcome::Reset { reason }) = outcome else { panic!("not a reset: {outcome:?}") };
    assert!(reason.contains("triple-faulted (KVM_EXIT_SHUTDOWN) at rip 0x"), "{reason}");
    assert!(node.has_exited());
}

/// A node forked between grants through the runtime's own hooks (prepare_fork, then
/// rehome in the child) goes on exactly like the parent and like a node never
/// forked: same output, end, virtual time and trace hash.
#[test]
fn kvm_node_forked_between_grants_goes_on_like_the_parent() {
    if !kvm_available() {
        return;
    }
    let straight = grant_out(&mut node_of("timer", 0), 10_000);
    assert!(straight.starts_with("Exited { status: Some(0)"), "{straight}");
    let mut node = node_of("timer", 0);
    let head = grant_out(&mut node, 3);
    assert!(head.starts_with("grants left"), "the timer guest ended within 3 grants: {head}");
    node.prepare_fork().unwrap();
    let child = in_child(|| {
        node.rehome().unwrap();
        grant_out(&mut node, 10_000)
    });
    let parent = grant_out(&mut node, 10_000);
    assert_eq!(child, parent, "the child vs its parent");
    // The same end as the straight run, and its output after the fork point.
    let end_of = |s: &str| s.split(" out=").next().unwrap().to_string();
    assert_eq!(end_of(&parent), end_of(&straight));
    assert!(straight.ends_with(parent.split(" out=").nth(1).unwrap()), "{straight}\n{parent}");
}

/// A forked node's child has a watchdog of its own (the parent's thread did not come
/// along): a guest spinning without exits in the child is still reported hung.
#[test]
fn kvm_node_forked_child_keeps_its_watchdog() {
    if !kvm_available() {
        return;
    }
    let mut node = node_of("spin", 0);
    node.prepare_fork().unwrap();
    let child = in_child(|| {
        node.rehome().unwrap();
        let began = Instant::now();
        let r = node.grant(VirtualTime::ZERO, 0, Duration::from_millis(300)).unwrap().outcome;
        format!(
            "{} after {} ms",
            if matches!(r, RunOutcome::Hung { .. }) { "hung" } else { "not hung" },
            began.elapsed().as_millis()
        )
    });
    assert!(child.starts_with("hung after "), "{child}");
    // rehome without prepare_fork is refused.
    let err = node_of("spin", 0).rehome().unwrap_err();
    assert!(err.to_string().contains("rehome without prepare_fork"), "{err}");
}
