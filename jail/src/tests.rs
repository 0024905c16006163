//! The jail as a program that escaped its guest would find it: a static
//! busybox takes the kernel's place (`/linux` in the jail) and reports
//! what it can see and do; the test looks at it from outside as well.
//!
//! Needs a static busybox (`testkit::busybox`: the host's or Debian's,
//! downloaded into the cache; else a `Missing` skip) and root or
//! unprivileged user namespaces (else a `Host` skip).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};

use super::*;
use testkit::proc::status_line;
use testkit::Cause;

/// A run directory with what a jail shows: busybox as the kernel (copied
/// in, so an unprivileged caller can read it), an image file, a socket.
struct Fixture {
    dir: PathBuf,
    busybox: PathBuf,
    image: PathBuf,
    _socket: UnixListener,
}

impl Fixture {
    fn new(name: &str) -> Option<Fixture> {
        let busybox = match testkit::busybox::static_busybox() {
            Ok(b) => b,
            Err(why) => {
                testkit::skip(Cause::Missing, why);
                return None;
            }
        };
        let dir = std::env::temp_dir().join(format!("simcluster-jail-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let copy = dir.join("busybox");
        std::fs::copy(&busybox, &copy).unwrap();
        let image = dir.join("image");
        std::fs::write(&image, "IMAGE\n").unwrap();
        let socket = UnixListener::bind(dir.join("t.sock")).unwrap();
        Some(Fixture { dir, busybox: copy, image, _socket: socket })
    }

    /// The jail: busybox as the kernel, and as the applets the scripts
    /// run (busybox runs its applets through /proc/self/exe, which the
    /// jail has not, or by their names in $PATH).
    fn plan(&self, ids: Ids) -> Jail {
        let bb = self.busybox.as_path();
        let mut files = vec![(bb, KERNEL_IN_JAIL), (self.image.as_path(), "/rootfs.img")];
        files.extend(APPLETS.iter().map(|a| (bb, *a)));
        let contents = Contents { kernel: bb, files: &files, run_dir: &self.dir, sockets: &["t.sock"], mem_mb: 16 };
        plan_for(ids, &contents).unwrap()
    }

    /// `busybox sh -c script` in `jail`, its standard input and output
    /// piped; `before` runs first between fork and exec (as a caller
    /// would be: another uid).
    fn spawn(&self, jail: Jail, script: &str, before: Option<(u32, u32)>) -> Child {
        let mut cmd = Command::new(KERNEL_IN_JAIL);
        cmd.arg0("busybox").args(["sh", "-c", script]).env_clear().env("PATH", "/bin").current_dir(&self.dir);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                if let Some((uid, gid)) = before {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setresgid(gid, gid, gid) != 0
                        || libc::setresuid(uid, uid, uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                enter(&jail, 2)
            });
        }
        cmd.spawn().unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether this process may make a user namespace (`unshare --user`).
fn user_namespaces_allowed() -> bool {
    Command::new("unshare").args(["--user", "true"]).status().is_ok_and(|s| s.success())
}

/// The jail's ids here, or `None` (a `Host` skip) where this process can
/// make no jail: not root, and no unprivileged user namespaces.
fn ids_here() -> Option<Ids> {
    if is_root() {
        return Some(Ids::FromRoot { uid: NODE_UID, gid: NODE_UID });
    }
    if !user_namespaces_allowed() {
        testkit::skip(Cause::Host, "not root, and unprivileged user namespaces are not allowed here");
        return None;
    }
    // SAFETY: getuid/getgid cannot fail.
    Some(unsafe { Ids::Caller { uid: libc::getuid(), gid: libc::getgid() } })
}

fn finish(child: Child) -> (ExitStatus, String, String) {
    let out = child.wait_with_output().unwrap();
    (out.status, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The busybox applets the scripts run as programs.
const APPLETS: [&str; 6] = ["/bin/ls", "/bin/cat", "/bin/nc", "/bin/sleep", "/bin/yes", "/bin/head"];

/// What the jailed program reports about itself, one `key=value` a line.
const PROBE: &str = r#"
echo "uid=$(id -u) gid=$(id -g)"
echo "pid=$$"
echo root= $(ls -a /)
echo dev= $(ls -a /dev)
echo "image=$(cat /rootfs.img)"
if echo x 2>/dev/null >/rootfs.img; then echo image_write=yes; else echo image_write=no; fi
if echo x >/scratch; then echo scratch_write=yes; else echo scratch_write=no; fi
if [ -e /proc/1 ] || [ -e /etc/passwd ] || [ -e /usr ] || [ -e /dev/zero ]; then echo host_files=yes; else echo host_files=no; fi
if kill -0 "$HOST_PID" 2>/dev/null; then echo host_pid=visible; else echo host_pid=hidden; fi
nc -w 2 127.0.0.1 "$PORT" </dev/null 2>/tmp-nc; echo "network=$(cat /tmp-nc)"
"#;

fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in:\n{out}"))
}

fn probe(ids: Ids, before: Option<(u32, u32)>) {
    let Some(fx) = Fixture::new(&format!("probe-{}", before.is_some())) else { return };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("HOST_PID={} PORT={port}\n{PROBE}", std::process::id());
    let (status, out, err) = finish(fx.spawn(fx.plan(ids), &script, before));
    assert!(status.success(), "{status}\n{out}\n{err}");
    let (uid, gid) = ids.node();
    assert_eq!(value(&out, "uid"), format!("{uid} gid={gid}"), "{out}");
    assert_eq!(value(&out, "pid"), "2", "the kernel is pid 2 of its own pid namespace:\n{out}");
    let mut root: Vec<&str> =
        out.lines().find_map(|l| l.strip_prefix("root= ")).unwrap_or("").split_whitespace().collect();
    root.sort();
    assert_eq!(
        root,
        [".", "..", "bin", "dev", "linux", "rootfs.img", "t.sock"],
        "the jail's root holds only what was shown:\n{out}"
    );
    let dev = out.lines().find_map(|l| l.strip_prefix("dev= ")).unwrap_or("");
    assert_eq!(dev, ". .. null ptmx pts", "the jail's /dev:\n{out}");
    assert_eq!(value(&out, "image"), "IMAGE");
    assert_eq!(value(&out, "image_write"), "no", "shown files are read-only");
    assert_eq!(value(&out, "scratch_write"), "yes", "the tmpfs is the node's scratch space");
    assert_eq!(value(&out, "host_files"), "no", "no /proc, /etc, /usr, no device but /dev/null");
    assert_eq!(value(&out, "host_pid"), "hidden", "host processes are in another pid namespace");
    assert!(
        value(&out, "network").contains("Network is unreachable"),
        "the node's network namespace has no route:\n{out}"
    );
    assert!(matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
    assert!(!fx.dir.join(STAGING_DIR).join("scratch").exists(), "the tmpfs is not the host's staging directory");
}

#[test]
fn a_jailed_program_sees_only_its_jail() {
    let Some(ids) = ids_here() else { return };
    probe(ids, None);
}

/// The unprivileged path (a caller that is not root), taken from root by
/// becoming another user first.
#[test]
fn a_caller_without_privilege_gets_the_same_jail() {
    if !is_root() {
        // Then the test above took this path.
        testkit::skip(
            Cause::Host,
            "needs root to act as another user; a_jailed_program_sees_only_its_jail ran this path",
        );
        return;
    }
    if !user_namespaces_allowed() {
        testkit::skip(Cause::Host, "unprivileged user namespaces are not allowed here");
        return;
    }
    let (uid, gid) = (65534, 65534);
    probe(Ids::Caller { uid, gid }, Some((uid, gid)));
}

/// The processes of `group` (pgid), from /proc.
fn group_members(group: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            after.split_whitespace().nth(2) == Some(&group.to_string())
        })
        .collect()
}

#[test]
fn the_kernel_process_has_no_capabilities_and_namespaces_of_its_own() {
    let Some(ids) = ids_here() else { return };
    let Some(fx) = Fixture::new("outside") else { return };
    let mut child = fx.spawn(fx.plan(ids), "echo ready; read x", None);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let outer = child.id();
    let members = group_members(outer);
    let kernel = *members
        .iter()
        .find(|p| status_line(**p, "NSpid:").split_whitespace().collect::<Vec<_>>().get(1) == Some(&"2"))
        .unwrap_or_else(|| panic!("no pid 2 of a namespace in group {outer}: {members:?}"));
    assert_eq!(members.len(), 3, "outer, init, kernel: {members:?}");
    let (uid, _) = ids.node();
    assert_eq!(status_line(kernel, "Uid:").split_whitespace().next(), Some(uid.to_string().as_str()));
    for key in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(status_line(kernel, key), "0000000000000000", "{key}");
    }
    assert_eq!(status_line(kernel, "NoNewPrivs:"), "1");
    for ns in ["user", "mnt", "pid", "ipc", "net", "uts"] {
        let mine = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        let its = std::fs::read_link(format!("/proc/{kernel}/ns/{ns}")).unwrap();
        assert_ne!(mine, its, "{ns} namespace");
    }
    let limit = std::fs::read_to_string(format!("/proc/{kernel}/limits")).unwrap();
    let processes = limit.lines().find(|l| l.starts_with("Max processes")).unwrap();
    assert!(processes.split_whitespace().nth(2) == Some(&MAX_PROCESSES.to_string()), "{processes}");
    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(child.wait().unwrap().success());
    assert!(group_members(outer).is_empty(), "nothing of the node is left");
}

#[test]
fn the_outer_process_ends_as_the_kernel_did() {
    let Some(ids) = ids_here() else { return };
    let Some(fx) = Fixture::new("exit") else { return };
    let (status, _, err) = finish(fx.spawn(fx.plan(ids), "exit 7", None));
    assert_eq!(status.code(), Some(7), "{err}");
    // UML's abort() on a guest panic: the kernel process (pid 2, not its
    // namespace's init) dies of SIGABRT, and so does the outer process.
    let (status, _, err) = finish(fx.spawn(fx.plan(ids), "kill -ABRT $$", None));
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status} {err}");
    // A process the kernel left behind ends with the namespace.
    let child = fx.spawn(fx.plan(ids), "sleep 1000 & echo $!", None);
    let outer = child.id();
    let (status, out, _) = finish(child);
    assert!(status.success());
    assert_eq!(out.trim(), "3");
    assert!(group_members(outer).is_empty(), "the background sleep ended with the namespace");
}

#[test]
fn a_node_cannot_fork_or_fill_memory_without_limit() {
    let Some(ids) = ids_here() else { return };
    let Some(fx) = Fixture::new("limits") else { return };
    let forks = format!("i=0; while [ $i -lt {} ]; do sleep 100 & i=$((i+1)); done; echo forked", MAX_PROCESSES + 16);
    let (_, out, err) = finish(fx.spawn(fx.plan(ids), &forks, None));
    assert!(!out.contains("forked") || err.contains("fork"), "{out}\n{err}");
    assert!(err.contains("fork") || err.contains("Resource temporarily unavailable"), "{err}");
    // The tmpfs holds 16 MiB of "memory" plus the slack; no more.
    let fill = "yes 0123456789abcdef | head -c 134217728 >/fill; ls -l /fill";
    let (_, out, err) = finish(fx.spawn(fx.plan(ids), fill, None));
    assert!(err.contains("head:"), "the write failed: {out}\n{err}");
    let size: u64 = out.split_whitespace().nth(4).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(size, (16 + TMPFS_SLACK_MIB) << 20, "the tmpfs filled up at its size");
}

#[test]
fn a_failed_step_is_named() {
    let Some(ids) = ids_here() else { return };
    let Some(fx) = Fixture::new("fail") else { return };
    let mut jail = fx.plan(ids);
    jail.binds[0].source = CString::new("/nonexistent/simcluster-jail").unwrap();
    let (r, w) = {
        let mut fds = [0; 2];
        // SAFETY: pipe2 with an out-array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        (fds[0], fds[1])
    };
    let j = jail.clone();
    let mut cmd = Command::new(KERNEL_IN_JAIL);
    cmd.current_dir(&fx.dir);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe { cmd.pre_exec(move || enter(&j, w)) };
    let err = cmd.spawn().expect_err("a bind of a missing file fails");
    // SAFETY: closing our write end, then reading the report.
    unsafe { libc::close(w) };
    let mut report = Vec::new();
    // SAFETY: r is this test's pipe.
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(r) };
    file.read_to_end(&mut report).unwrap();
    let msg = jail.failure(&report, err).to_string();
    assert!(
        msg.contains("show a host file") && msg.contains("/nonexistent/simcluster-jail") && msg.contains("/linux"),
        "{msg}"
    );
}

