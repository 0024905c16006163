//! Snapshots: save a running node mid-execution, restore it 100 times from the same
//! image (MAP_PRIVATE copy-on-write), and get 100 continuations identical to the node
//! that kept running: same console, virtual time, exit count and trace hash.

mod kvm_common;

use kvm_common::{guest, kvm_available, scratch};
use sha2::{Digest, Sha256};
use vmm::kvm::{MicroVm, MicroVmBuilder, RunLimits, RunOutcome};

#[derive(Debug, PartialEq, Eq)]
struct End {
    outcome: RunOutcome,
    console: Vec<u8>,
    now_ns: u64,
    exits: u64,
    hash: String,
}

impl End {
    /// What the guest saw and did (the trace hash aside, which also covers where
    /// the host stopped the run), the console as text for a readable failure.
    fn seen(&self) -> (RunOutcome, String, u64, u64) {
        (self.outcome, String::from_utf8_lossy(&self.console).into_owned(), self.exits, self.now_ns)
    }
}

fn finish(vm: &mut MicroVm) -> End {
    let outcome = vm.run_to_end(1_000_000).unwrap();
    End {
        outcome,
        console: vm.console().to_vec(),
        now_ns: vm.now().as_ns(),
        exits: vm.stats().exits,
        hash: vm.trace_hash_hex(),
    }
}

fn file_hash(p: &std::path::Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(p).unwrap()).to_vec()
}

#[test]
fn kvm_snapshot_restores_100_identical_continuations() {
    if !kvm_available() {
        return;
    }
    let dir = scratch("snap");
    let mut vm = MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap();
    // Stop in the middle: after the second tick, inside the work loop's output.
    let out = vm.run(RunLimits { max_exits: Some(300), until: None }).unwrap();
    assert_eq!(out, RunOutcome::ExitLimit);
    let at_snapshot = (vm.now().as_ns(), vm.console().len());
    let info = vm.snapshot(&dir).unwrap();
    eprintln!("snapshot at t={} ns: {info:?}", at_snapshot.0);
    assert!(info.memory_bytes_written > 0);
    let image_before = file_hash(&dir.join("memory.img"));
    let reference = finish(&mut vm);
    assert_eq!(reference.outcome, RunOutcome::PoweredOff(0));
    drop(vm);
    // Taking the snapshot (mid-`in`, completed with an immediate-exit KVM_RUN) is
    // invisible to the guest: same console, exits and time as an uninterrupted run.
    let mut straight = MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap();
    let s = finish(&mut straight);
    assert_eq!(s.seen(), reference.seen(), "straight run vs the one snapshotted");

    for i in 0..100 {
        let mut r = MicroVm::restore(&dir).unwrap();
        assert_eq!((r.now().as_ns(), r.console().len()), at_snapshot, "restore {i}");
        let end = finish(&mut r);
        assert_eq!(end, reference, "restore {i} diverged");
    }
    assert_eq!(file_hash(&dir.join("memory.img")), image_before, "MAP_PRIVATE restore wrote the image");
    eprintln!(
        "100 restores: console {} bytes, t={} ns, {} exits, trace {}",
        reference.console.len(),
        reference.now_ns,
        reference.exits,
        reference.hash
    );
}

#[test]
fn kvm_snapshot_of_a_halted_node_with_pending_timer() {
    if !kvm_available() {
        return;
    }
    let dir = scratch("snap-halt");
    let mut vm = MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap();
    // Stop while halted waiting for the third tick.
    assert_eq!(
        vm.run(RunLimits { max_exits: None, until: Some(simtime::VirtualTime::from_ns(2_500_000)) }).unwrap(),
        RunOutcome::TimeLimit
    );
    vm.snapshot(&dir).unwrap();
    let reference = finish(&mut vm);
    let mut r = MicroVm::restore(&dir).unwrap();
    assert_eq!(r.now().as_ns(), 2_500_000);
    assert!(r.is_halted());
    assert_eq!(finish(&mut r), reference);
    // Stopping at a time limit while halted is invisible to the guest: same console
    // and exits as an uninterrupted run.
    let mut straight = MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap();
    let s = finish(&mut straight);
    assert_eq!(s.seen(), reference.seen(), "straight run vs the one snapshotted");
}

#[test]
fn kvm_snapshot_rejects_garbage() {
    let dir = scratch("snap-bad");
    std::fs::write(dir.join("state.bin"), b"not a snapshot").unwrap();
    let err = MicroVm::restore(&dir).unwrap_err();
    assert!(err.to_string().contains("wrong magic"), "{err}");
}
