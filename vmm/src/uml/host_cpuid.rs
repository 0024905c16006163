//! simcluster's engine thread faults CPUID like the guest kernel it talks to.
//!
//! Why: the host kernel rewrites `MSR_MISC_FEATURES_ENABLES` each time it
//! switches a CPU from a task with CPUID faulting to one without, or back,
//! and where the host is itself a virtual machine that write is an exit.
//! The 7.2 guest kernel keeps CPUID faulting on for its own process (its
//! guest programs must not see host CPUID), and every grant is two
//! switches between it and simcluster's engine thread. With faulting on
//! for the engine thread too, those switches rewrite nothing: one
//! db-cluster execution took 7.6 s instead of 16.2 s here, same trace.
//!
//! What it costs simcluster: a CPUID in this thread (a crate detecting CPU
//! features lazily) faults. The SIGSEGV handler installed here answers it
//! from a table of the host's answers read before faulting was turned on,
//! skips the instruction and returns; any other SIGSEGV goes to the handler
//! that was installed before (Rust's stack-overflow report) or to the
//! default action. Nothing here reaches a guest: it is host-side speed only.
//!
//! Invariants: the table is complete before any thread turns faulting on
//! (`enable` fills it first); the handler only reads it; faulting is a
//! per-thread setting, so only threads that called [`enable`] fault.

use std::cell::Cell;
use std::sync::OnceLock;

use hostfacts::ARCH_SET_CPUID;

/// `si_code` of a fault the kernel raised itself (a #GP).
const SI_KERNEL: i32 = 0x80;
const SUBLEAVES: usize = 64;

/// The host's CPUID answers for the leaves that exist (basic, hypervisor,
/// extended), read natively.
struct Table {
    /// (first leaf, rows): each row is the leaf's answers per subleaf, or
    /// one answer for a leaf whose answers do not differ across subleaves.
    ranges: Vec<(u32, Vec<Vec<[u32; 4]>>)>,
}

impl Table {
    fn read() -> Table {
        let mut ranges = Vec::new();
        for base in [0u32, 0x4000_0000, 0x8000_0000] {
            let max = cpuid(base, 0)[0];
            if max < base || max - base > 0x3f {
                continue;
            }
            let rows = (base..=max)
                .map(|leaf| {
                    let subs: Vec<[u32; 4]> = (0..SUBLEAVES as u32).map(|s| cpuid(leaf, s)).collect();
                    if subs.iter().all(|s| *s == subs[0]) {
                        vec![subs[0]]
                    } else {
                        subs
                    }
                })
                .collect();
            ranges.push((base, rows));
        }
        Table { ranges }
    }

    /// What the host answered for (leaf, subleaf); zeros for what it does
    /// not have. Async-signal-safe: reads only.
    fn answer(&self, leaf: u32, subleaf: u32) -> [u32; 4] {
        for (base, rows) in &self.ranges {
            if let Some(row) = leaf.checked_sub(*base).and_then(|i| rows.get(i as usize)) {
                return match row.len() {
                    1 => row[0],
                    _ => row.get(subleaf as usize).copied().unwrap_or([0; 4]),
                };
            }
        }
        [0; 4]
    }
}

fn cpuid(leaf: u32, subleaf: u32) -> [u32; 4] {
    let r = core::arch::x86_64::__cpuid_count(leaf, subleaf);
    [r.eax, r.ebx, r.ecx, r.edx]
}

static TABLE: OnceLock<Table> = OnceLock::new();
/// The SIGSEGV action before ours; `Some` once ours is installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}

