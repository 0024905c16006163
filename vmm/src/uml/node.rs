//! One user-mode Linux process under simcluster's control.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use disksim::{Disk, DiskFault, RequestId};

use super::disk::{CompleteError, DiskPort};
use super::error::UmlError;
use super::timetravel::{Msg, Op, ProtocolError, SchedShm};
use crate::node::{
    Delivered, DiskCompletion, DiskRequest, Grant, GuestOutput, NodeConfig, NodeError, NodeRuntime, OutputStream,
    RunOutcome, TxFrame,
};
use crate::vhost_user::{DeviceEvent, VhostUserBackend, VhostUserError};
use crate::virtio::console::{self, VirtioConsole};
use crate::virtio::blk::REQUEST_QUEUE;
use crate::virtio::net::VirtioNet;
use crate::virtio::rng::VirtioRng;

/// Frames kept for a guest that has no free receive buffer, at most.
const RX_BACKLOG: usize = 1024;

/// virtio-net queue numbers.
const NET_RX: u16 = 0;

/// The node's network device and what is pending on it.
struct NetPort {
    backend: VhostUserBackend<VirtioNet>,
    tx: Vec<TxFrame>,
    /// Queues whose interrupt is owed to the guest at its next stop.
    irq_pending: std::collections::BTreeSet<u16>,
    backlog: std::collections::VecDeque<Vec<u8>>,
}

/// A running (or stopped) user-mode Linux node.
///
/// Invariant: the node executes only inside [`NodeRuntime::grant_at`]. Outside it,
/// the node is blocked on the time-travel socket, waiting either for the
/// ACK of its START or for RUN.
pub struct UmlNode {
    id: u16,
    child: Child,
    listener: Option<UnixListener>,
    conn: Option<UnixStream>,
    /// The read end of the console file (see [`CONSOLE_FILE`]).
    console: File,
    /// The control line (virtio-console, `/dev/hvc0` in the guest).
    ctl: VhostUserBackend<VirtioConsole>,
    ctl_irq_pending: std::collections::BTreeSet<u16>,
    /// The entropy device (virtio-rng, `rng.sock`): fills the guest's
    /// buffers at its kick, while the guest waits for our reply.
    rng: VhostUserBackend<VirtioRng>,
    /// Queues whose used-buffer interrupt is owed at the node's next stop.
    rng_irq_pending: std::collections::BTreeSet<u16>,
    stderr_path: PathBuf,
    /// Sequence number of the START we have not acknowledged yet.
    pending_start: Option<u32>,
    /// The shared scheduling page, in shared-memory mode (see
    /// [`SchedShm`]); set when the guest's START is acknowledged with it.
    shm: Option<SchedShm>,
    /// Whether to offer the page at START ([`NodeConfig::shared_clock`]).
    offer_shm: bool,
    /// The engine time the node was started at ([`Self::wait_connected`]):
    /// 0 for a node that boots with the cluster. In shared-memory mode it
    /// is also the guest's offset into engine time (the page's clock when
    /// its START is acknowledged, before it ever runs; see
    /// [`Self::ack_start`]): its own clock is engine time less this.
    boot_time: u64,
    /// The node's virtual time as last granted or reported.
    time: u64,
    /// The time the node asked to run at next.
    requested: u64,
    exited: bool,
    /// Bytes read from the console and the control line since the node's
    /// last message, not yet stamped (see [`GuestOutput`]).
    unstamped_console: Vec<u8>,
    unstamped_control: Vec<u8>,
    /// [`Self::read_console`]'s buffer, allocated once.
    console_scratch: Box<[u8]>,
    net: Option<NetPort>,
    /// The data disk (`/dev/vda`), if the node has one.
    disk: Option<DiskPort>,
    /// The read-only root disk ([`NodeConfig::root_disk`]).
    root: Option<DiskPort>,
}

/// Process groups of this process's nodes that are not reaped yet. A node
/// is a process group (the kernel process and the host processes behind
/// guest address spaces); if simcluster is ended by a signal, the kernel
/// process dies with it (PR_SET_PDEATHSIG) but the others would live on,
/// reparented to init. Entries leave the set before the group leader is
/// reaped, under the lock, so its pid is never signalled once reused.
/// A node is spawned and entered under the lock, so [`kill_all_nodes`]
/// (which closes the set) sees every node: none starts after it, even
/// from another job's thread.
static LIVE_GROUPS: std::sync::Mutex<LiveGroups> =
    std::sync::Mutex::new(LiveGroups { live: std::collections::BTreeSet::new(), closed: false });

struct LiveGroups {
    live: std::collections::BTreeSet<libc::pid_t>,
    /// [`kill_all_nodes`] ran: the process is exiting.
    closed: bool,
}

fn live_groups() -> std::sync::MutexGuard<'static, LiveGroups> {
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

/// The file in the node's run directory that its console (`con0`, UML's
/// standard output) is written to.
///
/// A file, not a pipe: UML registers a write interrupt on its console
/// descriptor, and the host sends the writer of a pipe SIGIO each time the
/// reader drains it, at a moment the host scheduler picks. Now and then
/// (2 runs in 240 of one seed, measured on a loaded host) the guest then
/// took a "console-write" interrupt that other runs did not, and the guest
/// kernel mixes every interrupt into its random pool: a UDP client got
/// another ephemeral port, and replays did not reproduce. Nobody signals
/// the writer of a regular file.
pub const CONSOLE_FILE: &str = "console.out";

