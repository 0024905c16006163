//! A user-mode Linux node's confinement, and nothing else: what a program
//! that escapes the guest (a guest program that breaks out of UML's stub,
//! or a hostile guest kernel, which is host code) can reach on the host.
//! The node runtime (`vmm::uml`) plans a jail with [`plan`] and enters it
//! with [`enter`] between fork and exec of the kernel process; this crate
//! knows nothing of the runtime (the way Firecracker's jailer stands apart
//! from its VMM).
//!
//! The node's kernel process runs as three processes, one process group:
//!
//! ```text
//! simcluster ─ outer (std's Child, simcluster's pid namespace; mirrors the exit)
//!               └ init (pid 1 of the node's pid namespace; reaps, reports the kernel's exit)
//!                  └ linux (pid 2: the node's kernel, then UML's helper processes)
//! ```
//!
//! The kernel is not pid 1 because a namespace's init ignores the signals
//! it sends itself: UML's abort() on a guest panic would end in another
//! signal, and the exit signal is in the trace. `init` hands the kernel's
//! wait status to `outer` over a pipe, and `outer` ends the same way (an
//! exit code, or the same signal), so the engine sees what it saw before.
//! When `init` ends, the kernel removes every process left in the pid
//! namespace: no helper process outlives its node.
//!
//! The kernel process sees ([`plan`], [`enter`]):
//! - **files:** a fresh tmpfs as `/`, owned by the node's uid, sized
//!   `mem_mb` plus [`TMPFS_SLACK_MIB`] (UML's memory file lives there, so
//!   this bounds the node's memory; the tmpfs disappears with the node);
//!   in it, read-only, the kernel as `/linux`, its loader and libraries at
//!   their own paths, and the root filesystem as `/rootfs.img`; the
//!   node's vhost-user and time-travel sockets; `/dev/null`; a pty file
//!   system of its own (`/dev/pts`, `/dev/ptmx`: UML checks ptys at boot
//!   and prints the answer, which is in the trace). Nothing else of the
//!   host: no /proc, /sys, /etc, /usr, no other device.
//! - **ids:** an unprivileged uid and gid ([`NODE_UID`] when simcluster is
//!   root, the caller's own otherwise), in a user namespace of its own
//!   that maps only them; no capabilities (bounding and ambient sets
//!   empty), `no_new_privs`.
//! - **namespaces:** its own user, mount, pid, IPC, network (a loopback,
//!   down) and UTS namespaces.
//! - **limits:** [`MAX_PROCESSES`] processes (UML uses one host process per
//!   guest address space), [`MAX_OPEN_FILES`] descriptors, no core files.
//!
//! When simcluster is root the mounts are made as root in namespaces it
//! owns, then the kernel drops to [`NODE_UID`]; otherwise `outer` first
//! enters a user namespace that maps the caller's ids (unprivileged user
//! namespaces must be allowed) and does the rest from there.
//! `SIMCLUSTER_DEBUG_UNCONFINED=1` ([`UNCONFINED_ENV`]) turns all of this
//! off, to compare costs or to run where namespaces are unavailable.
//!
//! Invariant: [`enter`] runs between fork and exec of a multi-threaded
//! process, so it makes async-signal-safe system calls only and never
//! allocates; everything it needs (paths, mount options, map lines) is
//! prepared by [`plan`] in the parent.

#![deny(missing_docs)]

mod enter;
mod libraries;
#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use enter::enter;

/// `SIMCLUSTER_DEBUG_UNCONFINED=1`: nodes run as simcluster's own user in
/// its namespaces, as before confinement existed.
pub const UNCONFINED_ENV: &str = "SIMCLUSTER_DEBUG_UNCONFINED";

/// The uid and gid of a node's processes when simcluster runs as root:
/// below the range of subordinate ids tools hand out (100000 and up, 65536
/// per user) would collide with Debian's and systemd's allocations, so it
/// is high, and below 2^31 for tools that read ids as signed.
pub const NODE_UID: u32 = 2_000_000_000;

