//! Running a closure in a child of fork(2) and getting its bytes back: the
//! process-level half of warm start (the node-level half is
//! [`nodeapi::NodeRuntime::prepare_fork`] and `rehome`).
//!
//! Why fork: it copies everything the simulator holds for an execution at
//! once (engine state, devices, netsim, disksim, the trace), with guest RAM
//! shared copy-on-write, so nothing needs a clone or a snapshot format. Its
//! price is the usual one:
//! - only the forking thread exists in the child: state another thread held
//!   (a lock, a watchdog) must be re-made there (`rehome` does so for KVM
//!   nodes); glibc makes malloc safe to use after fork;
//! - the child must never return into its caller's stack frames nor run the
//!   parent's exit handlers: it leaves through `_exit` whatever happens, a
//!   panic included (reported as [`ChildError::Panicked`]).
//!
//! Invariants: [`in_child`] returns only in the parent, after the child has
//! been reaped (no zombie is left, whatever the outcome); a child dies with
//! the thread that forked it (`PR_SET_PDEATHSIG`), so killing a child kills
//! the children it forked in turn.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// How a child did not give its bytes back.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// pipe(2), fork(2), poll(2) or reading the pipe failed.
    #[error("fork: {0}")]
    Io(#[from] std::io::Error),
    /// The closure panicked in the child (its message went to stderr).
    #[error("the forked child panicked")]
    Panicked,
    /// The child died without finishing (a signal, or an exit code other
    /// than 0).
    #[error("the forked child died ({0})")]
    Died(String),
    /// `cancel` was set: the child was killed.
    #[error("the forked child was cancelled")]
    Cancelled,
}

/// How often the parent looks at `cancel` while it waits (ms).
const CANCEL_POLL_MS: libc::c_int = 100;

/// What the child's exit code means: 0 ok, `PANICKED` the closure panicked.
const PANICKED: i32 = 101;

/// Runs `f` in a child of fork(2) and returns the bytes it produced. The
/// parent waits, checking `cancel` every 100 ms; once it is set the child is
/// killed and [`ChildError::Cancelled`] returned.
///
/// # Safety
///
/// The caller's process may have other threads: `f` must not touch state
/// they could have held at the fork (locks, channels) except through what
/// it re-makes itself. `f` runs in the child only.
pub unsafe fn in_child(f: impl FnOnce() -> Vec<u8>, cancel: Option<&AtomicBool>) -> Result<Vec<u8>, ChildError> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) with a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: both descriptors are fresh and ours alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: see the function's contract; the child leaves through _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    if pid == 0 {
        // Dies with the thread that forked it: a child whose parent was
        // killed (a cancelled execution's, with children of its own) must
        // not run on unseen.
        // SAFETY: prctl(2) with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        drop(read);
        let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(bytes) => {
                let mut w = std::fs::File::from(write);
                if w.write_all(&bytes).is_ok() {
                    0
                } else {
                    1
                }
            }
            Err(_) => PANICKED,
        };
        // SAFETY: ends the child without unwinding into the parent's frames
        // or running its exit handlers.
        unsafe { libc::_exit(code) };
    }
    drop(write);
    let out = read_until_eof(read, pid, cancel);
    let status = reap(pid)?;
    let bytes = out?;
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(bytes),
        (true, PANICKED) => Err(ChildError::Panicked),
        (true, code) => Err(ChildError::Died(format!("exit code {code}"))),
        _ => Err(ChildError::Died(format!("signal {}", libc::WTERMSIG(status)))),
    }
}

/// Reads the child's pipe to its end; kills the child if `cancel` is set.
fn read_until_eof(read: OwnedFd, pid: libc::pid_t, cancel: Option<&AtomicBool>) -> Result<Vec<u8>, ChildError> {
    use std::os::fd::AsRawFd;
    let mut file = std::fs::File::from(read);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(ChildError::Cancelled);
        }
        let mut pfd = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, CANCEL_POLL_MS) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        if n == 0 {
            continue;
        }
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(k) => out.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits for child `pid`; its wait status.
fn reap(pid: libc::pid_t) -> Result<libc::c_int, ChildError> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_child_gives_its_bytes_and_the_parent_keeps_its_state() {
        let mut parent_state = vec![1u8, 2, 3];
        // SAFETY: the closure touches only memory this thread owns.
        let got = unsafe {
            in_child(
                || {
                    parent_state.push(4);
                    parent_state.clone()
                },
                None,
            )
        }
        .unwrap();
        assert_eq!(got, vec![1, 2, 3, 4]);
        parent_state.push(9);
        assert_eq!(parent_state, vec![1, 2, 3, 9], "the child's change stayed in the child");
    }

    #[test]
    fn a_panicking_child_is_reported_and_reaped() {
        // SAFETY: as above.
        let r = unsafe { in_child(|| panic!("on purpose, in the child"), None) };
        assert!(matches!(r, Err(ChildError::Panicked)), "{r:?}");
    }

    #[test]
    fn a_child_killed_by_a_signal_is_reported() {
        // SAFETY: as above; the child kills itself.
        let r = unsafe {
            in_child(
                || {
                    libc::raise(libc::SIGKILL);
                    Vec::new()
                },
                None,
            )
        };
        assert!(matches!(&r, Err(ChildError::Died(s)) if s == "signal 9"), "{r:?}");
    }

    #[test]
    fn a_cancelled_child_is_killed() {
        let cancel = AtomicBool::new(true);
        // SAFETY: as above; the child sleeps until it is killed.
        let r = unsafe {
            in_child(
                || {
                    std::thread::sleep(Duration::from_secs(60));
                    Vec::new()
                },
                Some(&cancel),
            )
        };
        assert!(matches!(r, Err(ChildError::Cancelled)), "{r:?}");
    }
}
