//! The back end against a fake front end: a unix socket the test drives by
//! hand, a memfd as guest memory, and split rings laid out by
//! [`crate::virtio::testing::DriverQueue`].

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use disksim::virtio::{RequestHeader, T_FLUSH, T_IN, T_OUT};
use disksim::{BlockStore, Disk};
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use super::message::*;
use super::*;
use crate::virtio::blk::{BlkConfig, VirtioBlk};
use crate::virtio::net::{VirtioNet, RX_QUEUE, TX_QUEUE};
use crate::virtio::testing::DriverQueue;
use crate::virtio::VirtioDevice;

const GUEST_BASE: u64 = 0x10_0000;
/// The front end's own address of guest memory: ring addresses in
/// SET_VRING_ADDR are in this space and must be translated.
const USER_BASE: u64 = 0x7f00_0000_0000;
const MEM_SIZE: u64 = 4 << 20;

/// A test's socket directory, removed when the test's front end goes.
struct SockDir(PathBuf);

impl SockDir {
    fn new(name: &str) -> SockDir {
        let dir = std::env::temp_dir().join(format!("vu-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        SockDir(dir)
    }

    fn sock(&self) -> PathBuf {
        self.0.join("dev.sock")
    }
}

impl Drop for SockDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The test's side of one device.
struct Front<D: VirtioDevice> {
    be: VhostUserBackend<D>,
    sock: UnixStream,
    /// Our end of the back-end channel.
    chan: UnixStream,
    mem: GuestMemoryMmap,
    memfd: OwnedFd,
    events: Vec<DeviceEvent>,
    _dir: SockDir,
}

fn read_message(s: &mut UnixStream) -> Message {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).unwrap();
    let size = u32_at(&h, 8).unwrap() as usize;
    let mut payload = vec![0u8; size];
    s.read_exact(&mut payload).unwrap();
    Message { request: u32_at(&h, 0).unwrap(), flags: u32_at(&h, 4).unwrap(), payload }
}

impl<D: VirtioDevice> Front<D> {
    fn connect(name: &str, device: D) -> Front<D> {
        let dir = SockDir::new(name);
        let path = dir.sock();
        let mut be = VhostUserBackend::listen(&path, device).unwrap();
        let sock = UnixStream::connect(&path).unwrap();
        assert_eq!(be.handle_readable().unwrap(), vec![DeviceEvent::Connected]);
        // SAFETY: memfd_create with a valid C string.
        let fd = unsafe { libc::memfd_create(c"guest".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fd is a fresh descriptor we own.
        let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
        File::from(memfd.try_clone().unwrap()).set_len(MEM_SIZE).unwrap();
        let region =
            MmapRegion::from_file(FileOffset::new(File::from(memfd.try_clone().unwrap()), 0), MEM_SIZE as usize)
                .unwrap();
        let mem = GuestMemoryMmap::from_regions(vec![GuestRegionMmap::new(region, GuestAddress(GUEST_BASE)).unwrap()])
            .unwrap();
        let (chan, theirs) = UnixStream::pair().unwrap();
        let mut f = Front { be, sock, chan, mem, memfd, events: Vec::new(), _dir: dir };
        // The handshake, as virtio_uml does it.
        assert_eq!(f.request(req::SET_OWNER, vec![], &[], false), None);
        f.request(req::GET_FEATURES, vec![], &[], false).unwrap();
        f.request(req::GET_PROTOCOL_FEATURES, vec![], &[], false).unwrap();
        let pf = OFFERED_PROTOCOL_FEATURES.to_le_bytes().to_vec();
        assert_eq!(f.request(req::SET_PROTOCOL_FEATURES, pf, &[], true), Some(0));
        assert_eq!(f.request(req::SET_SLAVE_REQ_FD, vec![], &[theirs.as_raw_fd()], true), Some(0));
        f
    }

    /// Sends a request, lets the back end handle it, and returns the u64
    /// reply if one is expected (`need_reply`, or a GET).
    fn request(&mut self, request: u32, payload: Vec<u8>, fds: &[i32], need_reply: bool) -> Option<u64> {
        let m = self.exchange(request, payload, fds, need_reply)?;
        m.u64()
    }

    fn exchange(&mut self, request: u32, payload: Vec<u8>, fds: &[i32], need_reply: bool) -> Option<Message> {
        let flags = if need_reply { FLAG_NEED_REPLY } else { 0 };
        send_message(&self.sock, &Message::new(request, flags, payload), fds).unwrap();
        let ev = self.be.handle_readable().unwrap();
        self.events.extend(ev);
        let expects = need_reply
            || matches!(
                request,
                req::GET_FEATURES
                    | req::GET_PROTOCOL_FEATURES
                    | req::GET_QUEUE_NUM
                    | req::GET_CONFIG
                    | req::GET_VRING_BASE
            );
        if !expects {
            return None;
        }
        let r = read_message(&mut self.sock);
        assert_eq!(r.flags, VERSION | FLAG_REPLY, "reply flags");
        assert_eq!(r.request, request);
        Some(r)
    }

    /// SET_FEATURES, SET_MEM_TABLE, and the rings.
    fn setup(&mut self, rings: &[(u64, u16)]) -> Vec<DriverQueue> {
        let f = self.be.device().features() | F_PROTOCOL_FEATURES;
        assert_eq!(self.request(req::SET_FEATURES, f.to_le_bytes().to_vec(), &[], true), Some(0));
        let mut t = 1u32.to_le_bytes().to_vec();
        t.extend_from_slice(&0u32.to_le_bytes());
        for v in [GUEST_BASE, MEM_SIZE, USER_BASE, 0] {
            t.extend_from_slice(&v.to_le_bytes());
        }
        let fd = self.memfd.as_raw_fd();
        assert_eq!(self.request(req::SET_MEM_TABLE, t, &[fd], true), Some(0));
        let mut qs = Vec::new();
        for (i, &(base, size)) in rings.iter().enumerate() {
            let dq = DriverQueue::new(&self.mem, GUEST_BASE + base, size);
            let i = i as u32;
            assert_eq!(self.request(req::SET_VRING_NUM, vring_state(i, size.into()), &[], true), Some(0));
            assert_eq!(self.request(req::SET_VRING_BASE, vring_state(i, 0), &[], true), Some(0));
            let mut a = i.to_le_bytes().to_vec();
            a.extend_from_slice(&0u32.to_le_bytes());
            for g in [dq.desc, dq.used, dq.avail] {
                a.extend_from_slice(&(g - GUEST_BASE + USER_BASE).to_le_bytes());
            }
            a.extend_from_slice(&u64::MAX.to_le_bytes());
            assert_eq!(self.request(req::SET_VRING_ADDR, a, &[], true), Some(0));
            qs.push(dq);
        }
        for i in 0..rings.len() as u32 {
            assert_eq!(self.request(req::SET_VRING_ENABLE, vring_state(i, 1), &[], true), Some(0));
        }
        assert_eq!(self.events.last(), Some(&DeviceEvent::Ready));
        qs
    }

    fn kick(&mut self, queue: u32) -> DeviceEvent {
        self.events.clear();
        assert_eq!(self.request(req::VRING_KICK, vring_state(queue, 0), &[], true), Some(0));
        assert_eq!(self.events.len(), 1);
        self.events[0]
    }

    /// Plays the guest's back-end channel handler: reads one call, replies.
    fn take_call(&mut self) -> u32 {
        let m = read_message(&mut self.chan);
        assert_eq!(m.request, backend_req::VRING_CALL);
        assert_eq!(m.flags, VERSION | FLAG_NEED_REPLY);
        let (q, _) = m.vring_state().unwrap();
        let mut r = m.reply(0u64.to_le_bytes().to_vec());
        r.flags = VERSION | FLAG_REPLY;
        send_message(&self.chan, &r, &[]).unwrap();
        q
    }

    fn call_reply(&mut self) -> u64 {
        for _ in 0..1000 {
            if let Some(s) = self.be.try_call_reply().unwrap() {
                return s;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("no call reply");
    }
}

#[test]
fn handshake_features_config_and_errors() {
    let mut f = Front::connect("handshake", VirtioNet::new(simtime::NodeId::new(9).unwrap()));
    let feats = f.request(req::GET_FEATURES, vec![], &[], false).unwrap();
    assert_ne!(feats & F_PROTOCOL_FEATURES, 0);
    assert_ne!(feats & crate::virtio::VIRTIO_F_VERSION_1, 0);
    assert_ne!(feats & crate::virtio::net::VIRTIO_NET_F_MAC, 0);
    let pf = f.request(req::GET_PROTOCOL_FEATURES, vec![], &[], false).unwrap();
    assert_eq!(pf & 0x4228, 0x4228, "REPLY_ACK, SLAVE_REQ, CONFIG, INBAND_NOTIFICATIONS");
    assert_eq!(f.request(req::GET_QUEUE_NUM, vec![], &[], false), Some(2));
    // GET_CONFIG the way virtio_uml asks: offset 0, size offset+len.
    let mut p = vec![0u8; 12];
    p[4..8].copy_from_slice(&8u32.to_le_bytes());
    p.extend_from_slice(&[0xee; 8]);
    let r = f.exchange(req::GET_CONFIG, p, &[], false).unwrap();
    assert_eq!(r.payload.len(), 20);
    assert_eq!(u32_at(&r.payload, 4), Some(8));
    assert_eq!(&r.payload[12..], &[2, 0, 10, 0, 0, 9, 0, 0]);
    // Kick and call file descriptors are refused; "no fd" is accepted.
    let nofd = (VRING_NOFD_MASK | 1).to_le_bytes().to_vec();
    assert_eq!(f.request(req::SET_VRING_CALL, nofd, &[], true), Some(0));
    send_message(
        &f.sock,
        &Message::new(req::SET_VRING_KICK, FLAG_NEED_REPLY, 1u64.to_le_bytes().to_vec()),
        &[f.chan.as_raw_fd()],
    )
    .unwrap();
    assert!(matches!(f.be.handle_readable(), Err(VhostUserError::Unsupported(req::SET_VRING_KICK))));
    assert_eq!(read_message(&mut f.sock).u64(), Some(1));
    // A request we do not know gets a failed ACK.
    send_message(&f.sock, &Message::new(99, FLAG_NEED_REPLY, vec![]), &[]).unwrap();
    assert!(matches!(f.be.handle_readable(), Err(VhostUserError::Unsupported(99))));
    assert_eq!(read_message(&mut f.sock).u64(), Some(1));
}

#[test]
fn net_tx_frames_and_rx_delivery_with_calls() {
    let mut f = Front::connect("net", VirtioNet::new(simtime::NodeId::new(1).unwrap()));
    let mut q = f.setup(&[(0x1000, 64), (0x8000, 64)]);
    let mem = f.mem.clone();
    // TX: two frames, one kick.
    for (i, body) in [b"frame-one".as_slice(), b"frame-two"].iter().enumerate() {
        let at = GUEST_BASE + 0x20000 + 0x1000 * i as u64;
        let mut b = vec![0u8; 12];
        b.extend_from_slice(body);
        mem.write_slice(&b, GuestAddress(at)).unwrap();
        q[TX_QUEUE].add(&mem, &[(at, b.len() as u32, false)]);
    }
    assert_eq!(f.kick(TX_QUEUE as u32), DeviceEvent::Kicked { queue: 1, interrupt: true });
    assert_eq!(f.be.device_mut().take_tx(), vec![b"frame-one".to_vec(), b"frame-two".to_vec()]);
    assert_eq!(q[TX_QUEUE].take_used(&mem).len(), 2);
    // With EVENT_IDX negotiated the driver's used_event (0) was passed.
    // A further kick with nothing new asks for nothing.
    assert_eq!(f.kick(TX_QUEUE as u32), DeviceEvent::Kicked { queue: 1, interrupt: false });

    // RX: nothing to deliver into until the driver posts buffers.
    let frame = vec![0x42u8; 60];
    let (dev, queues) = f.be.device_and_queues();
    assert!(!dev.deliver(queues, &frame).unwrap());
    q[RX_QUEUE].add(&mem, &[(GUEST_BASE + 0x30000, 1526, true)]);
    assert_eq!(f.kick(RX_QUEUE as u32), DeviceEvent::Kicked { queue: 0, interrupt: false });
    let (dev, queues) = f.be.device_and_queues();
    assert!(dev.deliver(queues, &frame).unwrap());
    assert!(queues.needs_interrupt(RX_QUEUE).unwrap());
    f.be.send_call(RX_QUEUE as u16).unwrap();
    assert_eq!(f.be.calls_in_flight(), 1);
    assert_eq!(f.be.try_call_reply().unwrap(), None);
    assert_eq!(f.take_call(), 0);
    assert_eq!(f.call_reply(), 0);
    assert_eq!(f.be.calls_in_flight(), 0);
    assert_eq!(q[RX_QUEUE].take_used(&mem), vec![(0, 72)]);
    let mut got = vec![0u8; 72];
    mem.read_slice(&mut got, GuestAddress(GUEST_BASE + 0x30000)).unwrap();
    assert_eq!(&got[12..], &frame[..]);
}

#[test]
fn blk_write_flush_read_through_kicks() {
    let disk = Disk::new(BlockStore::zeros(4096));
    let mut f = Front::connect("blk", VirtioBlk::new(disk, BlkConfig::default()));
    let mut q = f.setup(&[(0x1000, 128)]).remove(0);
    let mem = f.mem.clone();
    let hdr = |t, sector| RequestHeader { request_type: t, reserved: 0, sector }.to_bytes();
    let g = |off: u64| GUEST_BASE + off;

    // WRITE 4 KiB at sector 8.
    mem.write_slice(&hdr(T_OUT, 8), GuestAddress(g(0x40000))).unwrap();
    mem.write_slice(&[0x77; 4096], GuestAddress(g(0x41000))).unwrap();
    q.add(&mem, &[(g(0x40000), 16, false), (g(0x41000), 4096, false), (g(0x42000), 1, true)]);
    assert_eq!(f.kick(0), DeviceEvent::Kicked { queue: 0, interrupt: false });
    let ids = f.be.device_mut().take_accepted();
    assert_eq!(ids.len(), 1);
    assert_eq!(f.be.device().disk().volatile_writes().count(), 1);
    let (dev, queues) = f.be.device_and_queues();
    dev.complete(ids[0], queues).unwrap();
    assert!(queues.needs_interrupt(0).unwrap());
    assert_eq!(q.take_used(&mem), vec![(0, 1)]);

    // FLUSH.
    mem.write_slice(&hdr(T_FLUSH, 0), GuestAddress(g(0x43000))).unwrap();
    q.add(&mem, &[(g(0x43000), 16, false), (g(0x44000), 1, true)]);
    f.kick(0);
    let ids = f.be.device_mut().take_accepted();
    let (dev, queues) = f.be.device_and_queues();
    dev.complete(ids[0], queues).unwrap();
    assert_eq!(f.be.device().disk().volatile_writes().count(), 0);
    let mut durable = vec![0u8; 4096];
    f.be.device().disk().durable_store().read(8, &mut durable).unwrap();
    assert!(durable.iter().all(|&b| b == 0x77));

    // READ it back.
    mem.write_slice(&hdr(T_IN, 8), GuestAddress(g(0x45000))).unwrap();
    q.add(&mem, &[(g(0x45000), 16, false), (g(0x46000), 4096, true), (g(0x47000), 1, true)]);
    f.kick(0);
    let ids = f.be.device_mut().take_accepted();
    let (dev, queues) = f.be.device_and_queues();
    dev.complete(ids[0], queues).unwrap();
    let used = q.take_used(&mem);
    assert_eq!(used.len(), 2);
    assert_eq!(used[1].1, 4097);
    let mut got = vec![0u8; 4096];
    mem.read_slice(&mut got, GuestAddress(g(0x46000))).unwrap();
    assert!(got.iter().all(|&b| b == 0x77));
    assert_eq!(mem.read_obj::<u8>(GuestAddress(g(0x47000))).unwrap(), 0);
}

#[test]
fn disconnect_resets_and_a_new_front_end_can_connect() {
    let mut f = Front::connect("reconnect", VirtioNet::new(simtime::NodeId::new(1).unwrap()));
    f.setup(&[(0x1000, 64), (0x8000, 64)]);
    let path = f.be.path().to_owned();
    drop(f.sock);
    assert_eq!(f.be.handle_readable().unwrap(), vec![DeviceEvent::Disconnected]);
    assert!(!f.be.is_connected());
    assert!(matches!(f.be.send_call(0), Err(VhostUserError::NoBackendChannel)));
    let _again = UnixStream::connect(&path).unwrap();
    assert_eq!(f.be.handle_readable().unwrap(), vec![DeviceEvent::Connected]);
}

#[test]
fn rng_fills_buffers_before_acking_the_kick_and_calls_in_band() {
    use crate::virtio::rng::{VirtioRng, REQUEST_QUEUE};
    let mut f = Front::connect("rng", VirtioRng::new(11));
    assert_eq!(f.request(req::GET_QUEUE_NUM, vec![], &[], false), Some(1));
    // No config space: GET_CONFIG answers zeros.
    let mut p = vec![0u8; 12];
    p[4..8].copy_from_slice(&4u32.to_le_bytes());
    p.extend_from_slice(&[0xee; 4]);
    let r = f.exchange(req::GET_CONFIG, p, &[], false).unwrap();
    assert_eq!(&r.payload[12..], &[0, 0, 0, 0]);
    let mut q = f.setup(&[(0x1000, 64)]);
    let mem = f.mem.clone();
    let at = GUEST_BASE + 0x20000;
    mem.write_slice(&[0u8; 32], GuestAddress(at)).unwrap();
    q[REQUEST_QUEUE].add(&mem, &[(at, 32, true)]);
    // By the time the kick is acknowledged the bytes are in guest memory.
    assert_eq!(f.kick(REQUEST_QUEUE as u32), DeviceEvent::Kicked { queue: 0, interrupt: true });
    assert_eq!(q[REQUEST_QUEUE].take_used(&mem), vec![(0, 32)]);
    let mut got = vec![0u8; 32];
    mem.read_slice(&mut got, GuestAddress(at)).unwrap();
    let mut want = vec![0u8; 32];
    let mut r = simrng::seeded(11);
    rand_core::RngCore::fill_bytes(&mut r, &mut want);
    assert_eq!(got, want);
    assert_eq!(f.be.device().handed_out(), 32);
    // The interrupt is an in-band call, as for every device.
    f.be.send_call(REQUEST_QUEUE as u16).unwrap();
    assert_eq!(f.take_call(), 0);
    assert_eq!(f.call_reply(), 0);
}

/// The fuzz corpus directory of `target` (`vmm/tests/fuzz/TARGET/`).
fn fuzz_corpus(target: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz").join(target)
}

/// vhost-user messages as a misbehaving guest kernel may send them, after
/// a correct handshake and ring setup: the back end may refuse them (an
/// error ends the node as a node failure), never panic.
#[test]
fn fuzz_vhost_user_messages() {
    testkit::fuzz::Target::new("vhost_user", &fuzz_corpus("vhost_user")).run(300, |input| {
        let mut f = Front::connect("fuzz-vu", VirtioNet::new(simtime::NodeId::new(3).unwrap()));
        f.setup(&[(0x1000, 16), (0x8000, 16)]);
        use std::io::Write;
        // Nonblocking: a reply the back end writes must not wait for us.
        f.sock.set_nonblocking(true).unwrap();
        let _ = f.sock.write_all(input);
        for _ in 0..4 {
            if f.be.handle_readable().is_err() {
                break;
            }
        }
    });
}

/// Descriptor tables and available rings as a misbehaving guest driver may
/// write them (loops, chains past the table, lengths past memory, writes
/// where reads belong), then a kick. Input: one byte choosing the device
/// (even: net's transmit queue, odd: blk's request queue), the 16-entry
/// descriptor table, the available ring, and 256 bytes of buffers at
/// `GUEST_BASE + 0x20000`.
#[test]
fn fuzz_virtqueue_descriptors() {
    const SIZE: u16 = 16;
    const DATA: u64 = GUEST_BASE + 0x20000;
    // Inputs the device took something from (a frame, a request): a fuzzer
    // whose mutants all fail before the device tests little.
    let (mut took, mut total) = (0u64, 0u64);
    testkit::fuzz::Target::new("virtqueue", &fuzz_corpus("virtqueue")).run(300, |input| {
        total += 1;
        let Some((&which, rest)) = input.split_first() else { return };
        let write_rings = |mem: &GuestMemoryMmap, q: &DriverQueue| {
            let table = 16 * usize::from(SIZE);
            let avail = 6 + 2 * usize::from(SIZE);
            let part = |from: usize, len: usize| rest.get(from..).map(|r| &r[..r.len().min(len)]).unwrap_or(&[]);
            mem.write_slice(part(0, table), GuestAddress(q.desc)).unwrap();
            mem.write_slice(part(table, avail), GuestAddress(q.avail)).unwrap();
            mem.write_slice(part(table + avail, 256), GuestAddress(DATA)).unwrap();
        };
        if which % 2 == 0 {
            let mut f = Front::connect("fuzz-vq-net", VirtioNet::new(simtime::NodeId::new(3).unwrap()));
            let q = f.setup(&[(0x1000, SIZE), (0x8000, SIZE)]);
            write_rings(&f.mem, &q[TX_QUEUE]);
            f.events.clear();
            let _ = send_message(&f.sock, &Message::new(req::VRING_KICK, 0, vring_state(TX_QUEUE as u32, 0)), &[]);
            let _ = f.be.handle_readable();
            took += u64::from(!f.be.device_mut().take_tx().is_empty());
        } else {
            let disk = Disk::new(BlockStore::zeros(64));
            let mut f = Front::connect("fuzz-vq-blk", VirtioBlk::new(disk, BlkConfig::default()));
            let q = f.setup(&[(0x1000, SIZE)]).remove(0);
            write_rings(&f.mem, &q);
            let _ = send_message(&f.sock, &Message::new(req::VRING_KICK, 0, vring_state(0, 0)), &[]);
            let _ = f.be.handle_readable();
            let ids = f.be.device_mut().take_accepted();
            took += u64::from(!ids.is_empty());
            let (dev, queues) = f.be.device_and_queues();
            for id in ids {
                let _ = dev.complete(id, queues);
            }
        }
    });
    eprintln!("fuzz virtqueue: the device took a frame or request from {took} of {total} inputs");
    assert!(took * 20 >= total, "only {took} of {total} inputs reached the device");
}
