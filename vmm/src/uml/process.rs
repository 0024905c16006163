//! A user-mode Linux node's host side: the `linux` process (and the helper
//! processes UML forks behind guest address spaces), how it is started,
//! confined, killed and reaped. Unconfined, they are one process group;
//! in a jail the group is the jail's outer process and its pid
//! namespace's init, and the kernel and its helpers are that namespace,
//! which ends when they are killed.
//!
//! - [`Process::spawn`]: the kernel command line ([`Attached`] devices,
//!   run-directory-relative names only), a fixed environment, and
//!   [`confine`] between fork and exec, with the node's jail
//!   ([`jail`]) unless `SIMCLUSTER_DEBUG_UNCONFINED=1`;
//! - [`LIVE_GROUPS`] and [`kill_all_nodes`]: no node outlives simcluster;
//! - [`Process::reap`], [`Process::kill_and_reap`]: a group is signalled
//!   only while its leader is not reaped.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::error::UmlError;
use jail::{self, Jail};
use nodeapi::NodeConfig;

/// Process groups of this process's nodes that are not reaped yet. A node
/// is a process group (the kernel process and the host processes behind
/// guest address spaces; in a jail, the processes whose death ends the
/// node's pid namespace); if simcluster is ended by a signal, the group's
/// leader dies with it (PR_SET_PDEATHSIG) but the others would live on,
/// reparented to init. Entries leave the set before the group leader is
/// reaped, under the lock, so its pid is never signalled once reused.
/// A node is spawned and entered under the lock, so [`kill_all_nodes`]
/// (which closes the set) sees every node: none starts after it, even
/// from another job's thread.
static LIVE_GROUPS: Mutex<LiveGroups> = Mutex::new(LiveGroups { live: BTreeSet::new(), closed: false });

struct LiveGroups {
    live: BTreeSet<libc::pid_t>,
    /// [`kill_all_nodes`] ran: the process is exiting.
    closed: bool,
}

