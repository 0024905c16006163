//! Shared helpers of the KVM integration tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
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

/// Runs `f` in a child of fork(2) and returns the line it produced ("child
/// panicked" if it did). A child that diverges may spin in a guest forever:
/// SIGALRM ends it after 30 s, and the parent's waitpid fails the test.
pub fn in_child(f: impl FnOnce() -> String) -> String {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) with a valid two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child touches only what it owns (glibc makes malloc safe after
    // fork) and leaves through _exit, never through the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm(2) has no memory effects; fds[1] is our write end.
        unsafe { libc::alarm(30) };
        let mut w = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        let line =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| "child panicked".into());
        let _ = w.write_all(line.as_bytes());
        drop(w);
        // SAFETY: ends the child without the parent's atexit handlers.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the parent's copy of the write end closes; fds[0] becomes a File.
    unsafe { libc::close(fds[1]) };
    let mut line = String::new();
    unsafe { std::fs::File::from_raw_fd(fds[0]) }.read_to_string(&mut line).unwrap();
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}: {line}");
    line
}
