//! The jail's steps, between fork and exec (see [`super`] for the process
//! tree and what each step is for). Async-signal-safe system calls only;
//! no allocation: everything comes prepared in the [`Jail`].

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

use super::{Ids, Jail, Step, MAX_OPEN_FILES, MAX_PROCESSES};

/// Enters `jail`. Returns in the kernel process only, ready for exec; the
/// outer process and the pid namespace's init never return (they wait and
/// exit). A failed step writes its number (and a bind's index) to
/// `report` before returning the error.
pub fn enter(jail: &Jail, report: RawFd) -> io::Result<()> {
    let step = Stepper { report };
    if let Ids::Caller { .. } = jail.ids {
        // Unprivileged: a user namespace first, which owns the namespaces
        // below and in which this process may mount.
        step.check(unsafe { libc::unshare(libc::CLONE_NEWUSER) }, Step::CallerUserNamespace, 0)?;
        // Owner of its /proc files (the maps) again, after any change of uid.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0) };
        write_maps(libc::AT_FDCWD, c"/proc/self/setgroups", c"/proc/self/uid_map", c"/proc/self/gid_map", jail)
            .map_err(|_| step.fail(Step::CallerIdMaps, 0))?;
    }
    // The host's /proc, kept for the kernel process to write its own id
    // maps after the host's root is gone (closed at exec).
    let proc_dir = unsafe { libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    step.check(proc_dir, Step::NodeIdMaps, 0)?;
    let namespaces =
        libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWNET | libc::CLONE_NEWUTS | libc::CLONE_NEWPID;
    step.check(unsafe { libc::unshare(namespaces) }, Step::Namespaces, 0)?;
    mount_root(jail, &step)?;

    let mut status = [0 as libc::c_int; 2];
    step.check(unsafe { libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) }, Step::Pipe, 0)?;
    let [status_read, status_write] = status;
    let init = step.check(fork(), Step::ForkInit, 0)?;
    if init > 0 {
        outer(init, status_read);
    }
    // pid 1 of the node's pid namespace (a signal from the outer
    // namespace reaches it only where it has a handler).
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    on_signal(libc::SIGTERM, stop_namespace);
    let kernel = step.check(fork(), Step::ForkKernel, 0)?;
    if kernel > 0 {
        init_process(kernel, status_write);
    }
    kernel_process(jail, &step, proc_dir)
}

/// Reports failed steps on the parent's pipe.
struct Stepper {
    report: RawFd,
}

impl Stepper {
    /// The error of `step` (errno), reported first.
    fn fail(&self, step: Step, index: u8) -> io::Error {
        let err = io::Error::last_os_error();
        let bytes = [step as u8, index];
        // SAFETY: write of a local buffer; a failure leaves the step unnamed.
        unsafe { libc::write(self.report, bytes.as_ptr().cast(), bytes.len()) };
        err
    }

    /// `r`, or the error of `step` where it is negative.
    fn check<T: Copy + PartialOrd + Default>(&self, r: T, step: Step, index: u8) -> io::Result<T> {
        if r < T::default() {
            Err(self.fail(step, index))
        } else {
            Ok(r)
        }
    }
}

/// The node's tmpfs with its files, made the root of this mount namespace.
fn mount_root(jail: &Jail, step: &Stepper) -> io::Result<()> {
    let null = std::ptr::null::<libc::c_char>();
    // SAFETY (every call below): system calls on NUL-terminated strings
    // the Jail owns; the mount namespace is this process's own.
    unsafe {
        // Nothing mounted below propagates back to the host.
        step.check(
            libc::mount(null, c"/".as_ptr(), null, libc::MS_REC | libc::MS_PRIVATE, null.cast()),
            Step::PrivateMounts,
            0,
        )?;
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        let tmpfs = c"tmpfs".as_ptr();
        step.check(
            libc::mount(tmpfs, jail.staging.as_ptr(), tmpfs, flags, jail.tmpfs_options.as_ptr().cast()),
            Step::Tmpfs,
            0,
        )?;
        step.check(libc::chdir(jail.staging.as_ptr()), Step::Tmpfs, 0)?;
        for (i, b) in jail.binds.iter().enumerate() {
            let i = i as u8;
            for d in &b.dirs {
                step.check(make_dir(d), Step::MountPoint, i)?;
            }
            step.check(make_file(&b.target), Step::MountPoint, i)?;
            step.check(
                libc::mount(b.source.as_ptr(), b.target.as_ptr(), null, libc::MS_BIND, null.cast()),
                Step::Bind,
                i,
            )?;
            if let Some(flags) = b.remount {
                let remount = libc::MS_REMOUNT | libc::MS_BIND | flags;
                step.check(libc::mount(null, b.target.as_ptr(), null, remount, null.cast()), Step::ReadOnly, i)?;
            }
        }
        // A pty namespace of the node's own: UML checks at boot that host
        // ptys give SIGIO, and prints the answer on the console.
        let devpts = c"devpts".as_ptr();
        let options = c"newinstance,ptmxmode=0666,mode=0620".as_ptr();
        step.check(make_dir(c"dev/pts"), Step::Devpts, 0)?;
        step.check(
            libc::mount(devpts, c"dev/pts".as_ptr(), devpts, libc::MS_NOSUID | libc::MS_NOEXEC, options.cast()),
            Step::Devpts,
            0,
        )?;
        step.check(make_file(c"dev/ptmx"), Step::Devpts, 0)?;
        step.check(
            libc::mount(c"dev/pts/ptmx".as_ptr(), c"dev/ptmx".as_ptr(), null, libc::MS_BIND, null.cast()),
            Step::Devpts,
            0,
        )?;
        // pivot_root(".", "."): the host's root ends up on top of the
        // tmpfs, and is then detached (pivot_root(2), NOTES).
        let dot = c".".as_ptr();
        step.check(libc::syscall(libc::SYS_pivot_root, dot, dot), Step::PivotRoot, 0)?;
        step.check(libc::umount2(dot, libc::MNT_DETACH), Step::DetachHostRoot, 0)?;
        step.check(libc::chdir(c"/".as_ptr()), Step::DetachHostRoot, 0)?;
    }
    Ok(())
}

