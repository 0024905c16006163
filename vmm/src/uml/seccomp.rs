//! Cuts the guest kernel off from host entropy.
//!
//! UML's `arch_get_random_longs()` is the host's getrandom(2), so without
//! this the guest's random pool (and with it IP ids, TCP sequence numbers,
//! hash seeds, ASLR in guest processes) differs from run to run. A seccomp
//! filter installed between fork and exec makes getrandom fail with ENOSYS
//! for the UML process and everything it forks; the guest kernel then seeds
//! its pool only from what it observes, which the engine fixes.

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

/// Installs the filter on the calling thread. Async-signal-safe: meant for
/// `pre_exec`.
pub fn deny_getrandom() -> std::io::Result<()> {
    let prog = libc::sock_fprog { len: FILTER.len() as u16, filter: FILTER.as_ptr() as *mut _ };
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
            println!("skipping: python3 is not installed");
            return;
        };
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("errno {}", libc::ENOSYS));
        let plain = Command::new("python3").arg("-c").arg(probe).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&plain.stdout).trim(), "ok");
    }
}
