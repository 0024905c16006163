//! End to end: a user-mode Linux node with an ext4 data disk (disksim
//! behind vhost-user virtio-blk), under a small engine loop that decides
//! when each disk write and flush completes.
//!
//! - `fsynced_rename_survives_power_loss`: the guest writes a file with
//!   write + fsync + rename + fsync(dir); the engine completes requests in
//!   submission order; right after the guest says it is done, the node
//!   loses power. The engine takes the disk, applies crash states (only the
//!   durable writes, and a few sampled ones with volatile writes kept), and
//!   a fresh node on each reads the file back.
//! - `fsync_waits_for_the_engine`: while the engine completes nothing, the
//!   guest's fsync does not return however far virtual time moves; once the
//!   engine completes the pending requests, it does, and the data is
//!   durable.
//! - `disk_requests_are_deterministic`: two runs with the same inputs give
//!   the same disk requests (id, kind, sectors, submission and completion
//!   times), the same console and the same durable image.
//!
//! Needs the UML kernel (`SIMCLUSTER_UML_KERNEL`: scripts/test.sh exports
//! the image builder's), a static busybox (`testkit::busybox`: the host's
//! or Debian's busybox-static, downloaded into the cache) and mke2fs;
//! otherwise a `Cause::Missing` skip (a failure under
//! `SIMCLUSTER_STRICT_SKIPS=1`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use disksim::{BlockStore, CrashModel, CrashState, Disk, RequestKind};
use simtime::VirtualTime;
use testkit::proc::status_line;
use testkit::Cause;
use vmm::node::{DiskCompletion, GuestOutput, NodeConfig, NodeDisk, NodeError, NodeRuntime, OutputStream, RunOutcome};
use vmm::uml::UmlNode;

/// What the guest believes the wall clock said at boot (ns).
const EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;
/// Wall-clock watchdog for one grant or interrupt delivery.
const WATCHDOG: Duration = Duration::from_secs(20);
/// Virtual service time of one disk request in the in-order policy.
const LATENCY: Duration = Duration::from_nanos(100_000);
/// Size of the data disk, MiB.
const DISK_MIB: u64 = 16;
/// A node that waits at or beyond this asks to run only when something
/// happens (an interrupt).
const IDLE: VirtualTime = VirtualTime::from_ns(i64::MAX as u64);

// ---- inputs: kernel, busybox, initramfs, ext4 image ----

/// The UML kernel scripts/test.sh exports (the image builder's); `Err` is
/// why there is none.
fn mke2fs() -> Option<PathBuf> {
    ["/sbin/mke2fs", "/usr/sbin/mke2fs"].map(PathBuf::from).into_iter().find(|p| p.is_file())
}

/// The guest's /init: mounts the data disk and does what `MODE` (from the
/// kernel command line) says. Output lines the test looks for are
/// upper-case markers.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
if ! mount -t ext4 /dev/vda /mnt; then echo MOUNT_FAILED; poweroff -f; fi
echo MOUNTED
case "$MODE" in
write)
  # The classic atomic replace: write, fsync, rename, fsync the directory.
  echo hello-simcluster > /mnt/f.tmp
  sync /mnt/f.tmp
  mv /mnt/f.tmp /mnt/f
  sync /mnt
  echo DURABLE
  # Then keep the disk busy, so that a crash finds writes not yet flushed.
  i=0
  while true; do
    i=$((i+1))
    echo "line $i" >> /mnt/log
    sync /mnt/log
  done
  ;;
read)
  echo "READ:$(cat /mnt/f)"
  echo "LS:$(ls /mnt | tr '\n' ' ')"
  umount /mnt
  echo UMOUNTED
  poweroff -f
  ;;
pending)
  echo pending-data-5f3a9c > /mnt/g
  echo BEFORE_FSYNC
  sync /mnt/g
  echo FSYNC_RETURNED
  sleep 1000
  ;;
esac
poweroff -f
"#;

