//! End to end: a user-mode Linux guest with a vhost-user virtio-net and
//! virtio-blk device, under a small time-travel controller that also
//! serves the device sockets (what `UmlNode::grant` will need to do).
//!
//! The guest configures eth0 as 10.0.0.1 and pings 10.0.0.2; the test
//! answers its ARP request and its echo requests, so ping succeeds. Then
//! it writes a sector to /dev/vda with fsync, and the test checks the
//! bytes are durable in disksim.
//!
//! Needs the UML kernel (`SIMCLUSTER_UML_KERNEL`: scripts/test.sh exports
//! the image builder's) and a static busybox (`testkit::busybox`: the
//! host's or Debian's busybox-static, downloaded into the cache); otherwise
//! a `Cause::Missing` skip (a failure under `SIMCLUSTER_STRICT_SKIPS=1`).

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use disksim::{BlockStore, Disk};
use vmm::uml::timetravel::{Msg, Op};
use vmm::vhost_user::{DeviceEvent, VhostUserBackend};
use vmm::virtio::blk::REQUEST_QUEUE;
use vmm::virtio::net::RX_QUEUE;
use vmm::virtio::{BlkConfig, VirtioBlk, VirtioNet};

/// The UML kernel scripts/test.sh exports (the image builder's); `Err` is
/// why there is none.
/// One node: the UML process and its time-travel connection.
struct Node {
    child: Child,
    tt: UnixStream,
    /// The node's virtual time (last RUN or GET answer).
    time: u64,
    requested: u64,
    messages: u64,
    /// Every time-travel message and device event, in order: two runs of
    /// the same guest must produce the same trace.
    trace: Vec<String>,
}

impl Node {
    fn spawn(kernel: &Path, initrd: &Path, dir: &Path, extra: &[String]) -> Node {
        let tt_path = dir.join("tt.sock");
        let listener = UnixListener::bind(&tt_path).unwrap();
        let console = File::create(dir.join("console.log")).unwrap();
        let stderr = File::create(dir.join("stderr.log")).unwrap();
        let mut cmd = Command::new(kernel);
        cmd.arg("mem=128M")
            .arg("umid=vu1")
            .arg(format!("uml_dir={}", dir.display()))
            .arg(format!("time-travel=ext:1:{}", tt_path.display()))
            .arg(format!("initrd={}", initrd.display()))
            .args(["con=null", "ssl=null", "con0=null,fd:1", "console=tty0", "panic=-1"])
            .args(extra)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", dir)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(stderr);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
                vmm::uml::seccomp::deny_getrandom()
            });
        }
        let child = cmd.spawn().unwrap();
        listener.set_nonblocking(true).unwrap();
        let began = Instant::now();
        let tt = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(_) if began.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => panic!("no result: the node did not connect within the 20 s wall-clock watchdog ({e})"),
            }
        };
        tt.set_nonblocking(false).unwrap();
        let mut n = Node { child, tt, time: 0, requested: 0, messages: 0, trace: Vec::new() };
        let start = n.read();
        assert_eq!(start.op, Op::Start);
        n.reply(&start, 0); // the first grant
        n
    }

    fn read(&mut self) -> Msg {
        let m = Msg::read_from(&mut self.tt).expect("time-travel message");
        self.note(&m);
        m
    }

    fn note(&mut self, m: &Msg) {
        self.messages += 1;
        self.trace.push(format!("{:?} {}", m.op, m.time));
    }

    fn reply(&mut self, m: &Msg, time: u64) {
        Msg::new(Op::Ack, m.seq, time).write_to(&mut self.tt).unwrap();
    }

    /// Handles one message that is not WAIT; `get_time` answers GET.
    fn serve(&mut self, m: Msg, get_time: u64) {
        let t = match m.op {
            Op::Request => {
                self.requested = m.time;
                0
            }
            Op::Update => {
                self.time = self.time.max(m.time);
                0
            }
            Op::Get => {
                self.time = get_time;
                self.trace.push(format!("  -> {get_time}"));
                get_time
            }
            Op::GetTod => 1_700_000_000_000_000_000,
            other => panic!("unexpected {other:?}"),
        };
        self.reply(&m, t);
    }

    fn run(&mut self) {
        self.time = self.requested;
        self.trace.push(format!("RUN {}", self.time));
        Msg::new(Op::Run, 0, self.time).write_to(&mut self.tt).unwrap();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: signalling our own child's process group (setsid above).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn poll(fds: &[RawFd], ms: i32) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: valid pollfd array.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    p.iter().map(|p| p.revents != 0).collect()
}