impl UmlNode {
    /// Starts the node's process. The node runs its early host-side setup,
    /// connects to the socket and then blocks on START until the engine
    /// grants it time.
    pub fn spawn(cfg: &NodeConfig) -> Result<UmlNode, NodeError> {
        Self::spawn_with_disk(cfg, None)
    }

    /// [`UmlNode::spawn`] with a data disk: `disk` becomes the guest's
    /// `/dev/vda` (virtio-blk over vhost-user, `blk.sock` in the run
    /// directory), served as described in [`super::disk`].
    ///
    /// The disk is passed here rather than in [`NodeConfig`] because it is
    /// state, not configuration: it moves into the node, and
    /// [`UmlNode::take_disk`] moves it back out after a power loss so the
    /// engine can pick a crash state and start a fresh node on it.
    ///
    /// `disk` must have no outstanding requests: those of a node that lost
    /// power are resolved by [`Disk::apply_crash`] first (a new driver could
    /// never complete them, and an in-flight write would block the log).
    pub fn spawn_with_disk(cfg: &NodeConfig, disk: Option<Disk>) -> Result<UmlNode, NodeError> {
        if !cfg.kernel.is_file() {
            return Err(UmlError::MissingKernel(cfg.kernel.clone()).into());
        }
        if !cfg.initrd.is_file() {
            return Err(UmlError::MissingInitrd(cfg.initrd.clone()).into());
        }
        let id = cfg.node_id;
        let io_err = |what: &'static str| move |source| UmlError::Io { node: id, what, source };
        if cfg.kernel_faults_cpuid {
            // Speed only; a host that cannot fault CPUID loses nothing.
            super::host_cpuid::enable();
        }
        let sock = cfg.run_dir.join("tt.sock");
        let _ = std::fs::remove_file(&sock);
        // The guest sees only run-directory-relative names (see the module
        // docs): link the root filesystem in.
        let initrd_link = cfg.run_dir.join("rootfs.img");
        let _ = std::fs::remove_file(&initrd_link);
        let initrd_abs = cfg.initrd.canonicalize().unwrap_or(cfg.initrd.clone());
        std::os::unix::fs::symlink(&initrd_abs, &initrd_link).map_err(io_err("link root filesystem"))?;
        let listener = UnixListener::bind(&sock).map_err(io_err("bind time-travel socket"))?;
        listener.set_nonblocking(true).map_err(io_err("socket"))?;

        let net = if cfg.net {
            let backend = VhostUserBackend::listen(&cfg.run_dir.join("net.sock"), VirtioNet::new(id as u8))
                .map_err(|source| UmlError::Net { node: id, source })?;
            Some(NetPort {
                backend,
                tx: Vec::new(),
                irq_pending: Default::default(),
                backlog: Default::default(),
            })
        } else {
            None
        };
        let disk = match disk {
            None => None,
            Some(d) => {
                let outstanding = d.outstanding().count();
                if outstanding > 0 {
                    return Err(NodeError::DiskBusy { node: id, outstanding });
                }
                Some(
                    DiskPort::listen(&cfg.run_dir.join("blk.sock"), d, cfg.read_faults)
                        .map_err(|source| UmlError::DiskDevice { node: id, source })?,
                )
            }
        };
        let root = match &cfg.root_disk {
            None => None,
            Some(image) => Some(
                DiskPort::listen_root(&cfg.run_dir.join("root.sock"), image.clone())
                    .map_err(|source| UmlError::DiskDevice { node: id, source })?,
            ),
        };
        let ctl = VhostUserBackend::listen(&cfg.run_dir.join("ctl.sock"), VirtioConsole::new())
            .map_err(|source| UmlError::Net { node: id, source })?;
        let rng = VhostUserBackend::listen(&cfg.run_dir.join("rng.sock"), VirtioRng::new(cfg.entropy_seed))
            .map_err(|source| UmlError::Entropy { node: id, source })?;
        let console_path = cfg.run_dir.join(CONSOLE_FILE);
        let con_w = File::create(&console_path).map_err(io_err("console file"))?;
        let con_r = File::open(&console_path).map_err(io_err("console file"))?;
        let stderr_path = cfg.run_dir.join("stderr.log");
        let stderr = File::create(&stderr_path).map_err(io_err("stderr log"))?;

        let mut cmd = Command::new(&cfg.kernel);
        cmd.arg(format!("mem={}M", cfg.mem_mb))
            .arg(format!("umid=n{id}"))
            .arg("uml_dir=.")
            .arg(format!("time-travel=ext:{id}:tt.sock"))
            .arg("initrd=rootfs.img")
            // con0 is output only, every other UML console and serial line
            // is null; the control line is a virtio console (hvc0).
            .arg("con=null")
            .arg("ssl=null")
            .arg("con0=null,fd:1")
            .arg("console=tty0")
            .arg("virtio_uml.device=ctl.sock:3")
            .args(net.as_ref().map(|_| "virtio_uml.device=net.sock:1"))
            .args(disk.as_ref().map(|_| "virtio_uml.device=blk.sock:2"))
            // After the others, so they keep their numbers (virtio0, ...).
            .arg("virtio_uml.device=rng.sock:4")
            .args(root.as_ref().map(|_| "virtio_uml.device=root.sock:2"))
            .args(&cfg.extra_args);
        for (k, v) in &cfg.init_env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", ".")
            .current_dir(&cfg.run_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(con_w))
            .stderr(Stdio::from(stderr));
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
                super::seccomp::deny_getrandom()?;
                Ok(())
            });
        }
        let mut groups = live_groups();
        if groups.closed {
            let source = io::Error::new(io::ErrorKind::Interrupted, "simcluster is exiting");
            return Err(UmlError::Spawn { kernel: cfg.kernel.clone(), source }.into());
        }
        let child = cmd
            .spawn()
            .map_err(|source| UmlError::Spawn { kernel: cfg.kernel.clone(), source })?;
        groups.live.insert(child.id() as libc::pid_t);
        drop(groups);
        drop(cmd);
        Ok(UmlNode {
            id,
            child,
            listener: Some(listener),
            conn: None,
            console: con_r,
            ctl,
            ctl_irq_pending: Default::default(),
            rng,
            rng_irq_pending: Default::default(),
            stderr_path,
            pending_start: None,
            shm: None,
            offer_shm: cfg.shared_clock,
            boot_time: 0,
            time: 0,
            requested: 0,
            exited: false,
            unstamped_console: Vec::new(),
            unstamped_control: Vec::new(),
            console_scratch: vec![0u8; 65536].into_boxed_slice(),
            net,
            disk,
            root,
        })
    }

    pub fn id(&self) -> u16 {
        self.id
    }

    /// Takes in the clock the guest published in the shared page (where it
    /// would send UPDATE), before anything is stamped with `self.time`.
    fn sync_shared_clock(&mut self) {
        if let Some(shm) = &self.shm {
            self.time = self.time.max(shm.current_time());
        }
    }

    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// Answers the guest's START: with the shared page where the guest
    /// should use one (the ACK then carries its client id and the page's
    /// descriptor), else with a plain ACK.
    fn ack_start(&mut self, seq: u32) -> Result<(), UmlError> {
        if !self.offer_shm {
            return self.send_msg(Op::Ack, seq, 0);
        }
        let id = self.id;
        // The guest takes the page's clock at START as its offset into our
        // time domain: from then on it reads and publishes engine time in
        // the page, while its own clock starts at 0. A node that boots with
        // the cluster starts at 0 anyway; one restarted after a power loss
        // boots at the engine's "now" with a monotonic clock from 0, as a
        // rebooted machine does. (With messages, its first GET moves its
        // clock to "now" instead; the page leaves no moment for that,
        // since the guest reads it as soon as it runs.)
        // START is acknowledged before the node ever runs, so its clock is
        // still the start time.
        debug_assert_eq!(self.time, self.boot_time);
        let shm = SchedShm::new().map_err(|source| UmlError::Io { node: id, what: "shared time-travel page", source })?;
        shm.start_at(self.boot_time);
        let conn = self.conn.as_ref().expect("the node is connected");
        shm.send_start_ack(conn, seq).map_err(|source| UmlError::Protocol { node: id, source })?;
        self.shm = Some(shm);
        Ok(())
    }

    /// Writes one message to the node's time-travel socket.
    fn send_msg(&mut self, op: Op, seq: u32, time: u64) -> Result<(), UmlError> {
        let conn = self.conn.as_mut().expect("the node is connected");
        Msg::new(op, seq, time).write_to(conn).map_err(|source| UmlError::Protocol { node: self.id, source })
    }

    /// Answers the messages a node may send whenever it talks to us, running
    /// or taking an interrupt: REQUEST (its next wake-up), UPDATE (its clock
    /// moved) and GET (answered with `get_time`, which its clock moves to;
    /// never backwards). Returns false, answering nothing, for other ops.
    fn answer_clock_message(&mut self, msg: &Msg, get_time: u64) -> Result<bool, UmlError> {
        let reply = match msg.op {
            Op::Request => {
                self.requested = msg.time;
                0
            }
            Op::Update => {
                self.time = self.time.max(msg.time);
                0
            }
            Op::Get => {
                self.time = self.time.max(get_time);
                self.time
            }
            _ => return Ok(false),
        };
        self.send_msg(Op::Ack, msg.seq, reply)?;
        Ok(true)
    }

    /// Reads one message, serving the node's devices while waiting. `None`:
    /// the socket closed (the node exited; `self.exited` is set) or `limit`
    /// passed.
    fn read_msg(&mut self, limit: Option<Duration>) -> Result<Option<Msg>, UmlError> {
        let began = Instant::now();
        let fd = self.conn.as_ref().unwrap().as_raw_fd();
        loop {
            let wait_ms = match limit {
                Some(l) => {
                    let left = l.saturating_sub(began.elapsed());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.as_millis().min(100) as i32
                }
                None => 100,
            };
            // The console is a file, read at message boundaries only.
            let mut pfd = vec![libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
            // Device sockets: control line, network, disk, entropy, in that
            // order; `ends` marks where each one's descriptors end in `pfd`.
            let mut ends = [0usize; 5];
            let device_fds = [
                self.ctl.fds(),
                self.net.as_ref().map(|n| n.backend.fds()).unwrap_or_default(),
                self.disk.as_ref().map(|d| d.backend.fds()).unwrap_or_default(),
                self.rng.fds(),
                self.root.as_ref().map(|d| d.backend.fds()).unwrap_or_default(),
            ];
            for (end, fds) in ends.iter_mut().zip(device_fds) {
                pfd.extend(fds.into_iter().map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }));
                *end = pfd.len();
            }
            // SAFETY: pfd is a valid array of pollfd.
            let n = unsafe { libc::poll(pfd.as_mut_ptr(), pfd.len() as libc::nfds_t, wait_ms.max(1)) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(UmlError::Io { node: self.id, what: "poll", source: e });
            }
            // Frames, disk requests and output are stamped with the guest's
            // clock as it stands when it hands control to us.
            self.sync_shared_clock();
            let readable = |from: usize, to: usize| pfd[from..to].iter().any(|p| p.revents != 0);
            let (ctl_ready, net_ready, disk_ready, rng_ready, root_ready) = (
                readable(1, ends[0]),
                readable(ends[0], ends[1]),
                readable(ends[1], ends[2]),
                readable(ends[2], ends[3]),
                readable(ends[3], ends[4]),
            );
            if ctl_ready {
                self.service_ctl()?;
            }
            // The guest waits for our answer to each device message (a kick
            // carries NEED_REPLY), so it is stopped while the device works,
            // and frames and disk requests are stamped with its current time.
            if net_ready {
                self.service_net()?;
            }
            if disk_ready {
                let (id, time) = (self.id, self.time);
                if let Some(d) = self.disk.as_mut() {
                    d.service(time).map_err(|source| UmlError::DiskDevice { node: id, source })?;
                }
            }
            if rng_ready {
                self.service_rng()?;
            }
            if root_ready {
                let (id, time) = (self.id, self.time);
                if let Some(d) = self.root.as_mut() {
                    d.service(time).map_err(|source| UmlError::DiskDevice { node: id, source })?;
                }
            }
            if pfd[0].revents != 0 {
                let conn = self.conn.as_mut().unwrap();
                return match Msg::read_from(conn) {
                    Ok(m) => Ok(Some(m)),
                    Err(ProtocolError::Closed) => {
                        self.exited = true;
                        Ok(None)
                    }
                    Err(source) => {
                        if let ProtocolError::Io(e) = &source {
                            if e.kind() == io::ErrorKind::ConnectionReset {
                                self.exited = true;
                                return Ok(None);
                            }
                        }
                        Err(UmlError::Protocol { node: self.id, source })
                    }
                };
            }
            if limit.is_none() && began.elapsed() > Duration::from_secs(120) {
                return Ok(None);
            }
        }
    }
}