/// An empty ext4 filesystem, made the way `simcluster`'s
/// `src/image/disk.rs` makes data-disk base images (same configuration,
/// options and fake time; keep the two in step).
fn ext4_image(mke2fs: &Path, out: &Path) {
    const CONF: &str = "[defaults]\n\tbase_features = sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr\n\tenable_periodic_fsck = 0\n\tblocksize = 4096\n\tinode_size = 256\n\tinode_ratio = 16384\n\n[fs_types]\n\tdefault = {\n\t}\n\text4 = {\n\t\tfeatures = has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize\n\t}\n";
    let conf = out.with_extension("conf");
    std::fs::write(&conf, CONF).unwrap();
    std::fs::File::create(out).unwrap().set_len(DISK_MIB << 20).unwrap();
    let st = Command::new(mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-T", "default", "-L", "simdata", "-m", "0"])
        .args(["-U", "5c4d7a1e-0b1d-4c5e-9a3f-51c1a5e7d15c"])
        .args([
            "-E",
            "hash_seed=0b6e9a55-7f1c-4d2b-8e3a-6c9d1f2a4b70,lazy_itable_init=0,lazy_journal_init=0,nodiscard,root_owner=0:0",
        ])
        .arg(out)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .env("MKE2FS_CONFIG", &conf)
        .env("E2FSPROGS_FAKE_TIME", "1767225600")
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "mke2fs failed");
}

struct Setup {
    dir: PathBuf,
    kernel: PathBuf,
    initrd: PathBuf,
    image: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn setup(name: &str) -> Option<Setup> {
    let (kernel, bb) = testkit::busybox::uml_guest()?;
    let Some(mkfs) = mke2fs() else {
        testkit::skip(
            Cause::Missing,
            "no mke2fs in /sbin or /usr/sbin (Debian package e2fsprogs: apt-get install e2fsprogs)",
        );
        return None;
    };
    let dir = std::env::temp_dir().join(format!("uml-disk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let initrd = dir.join("root.cpio");
    std::fs::write(&initrd, testkit::busybox::initramfs(&bb, INIT).unwrap()).unwrap();
    let image = dir.join("base.ext4");
    ext4_image(&mkfs, &image);
    Some(Setup { dir, kernel, initrd, image })
}

// ---- the engine in miniature ----

/// One boot of the node, driven by the test.
struct Boot {
    node: UmlNode,
    console: String,
    /// Everything that happened, in order: the determinism check compares
    /// it between runs.
    trace: Vec<String>,
    /// Every disk request completed, in completion order.
    completions: Vec<DiskCompletion>,
}

impl Setup {
    fn boot(&self, run: &str, mode: &str, disk: Disk) -> Boot {
        let run_dir = self.dir.join(run);
        std::fs::create_dir_all(&run_dir).unwrap();
        let cfg = self.config(1, run_dir, vec![("MODE".into(), mode.into())], vec![]);
        let mut node = UmlNode::spawn_with_disk(&cfg, Some(disk)).unwrap();
        // Output before the connection is UML's host-side start-up chatter.
        node.wait_connected(VirtualTime::ZERO, Duration::from_secs(20)).unwrap();
        Boot { node, console: String::new(), trace: Vec::new(), completions: Vec::new() }
    }

    /// Node `id`'s configuration: this setup's kernel and initramfs, 96
    /// MiB, no network.
    fn config(
        &self,
        id: u16,
        run_dir: PathBuf,
        init_env: Vec<(String, String)>,
        extra_args: Vec<String>,
    ) -> NodeConfig {
        NodeConfig {
            kernel: self.kernel.clone(),
            initrd: self.initrd.clone(),
            mem_mb: 96,
            node_id: simtime::NodeId::new(id).expect("a node number"),
            run_dir,
            init_env,
            extra_args,
            net: false,
            entropy_seed: 1,
            read_faults: Default::default(),
            shared_clock: false,
            root_disk: None,
            kernel_faults_cpuid: false,
        }
    }

    fn base_disk(&self) -> Disk {
        Disk::new(BlockStore::open_image(&self.image).unwrap())
    }
}

/// How the engine treats pending writes and flushes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Complete each, in submission order, `LATENCY` after it was
    /// submitted (or after the previous completion).
    InOrder,
    /// Complete none.
    Hold,
}

/// How a drive ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The stop condition held.
    Stopped,
    /// The node exited.
    Exited,
    /// The node waits for an interrupt that only the disk could give, and
    /// the policy gives none.
    Idle,
    /// The node asked to run after the given virtual time.
    TimeLimit,
}

impl Boot {
    fn record(&mut self, output: Vec<GuestOutput>, disk: Vec<DiskCompletion>) {
        for o in output {
            let text = String::from_utf8_lossy(&o.bytes).into_owned();
            if o.stream == OutputStream::Console {
                self.console.push_str(&text);
            }
            self.trace.push(format!("{} {:?} {text:?}", o.time.as_ns(), o.stream));
        }
        for c in disk {
            let r = c.request;
            self.trace.push(format!(
                "disk {} {:?} {}+{} submitted {} completed {}",
                r.id,
                r.kind,
                r.sector,
                r.sectors,
                r.submitted.as_ns(),
                c.completed.as_ns()
            ));
            self.completions.push(c);
        }
    }