/// What the "network" does with a frame the guest sent: the replies to
/// deliver back.
type Responder = Box<dyn FnMut(&[u8]) -> Vec<Vec<u8>>>;

/// The engine in miniature: one node, its two devices, FIFO delivery.
struct Sim {
    node: Node,
    net: VhostUserBackend<VirtioNet>,
    blk: VhostUserBackend<VirtioBlk>,
    respond: Responder,
    /// Frames waiting for the guest's receive buffers.
    rx_backlog: Vec<Vec<u8>>,
    /// Interrupts owed: (0 = net, 1 = blk, queue).
    irqs: Vec<(u8, u16)>,
    tx_frames: Vec<Vec<u8>>,
    rx_delivered: u64,
    blk_done: u64,
    calls: u64,
    /// Virtual latency of device effects.
    latency: u64,
    /// Frames the "network" pushes at the guest unprompted: (frame, how many).
    flood: Option<(Vec<u8>, u64)>,
    /// The flood starts once the guest has sent this many frames.
    flood_after_tx: usize,
    flood_wall: (Option<Instant>, Option<Instant>),
    /// Wall time of the first and the latest frame the guest sent.
    tx_wall: (Option<Instant>, Option<Instant>),
}

impl Sim {
    fn owe(&mut self, dev: u8, q: u16) {
        if !self.irqs.contains(&(dev, q)) {
            self.irqs.push((dev, q));
        }
    }

    fn on_device_events(&mut self) {
        for ev in self.net.handle_readable().unwrap() {
            self.node.trace.push(format!("net {ev:?}"));
            if let DeviceEvent::Kicked { queue, interrupt: true } = ev {
                self.owe(0, queue);
            }
        }
        for f in self.net.device_mut().take_tx() {
            self.node.trace.push(format!(
                "tx {} {:08x} {}",
                f.len(),
                crc(&f),
                f.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ));
            self.tx_wall.0.get_or_insert_with(Instant::now);
            self.tx_wall.1 = Some(Instant::now());
            let replies = (self.respond)(&f);
            self.rx_backlog.extend(replies);
            self.tx_frames.push(f);
        }
        for ev in self.blk.handle_readable().unwrap() {
            self.node.trace.push(format!("blk {ev:?}"));
            if let DeviceEvent::Kicked { queue, interrupt: true } = ev {
                self.owe(1, queue);
            }
        }
    }

    /// The node is stopped (it sent WAIT): apply device effects, deliver
    /// their interrupts (steps 2-5 of the vhost_user module docs), RUN.
    fn at_stop(&mut self) {
        let t = (self.node.time + self.latency).min(self.node.requested);
        if let Some((frame, left)) = self.flood.as_mut().filter(|_| self.tx_frames.len() >= self.flood_after_tx) {
            let n = (256 - self.rx_backlog.len().min(256)).min(*left as usize);
            if n > 0 && self.net.device_and_queues().1.is_ready(RX_QUEUE) {
                self.flood_wall.0.get_or_insert_with(Instant::now);
                *left -= n as u64;
                self.rx_backlog.extend((0..n).map(|_| frame.clone()));
            }
        }
        // Network: as many backlog frames as there are buffers.
        let (dev, qs) = self.net.device_and_queues();
        let mut n = 0;
        while n < self.rx_backlog.len() && dev.deliver(qs, &self.rx_backlog[n]).unwrap() {
            n += 1;
        }
        self.rx_backlog.drain(..n);
        self.rx_delivered += n as u64;
        if self.flood.as_ref().is_some_and(|f| f.1 == 0) && self.rx_backlog.is_empty() && self.flood_wall.1.is_none() {
            self.flood_wall.1 = Some(Instant::now());
        }
        if n > 0 && qs.needs_interrupt(RX_QUEUE).unwrap() {
            self.owe(0, RX_QUEUE as u16);
        }
        // Disk: complete everything accepted, in issue order.
        let (dev, qs) = self.blk.device_and_queues();
        let ids: Vec<_> = dev.pending().collect();
        for id in &ids {
            dev.complete(*id, qs).unwrap();
        }
        self.blk_done += ids.len() as u64;
        if !ids.is_empty() && qs.needs_interrupt(REQUEST_QUEUE).unwrap() {
            self.owe(1, REQUEST_QUEUE as u16);
        }
        let calls = std::mem::take(&mut self.irqs);
        for &(d, q) in &calls {
            self.node.trace.push(format!("call {d}/{q} at {t}"));
            if d == 0 { self.net.send_call(q) } else { self.blk.send_call(q) }.unwrap();
            self.calls += 1;
        }
        let mark = self.node.trace.len();
        // Serve GET (answered with t) and REQUEST until every call is taken.
        while self.net.calls_in_flight() + self.blk.calls_in_flight() > 0 {
            let fds = [
                self.node.tt.as_raw_fd(),
                self.net.call_reply_fd().unwrap_or(-1),
                self.blk.call_reply_fd().unwrap_or(-1),
            ];
            let r = poll(&fds, 10_000);
            assert!(r.iter().any(|&x| x), "node stuck handling an interrupt");
            if r[0] {
                let m = self.node.read();
                self.node.serve(m, t);
            }
            // Two calls on one device may be answered in one read: take
            // every buffered reply, not one per readable poll.
            if r[1] {
                assert!(self.net.take_call_replies().unwrap().iter().all(|&s| s == 0));
            }
            if r[2] {
                assert!(self.blk.take_call_replies().unwrap().iter().all(|&s| s == 0));
            }
        }
        if !calls.is_empty() {
            // Steps 3 and 4 of the module docs: the guest asked for the time
            // (answered t) and then, unless an interrupt event was already
            // pending, requested to run at t.
            let seen = &self.node.trace[mark..];
            assert!(seen.first().is_some_and(|l| l.starts_with("Get ")), "call handling began with {seen:?}");
            assert_eq!(self.node.requested, t, "after {seen:?}");
        }
        self.node.run();
    }

