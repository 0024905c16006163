//! vhost-user messages as a misbehaving guest kernel may send them, after
//! a correct handshake and ring setup (what `virtio_uml` does), into the
//! back end over its real unix socket (`vmm::vhost_user`). The back end
//! may refuse a message (an error ends the node as a node failure); it may
//! not panic. The input is the byte stream the guest writes; the corpus is
//! seeded from vmm's `fuzz_vhost_user_messages` test.
#![no_main]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use vmm::vhost_user::message::{
    req, send_message, u32_at, vring_state, Message, FLAG_NEED_REPLY, F_PROTOCOL_FEATURES, HEADER_LEN,
};
use vmm::vhost_user::{VhostUserBackend, OFFERED_PROTOCOL_FEATURES};
use vmm::virtio::{VirtioDevice, VirtioNet};

const GUEST_BASE: u64 = 0x10_0000;
/// The front end's own address of guest memory: ring addresses in
/// SET_VRING_ADDR are in this space.
const USER_BASE: u64 = 0x7f00_0000_0000;
const MEM_SIZE: u64 = 4 << 20;
const SIZE: u16 = 16;
/// The receive and transmit queues' rings, as offsets into guest memory.
const RING_BASES: [u64; 2] = [0x1000, 0x8000];

/// The socket's path, in a directory of this process's own.
fn socket_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("simcluster-fuzz-vu-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join("dev.sock")
    })
}

/// The guest's side: the socket, its back-end channel end, guest memory.
struct Front {
    be: VhostUserBackend<VirtioNet>,
    sock: UnixStream,
    _chan: UnixStream,
    memfd: OwnedFd,
}

impl Front {
    /// Connects, negotiates as `virtio_uml` does, maps memory and sets up
    /// both rings (zeroed) and enables them.
    fn ready() -> Front {
        let be = VhostUserBackend::listen(socket_path(), VirtioNet::new(engine::NodeId::new(3).unwrap())).unwrap();
        let sock = UnixStream::connect(socket_path()).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // SAFETY: memfd_create with a valid C string.
        let fd = unsafe { libc::memfd_create(c"guest".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fd is a fresh descriptor this function owns.
        let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
        File::from(memfd.try_clone().unwrap()).set_len(MEM_SIZE).unwrap();
        let (chan, theirs) = UnixStream::pair().unwrap();
        let mut f = Front { be, sock, _chan: chan, memfd };
        f.be.handle_readable().unwrap();
        f.request(req::SET_OWNER, vec![], &[], false);
        f.request(req::GET_FEATURES, vec![], &[], false);
        f.request(req::GET_PROTOCOL_FEATURES, vec![], &[], false);
        f.request(req::SET_PROTOCOL_FEATURES, OFFERED_PROTOCOL_FEATURES.to_le_bytes().to_vec(), &[], true);
        f.request(req::SET_SLAVE_REQ_FD, vec![], &[theirs.as_raw_fd()], true);
        let features = f.be.device().features() | F_PROTOCOL_FEATURES;
        f.request(req::SET_FEATURES, features.to_le_bytes().to_vec(), &[], true);
        let mut table = 1u32.to_le_bytes().to_vec();
        table.extend_from_slice(&0u32.to_le_bytes());
        for v in [GUEST_BASE, MEM_SIZE, USER_BASE, 0] {
            table.extend_from_slice(&v.to_le_bytes());
        }
        let memfd = f.memfd.as_raw_fd();
        f.request(req::SET_MEM_TABLE, table, &[memfd], true);
        for (i, base) in RING_BASES.into_iter().enumerate() {
            let i = i as u32;
            let desc = USER_BASE + base;
            let avail = desc + 16 * u64::from(SIZE);
            let used = (avail + 6 + 2 * u64::from(SIZE) + 4095) & !4095;
            f.request(req::SET_VRING_NUM, vring_state(i, SIZE.into()), &[], true);
            f.request(req::SET_VRING_BASE, vring_state(i, 0), &[], true);
            let mut a = i.to_le_bytes().to_vec();
            a.extend_from_slice(&0u32.to_le_bytes());
            for addr in [desc, used, avail, u64::MAX] {
                a.extend_from_slice(&addr.to_le_bytes());
            }
            f.request(req::SET_VRING_ADDR, a, &[], true);
        }
        for i in 0..RING_BASES.len() as u32 {
            f.request(req::SET_VRING_ENABLE, vring_state(i, 1), &[], true);
        }
        f
    }

    /// Sends a setup request, lets the back end handle it and reads its
    /// reply, if one comes (`need_reply`, or a GET).
    fn request(&mut self, request: u32, payload: Vec<u8>, fds: &[i32], need_reply: bool) {
        let flags = if need_reply { FLAG_NEED_REPLY } else { 0 };
        send_message(&self.sock, &Message::new(request, flags, payload), fds).unwrap();
        self.be.handle_readable().unwrap();
        if need_reply || matches!(request, req::GET_FEATURES | req::GET_PROTOCOL_FEATURES) {
            let mut h = [0u8; HEADER_LEN];
            self.sock.read_exact(&mut h).unwrap();
            let mut payload = vec![0u8; u32_at(&h, 8).unwrap() as usize];
            self.sock.read_exact(&mut payload).unwrap();
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let mut f = Front::ready();
    // Nonblocking: a reply the back end writes must not wait for us.
    f.sock.set_nonblocking(true).unwrap();
    let _ = f.sock.write_all(input);
    for _ in 0..4 {
        if f.be.handle_readable().is_err() {
            break;
        }
    }
});
