//! Cuts the guest kernel off from host entropy.
//!
//! UML's `arch_get_random_longs()` is the host's getrandom(2), so without
//! this the guest's random pool (and with it IP ids, TCP sequence numbers,
//! hash seeds, ASLR in guest processes) differs from run to run. A seccomp
//! filter installed between fork and exec makes getrandom fail with ENOSYS
//! for the UML process and everything it forks; the guest kernel then seeds
//! its pool only from what it observes, which the engine fixes.
//!
//! With `SIMCLUSTER_DEBUG_NO_CPUID_FAULTING=1` (`hostfacts`) a second
//! filter also answers `arch_prctl(ARCH_SET_CPUID, ...)` with ENODEV, what a
//! host cpu without CPUID faulting answers, so the guest kernel and its
//! stubs (which inherit the filter) run as on such a host.

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `AUDIT_ARCH_X86_64`.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// The low word of `args[0]` (little-endian). arch_prctl's code is an
/// `int` (the kernel ignores the high word), so the low word decides.
const OFFSET_ARG0_LOW: u32 = 16;
/// `ARCH_SET_CPUID` (asm/prctl.h).
const ARCH_SET_CPUID: u32 = 0x1012;

const fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

const fn jump(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code: BPF_JEQ_K, jt, jf, k }
}

/// The filter: a foreign syscall ABI is killed (it could bypass the number
/// check), getrandom gets ENOSYS, everything else is allowed.
static FILTER: [libc::sock_filter; 7] = [
    stmt(BPF_LD_W_ABS, OFFSET_ARCH),
    jump(AUDIT_ARCH_X86_64, 1, 0),
    stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
    stmt(BPF_LD_W_ABS, OFFSET_NR),
    jump(libc::SYS_getrandom as u32, 0, 1),
    stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
];

/// [`FILTER`], and `arch_prctl(ARCH_SET_CPUID, ...)` gets ENODEV.
static FILTER_NO_CPUID_FAULTING: [libc::sock_filter; 11] = deny_arch_prctl(ARCH_SET_CPUID);

/// [`FILTER`], and `arch_prctl(code, ...)` gets ENODEV (a function of the
/// code so that a test can check it with a code any host answers): FILTER's
/// instructions up to its final allow, then the arch_prctl check.
const fn deny_arch_prctl(code: u32) -> [libc::sock_filter; 11] {
    let mut f = [stmt(BPF_RET_K, SECCOMP_RET_ALLOW); 11];
    let mut i = 0;
    while i < FILTER.len() - 1 {
        f[i] = FILTER[i];
        i += 1;
    }
    f[6] = jump(libc::SYS_arch_prctl as u32, 0, 3);
    f[7] = stmt(BPF_LD_W_ABS, OFFSET_ARG0_LOW);
    f[8] = jump(code, 0, 1);
    f[9] = stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENODEV as u32);
    // f[10]: allow, as initialised.
    f
}

/// Installs the filter on the calling thread. Async-signal-safe: meant for
/// `pre_exec`.
pub fn deny_getrandom() -> std::io::Result<()> {
    install(&FILTER)
}

/// [`deny_getrandom`], and CPUID faulting refused as on a host without it
/// (`SIMCLUSTER_DEBUG_NO_CPUID_FAULTING`). Async-signal-safe.
pub fn deny_getrandom_and_cpuid_faulting() -> std::io::Result<()> {
    install(&FILTER_NO_CPUID_FAULTING)
}

fn install(filter: &'static [libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
    // SAFETY: prctl with documented arguments; prog points at static data
    // that outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn getrandom_fails_with_enosys_in_a_filtered_child() {
        // python3 calls getrandom(2) through os.getrandom.
        let probe = "import os\ntry:\n os.getrandom(8)\n print('ok')\nexcept OSError as e:\n print('errno', e.errno)";
        let mut cmd = Command::new("python3");
        cmd.arg("-c").arg(probe);
        // SAFETY: only the filter installation runs between fork and exec.
        unsafe {
            cmd.pre_exec(super::deny_getrandom);
        }
        let Ok(out) = cmd.output() else {
            testkit::skip(testkit::Cause::Missing, "python3 is not installed (Debian package python3)");
            return;
        };
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("errno {}", libc::ENOSYS));
        let plain = Command::new("python3").arg("-c").arg(probe).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&plain.stdout).trim(), "ok");
    }

    /// arch_prctl(ARCH_SET_CPUID, 0) (also with junk in the high word, which
    /// the kernel ignores), then ARCH_GET_CPUID, then getrandom: "r errno"
    /// each. A set that succeeds is undone (CPUID native again).
    const ARCH_PRCTL_PROBE: &str = "import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(code, arg):
    r = libc.syscall(ctypes.c_long(158), ctypes.c_long(code), ctypes.c_long(arg))
    e = ctypes.get_errno()
    if code & 0xffffffff == 0x1012 and r == 0:
        libc.syscall(ctypes.c_long(158), ctypes.c_long(0x1012), ctypes.c_long(1))
    return '%d %d' % (r, e if r < 0 else 0)