/// A directory to mount on (or under), if it is not there yet: 0, or -1
/// with errno.
fn make_dir(path: &CStr) -> libc::c_int {
    // SAFETY: mkdir of a NUL-terminated path.
    if unsafe { libc::mkdir(path.as_ptr(), 0o755) } < 0 && errno() != libc::EEXIST {
        return -1;
    }
    0
}

/// An empty file to mount a file on: 0, or -1 with errno.
fn make_file(path: &CStr) -> libc::c_int {
    // SAFETY: open and close of a NUL-terminated path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o600);
        if fd < 0 {
            return -1;
        }
        libc::close(fd);
    }
    0
}

/// The kernel process's last steps: no capabilities, the node's ids in a
/// user namespace of its own, its limits.
fn kernel_process(jail: &Jail, step: &Stepper, proc_dir: RawFd) -> io::Result<()> {
    // SAFETY (every call below): prctl, set*id, unshare, setrlimit with
    // documented arguments, on this single-threaded process.
    unsafe {
        let (uid, gid) = jail.ids.node();
        if let Ids::FromRoot { .. } = jail.ids {
            step.check(libc::setgroups(0, std::ptr::null()), Step::ChangeIds, 0)?;
        }
        step.check(libc::setresgid(gid, gid, gid), Step::ChangeIds, 0)?;
        step.check(libc::setresuid(uid, uid, uid), Step::ChangeIds, 0)?;
        // A change of uid makes the process non-dumpable, which gives its
        // /proc files (the id maps) to root; and clears the death signal.
        step.check(libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0), Step::ChangeIds, 0)?;
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        step.check(libc::unshare(libc::CLONE_NEWUSER), Step::NodeUserNamespace, 0)?;
        write_maps(proc_dir, c"self/setgroups", c"self/uid_map", c"self/gid_map", jail)
            .map_err(|_| step.fail(Step::NodeIdMaps, 0))?;
        libc::close(proc_dir);
        // The bounding set: a new user namespace starts with a full one
        // (and every capability in it until exec, which drops them for a
        // uid other than 0).
        for cap in 0..64 as libc::c_ulong {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 {
                if errno() == libc::EINVAL {
                    break; // past the last capability this kernel knows
                }
                return Err(step.fail(Step::Capabilities, 0));
            }
        }
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0);
        // After the user namespace: its count of processes is the node's
        // own, not the node uid's across the host.
        for (resource, max) in [(libc::RLIMIT_NPROC, MAX_PROCESSES), (libc::RLIMIT_NOFILE, MAX_OPEN_FILES)] {
            let limit = libc::rlimit { rlim_cur: max, rlim_max: max };
            step.check(libc::setrlimit(resource, &limit), Step::Limits, 0)?;
        }
        step.check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0), Step::Capabilities, 0)?;
    }
    Ok(())
}

/// Writes `deny` to `setgroups`, then the jail's uid and gid maps, each
/// file opened relative to `dir`.
fn write_maps(dir: RawFd, setgroups: &CStr, uid_map: &CStr, gid_map: &CStr, jail: &Jail) -> io::Result<()> {
    write_file(dir, setgroups, b"deny")?;
    write_file(dir, uid_map, jail.uid_map.as_bytes())?;
    write_file(dir, gid_map, jail.gid_map.as_bytes())
}