    /// Runs the node under `policy` until `stop` holds (checked between
    /// grants), it exits, it idles on the disk, or it wants to run after
    /// `until`.
    fn drive(&mut self, policy: Policy, until: VirtualTime, stop: impl Fn(&Boot) -> bool) -> End {
        loop {
            if stop(self) {
                return End::Stopped;
            }
            let requested = self.node.requested();
            if policy == Policy::InOrder {
                if let Some(p) = self.node.pending_disk().first().copied() {
                    let due = p.submitted.max(self.node.time()) + LATENCY;
                    if due <= requested {
                        let c = self.node.complete_disk(due, p.id, WATCHDOG).unwrap();
                        self.record(Vec::new(), vec![c]);
                        continue;
                    }
                }
            }
            if requested >= IDLE {
                assert!(!self.node.pending_disk().is_empty(), "the node waits for an interrupt nobody owes it");
                return End::Idle;
            }
            if requested > until {
                return End::TimeLimit;
            }
            self.trace.push(format!("run {}", requested.as_ns()));
            // A grant that ends waiting also delivers the interrupts owed for
            // reads that completed in a kick.
            let grant = self.node.grant(requested, EPOCH_NS, WATCHDOG).unwrap();
            self.record(grant.output, grant.disk);
            match grant.outcome {
                RunOutcome::Waiting { .. } => {}
                RunOutcome::Exited { .. } | RunOutcome::Reset { .. } => return End::Exited,
                RunOutcome::Hung { wall } => {
                    panic!(
                        "no result: the {WATCHDOG:?} wall-clock watchdog fired (the node ran {wall:?} without an exit); console:\n{}",
                        self.console
                    )
                }
            }
        }
    }
}

fn has(s: &str) -> impl Fn(&Boot) -> bool + '_ {
    move |b| b.console.contains(s)
}

/// First boot of the write scenario: the guest's atomic replace, completed
/// in order; returns the boot once the guest said DURABLE and the disk
/// holds at least `volatile` writes that a power loss may lose.
fn write_file(s: &Setup, run: &str, volatile: usize) -> Boot {
    let mut b = s.boot(run, "write", s.base_disk());
    let end = b.drive(Policy::InOrder, VirtualTime::from_ns(60_000_000_000), |b| {
        b.console.contains("DURABLE") && b.node.disk().unwrap().volatile_writes().count() >= volatile
    });
    assert_eq!(end, End::Stopped, "console:\n{}", b.console);
    b
}

fn line(console: &str, want: &str) -> bool {
    console.lines().any(|l| l.trim_end() == want)
}

