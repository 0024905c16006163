//! Forking a running node with its process ([`MicroVm::prepare_fork`], fork(2),
//! [`MicroVm::rehome`] in the child): every child continues exactly as the parent
//! does (same console, virtual time, exit count and trace hash), and the children's
//! writes to guest RAM never reach the parent (copy-on-write).

mod kvm_common;

use std::io::{Read, Write};
use std::os::fd::FromRawFd;

use kvm_common::{guest, kvm_available};
use vmm::kvm::{MicroVm, MicroVmBuilder, RunLimits, RunOutcome};

/// How a VM ended, as one line (what a child sends back).
fn finish(vm: &mut MicroVm) -> String {
    let outcome = vm.run_to_end(1_000_000).unwrap();
    let console = String::from_utf8_lossy(vm.console()).replace('\n', "|");
    format!("{outcome:?} t={} exits={} trace={} console={console}", vm.now_ns(), vm.stats().exits, vm.trace_hash_hex())
}

/// Forks; the child rehomes `vm`, finishes it and writes its end line to a pipe.
fn fork_and_finish(vm: &mut MicroVm) -> (libc::pid_t, std::fs::File) {
    let point = vm.prepare_fork().unwrap();
    let mut fds = [0; 2];
    // SAFETY: pipe(2) with a valid two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the test's only thread forks; the child touches only what it owns and
    // leaves through _exit, never through the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // A child that diverges may spin in the guest forever: SIGALRM ends it, and
        // the parent's waitpid reports that.
        // SAFETY: alarm(2) has no memory effects.
        unsafe { libc::alarm(30) };
        // SAFETY: fds[1] is this process's write end of the pipe.
        let mut w = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        let line = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            vm.rehome(&point).unwrap();
            finish(vm)
        }))
        .unwrap_or_else(|_| "child panicked".to_string());
        let _ = w.write_all(line.as_bytes());
        drop(w);
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: closing the parent's copy of the write end; fds[0] becomes a File.
    unsafe { libc::close(fds[1]) };
    (pid, unsafe { std::fs::File::from_raw_fd(fds[0]) })
}

/// A fresh VM of the `timer` guest (it arms its timer, halts, prints, powers off).
fn timer_vm() -> MicroVm {
    MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap()
}

fn child_result(pid: libc::pid_t, mut r: std::fs::File) -> String {
    let mut line = String::new();
    r.read_to_string(&mut line).unwrap();
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
    line
}

#[test]
fn kvm_forked_children_continue_exactly_as_the_parent() {
    if !kvm_available("kvm_forked_children_continue_exactly_as_the_parent") {
        return;
    }
    // The reference: one VM run straight through.
    let reference = finish(&mut timer_vm());
    assert!(reference.starts_with("PoweredOff(0)"), "{reference}");

    // Stop mid-run (inside the work loop's output, timer armed), fork three children
    // one after the other, each finishing on its own, then finish the parent too.
    let mut vm = timer_vm();
    assert_eq!(vm.run(RunLimits { max_exits: Some(300), until_ns: None }).unwrap(), RunOutcome::ExitLimit);
    let at_fork = vm.now_ns();
    let mut children = Vec::new();
    for _ in 0..3 {
        children.push(fork_and_finish(&mut vm));
    }
    let results: Vec<String> = children.into_iter().map(|(pid, r)| child_result(pid, r)).collect();
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r, &reference, "child {i} (forked at t={at_fork} ns) diverged");
    }
    // The parent, whose RAM the children wrote copy-on-write, ends as if alone.
    assert_eq!(finish(&mut vm), reference, "the parent after its children");
    eprintln!("3 children forked at t={at_fork} ns ended like the straight run: {}", &reference[..60]);
}

#[test]
fn kvm_fork_of_a_halted_node_waiting_for_its_timer() {
    if !kvm_available("kvm_fork_of_a_halted_node_waiting_for_its_timer") {
        return;
    }
    let reference = finish(&mut timer_vm());
    let mut vm = timer_vm();
    // Run until the guest first halts with its timer armed: a fork there must keep the
    // halted flag and the deadline (both in the VMM's memory, not in KVM).
    let mut out = RunOutcome::ExitLimit;
    for _ in 0..10_000 {
        out = vm.run(RunLimits { max_exits: Some(vm.stats().exits + 1), until_ns: None }).unwrap();
        if vm.stats().hlt > 0 {
            break;
        }
    }
    assert!(vm.stats().hlt > 0 && vm.devices().clock.deadline().is_some(), "{out:?} {:?}", vm.stats());
    let (pid, r) = fork_and_finish(&mut vm);
    assert_eq!(child_result(pid, r), reference);
    assert_eq!(finish(&mut vm), reference);
}