impl UmlNode {
    /// Answers the guest's network-device messages; transmitted frames are
    /// collected with the node's current virtual time.
    fn service_net(&mut self) -> Result<(), UmlError> {
        let (id, time) = (self.id, self.time);
        let Some(net) = self.net.as_mut() else { return Ok(()) };
        let events = net.backend.handle_readable().map_err(|source| UmlError::Net { node: id, source })?;
        for ev in events {
            if let DeviceEvent::Kicked { queue, interrupt } = ev {
                for bytes in net.backend.device_mut().take_tx() {
                    net.tx.push(TxFrame { time, bytes });
                }
                if interrupt {
                    net.irq_pending.insert(queue);
                }
            }
        }
        Ok(())
    }

    /// Answers the control device; what the guest wrote joins the
    /// unstamped control bytes (stamped at its next message).
    fn service_ctl(&mut self) -> Result<(), UmlError> {
        let id = self.id;
        let events = self.ctl.handle_readable().map_err(|source| UmlError::Net { node: id, source })?;
        for ev in events {
            if let DeviceEvent::Kicked { queue, interrupt } = ev {
                let out = self.ctl.device_mut().take_output();
                self.unstamped_control.extend(out);
                if interrupt {
                    self.ctl_irq_pending.insert(queue);
                }
            }
        }
        Ok(())
    }