/// The most processes a node's kernel may have at once in its user
/// namespace (the kernel, its helpers: one per guest address space).
pub const MAX_PROCESSES: u64 = 1024;

/// The most descriptors a node's process may hold.
pub const MAX_OPEN_FILES: u64 = 1024;

/// The node's tmpfs holds UML's memory file (`mem_mb`) and this much more
/// (UML's own small files).
pub const TMPFS_SLACK_MIB: u64 = 64;

/// The directory in the run directory where the node's tmpfs is mounted
/// before it becomes the node's root (only inside the node's mount
/// namespace: on the host it stays empty).
pub const STAGING_DIR: &str = "jail";

/// The name the kernel has inside the jail.
pub const KERNEL_IN_JAIL: &str = "/linux";

/// Whether nodes are confined: not with [`UNCONFINED_ENV`]`=1`.
pub fn enabled() -> bool {
    std::env::var_os(UNCONFINED_ENV).is_none_or(|v| v != "1")
}

/// A host path to show in the jail at `target` (relative to its root).
#[derive(Debug, Clone)]
pub(crate) struct Bind {
    source: CString,
    target: CString,
    /// The directories to create for `target`, parents first (relative).
    dirs: Vec<CString>,
    /// The flags to remount the view with (a file: read-only, nosuid,
    /// nodev; a device: nosuid, noexec), with those of the source's mount
    /// that a user namespace may not clear. `None`: shown as it is (a
    /// socket).
    remount: Option<libc::c_ulong>,
}

/// Whose ids the node runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ids {
    /// simcluster is root: mounts as root, then the node becomes
    /// [`NODE_UID`].
    FromRoot {
        /// The node's uid.
        uid: u32,
        /// The node's gid.
        gid: u32,
    },
    /// simcluster is not root: a user namespace mapping the caller's ids
    /// first.
    Caller {
        /// The caller's uid.
        uid: u32,
        /// The caller's gid.
        gid: u32,
    },
}

impl Ids {
    /// The node's uid and gid.
    pub fn node(self) -> (u32, u32) {
        match self {
            Ids::FromRoot { uid, gid } | Ids::Caller { uid, gid } => (uid, gid),
        }
    }
}

/// Everything [`enter`] needs, prepared in the parent.
#[derive(Debug, Clone)]
pub struct Jail {
    pub(crate) ids: Ids,
    /// `<run dir>/jail`, absolute.
    staging: CString,
    /// tmpfs options: size, mode, owner.
    tmpfs_options: CString,
    binds: Vec<Bind>,
    /// `"U U 1\n"` and `"G G 1\n"`: the node's user namespace maps its own
    /// ids only.
    uid_map: CString,
    gid_map: CString,
}

/// A step of [`enter`]; the one that failed is reported to the parent
/// (one byte over a pipe, with the bind's index where it is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    CallerUserNamespace = 1,
    CallerIdMaps,
    Namespaces,
    PrivateMounts,
    Tmpfs,
    MountPoint,
    Bind,
    ReadOnly,
    Devpts,
    PivotRoot,
    DetachHostRoot,
    Pipe,
    ForkInit,
    ForkKernel,
    Capabilities,
    ChangeIds,
    NodeUserNamespace,
    NodeIdMaps,
    Limits,
}

impl Step {
    const ALL: [Step; 19] = [
        Step::CallerUserNamespace,
        Step::CallerIdMaps,
        Step::Namespaces,
        Step::PrivateMounts,
        Step::Tmpfs,
        Step::MountPoint,
        Step::Bind,
        Step::ReadOnly,
        Step::Devpts,
        Step::PivotRoot,
        Step::DetachHostRoot,
        Step::Pipe,
        Step::ForkInit,
        Step::ForkKernel,
        Step::Capabilities,
        Step::ChangeIds,
        Step::NodeUserNamespace,
        Step::NodeIdMaps,
        Step::Limits,
    ];