/// Turns CPUID faulting on for the calling thread, answering its CPUIDs
/// from the table. Idempotent. Returns whether faulting is on (false where
/// the host cpu cannot fault CPUID, or `SIMCLUSTER_DEBUG_NO_CPUID_FAULTING`
/// says to act as if: nothing changed then).
pub fn enable() -> bool {
    if ON.with(Cell::get) {
        return true;
    }
    if hostfacts::cpuid_faulting_forced_off() {
        return false;
    }
    TABLE.get_or_init(Table::read);
    if PREVIOUS.get().is_none() && !install_handler() {
        return false;
    }
    // SAFETY: arch_prctl on the calling thread.
    let on = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 0 as libc::c_ulong) } == 0;
    ON.with(|c| c.set(on));
    on
}

fn install_handler() -> bool {
    // SAFETY: a zeroed sigaction filled below; sigaction with valid pointers.
    unsafe {
        let mut ours: libc::sigaction = std::mem::zeroed();
        ours.sa_sigaction = on_segv as *const () as usize;
        ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut ours.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, &ours, &mut old) != 0 {
            return false;
        }
        let _ = PREVIOUS.set(old);
    }
    true
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext (SA_SIGINFO).
    unsafe {
        let uc = &mut *(ctx as *mut libc::ucontext_t);
        let gregs = &mut uc.uc_mcontext.gregs;
        let rip = gregs[libc::REG_RIP as usize] as *const u8;
        // A CPUID that faulted is a #GP (SI_KERNEL) at an executable,
        // mapped instruction: its two bytes can be read.
        if (*info).si_code == SI_KERNEL && !rip.is_null() && *rip == 0x0f && *rip.add(1) == 0xa2 {
            if let Some(t) = TABLE.get() {
                let r = t.answer(gregs[libc::REG_RAX as usize] as u32, gregs[libc::REG_RCX as usize] as u32);
                // 32-bit destinations: the upper halves are zeroed.
                gregs[libc::REG_RAX as usize] = i64::from(r[0]);
                gregs[libc::REG_RBX as usize] = i64::from(r[1]);
                gregs[libc::REG_RCX as usize] = i64::from(r[2]);
                gregs[libc::REG_RDX as usize] = i64::from(r[3]);
                gregs[libc::REG_RIP as usize] += 2;
                return;
            }
        }
        // Not ours: the previous handler, or the default action (restored
        // here; the fault repeats when we return).
        match PREVIOUS.get() {
            Some(old)
                if old.sa_flags & libc::SA_SIGINFO != 0
                    && old.sa_sigaction != libc::SIG_DFL
                    && old.sa_sigaction != libc::SIG_IGN =>
            {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(old.sa_sigaction);
                f(sig, info, ctx);
            }
            Some(old) => {
                libc::sigaction(libc::SIGSEGV, old, std::ptr::null_mut());
            }
            None => {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGSEGV, &dfl, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuid_in_a_faulting_thread_answers_as_the_host() {
        // A thread of its own: faulting is per thread.
        let test = testkit::current_test();
        std::thread::spawn(move || {
            let probes = [(0, 0), (1, 0), (1, 0x1234), (7, 0), (7, 1), (0xd, 1), (0x8000_0001, 0), (0x8000_0000, 99)];
            let native: Vec<[u32; 4]> = probes.iter().map(|&(l, s)| cpuid(l, s)).collect();
            if !enable() {
                testkit::skip_named(&test, testkit::Cause::Host, "this host cpu cannot fault CPUID");
                return;
            }
            assert!(enable(), "enable is idempotent");
            let faulted: Vec<[u32; 4]> = probes.iter().map(|&(l, s)| cpuid(l, s)).collect();
            assert_eq!(faulted, native);
            // Rust's own lazy detection (it may execute CPUID now) works.
            let _ = std::arch::is_x86_feature_detected!("avx2");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn leaves_without_subleaves_ignore_ecx() {
        let t = Table::read();
        assert_eq!(t.answer(0, 0), t.answer(0, 0xdead));
        assert_eq!(t.answer(0, 0), cpuid(0, 0));
        // A leaf past every range reads zeros.
        assert_eq!(t.answer(0x2000_0000, 0), [0; 4]);
    }
}
