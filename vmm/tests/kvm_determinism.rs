//! Determinism: the same guest run 5 times gives the same trace hash (sha256 over
//! every exit: kind, virtual time, port/address, data, which covers console bytes and
//! interrupt injections).

mod kvm_common;

use kvm_common::{guest, kvm_available};
use vmm::kvm::{MicroVmBuilder, RunOutcome};

fn run_once(image: &[u8], exit_cost_ns: u64) -> (String, Vec<u8>, u64, u64) {
    let mut vm = MicroVmBuilder::new().memory_mib(8).exit_cost_ns(exit_cost_ns).image(image).build().unwrap();
    assert_eq!(vm.run_to_end(1_000_000).unwrap(), RunOutcome::PoweredOff(0));
    (vm.trace_hash_hex(), vm.console().to_vec(), vm.now().as_ns(), vm.stats().exits)
}

#[test]
fn kvm_same_guest_five_times_same_trace_hash() {
    if !kvm_available() {
        return;
    }
    let image = guest("timer");
    let first = run_once(&image, 1000);
    eprintln!("trace hash {} ({} exits, t={} ns)", first.0, first.3, first.2);
    for i in 1..5 {
        assert_eq!(run_once(&image, 1000), first, "run {i} diverged");
    }
    // The hash does see virtual time: another exit cost gives another trace.
    assert_ne!(run_once(&image, 1001).0, first.0);
}