    fn from_byte(b: u8) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u8 == b)
    }

    /// What the step does, for an error message.
    fn describe(self) -> &'static str {
        match self {
            Step::CallerUserNamespace => "enter a user namespace (are unprivileged user namespaces allowed?)",
            Step::CallerIdMaps => "map the caller's uid and gid in its user namespace",
            Step::Namespaces => "create mount, pid, IPC, network and UTS namespaces",
            Step::PrivateMounts => "make the host's mounts private to the node",
            Step::Tmpfs => "mount the node's tmpfs",
            Step::MountPoint => "create a mount point in the node's tmpfs",
            Step::Bind => "show a host file in the node's root",
            Step::ReadOnly => "make a shown file read-only",
            Step::Devpts => "mount the node's own pty file system (/dev/pts, /dev/ptmx)",
            Step::PivotRoot => "make the tmpfs the node's root (pivot_root)",
            Step::DetachHostRoot => "detach the host's root",
            Step::Pipe => "create the exit-status pipe",
            Step::ForkInit => "start the pid namespace's init",
            Step::ForkKernel => "start the kernel process",
            Step::Capabilities => "drop capabilities",
            Step::ChangeIds => "change to the node's uid and gid",
            Step::NodeUserNamespace => "enter the node's user namespace",
            Step::NodeIdMaps => "map the node's uid and gid",
            Step::Limits => "set resource limits",
        }
    }
}

/// What a node's jail shows: host files, read-only, at the names given
/// (the kernel at [`KERNEL_IN_JAIL`], the root filesystem), and sockets
/// in the run directory (names relative to it, shown at the same names).
pub struct Contents<'a> {
    /// The kernel binary (its loader and libraries are shown too).
    pub kernel: &'a Path,
    /// Host files and their absolute names in the jail; the kernel first.
    pub files: &'a [(&'a Path, &'a str)],
    /// The node's run directory, where the sockets are and the jail's
    /// tmpfs is staged.
    pub run_dir: &'a Path,
    /// Sockets in `run_dir` (names relative to it) to show at the same names.
    pub sockets: &'a [&'a str],
    /// The node's memory (MiB): the tmpfs holds UML's memory file.
    pub mem_mb: u32,
}

/// Why a jail cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    /// A path could not be resolved or inspected. (The error is in the
    /// message and not a `source`, so that a chain prints it once.)
    #[error("{path}: {what}: {error}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The error.
        error: io::Error,
    },
    /// The kernel's shared libraries could not be listed.
    #[error("{kernel}: cannot list its shared libraries: {why}")]
    Libraries {
        /// The kernel binary.
        kernel: PathBuf,
        /// Why.
        why: String,
    },
    /// A step between fork and exec failed.
    #[error("cannot confine the node: {step}: {error} (SIMCLUSTER_DEBUG_UNCONFINED=1 runs nodes unconfined)")]
    Enter {
        /// The step, as `Step::describe` says it, with the path where
        /// it is a bind.
        step: String,
        /// The system call's error.
        error: io::Error,
    },
}

/// Prepares the jail of a node: resolves every path, lists the kernel's
/// libraries, and (as root) gives the sockets to the node's uid.
pub fn plan(c: &Contents) -> Result<Jail, JailError> {
    // SAFETY: geteuid and getegid cannot fail.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let ids =
        if euid == 0 { Ids::FromRoot { uid: NODE_UID, gid: NODE_UID } } else { Ids::Caller { uid: euid, gid: egid } };
    plan_for(ids, c)
}