/// Reads a disk's whole durable-only crash image (what survives if every
/// volatile write is lost).
fn durable_image(d: &Disk) -> Vec<u8> {
    let v = d.crash_view(&CrashState::none()).unwrap();
    let mut img = vec![0u8; (d.capacity_sectors() * 512) as usize];
    v.read(0, &mut img).unwrap();
    img
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn fsynced_rename_survives_power_loss() {
    let Some(s) = setup("crash") else { return };
    let mut b = write_file(&s, "n1", 3);
    let writes = b.completions.iter().filter(|c| matches!(c.request.kind, RequestKind::Write { .. })).count();
    let flushes = b.completions.iter().filter(|c| c.request.kind == RequestKind::Flush).count();
    let reads = b.completions.iter().filter(|c| c.request.kind == RequestKind::Read).count();
    eprintln!(
        "boot 1: {reads} reads, {writes} writes, {flushes} flushes completed; virtual {} ns",
        b.node.time().as_ns()
    );
    assert!(writes > 0 && flushes > 0, "fsync must write and flush");

    // Power loss, after fsync(dir) returned, while later writes are in
    // the disk's volatile cache.
    b.node.kill();
    assert!(b.node.pending_disk().is_empty(), "requests die with the node");
    let mut disk = b.node.take_disk().unwrap();
    let volatile = disk.volatile_writes().count();
    let count = disk.crash_state_count(CrashModel::ATOMIC);
    eprintln!("after the crash: {volatile} volatile writes, {count:?} crash states");
    assert!(contains(&durable_image(&disk), b"hello-simcluster\n"), "the file's data is durable");

    assert!(count.lower_bound() > 1, "some writes are volatile");
    // Crash states: only the durable writes, and sampled ones that keep
    // some volatile writes (a journal block without its commit, say).
    let mut states = vec![CrashState::none()];
    let mut rng = simrng::seeded(7);
    for _ in 0..32 {
        let st = disk.sample_crash_state(CrashModel::ATOMIC, &mut rng);
        if !states.contains(&st) && states.len() < 4 {
            states.push(st);
        }
    }
    for (i, st) in states.iter().enumerate() {
        let mut d = disk.clone();
        d.apply_crash(st).unwrap();
        assert_eq!(d.outstanding().count(), 0);
        let mut r = s.boot(&format!("n1.boot{}", i + 1), "read", d);
        let end = r.drive(Policy::InOrder, VirtualTime::from_ns(60_000_000_000), |_| false);
        assert_eq!(end, End::Exited, "console:\n{}", r.console);
        eprintln!(
            "restart {} on crash state {:?}: {}",
            i + 1,
            st.persisted.iter().map(|p| p.write.0).collect::<Vec<_>>(),
            r.console
                .lines()
                .filter(|l| l.starts_with("READ:") || l.starts_with("LS:"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        assert!(line(&r.console, "READ:hello-simcluster"), "console:\n{}", r.console);
        assert!(!r.console.contains("f.tmp"), "the rename is durable too");
        assert!(line(&r.console, "UMOUNTED"));
    }
    // The disk of a dead node cannot be taken twice, nor from a live one.
    assert!(matches!(b.node.take_disk(), Err(NodeError::NoDisk { .. })));
    disk.apply_crash(&CrashState::none()).unwrap();
}

#[test]
fn fsync_waits_for_the_engine() {
    let Some(s) = setup("pending") else { return };
    let mut b = s.boot("n1", "pending", s.base_disk());
    assert!(matches!(b.node.take_disk(), Err(NodeError::DiskInUse { .. })));
    let end = b.drive(Policy::InOrder, VirtualTime::from_ns(60_000_000_000), has("BEFORE_FSYNC"));
    assert_eq!(end, End::Stopped, "console:\n{}", b.console);
    let marked = b.node.time();

    // The engine completes nothing: ten virtual seconds pass (the guest's
    // timers keep firing: journal commits, writeback), or the guest idles.
    let end = b.drive(Policy::Hold, marked + Duration::from_secs(10), |_| false);
    let pending = b.node.pending_disk();
    eprintln!(
        "held: {end:?} at {} ns, pending {:?}",
        b.node.time().as_ns(),
        pending.iter().map(|p| (p.id.0, p.kind, p.sector, p.sectors, p.submitted)).collect::<Vec<_>>()
    );
    assert!(!b.console.contains("FSYNC_RETURNED"), "fsync returned without the disk");
    assert!(
        pending.iter().any(|p| matches!(p.kind, RequestKind::Write { .. }) && p.submitted >= marked),
        "the fsync's write waits for the engine"
    );
    assert!(pending.iter().all(|p| p.kind != RequestKind::Read), "reads never wait");
    assert!(!contains(&durable_image(b.node.disk().unwrap()), b"pending-data-5f3a9c"));
    // Those requests are in flight in the disk: a node cannot start on it.
    let busy = b.node.disk().unwrap().clone();
    let cfg = s.config(2, s.dir.clone(), vec![], vec![]);
    assert!(matches!(UmlNode::spawn_with_disk(&cfg, Some(busy)), Err(NodeError::DiskBusy { .. })));

    // Now the engine completes them (and what follows), in order.
    let end = b.drive(Policy::InOrder, marked + Duration::from_secs(60), has("FSYNC_RETURNED"));
    assert_eq!(end, End::Stopped, "console:\n{}", b.console);
    let d = b.node.disk().unwrap();
    assert!(contains(&durable_image(d), b"pending-data-5f3a9c"), "fsync returned, so the data is durable");
}

#[test]
fn disk_requests_are_deterministic() {
    let Some(s) = setup("det") else { return };
    let run = |name: &str| {
        let mut b = write_file(&s, name, 0);
        b.node.kill();
        let disk = b.node.take_disk().unwrap();
        let fp = disk.crash_view(&CrashState::none()).unwrap().fingerprint();
        let durable = durable_image(&disk);
        (b.trace, b.completions, b.console, fp, durable)
    };
    let a = run("a1");
    let b = run("b1");
    eprintln!("{} trace entries, {} disk completions", a.0.len(), a.1.len());
    assert_eq!(a.1.len(), b.1.len(), "completion counts differ");
    for (i, (x, y)) in a.1.iter().zip(&b.1).enumerate() {
        assert_eq!(x, y, "disk request {i} differs");
    }
    assert_eq!(a.2, b.2, "consoles differ");
    for (i, (x, y)) in a.0.iter().zip(&b.0).enumerate() {
        assert_eq!(x, y, "traces diverge at entry {i}");
    }
    assert_eq!(a.0.len(), b.0.len());
    assert_eq!(a.3, b.3, "crash-image fingerprints differ");
    assert!(a.4 == b.4, "durable images differ");
}

/// Every process below this one.
fn descendants() -> Vec<u32> {
    testkit::proc::below(std::process::id()).into_iter().map(|(pid, _)| pid).collect()
}

/// A real node's kernel runs in its jail (the jail crate): pid 2 of its
/// own namespace, the node's uid without capabilities, a root holding only
/// what the jail shows (its kernel, image, sockets, loader and libraries,
/// UML's own files), other namespaces than ours.
#[test]
fn a_node_kernel_runs_in_its_jail() {
    if !jail::enabled() {
        testkit::skip(Cause::Host, "SIMCLUSTER_DEBUG_UNCONFINED=1 is set");
        return;
    }
    let Some(s) = setup("jail") else { return };
    let run_dir = s.dir.join("n1");
    std::fs::create_dir_all(&run_dir).unwrap();
    // A word on the command line to tell this node from other tests'.
    let marker = format!("jailtest={}", std::process::id());
    let cfg = s.config(1, run_dir, vec![("MODE".into(), "pending".into())], vec![marker.clone()]);
    let mut node = UmlNode::spawn_with_disk(&cfg, Some(s.base_disk())).unwrap();
    node.wait_connected(VirtualTime::ZERO, Duration::from_secs(20)).unwrap();
    let kernel = descendants()
        .into_iter()
        .find(|&p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            status_line(p, "NSpid:").split_whitespace().nth(1) == Some("2")
                && cmdline.split(|b| *b == 0).any(|w| w == marker.as_bytes())
        })
        .expect("the node's kernel is pid 2 of a namespace below this process");
    // SAFETY: geteuid cannot fail.
    let uid = if unsafe { libc::geteuid() } == 0 { jail::NODE_UID } else { unsafe { libc::geteuid() } };
    assert_eq!(status_line(kernel, "Uid:").split_whitespace().next(), Some(uid.to_string().as_str()));
    for key in ["CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(status_line(kernel, key), "0000000000000000", "{key}");
    }
    assert_eq!(status_line(kernel, "NoNewPrivs:"), "1");
    for ns in ["user", "mnt", "pid", "ipc", "net", "uts"] {
        let mine = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert_ne!(std::fs::read_link(format!("/proc/{kernel}/ns/{ns}")).unwrap(), mine, "{ns} namespace");
    }
    let root = PathBuf::from(format!("/proc/{kernel}/root"));
    let mut names: Vec<String> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for want in ["linux", "rootfs.img", "tt.sock", "ctl.sock", "blk.sock", "rng.sock", "dev"] {
        assert!(names.iter().any(|n| n == want), "{want} in the jail's root: {names:?}");
    }
    for host in ["etc", "usr", "proc", "sys", "home", "root", "tmp"] {
        assert!(!names.iter().any(|n| n == host), "no /{host} in the jail's root: {names:?}");
    }
    drop(node);
    assert!(!descendants().contains(&kernel), "the kernel ended with its node");
}
