//! A wall-clock watchdog for a vCPU: stops [`super::MicroVm::run`] when a guest has
//! run too long without yielding (a guest spinning without exits never returns from
//! KVM_RUN on its own; without a PMU nothing preempts it deterministically).
//!
//! The watchdog thread sets the VM's stop flag and sends the vCPU thread a signal
//! (a no-op handler installed without SA_RESTART), repeating every few milliseconds
//! until the run returns: KVM_RUN then fails with EINTR and `run` returns
//! [`super::RunOutcome::Interrupted`]. This is a host-timed event: it only ever ends
//! an execution (reported as a hang), never steers one that continues.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::{Duration, Instant};

fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

extern "C" fn on_kick(_: libc::c_int) {}

fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: installs a handler that does nothing (async-signal-safe), without
        // SA_RESTART so that KVM_RUN returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_kick as *const () as usize;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(kick_signal(), &sa, std::ptr::null_mut());
        }
    });
}

#[derive(Default)]
struct State {
    /// Deadline and the thread to kick.
    armed: Option<(Instant, libc::pthread_t)>,
    quit: bool,
}

/// One watchdog thread for one VM's stop flag.
pub struct Watchdog {
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// A watchdog that sets `stop` and kicks the armed thread at its deadline.
    pub fn new(stop: Arc<AtomicBool>) -> Watchdog {
        install_handler();
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kvm-watchdog".into())
            .spawn(move || {
                let (lock, cv) = &*s;
                let mut st = lock.lock().unwrap();
                loop {
                    if st.quit {
                        return;
                    }
                    match st.armed {
                        None => st = cv.wait(st).unwrap(),
                        Some((deadline, tid)) => {
                            let now = Instant::now();
                            if now < deadline {
                                st = cv.wait_timeout(st, deadline - now).unwrap().0;
                                continue;
                            }
                            stop.store(true, Ordering::SeqCst);
                            // SAFETY: `tid` is the thread that armed us; it disarms
                            // (under this lock) before it could exit.
                            unsafe { libc::pthread_kill(tid, kick_signal()) };
                            st = cv.wait_timeout(st, Duration::from_millis(5)).unwrap().0;
                        }
                    }
                }
            })
            .expect("spawn the KVM watchdog thread");
        Watchdog { shared, thread: Some(thread) }
    }

    /// Arms the watchdog for the calling thread: `limit` from now.
    pub fn arm(&self, limit: Duration) {
        let (lock, cv) = &*self.shared;
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        lock.lock().unwrap().armed = Some((Instant::now() + limit, me));
        cv.notify_all();
    }

    /// Disarms it (no kick is sent after this returns).
    pub fn disarm(&self) {
        let (lock, cv) = &*self.shared;
        lock.lock().unwrap().armed = None;
        cv.notify_all();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            let mut st = lock.lock().unwrap();
            st.armed = None;
            st.quit = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