/// [`plan`] for the node ids `ids`.
fn plan_for(ids: Ids, c: &Contents) -> Result<Jail, JailError> {
    let (uid, gid) = ids.node();

    let staging = c.run_dir.join(STAGING_DIR);
    match std::fs::create_dir(&staging) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(JailError::Path { path: staging, what: "create the staging directory", error }),
    }
    let staging = absolute(&staging)?;

    let mut binds = Vec::new();
    for (source, target) in c.files {
        binds.push(read_only(source, target)?);
    }
    for lib in libraries::of(c.kernel)? {
        let target = lib.to_string_lossy().into_owned();
        binds.push(read_only(&lib, &target)?);
    }
    // Programs expect it (a shell's background job reads it); a device,
    // so not `nodev`.
    let null = Path::new("/dev/null");
    binds.push(Bind {
        remount: Some(libc::MS_NOSUID | libc::MS_NOEXEC | locked_flags(null)?),
        ..view(null, "dev/null")?
    });
    for name in c.sockets {
        let path = c.run_dir.join(name);
        if let Ids::FromRoot { uid, gid } = ids {
            // connect(2) needs write permission on the socket.
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(|error| JailError::Path {
                path: path.clone(),
                what: "give the socket to the node's uid (EINVAL: simcluster is root in a user namespace that does not map jail::NODE_UID, as in a container; SIMCLUSTER_DEBUG_UNCONFINED=1 runs nodes unconfined)",
                error,
            })?;
        }
        binds.push(Bind { remount: None, ..view(&path, name)? });
    }
    let size_mib = u64::from(c.mem_mb) + TMPFS_SLACK_MIB;
    Ok(Jail {
        ids,
        staging: cstring(&staging),
        tmpfs_options: CString::new(format!("size={size_mib}m,mode=0700,uid={uid},gid={gid}")).expect("no NUL"),
        binds,
        uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("no NUL"),
        gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("no NUL"),
    })
}

/// A read-only view of the host file `source` at `target` in the jail.
fn read_only(source: &Path, target: &str) -> Result<Bind, JailError> {
    let ro = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | locked_flags(source)?;
    Ok(Bind { remount: Some(ro), ..view(source, target)? })
}

/// The host file `source` at `target` in the jail (a leading `/` is
/// dropped: targets are relative to the jail's root), remounted as it is.
fn view(source: &Path, target: &str) -> Result<Bind, JailError> {
    let source = absolute(source)?;
    let target = Path::new(target.trim_start_matches('/'));
    let mut dirs = Vec::new();
    let mut parent = target.parent();
    while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
        dirs.push(cstring(p));
        parent = p.parent();
    }
    dirs.reverse();
    Ok(Bind { source: cstring(&source), target: cstring(target), dirs, remount: None })
}

/// The flags of the mount `path` is on that a remount in a user namespace
/// must keep (the kernel refuses to clear them there).
fn locked_flags(path: &Path) -> Result<libc::c_ulong, JailError> {
    let c = cstring(path);
    // SAFETY: statvfs with a valid path and an out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(JailError::Path { path: path.into(), what: "statvfs", error: io::Error::last_os_error() });
    }
    let pairs = [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(pairs.iter().filter(|(st_flag, _)| st.f_flag & st_flag != 0).fold(0, |acc, (_, ms)| acc | ms))
}

fn absolute(p: &Path) -> Result<PathBuf, JailError> {
    p.canonicalize().map_err(|error| JailError::Path { path: p.into(), what: "resolve", error })
}

fn cstring(p: &Path) -> CString {
    // A path from the file system holds no NUL.
    CString::new(p.as_os_str().as_bytes()).expect("a path without NUL")
}

impl Jail {
    /// The error of a failed [`enter`], from the byte(s) it reported.
    pub fn failure(&self, report: &[u8], source: io::Error) -> JailError {
        let step = match report.first().copied().and_then(Step::from_byte) {
            Some(s @ (Step::Bind | Step::ReadOnly | Step::MountPoint)) => {
                match report.get(1).and_then(|i| self.binds.get(*i as usize)) {
                    Some(b) => {
                        format!("{} ({} as /{})", s.describe(), b.source.to_string_lossy(), b.target.to_string_lossy())
                    }
                    None => s.describe().to_string(),
                }
            }
            Some(s) => s.describe().to_string(),
            None => "an unreported step".to_string(),
        };
        JailError::Enter { step, error: source }
    }
}
