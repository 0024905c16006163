//! Shared helpers of the KVM integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// True where /dev/kvm can be opened; otherwise records why the running test
/// skips (`testkit`: the host has no KVM, `Cause::Host`).
pub fn kvm_available() -> bool {
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(_) => true,
        Err(e) => {
            testkit::skip(testkit::Cause::Host, format!("cannot open /dev/kvm: {e}"));
            false
        }
    }
}

/// A fresh scratch directory under cargo's per-target temp dir.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kvm-tests").join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Assembles vmm/guests/<name>.S.
pub fn guest(name: &str) -> Vec<u8> {
    vmm::kvm::asm::assemble(name, &scratch(&format!("asm-{name}"))).expect("assemble guest")
}

/// Runs `f` in a child of fork(2) (`vmm::fork::in_child`) and returns the line
/// it produced ("child panicked" if it did). A child that diverges may spin in a
/// guest forever: SIGALRM ends it after 30 s, and the test fails saying so.
pub fn in_child(f: impl FnOnce() -> String) -> String {
    let child = || {
        // SAFETY: alarm(2) has no memory effects.
        unsafe { libc::alarm(30) };
        f().into_bytes()
    };
    // SAFETY: the child touches only what the test owns (glibc makes malloc safe
    // after fork).
    match unsafe { vmm::fork::in_child(child, None) } {
        Ok(bytes) => String::from_utf8(bytes).expect("the child's line is UTF-8"),
        Err(vmm::fork::ChildError::Panicked) => "child panicked".into(),
        Err(e) => panic!("{e}"),
    }
}
