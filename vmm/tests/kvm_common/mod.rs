//! Shared helpers of the KVM integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// True where /dev/kvm can be opened; otherwise prints why the test is skipped.
pub fn kvm_available(test: &str) -> bool {
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP {test}: cannot open /dev/kvm: {e}");
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