try:
    os.getrandom(8)
    g = 'ok'
except OSError as e:
    g = 'errno %d' % e.errno
print(call(0x1012, 0), call(0x100001012, 0), call(0x1011, 0), g, sep=',')";

    fn arch_prctl_probe(filter: Option<fn() -> std::io::Result<()>>) -> Option<Vec<String>> {
        let mut cmd = Command::new("python3");
        cmd.arg("-c").arg(ARCH_PRCTL_PROBE);
        if let Some(f) = filter {
            // SAFETY: only the filter installation runs between fork and exec.
            unsafe {
                cmd.pre_exec(f);
            }
        }
        let out = cmd.output().ok()?;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Some(String::from_utf8_lossy(&out.stdout).trim().split(',').map(String::from).collect())
    }

    #[test]
    fn the_no_cpuid_faulting_filter_answers_arch_set_cpuid_with_enodev() {
        let Some(filtered) = arch_prctl_probe(Some(super::deny_getrandom_and_cpuid_faulting)) else {
            testkit::skip(testkit::Cause::Missing, "python3 is not installed (it runs the arch_prctl probe)");
            return;
        };
        let enodev = format!("-1 {}", libc::ENODEV);
        // ARCH_SET_CPUID refused, as a host cpu without faulting refuses it;
        // ARCH_GET_CPUID still answers (1: native); getrandom still denied.
        let want = [enodev.clone(), enodev.clone(), "1 0".into(), format!("errno {}", libc::ENOSYS)];
        assert_eq!(filtered, want);
        // The default filter leaves ARCH_SET_CPUID to the host.
        let plain = arch_prctl_probe(Some(super::deny_getrandom)).unwrap();
        let host = if hostfacts::cpuid_faulting_native() { "0 0".to_string() } else { enodev };
        assert_eq!(plain[0], host, "{plain:?}");
        assert_eq!(plain[2..], want[2..]);
    }

    /// The variant's argument check, on a code every host answers:
    /// ARCH_GET_CPUID (0x1011) denied, ARCH_SET_CPUID left to the host.
    static DENY_GET_CPUID: [libc::sock_filter; 11] = super::deny_arch_prctl(0x1011);

    #[test]
    fn the_variant_denies_only_the_code_it_names() {
        let Some(out) = arch_prctl_probe(Some(|| super::install(&DENY_GET_CPUID))) else {
            testkit::skip(testkit::Cause::Missing, "python3 is not installed (it runs the arch_prctl probe)");
            return;
        };
        let plain = arch_prctl_probe(None).unwrap();
        assert_eq!(out[2], format!("-1 {}", libc::ENODEV), "{out:?}");
        assert_eq!(plain[2], "1 0", "{plain:?}");
        assert_eq!(out[..2], plain[..2], "ARCH_SET_CPUID is the host's answer");
        assert_eq!(out[3], format!("errno {}", libc::ENOSYS));
    }

    #[test]
    fn the_default_filter_is_unchanged() {
        // Seven instructions: arch check, kill, getrandom -> ENOSYS, allow.
        let words: Vec<(u16, u8, u8, u32)> = super::FILTER.iter().map(|f| (f.code, f.jt, f.jf, f.k)).collect();
        assert_eq!(
            words,
            [
                (0x20, 0, 0, 4),
                (0x15, 1, 0, 0xc000_003e),
                (0x06, 0, 0, 0x8000_0000),
                (0x20, 0, 0, 0),
                (0x15, 0, 1, libc::SYS_getrandom as u32),
                (0x06, 0, 0, 0x0005_0000 | libc::ENOSYS as u32),
                (0x06, 0, 0, 0x7fff_0000),
            ]
        );
    }
}
