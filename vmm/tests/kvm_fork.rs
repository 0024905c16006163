//! Forking a running node with its process ([`MicroVm::prepare_fork`], fork(2),
//! [`MicroVm::rehome`] in the child): every child continues exactly as the parent
//! does (same console, virtual time, exit count and trace hash), and the children's
//! writes to guest RAM never reach the parent (copy-on-write).

mod kvm_common;

use kvm_common::{guest, in_child, kvm_available};
use vmm::kvm::{MicroVm, MicroVmBuilder, RunLimits, RunOutcome};

/// How a VM ended, as one line (what a child sends back).
fn finish(vm: &mut MicroVm) -> String {
    let outcome = vm.run_to_end(1_000_000).unwrap();
    let console = String::from_utf8_lossy(vm.console()).replace('\n', "|");
    format!(
        "{outcome:?} t={} exits={} trace={} console={console}",
        vm.now().as_ns(),
        vm.stats().exits,
        vm.trace_hash_hex()
    )
}

/// Forks; the child rehomes `vm` and finishes it: its end line.
fn fork_and_finish(vm: &mut MicroVm) -> String {
    let point = vm.prepare_fork().unwrap();
    in_child(|| {
        vm.rehome(&point).unwrap();
        finish(vm)
    })
}

/// A fresh VM of the `timer` guest (it arms its timer, halts, prints, powers off).
fn timer_vm() -> MicroVm {
    MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap()
}

#[test]
fn kvm_forked_children_continue_exactly_as_the_parent() {
    if !kvm_available() {
        return;
    }
    // The reference: one VM run straight through.
    let reference = finish(&mut timer_vm());
    assert!(reference.starts_with("PoweredOff(0)"), "{reference}");

    // Stop mid-run (inside the work loop's output, timer armed), fork three children
    // one after the other, each finishing on its own, then finish the parent too.
    let mut vm = timer_vm();
    assert_eq!(vm.run(RunLimits { max_exits: Some(300), until: None }).unwrap(), RunOutcome::ExitLimit);
    let at_fork = vm.now().as_ns();
    // Each child runs to its end before the next is forked.
    let results: Vec<String> = (0..3).map(|_| fork_and_finish(&mut vm)).collect();
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r, &reference, "child {i} (forked at t={at_fork} ns) diverged");
    }
    // The parent, whose RAM the children wrote copy-on-write, ends as if alone.
    assert_eq!(finish(&mut vm), reference, "the parent after its children");
    eprintln!("3 children forked at t={at_fork} ns ended like the straight run: {}", &reference[..60]);
}

#[test]
fn kvm_fork_of_a_halted_node_waiting_for_its_timer() {
    if !kvm_available() {
        return;
    }
    let reference = finish(&mut timer_vm());
    let mut vm = timer_vm();
    // Run until the guest first halts with its timer armed: a fork there must keep the
    // halted flag and the deadline (both in the VMM's memory, not in KVM).
    let mut out = RunOutcome::ExitLimit;
    for _ in 0..10_000 {
        out = vm.run(RunLimits { max_exits: Some(vm.stats().exits + 1), until: None }).unwrap();
        if vm.stats().hlt > 0 {
            break;
        }
    }
    assert!(vm.stats().hlt > 0 && vm.devices().clock.deadline().is_some(), "{out:?} {:?}", vm.stats());
    assert_eq!(fork_and_finish(&mut vm), reference);
    assert_eq!(finish(&mut vm), reference);
}