    /// Runs until the node exits; returns the number of grants.
    fn run(&mut self, wall_limit: Duration) -> u64 {
        let began = Instant::now();
        let mut grants = 1;
        loop {
            assert!(
                began.elapsed() < wall_limit,
                "no result: the {wall_limit:?} wall-clock watchdog fired before the node exited ({grants} grants)"
            );
            let mut fds = vec![self.node.tt.as_raw_fd()];
            fds.extend(self.net.fds());
            fds.extend(self.blk.fds());
            let r = poll(&fds, 1000);
            if r[1..].iter().any(|&x| x) {
                self.on_device_events();
            }
            if !r[0] {
                continue;
            }
            let m = match Msg::read_from(&mut self.node.tt) {
                Ok(m) => m,
                Err(_) => return grants, // the node exited
            };
            self.node.note(&m);
            match m.op {
                Op::Ack => {}
                Op::Wait => {
                    self.node.reply(&m, 0);
                    if self.node.requested >= i64::MAX as u64
                        && self.rx_backlog.is_empty()
                        && self.irqs.is_empty()
                        && self.blk.device().pending().next().is_none()
                    {
                        panic!("node waits forever with nothing to deliver");
                    }
                    self.at_stop();
                    grants += 1;
                }
                _ => {
                    let t = self.node.time;
                    self.node.serve(m, t);
                }
            }
        }
    }
}

fn crc(b: &[u8]) -> u32 {
    b.iter().fold(0x811c9dc5u32, |h, &x| (h ^ u32::from(x)).wrapping_mul(0x0100_0193))
}

// ---- a tiny network: ARP and ICMP echo for 10.0.0.2 ----

const PEER_IP: [u8; 4] = [10, 0, 0, 2];
const PEER_MAC: [u8; 6] = [0x02, 0, 0x0a, 0, 0, 2];

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Answers ARP requests for and ICMP echo requests to 10.0.0.2.
fn peer(f: &[u8]) -> Vec<Vec<u8>> {
    if f.len() < 42 {
        return vec![];
    }
    let ethertype = u16::from_be_bytes([f[12], f[13]]);
    let src_mac = &f[6..12];
    if ethertype == 0x0806 && f[20..22] == [0, 1] && f[38..42] == PEER_IP {
        let mut r = Vec::with_capacity(42);
        r.extend_from_slice(src_mac);
        r.extend_from_slice(&PEER_MAC);
        r.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
        r.extend_from_slice(&PEER_MAC);
        r.extend_from_slice(&PEER_IP);
        r.extend_from_slice(&f[22..32]); // requester's MAC and IP
        return vec![r];
    }
    let ihl = (f[14] & 0xf) as usize * 4;
    if ethertype == 0x0800 && f[23] == 1 && f[30..34] == PEER_IP && f.get(14 + ihl) == Some(&8) {
        let mut r = f.to_vec();
        r[0..6].copy_from_slice(src_mac);
        r[6..12].copy_from_slice(&PEER_MAC);
        r[26..30].copy_from_slice(&f[30..34]);
        r[30..34].copy_from_slice(&f[26..30]);
        let icmp = 14 + ihl;
        r[icmp] = 0; // echo reply
        r[icmp + 2..icmp + 4].copy_from_slice(&[0, 0]);
        let c = csum(&r[icmp..]);
        r[icmp + 2..icmp + 4].copy_from_slice(&c.to_be_bytes());
        return vec![r];
    }
    vec![]
}