fn live_groups() -> MutexGuard<'static, LiveGroups> {
    LIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills every node of this process (SIGKILL to each node's process
/// group) and refuses to start new ones. For a signal handler thread that
/// is about to exit the process: nodes killed here stay in the set, and
/// their `UmlNode`s must not be used afterwards.
pub fn kill_all_nodes() {
    let mut groups = live_groups();
    groups.closed = true;
    for &pgid in groups.live.iter() {
        // SAFETY: signalling a process group this process created and has
        // not reaped (see LIVE_GROUPS).
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// The optional devices the kernel is told about; the control line and
/// the entropy device are always there.
#[derive(Debug, Clone, Copy)]
pub(super) struct Attached {
    pub net: bool,
    pub disk: bool,
    pub root: bool,
}

impl Attached {
    /// The sockets in the run directory the kernel connects to, as the
    /// command line names them.
    pub fn sockets(self) -> Vec<&'static str> {
        let mut s = vec!["tt.sock", "ctl.sock", "rng.sock"];
        s.extend(self.net.then_some("net.sock"));
        s.extend(self.disk.then_some("blk.sock"));
        s.extend(self.root.then_some("root.sock"));
        s
    }
}

/// The root filesystem's name on the kernel command line: a link in the
/// run directory, or a file in the jail's root.
const ROOTFS: &str = "rootfs.img";

/// Links the root filesystem into the run directory as [`ROOTFS`] (an
/// unconfined node; a jail shows it there itself): the guest sees only
/// run-directory-relative names (see [`super`]).
fn link_initrd(cfg: &NodeConfig) -> Result<(), UmlError> {
    let link = cfg.run_dir.join(ROOTFS);
    let _ = std::fs::remove_file(&link);
    let target = cfg.initrd.canonicalize().unwrap_or(cfg.initrd.clone());
    std::os::unix::fs::symlink(&target, &link).map_err(|source| UmlError::Io {
        node: cfg.node_id,
        what: "link root filesystem",
        source,
    })
}

/// The kernel command line and environment of a node: every name relative
/// to the run directory, its working directory (in a jail, the jail's
/// root, where the kernel is [`jail::KERNEL_IN_JAIL`]).
fn command(cfg: &NodeConfig, attached: Attached, jailed: bool) -> Command {
    let id = cfg.node_id;
    let mut cmd = if jailed { Command::new(jail::KERNEL_IN_JAIL) } else { Command::new(&cfg.kernel) };
    cmd.arg(format!("mem={}M", cfg.mem_mb))
        .arg(format!("umid={id}"))
        .arg("uml_dir=.")
        .arg(format!("time-travel=ext:{}:tt.sock", id.number()))
        .arg(format!("initrd={ROOTFS}"))
        // con0 is output only, every other UML console and serial line
        // is null; the control line is a virtio console (hvc0).
        .arg("con=null")
        .arg("ssl=null")
        .arg("con0=null,fd:1")
        .arg("console=tty0")
        .arg("virtio_uml.device=ctl.sock:3")
        .args(attached.net.then_some("virtio_uml.device=net.sock:1"))
        .args(attached.disk.then_some("virtio_uml.device=blk.sock:2"))
        // After the others, so they keep their numbers (virtio0, ...).
        .arg("virtio_uml.device=rng.sock:4")
        .args(attached.root.then_some("virtio_uml.device=root.sock:2"))
        .args(&cfg.extra_args);
    for (k, v) in &cfg.init_env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.env_clear().env("PATH", "/usr/bin:/bin").env("TMPDIR", ".").current_dir(&cfg.run_dir);
    cmd
}

/// What the child does between fork and exec (async-signal-safe calls
/// only): its own process group, death with simcluster, no address-space
/// randomisation, no core files, no inherited descriptors, the `jail`
/// (whose failed step is written to `report`), no getrandom (and, forced
/// by `SIMCLUSTER_DEBUG_NO_CPUID_FAULTING`, no CPUID faulting).
fn confine(cmd: &mut Command, jail: Option<Jail>, report: libc::c_int) {
    // Read here: the environment is not safe to read after fork.
    let no_cpuid_faulting = hostfacts::cpuid_faulting_forced_off();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Own process group, so the whole node (UML forks helper
            // processes for guest address spaces) dies together.
            libc::setsid();
            // If simcluster dies, its nodes die with it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            // A guest panic ends in abort(); no host core files.
            let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            // Only stdin, stdout and stderr cross exec: descriptors
            // simcluster inherited (a batch system's, a shell's) would
            // shift the node's own descriptor numbers, which its
            // kernel prints on the console. Best effort: Linux 5.11+.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            if let Some(jail) = &jail {
                jail::enter(jail, report)?;
            }
            if no_cpuid_faulting {
                super::seccomp::deny_getrandom_and_cpuid_faulting()?;
            } else {
                super::seccomp::deny_getrandom()?;
            }
            Ok(())
        });
    }
}

/// A pipe a failed jail step writes its number to (close-on-exec, so a
/// successful exec leaves it empty).
struct ReportPipe {
    read: libc::c_int,
    write: libc::c_int,
}

impl ReportPipe {
    fn new() -> io::Result<ReportPipe> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 with an out-array of two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ReportPipe { read: fds[0], write: fds[1] })
    }

    /// What was written (nothing after a successful exec).
    fn read(&self) -> Vec<u8> {
        let mut buf = [0u8; 2];
        // SAFETY: a non-blocking read into a local buffer.
        let n = unsafe { libc::read(self.read, buf.as_mut_ptr().cast(), buf.len()) };
        buf[..n.max(0) as usize].to_vec()
    }
}