fn write_file(dir: RawFd, path: &CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: openat/write/close on a NUL-terminated path and a buffer.
    unsafe {
        let fd = libc::openat(dir, path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// The pid namespace's init: reaps until the kernel process ends, then
/// kills and reaps whatever is left (UML's helpers), hands the kernel's
/// wait status to the outer process, and exits. Every process of the node
/// is so waited for by its parent, and their CPU time reaches simcluster's
/// `RUSAGE_CHILDREN`; processes the kernel removes when a namespace's init
/// exits are reaped without that. A SIGTERM ([`stop_namespace`]) kills
/// every process in the namespace.
fn init_process(kernel: libc::pid_t, status_write: RawFd) -> ! {
    close_all_except(status_write);
    let mut kernel_status = None;
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid with an out-parameter; kill of this namespace.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == kernel {
            kernel_status = Some(st);
            unsafe { libc::kill(-1, libc::SIGKILL) };
        } else if r < 0 && errno() != libc::EINTR {
            break; // ECHILD: nothing left
        }
    }
    // Without a status (it cannot happen: the kernel is a child), the
    // outer process ends as init did.
    if let Some(st) = kernel_status {
        // SAFETY: write of a local buffer.
        unsafe { libc::write(status_write, st.to_ne_bytes().as_ptr().cast(), 4) };
    }
    // SAFETY: _exit.
    unsafe { libc::_exit(0) }
}

/// SIGTERM in the namespace's init (which the outer process sends on
/// [`stop`]): kill every other process of the namespace; init's loop then
/// reaps them.
extern "C" fn stop_namespace(_: libc::c_int) {
    // SAFETY: kill is async-signal-safe.
    unsafe { libc::kill(-1, libc::SIGKILL) };
}

/// The pid namespace's init, for [`stop`] (set in the outer process).
static INIT: AtomicI32 = AtomicI32::new(0);

/// SIGTERM in the outer process: passed on to the namespace's init
/// ([`stop_namespace`]), which kills and reaps the node; the outer
/// process then reaps init and ends as the kernel did. A node stopped so
/// has its CPU time counted (a SIGKILL of the group would lose it).
extern "C" fn stop(_: libc::c_int) {
    let init = INIT.load(Ordering::Relaxed);
    if init > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(init, libc::SIGTERM) };
    }
}

/// The outer process (std's child): waits for init, then ends as the
/// kernel process ended (init's own status if it sent none: it was
/// killed). A SIGTERM stops the node ([`stop`]).
fn outer(init: libc::pid_t, status_read: RawFd) -> ! {
    close_all_except(status_read);
    INIT.store(init, Ordering::Relaxed);
    on_signal(libc::SIGTERM, stop);
    let mut st: libc::c_int = 0;
    loop {
        // SAFETY: waitpid with an out-parameter.
        let r = unsafe { libc::waitpid(init, &mut st, 0) };
        if r == init || (r < 0 && errno() != libc::EINTR) {
            break;
        }
    }
    let mut buf = [0u8; 4];
    // SAFETY: read into a local buffer; every writer has exited or exec'd.
    let n = unsafe { libc::read(status_read, buf.as_mut_ptr().cast(), 4) };
    if n == 4 {
        st = libc::c_int::from_ne_bytes(buf);
    }
    end_as(st)
}

/// Ends this process as wait status `st` says: the same exit code, or
/// death by the same signal.
fn end_as(st: libc::c_int) -> ! {
    // SAFETY: sigaction/sigprocmask/kill on this process, then _exit.
    unsafe {
        if libc::WIFSIGNALED(st) {
            let sig = libc::WTERMSIG(st);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &action, std::ptr::null_mut());
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig)
        }
        libc::_exit(if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { 1 })
    }
}

/// Closes every descriptor from 3 up but `keep`: the ones std's spawn and
/// the parent's report use must close here, or the parent would wait for
/// this process to end before its spawn returns.
fn close_all_except(keep: RawFd) {
    // SAFETY: closing descriptors of this process.
    unsafe {
        let ranges = [(3, keep - 1), (keep + 1, libc::c_int::MAX)];
        for (first, last) in ranges.into_iter().filter(|(f, l)| f <= l) {
            if libc::syscall(libc::SYS_close_range, first as libc::c_uint, last as libc::c_uint, 0) < 0 {
                // Before Linux 5.9: one by one, up to the limit.
                let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                let end = (lim.rlim_cur.min(1 << 20) as libc::c_int).min(last.saturating_add(1).max(first));
                for fd in first..end {
                    libc::close(fd);
                }
            }
        }
    }
}

/// Installs `handler` (which must make async-signal-safe calls only) for
/// `sig`, without SA_RESTART: a wait it interrupts returns EINTR.
fn on_signal(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: sigaction with a zeroed action naming a plain handler.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as libc::sighandler_t;
        libc::sigaction(sig, &action, std::ptr::null_mut());
    }
}

/// fork(2) as a system call: glibc's runs atfork handlers, which a child
/// of a multi-threaded process must not.
fn fork() -> libc::pid_t {
    // SAFETY: clone with SIGCHLD only is fork.
    unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) as libc::pid_t }
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