struct Setup {
    dir: PathBuf,
    kernel: PathBuf,
    initrd: PathBuf,
}

fn setup(name: &str, init: &str) -> Option<Setup> {
    let (kernel, busybox) = testkit::busybox::uml_guest()?;
    let dir = std::env::temp_dir().join(format!("vu-uml-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let initrd = dir.join("root.cpio");
    std::fs::write(&initrd, testkit::busybox::initramfs(&busybox, init).unwrap()).unwrap();
    Some(Setup { dir, kernel, initrd })
}

fn start(s: &Setup, disk_sectors: u64, respond: Responder) -> Sim {
    let net_sock = s.dir.join("net.sock");
    let blk_sock = s.dir.join("blk.sock");
    let net = VhostUserBackend::listen(&net_sock, VirtioNet::new(simtime::NodeId::new(1).unwrap())).unwrap();
    let disk = Disk::new(BlockStore::zeros(disk_sectors));
    let blk = VhostUserBackend::listen(&blk_sock, VirtioBlk::new(disk, BlkConfig::default())).unwrap();
    let extra = vec![
        format!("virtio_uml.device={}:1", net_sock.display()),
        format!("virtio_uml.device={}:2", blk_sock.display()),
    ];
    let node = Node::spawn(&s.kernel, &s.initrd, &s.dir, &extra);
    Sim {
        node,
        net,
        blk,
        respond,
        rx_backlog: Vec::new(),
        irqs: Vec::new(),
        tx_frames: Vec::new(),
        rx_delivered: 0,
        blk_done: 0,
        calls: 0,
        latency: 50_000,
        flood: None,
        flood_after_tx: 0,
        flood_wall: (None, None),
        tx_wall: (None, None),
    }
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
ip link set eth0 up
ip addr add 10.0.0.1/24 dev eth0
ping -c 3 10.0.0.2
echo PING_RC=$?
echo simcluster-disk-test > /tmp/x
dd if=/tmp/x of=/dev/vda bs=512 count=1 conv=sync,fsync 2>/dev/null
echo DD_RC=$?
echo READBACK=$(dd if=/dev/vda bs=512 count=1 2>/dev/null | head -c 20)
echo UPTIME $(cat /proc/uptime)
poweroff -f
"#;

fn run_e2e(name: &str) -> Option<(Sim, String, Duration)> {
    let s = setup(name, INIT)?;
    let mut sim = start(&s, 8192, Box::new(peer));
    let t0 = Instant::now();
    let grants = sim.run(Duration::from_secs(120));
    let wall = t0.elapsed();
    let console = std::fs::read_to_string(s.dir.join("console.log")).unwrap();
    eprintln!(
        "grants {grants}, tt messages {}, tx frames {}, rx frames {}, blk requests {}, calls {}, virtual {} ns, wall {wall:?}",
        sim.node.messages,
        sim.tx_frames.len(),
        sim.rx_delivered,
        sim.blk_done,
        sim.calls,
        sim.node.time
    );
    let _ = std::fs::remove_dir_all(&s.dir);
    Some((sim, console, wall))
}

#[test]
fn uml_guest_pings_through_vhost_user_net_and_writes_disksim() {
    let Some((sim, console, _)) = run_e2e("e2e") else {
        return;
    };
    eprintln!("{console}");
    // The guest's frames came out of TX: an ARP request from its MAC.
    let arp = sim.tx_frames.iter().find(|f| f.len() >= 42 && f[12..14] == [8, 6]).expect("an ARP request");
    assert_eq!(&arp[6..12], &[2, 0, 0x0a, 0, 0, 1]);
    assert_eq!(&arp[38..42], &PEER_IP);
    assert!(console.contains("3 packets transmitted, 3 packets received"), "ping did not get its replies");
    assert!(console.contains("PING_RC=0"));
    assert!(console.contains("DD_RC=0"));
    assert!(console.contains("READBACK=simcluster-disk-test"));
    // fsync flushed: the sector is durable in disksim.
    let d = sim.blk.device().disk();
    let mut sector = vec![0u8; 512];
    d.durable_store().read(0, &mut sector).unwrap();
    assert_eq!(&sector[..21], b"simcluster-disk-test\n");
}

#[test]
fn uml_device_traffic_is_deterministic() {
    let Some((a, ca, _)) = run_e2e("det") else {
        return;
    };
    let Some((b, cb, _)) = run_e2e("det") else {
        return;
    };
    // Console lines carry the socket paths (which differ by name) only in
    // the boot log; compare from /init on.
    let tail = |c: &str| c[c.find("Run /init").unwrap_or(0)..].to_string();
    assert_eq!(tail(&ca), tail(&cb));
    assert_eq!(a.node.trace.len(), b.node.trace.len(), "trace lengths differ");
    for (i, (x, y)) in a.node.trace.iter().zip(&b.node.trace).enumerate() {
        assert_eq!(x, y, "traces diverge at entry {i}");
    }
    let d = |s: &Sim| {
        let mut v = vec![0u8; 4096];
        s.blk.device().disk().durable_store().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(d(&a), d(&b));
}

const PERF_INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
ip link set eth0 up
ip addr add 10.0.0.1/24 dev eth0
ping -A -q -c 2000 10.0.0.2
sleep 1
echo RX_PACKETS=$(cat /sys/class/net/eth0/statistics/rx_packets)
echo TX_PACKETS=$(cat /sys/class/net/eth0/statistics/tx_packets)
poweroff -f
"#;

/// Numbers: a ping -A round-trip stream (one TX kick plus one RX delivery
/// and interrupt per echo) and a host-side flood of frames into the guest.
#[test]
fn uml_vhost_user_frame_rates() {
    let Some(s) = setup("perf", PERF_INIT) else {
        return;
    };
    let mut sim = start(&s, 8192, Box::new(peer));
    // 50k frames to the guest's MAC with an ethertype nobody handles: the
    // driver counts them, the stack drops them.
    let mut junk = vec![0u8; 64];
    junk[0..6].copy_from_slice(&[2, 0, 0x0a, 0, 0, 1]);
    junk[6..12].copy_from_slice(&PEER_MAC);
    junk[12..14].copy_from_slice(&[0x88, 0xb5]);
    sim.flood = Some((junk, 50_000));
    sim.flood_after_tx = 2001; // ARP and 2000 echo requests first
    let t0 = Instant::now();
    sim.run(Duration::from_secs(300));
    let wall = t0.elapsed();
    let console = std::fs::read_to_string(s.dir.join("console.log")).unwrap();
    let tail = &console[console.find("Run /init").unwrap_or(0)..];
    eprintln!("{tail}");
    assert!(tail.contains("2000 packets transmitted, 2000 packets received"));
    let (f0, f1) = sim.flood_wall;
    let flood = f1.unwrap() - f0.unwrap();
    let ping = sim.tx_wall.1.unwrap() - sim.tx_wall.0.unwrap();
    eprintln!(
        "ping -A: 2000 echo round trips (tx kick + rx delivery + call each) in {ping:?} wall = {:.0} round trips/s",
        2000.0 / ping.as_secs_f64()
    );
    eprintln!(
        "whole run: {} tx + {} rx frames, {} calls, {} time-travel messages, wall {wall:?}, virtual {:.3} s",
        sim.tx_frames.len(),
        sim.rx_delivered,
        sim.calls,
        sim.node.messages,
        sim.node.time as f64 / 1e9
    );
    eprintln!(
        "flood: 50000 frames into the guest in {flood:?} wall = {:.0} frames/s; overall {:.0} frames/s",
        50_000.0 / flood.as_secs_f64(),
        (sim.tx_frames.len() as f64 + sim.rx_delivered as f64) / wall.as_secs_f64()
    );
    let rx: u64 = tail.split("RX_PACKETS=").nth(1).unwrap().lines().next().unwrap().trim().parse().unwrap();
    assert_eq!(rx, sim.rx_delivered, "the guest driver counted every delivered frame");
    let _ = std::fs::remove_dir_all(&s.dir);
}