impl Drop for ReportPipe {
    fn drop(&mut self) {
        // SAFETY: closing the pipe's own descriptors once.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// A node's process, the leader of its process group: the kernel, or in
/// a jail the outer process that ends as the kernel does.
pub(super) struct Process {
    child: Child,
    stderr_path: PathBuf,
    /// The kernel runs in a jail (a pid namespace below `child`).
    jailed: bool,
}

impl Process {
    /// Starts the kernel of `cfg` with `attached` devices, its console
    /// (standard output) going to `console` and its standard error to
    /// `stderr.log` in the run directory. Fails once [`kill_all_nodes`]
    /// ran.
    pub fn spawn(cfg: &NodeConfig, attached: Attached, console: File) -> Result<Process, UmlError> {
        let stderr_path = cfg.run_dir.join("stderr.log");
        let stderr = File::create(&stderr_path).map_err(|source| UmlError::Io {
            node: cfg.node_id,
            what: "stderr log",
            source,
        })?;
        let jail = if jail::enabled() {
            let contents = jail::Contents {
                kernel: &cfg.kernel,
                files: &[(&cfg.kernel, jail::KERNEL_IN_JAIL), (&cfg.initrd, ROOTFS)],
                run_dir: &cfg.run_dir,
                sockets: &attached.sockets(),
                mem_mb: cfg.mem_mb,
            };
            Some(jail::plan(&contents).map_err(|error| UmlError::Confine { node: cfg.node_id, error })?)
        } else {
            link_initrd(cfg)?;
            None
        };
        let mut cmd = command(cfg, attached, jail.is_some());
        cmd.stdin(Stdio::null()).stdout(Stdio::from(console)).stderr(Stdio::from(stderr));
        let report = ReportPipe::new().map_err(|source| UmlError::Io { node: cfg.node_id, what: "pipe", source })?;
        confine(&mut cmd, jail.clone(), report.write);
        let spawn_err = |source| UmlError::Spawn { kernel: cfg.kernel.clone(), source };
        let mut groups = live_groups();
        if groups.closed {
            return Err(spawn_err(io::Error::new(io::ErrorKind::Interrupted, "simcluster is exiting")));
        }
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(source) => {
                let step = report.read();
                return Err(match &jail {
                    Some(j) if !step.is_empty() => {
                        UmlError::Confine { node: cfg.node_id, error: j.failure(&step, source) }
                    }
                    _ => spawn_err(source),
                });
            }
        };
        groups.live.insert(child.id() as libc::pid_t);
        Ok(Process { child, stderr_path, jailed: jail.is_some() })
    }

    /// Whether the kernel runs in a jail ([`jail`]): then it and
    /// UML's helpers are in a pid namespace of their own (and a process
    /// group of their own, which UML makes), which ends with the group.
    pub fn jailed(&self) -> bool {
        self.jailed
    }

    /// Where the kernel's standard error goes.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// The process group (the leader's pid: setsid in [`confine`]).
    pub fn group(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// The exit status, if the process already ended (it is then reaped,
    /// and its group leaves LIVE_GROUPS under the lock).
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        let mut groups = live_groups();
        let status = self.child.try_wait().ok().flatten()?;
        groups.live.remove(&self.group());
        Some(status)
    }

    /// Collects the exit status of a node whose socket closed. The main
    /// process is given a moment to finish on its own (a clean poweroff
    /// exits 0), observed without reaping it (WNOWAIT) so that its process
    /// group id stays ours while we kill the helper processes left in it.
    pub fn reap(&mut self) -> Option<ExitStatus> {
        self.wait_exit(Duration::from_secs(2));
        self.kill_and_reap()
    }

    /// Waits up to `limit` (wall clock) for the leader to end, without
    /// reaping it (WNOWAIT), so that its process group id stays ours.
    fn wait_exit(&self, limit: Duration) {
        let pid = self.child.id() as libc::id_t;
        let began = Instant::now();
        while began.elapsed() < limit {
            // SAFETY: waitid with a zeroed siginfo out-parameter.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
            if r != 0 || unsafe { info.si_pid() } != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kills the node's process group and reaps its kernel process. The
    /// group leaves LIVE_GROUPS before the reap, so no one signals its pid
    /// once it may be reused. Call at most once.
    ///
    /// A jailed node is first asked to stop (SIGTERM to the outer process,
    /// which kills its namespace and reaps it: see `jail::enter`), so that
    /// its processes are all waited for and their CPU time is counted in
    /// simcluster's children; the group's SIGKILL then finds it gone.
    pub fn kill_and_reap(&mut self) -> Option<ExitStatus> {
        let pid = self.group();
        if self.jailed {
            // SAFETY: signalling our own child, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            self.wait_exit(Duration::from_secs(2));
        }
        // SAFETY: signalling our own child's process group (setsid in
        // pre_exec made its pgid equal to its pid); not reaped yet.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        live_groups().live.remove(&pid);
        self.child.wait().ok()
    }
}