#[test]
fn steps_round_trip_through_their_byte() {
    for s in Step::ALL {
        assert_eq!(Step::from_byte(s as u8), Some(s));
    }
    assert_eq!(Step::from_byte(0), None);
}

/// CPU time of this process's waited-for descendants, in seconds.
fn children_cpu() -> f64 {
    // SAFETY: getrusage with an out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// simcluster reports its guests' CPU time from `RUSAGE_CHILDREN`: the
/// kernel's must reach it through init and the outer process, whether the
/// kernel ends or is stopped.
#[test]
fn the_kernels_cpu_time_reaches_simcluster() {
    let Some(ids) = ids_here() else { return };
    let Some(fx) = Fixture::new("cpu") else { return };
    let burn = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    let before = children_cpu();
    let (status, _, err) = finish(fx.spawn(fx.plan(ids), burn, None));
    assert!(status.success(), "{err}");
    let ended = children_cpu() - before;
    assert!(ended > 0.05, "{ended} s");
    // The burning process is a child of the kernel, as UML's helpers are
    // (guest programs run in them), and is killed while the kernel lives.
    let mut child = fx.spawn(fx.plan(ids), &format!("( {burn}; echo burnt; read x ); read y"), None);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let before = children_cpu();
    // Kept open: at end of input the scripts would end on their own.
    let _stdin = child.stdin.take();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "the node was killed: {status}");
    let stopped = children_cpu() - before;
    assert!(stopped > 0.05, "{stopped} s");
}