    /// Answers the entropy device. Its buffers are filled inside the kick,
    /// while the guest waits for our reply (so guest memory is quiescent and
    /// the bytes depend only on the guest's own requests); the used-buffer
    /// interrupt is owed and delivered in-band at the node's next stop
    /// ([`Self::raise_interrupts`]), like every other device's.
    fn service_rng(&mut self) -> Result<(), UmlError> {
        let id = self.id;
        let events = self.rng.handle_readable().map_err(|source| UmlError::Entropy { node: id, source })?;
        for ev in events {
            if let DeviceEvent::Kicked { queue, interrupt: true } = ev {
                self.rng_irq_pending.insert(queue);
            }
        }
        Ok(())
    }

    /// Runs the node at virtual time `at` until it waits, exits or trips the
    /// watchdog (see [`NodeRuntime::grant`]). `at` may be later than the
    /// node asked for (never earlier): the engine may let other events due
    /// within its clock window go first, and this node's timer then fires
    /// late, as a timer on a loaded machine does. `time_of_day` answers
    /// GET_TOD, plus the node's start time (`boot_time`).
    fn run_until_stop(
        &mut self,
        at: u64,
        time_of_day: u64,
        watchdog: Duration,
        out: &mut Vec<GuestOutput>,
    ) -> Result<RunOutcome, UmlError> {
        assert!(!self.exited, "grant to an exited node");
        assert!(self.conn.is_some(), "grant before wait_connected");
        if let Some(seq) = self.pending_start.take() {
            self.ack_start(seq)?;
        } else {
            self.requested = self.requested();
            self.time = at.max(self.requested).max(self.time);
            let run_at = match &self.shm {
                Some(shm) => {
                    // What the guest's clock reads until it publishes its
                    // own. RUN's time is not offset by the guest (7.2's
                    // time.c sets it as is), so it is sent in the guest's
                    // domain.
                    shm.set_current_time(self.time);
                    self.time - self.boot_time
                }
                None => self.time,
            };
            self.send_msg(Op::Run, 0, run_at)?;
        }
        let began = Instant::now();
        loop {
            let left = watchdog.saturating_sub(began.elapsed());
            let msg = match self.read_msg(Some(left))? {
                Some(m) => m,
                None if self.exited => {
                    self.drain(out);
                    let st = self.reap();
                    return Ok(RunOutcome::Exited { status: st.and_then(|s| s.code()), signal: st.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)) });
                }
                None => {
                    self.drain(out);
                    return Ok(RunOutcome::Hung { wall: began.elapsed() });
                }
            };
            self.drain(out);
            match msg.op {
                Op::Ack => {} // the node's ACK of our RUN (not in shared-memory mode)
                // The guest takes this as the time of day "now", at its
                // boot: a node restarted after a power loss at engine time
                // t must read the cluster's date plus t, or its wall clock
                // would be t behind every other node's (with either
                // transport: the guest subtracts its own clock at the GET
                // that follows, which is t with messages and 0 with the
                // shared page, whose clock it counts from its offset).
                Op::GetTod => self.send_msg(Op::Ack, msg.seq, time_of_day + self.boot_time)?,
                Op::Wait => {
                    // A guest that refused the page (another layout version)
                    // speaks the message protocol: so do we, from now on.
                    if self.shm.as_ref().is_some_and(|s| !s.guest_attached()) {
                        self.shm = None;
                    }
                    // No ACK for WAIT in shared-memory mode.
                    if self.shm.is_none() {
                        self.send_msg(Op::Ack, msg.seq, 0)?;
                    }
                    self.requested = self.requested();
                    return Ok(RunOutcome::Waiting { requested: self.requested });
                }
                _ if self.answer_clock_message(&msg, self.time)? => {}
                _ => return Err(UmlError::Unexpected { node: self.id, msg, state: "running" }),
            }
        }
    }

    /// Delivers what is owed to the stopped guest at virtual time `t`:
    /// queued control input and backlogged frames that now fit, and every
    /// pending interrupt. Every grant that ends in a wait ends with this.
    fn settle(&mut self, t: u64, watchdog: Duration) -> Result<(), UmlError> {
        let id = self.id;
        if self.ctl.device().has_input() {
            let (dev, queues) = self.ctl.device_and_queues();
            let moved = dev
                .flush_input(queues)
                .map_err(|e| UmlError::Net { node: id, source: VhostUserError::Device(e) })?;
            if moved && queues.needs_interrupt(console::RX_QUEUE).unwrap_or(true) {
                self.ctl_irq_pending.insert(console::RX_QUEUE as u16);
            }
        }
        if self.has_rx_backlog() {
            self.fill_rx_from_backlog()?;
        }
        self.raise_interrupts(t, watchdog)
    }

    /// The node's virtual time as last granted or reported.
    pub fn time(&self) -> u64 {
        self.time
    }

    /// Whether frames wait for the guest to post receive buffers.
    pub fn has_rx_backlog(&self) -> bool {
        self.net.as_ref().is_some_and(|n| !n.backlog.is_empty())
    }

    /// Moves backlogged frames into receive buffers the guest has posted
    /// since (the node is stopped) and marks the receive interrupt owed;
    /// [`Self::settle`] delivers it. Returns how many frames moved.
    fn fill_rx_from_backlog(&mut self) -> Result<usize, UmlError> {
        let id = self.id;
        let Some(net) = self.net.as_mut() else { return Ok(0) };
        let mut moved = 0;
        while let Some(frame) = net.backlog.front() {
            let (dev, queues) = net.backend.device_and_queues();
            match dev.deliver(queues, frame) {
                Ok(true) => {
                    net.backlog.pop_front();
                    moved += 1;
                }
                Ok(false) => break,
                Err(e) => return Err(UmlError::Net { node: id, source: VhostUserError::Device(e) }),
            }
        }
        if moved > 0 {
            let (_, queues) = net.backend.device_and_queues();
            if queues.needs_interrupt(NET_RX as usize).unwrap_or(true) {
                net.irq_pending.insert(NET_RX);
            }
        }
        Ok(moved)
    }

    /// Delivers every interrupt owed to the stopped guest, at virtual time
    /// `t`: each is an in-band call the guest's SIGIO handler takes by
    /// asking us the time (we answer `t`) and requesting to run at it.
    /// See `vmm::vhost_user` for the exact sequence.
    pub fn raise_interrupts(&mut self, t: u64, watchdog: Duration) -> Result<(), UmlError> {
        let id = self.id;
        if let Some(shm) = &self.shm {
            // The guest's interrupt handler reads its clock from the page
            // (where it would send GET, answered with `t`).
            self.time = self.time.max(t);
            shm.set_current_time(self.time);
        }
        let net_err = |source| UmlError::Net { node: id, source };
        if self.ctl.is_connected() {
            for q in std::mem::take(&mut self.ctl_irq_pending) {
                self.ctl.send_call(q).map_err(net_err)?;
            }
        }
        if let Some(net) = self.net.as_mut().filter(|n| n.backend.is_connected()) {
            for q in std::mem::take(&mut net.irq_pending) {
                net.backend.send_call(q).map_err(net_err)?;
            }
        }
        let disk_err = |source| UmlError::DiskDevice { node: id, source };
        for d in self.disk.iter_mut().chain(self.root.iter_mut()).filter(|d| d.backend.is_connected()) {
            if std::mem::take(&mut d.irq_pending) {
                d.backend.send_call(REQUEST_QUEUE as u16).map_err(disk_err)?;
            }
        }
        let rng_err = |source| UmlError::Entropy { node: id, source };
        if self.rng.is_connected() {
            for q in std::mem::take(&mut self.rng_irq_pending) {
                self.rng.send_call(q).map_err(rng_err)?;
            }
        }
        let began = Instant::now();
        loop {
            if self.ctl.calls_in_flight() > 0 {
                self.ctl.take_call_replies().map_err(net_err)?;
            }
            let mut in_flight = self.ctl.calls_in_flight();
            let mut fds = vec![self.conn.as_ref().unwrap().as_raw_fd()];
            fds.extend(self.ctl.call_reply_fd().filter(|_| self.ctl.calls_in_flight() > 0));
            if let Some(net) = self.net.as_mut() {
                if net.backend.calls_in_flight() > 0 {
                    net.backend.take_call_replies().map_err(net_err)?;
                }
                in_flight += net.backend.calls_in_flight();
                fds.extend(net.backend.call_reply_fd().filter(|_| net.backend.calls_in_flight() > 0));
            }
            for d in self.disk.iter_mut().chain(self.root.iter_mut()) {
                if d.backend.calls_in_flight() > 0 {
                    d.backend.take_call_replies().map_err(disk_err)?;
                }
                in_flight += d.backend.calls_in_flight();
                fds.extend(d.backend.call_reply_fd().filter(|_| d.backend.calls_in_flight() > 0));
            }
            if self.rng.calls_in_flight() > 0 {
                self.rng.take_call_replies().map_err(rng_err)?;
            }
            in_flight += self.rng.calls_in_flight();
            fds.extend(self.rng.call_reply_fd().filter(|_| self.rng.calls_in_flight() > 0));
            if in_flight == 0 {
                return Ok(());
            }
            if began.elapsed() > watchdog {
                return Err(UmlError::InterruptTimeout { node: id, secs: watchdog.as_secs() });
            }
            let mut pfd: Vec<libc::pollfd> =
                fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
            // SAFETY: valid pollfd array.
            let n = unsafe { libc::poll(pfd.as_mut_ptr(), pfd.len() as libc::nfds_t, 100) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(UmlError::Io { node: id, what: "poll", source: e });
                }
                continue;
            }
            if pfd[0].revents != 0 {
                let conn = self.conn.as_mut().unwrap();
                let msg = match Msg::read_from(conn) {
                    Ok(m) => m,
                    Err(ProtocolError::Closed) => {
                        self.exited = true;
                        return Ok(());
                    }
                    Err(source) => return Err(UmlError::Protocol { node: id, source }),
                };
                if !self.answer_clock_message(&msg, t)? {
                    return Err(UmlError::Unexpected { node: id, msg, state: "taking an interrupt" });
                }
            }
        }
    }

    /// Moves what the node appended to its console file since the last
    /// read into the unstamped buffer.
    ///
    /// This runs at every protocol message, so it must be cheap: one
    /// scratch buffer for the node's life (zeroing a fresh 64 KiB one was
    /// most of simcluster's instructions per grant, measured with
    /// callgrind), and no read after a short one: the node is stopped
    /// while we drain it, so a short read has reached the end of what it
    /// wrote.
    fn read_console(&mut self) {
        let buf = &mut self.console_scratch[..];
        loop {
            match self.console.read(buf) {
                Ok(n) => {
                    self.unstamped_console.extend_from_slice(&buf[..n]);
                    if n < buf.len() {
                        break; // all of it, for now
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// Stamps everything the node wrote since its previous message with its
    /// current virtual time. Call at every message boundary.
    fn drain(&mut self, out: &mut Vec<GuestOutput>) {
        self.read_console();
        for (stream, buf) in [
            (OutputStream::Console, &mut self.unstamped_console),
            (OutputStream::Control, &mut self.unstamped_control),
        ] {
            if !buf.is_empty() {
                out.push(GuestOutput { time: self.time, stream, bytes: std::mem::take(buf) });
            }
        }
    }

    /// Collects the exit status of a node whose socket closed. The main
    /// process is given a moment to finish on its own (a clean poweroff
    /// exits 0), observed without reaping it (WNOWAIT) so that its process
    /// group id stays ours while we kill the helper processes left in it.
    fn reap(&mut self) -> Option<ExitStatus> {
        self.exited = true;
        let pid = self.child.id() as libc::id_t;
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(2) {
            // SAFETY: waitid with a zeroed siginfo out-parameter.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
            };
            if r != 0 || unsafe { info.si_pid() } != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.kill_and_reap()
    }

    /// Kills the node's process group and reaps its kernel process. The
    /// group leaves LIVE_GROUPS before the reap, so no one signals its pid
    /// once it may be reused.
    fn kill_and_reap(&mut self) -> Option<ExitStatus> {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signalling our own child's process group (setsid in
        // pre_exec made its pgid equal to its pid); not reaped yet.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        live_groups().live.remove(&pid);
        self.child.wait().ok()
    }

}

impl NodeRuntime for UmlNode {
    /// Waits (wall clock, bounded) for the node to connect and send START.
    /// After this the node is stopped and ready for its first grant at
    /// `start_time`.
    fn wait_connected(&mut self, start_time: u64, limit: Duration) -> Result<Vec<GuestOutput>, NodeError> {
        let listener = self.listener.take().expect("wait_connected called twice");
        let began = Instant::now();
        let stream = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(source) => return Err(UmlError::Io { node: self.id, what: "accept", source }.into()),
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                self.exited = true;
                return Err(UmlError::DiedBeforeStart {
                    node: self.id,
                    status: st.to_string(),
                    stderr: self.stderr_path.clone(),
                }.into());
            }
            if began.elapsed() > limit {
                return Err(UmlError::NoConnect {
                    node: self.id,
                    secs: limit.as_secs(),
                    stderr: self.stderr_path.clone(),
                }.into());
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        stream
            .set_nonblocking(false)
            .map_err(|source| UmlError::Io { node: self.id, what: "socket", source })?;
        self.conn = Some(stream);
        let msg = self.read_msg(None)?;
        let mut out = Vec::new();
        self.time = start_time;
        self.boot_time = start_time;
        self.requested = start_time;
        self.drain(&mut out);
        match msg {
            Some(m) if m.op == Op::Start => {
                self.pending_start = Some(m.seq);
                Ok(out)
            }
            Some(m) => Err(UmlError::Unexpected { node: self.id, msg: m, state: "connecting" }.into()),
            None => Err(UmlError::DiedBeforeStart {
                node: self.id,
                status: "closed the time-travel socket".into(),
                stderr: self.stderr_path.clone(),
            }.into()),
        }
    }

    /// The time this node wants to run at next. In shared-memory mode the
    /// guest publishes a request in the page (while it runs or takes an
    /// interrupt) instead of sending REQUEST; one it has not published
    /// since its last RUN leaves the previous request standing, as a
    /// missing REQUEST message does.
    fn requested(&self) -> u64 {
        self.shm.as_ref().and_then(|s| s.request()).unwrap_or(self.requested)
    }

    fn has_exited(&self) -> bool {
        self.exited
    }

    fn grant(&mut self, at: u64, time_of_day: u64, watchdog: Duration) -> Result<Grant, NodeError> {
        let mut output = Vec::new();
        let outcome = self.run_until_stop(at, time_of_day, watchdog, &mut output)?;
        let disk = self.disk.as_mut().map(|d| d.take_reads_done()).unwrap_or_default();
        let tx = self.net.as_mut().map(|n| std::mem::take(&mut n.tx)).unwrap_or_default();
        if let RunOutcome::Waiting { .. } = outcome {
            // Interrupts owed for transmitted frames, disk reads and control
            // output, and input that waited for buffers, reach it now.
            self.settle(at, watchdog)?;
        }
        Ok(Grant { outcome, output, disk, tx })
    }

    /// Sends engine commands to the guest's control line at virtual time
    /// `t` (an interrupt: the guest will ask to run at `t`). Call only while
    /// the node is stopped, with `t` between its clock and its requested
    /// time. Bytes the guest has no buffer for yet follow at a later stop.
    fn send_control(&mut self, t: u64, bytes: &[u8], watchdog: Duration) -> Result<(), NodeError> {
        self.ctl.device_mut().push_input(bytes);
        Ok(self.settle(t, watchdog)?)
    }

    /// Puts a frame into the guest's receive queue at virtual time `t` and
    /// interrupts the guest, which will then ask to run at `t`. Call only
    /// while the node is stopped, with `t` no earlier than its clock and no
    /// later than its requested time.
    fn deliver_frame(&mut self, t: u64, frame: &[u8], watchdog: Duration) -> Result<Delivered, NodeError> {
        let id = self.id;
        let Some(net) = self.net.as_mut() else { return Ok(Delivered::Dropped) };
        if !net.backend.is_connected() {
            return Ok(Delivered::Dropped);
        }
        let result = if !net.backlog.is_empty() {
            // Keep arrival order behind frames already waiting.
            Delivered::Queued
        } else {
            let (dev, queues) = net.backend.device_and_queues();
            if !queues.is_ready(NET_RX as usize) {
                return Ok(Delivered::Dropped);
            }
            match dev.deliver(queues, frame) {
                Ok(true) => {
                    if queues.needs_interrupt(NET_RX as usize).unwrap_or(true) {
                        net.irq_pending.insert(NET_RX);
                    }
                    Delivered::Now
                }
                Ok(false) => Delivered::Queued,
                Err(e) => return Err(UmlError::Net { node: id, source: VhostUserError::Device(e) }.into()),
            }
        };
        if result == Delivered::Queued {
            if net.backlog.len() >= RX_BACKLOG {
                return Ok(Delivered::Dropped);
            }
            net.backlog.push_back(frame.to_vec());
        }
        self.raise_interrupts(t, watchdog)?;
        Ok(result)
    }

    /// Whether the node has a data disk.
    fn has_disk(&self) -> bool {
        self.disk.is_some()
    }

    /// The data disk, for inspection (its durable store, volatile writes,
    /// crash-state counts). Completing requests behind the node's back
    /// breaks its bookkeeping: use [`Self::complete_disk`].
    fn disk(&self) -> Option<&Disk> {
        self.disk.as_ref().map(|d| d.disk())
    }

    /// Disk writes and flushes the guest submitted and that wait for the
    /// engine, in submission (= id) order: the completions the engine may
    /// choose from, in any order. Empty once the node has exited (its
    /// requests died with it; the disk resolves them in a crash state).
    fn pending_disk(&self) -> Vec<DiskRequest> {
        match &self.disk {
            Some(d) if !self.exited => d.pending(),
            _ => Vec::new(),
        }
    }

    /// See `NodeRuntime::disk_fault`.
    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool {
        self.disk.as_mut().is_some_and(|d| d.backend.device_and_queues().0.disk_mut().inject(id, fault))
    }

    /// See `NodeRuntime::stop_read_faults`.
    fn stop_read_faults(&mut self) {
        if let Some(d) = self.disk.as_mut() {
            d.backend.device_mut().set_read_faults(disksim::ReadFaults::default());
        }
    }

    /// Completes pending disk request `id` at virtual time `t`: applies its
    /// durability effect to the disk's write log (a completed write is
    /// volatile; a completed flush makes durable every write completed
    /// before it was issued), hands the status to the guest's driver and
    /// delivers the used-buffer interrupt in-band at `t`. Call only while
    /// the node is stopped, with `t` no earlier than its clock and no later
    /// than its requested time; the guest will then ask to run at `t`.
    fn complete_disk(&mut self, t: u64, id: RequestId, watchdog: Duration) -> Result<DiskCompletion, NodeError> {
        let node = self.id;
        if self.exited {
            return Err(NodeError::DiskNodeExited { node });
        }
        let t = t.max(self.time);
        let d = self.disk.as_mut().ok_or(NodeError::NoDisk { node })?;
        let c = d.complete(t, id).map_err(|e| match e {
            CompleteError::Unknown => NodeError::UnknownDiskRequest { node, id },
            CompleteError::Device(source) => UmlError::DiskComplete { node, id, source }.into(),
        })?;
        self.raise_interrupts(t, watchdog)?;
        Ok(c)
    }

    /// Takes the data disk out of a node that is no longer running (after
    /// [`Self::kill`], or once it exited): the disk as the power loss left
    /// it, with its write log and the requests that were in flight still
    /// outstanding. The engine then picks a crash state
    /// ([`Disk::crash_states`], [`Disk::sample_crash_state`]), applies it
    /// ([`Disk::apply_crash`]) and may start a fresh node on the result
    /// with [`Self::spawn_with_disk`].
    fn take_disk(&mut self) -> Result<Disk, NodeError> {
        let node = self.id;
        if !self.exited {
            return Err(NodeError::DiskInUse { node });
        }
        let d = self.disk.take().ok_or(NodeError::NoDisk { node })?;
        Ok(d.into_disk())
    }

    /// Proportional set size of the node's processes (the kernel process
    /// and the host processes backing guest address spaces), in KiB; guest
    /// memory shared between them is counted once.
    fn memory_kib(&self) -> u64 {
        if self.exited {
            return 0;
        }
        let pgid = self.child.id() as i64;
        let mut total = 0;
        let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            // Fields after the command name (which may hold spaces): state ppid pgrp.
            let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let pgrp = after.split_whitespace().nth(2).and_then(|s| s.parse::<i64>().ok());
            if pgrp != Some(pgid) {
                continue;
            }
            if let Ok(roll) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
                total += roll
                    .lines()
                    .find_map(|l| l.strip_prefix("Pss:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        total
    }

    /// Powers the node off at once (the engine's "stop the world").
    fn kill(&mut self) {
        // Never signal the group after the child was reaped: its pid (and
        // so the group id) may already belong to someone else.
        if !self.exited {
            let _ = self.kill_and_reap();
            self.exited = true;
        }
    }
}

impl Drop for UmlNode {
    fn drop(&mut self) {
        self.kill();
    }
}
