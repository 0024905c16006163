//! The vhost-user wire format, as much of it as user-mode Linux uses
//! (`arch/um/drivers/vhost_user.h` in linux 6.1), and non-blocking message
//! I/O with file descriptors (`SCM_RIGHTS`).
//!
//! A message is a 12-byte header (`request: u32, flags: u32, size: u32`,
//! little-endian, packed) followed by `size` bytes of payload. The low two
//! flag bits are the protocol version (1); bit 2 marks a reply, bit 3 asks
//! for one.

use super::memory::{MemTableError, Region};
use super::protocol_error::ProtocolError;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Protocol version carried in the flags of every message.
pub const VERSION: u32 = 1;
/// The message is a reply.
pub const FLAG_REPLY: u32 = 1 << 2;
/// The sender wants a reply (an ACK with a u64 status if nothing else).
pub const FLAG_NEED_REPLY: u32 = 1 << 3;
/// Size of the header.
pub const HEADER_LEN: usize = 12;
/// Largest payload accepted: a config space read plus its 12-byte header,
/// or a memory table of up to 8 regions, fit with room to spare.
pub const MAX_PAYLOAD: usize = 4096;
/// Most file descriptors one message may carry.
pub const MAX_FDS: usize = 8;

/// `VHOST_USER_F_PROTOCOL_FEATURES` (a feature bit, not a virtio one).
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
/// Protocol feature bits. `VHOST_USER_PROTOCOL_F_REPLY_ACK`: the front end
/// may set [`FLAG_NEED_REPLY`] on any request and gets a u64 status back.
pub const PROTOCOL_F_REPLY_ACK: u64 = 1 << 3;
/// `VHOST_USER_PROTOCOL_F_SLAVE_REQ` (`BACKEND_REQ`): the back end gets a
/// socket of its own for requests to the front end (SET_SLAVE_REQ_FD).
pub const PROTOCOL_F_SLAVE_REQ: u64 = 1 << 5;
/// `VHOST_USER_PROTOCOL_F_CONFIG`: the device config space is read and
/// written with GET_CONFIG and SET_CONFIG.
pub const PROTOCOL_F_CONFIG: u64 = 1 << 9;
/// `VHOST_USER_PROTOCOL_F_INBAND_NOTIFICATIONS`: kicks (VRING_KICK) and
/// calls (the back end's VRING_CALL) are messages instead of eventfds.
pub const PROTOCOL_F_INBAND_NOTIFICATIONS: u64 = 1 << 14;
/// `VHOST_USER_VRING_INDEX_MASK` and `VHOST_USER_VRING_POLL_MASK`: in
/// SET_VRING_KICK/CALL/ERR, the queue index and "no file descriptor".
pub const VRING_INDEX_MASK: u64 = 0xff;
/// `VHOST_USER_VRING_POLL_MASK`: set when the message carries no file
/// descriptor.
pub const VRING_NOFD_MASK: u64 = 1 << 8;

/// Front-end requests (`enum vhost_user_request`).
pub mod req {
    /// `VHOST_USER_GET_FEATURES`: the back end's virtio feature bits, plus
    /// [`super::F_PROTOCOL_FEATURES`] (reply: u64).
    pub const GET_FEATURES: u32 = 1;
    /// `VHOST_USER_SET_FEATURES`: the driver's acknowledged feature bits
    /// (u64).
    pub const SET_FEATURES: u32 = 2;
    /// `VHOST_USER_SET_OWNER`: the front end takes the session.
    pub const SET_OWNER: u32 = 3;
    /// `VHOST_USER_RESET_OWNER`: the session is reset (deprecated).
    pub const RESET_OWNER: u32 = 4;
    /// `VHOST_USER_SET_MEM_TABLE`: the guest memory regions, one file
    /// descriptor each (`struct vhost_user_mem_regions`).
    pub const SET_MEM_TABLE: u32 = 5;
    /// `VHOST_USER_SET_LOG_BASE`: the dirty-page log for live migration,
    /// with its file descriptor.
    pub const SET_LOG_BASE: u32 = 6;
    /// `VHOST_USER_SET_LOG_FD`: the eventfd to signal after logging.
    pub const SET_LOG_FD: u32 = 7;
    /// `VHOST_USER_SET_VRING_NUM`: a queue's size (`vring_state`: index,
    /// size).
    pub const SET_VRING_NUM: u32 = 8;
    /// `VHOST_USER_SET_VRING_ADDR`: a queue's descriptor table, used and
    /// available ring addresses, in front-end user addresses
    /// (`struct vhost_vring_addr`).
    pub const SET_VRING_ADDR: u32 = 9;
    /// `VHOST_USER_SET_VRING_BASE`: the next available-ring index the back
    /// end processes (`vring_state`: index, base).
    pub const SET_VRING_BASE: u32 = 10;
    /// `VHOST_USER_GET_VRING_BASE`: stops a queue; the reply carries its
    /// next available-ring index.
    pub const GET_VRING_BASE: u32 = 11;
    /// `VHOST_USER_SET_VRING_KICK`: a queue's kick eventfd, or none
    /// ([`super::VRING_NOFD_MASK`]).
    pub const SET_VRING_KICK: u32 = 12;
    /// `VHOST_USER_SET_VRING_CALL`: a queue's call (interrupt) eventfd, or
    /// none.
    pub const SET_VRING_CALL: u32 = 13;
    /// `VHOST_USER_SET_VRING_ERR`: a queue's error eventfd, or none.
    pub const SET_VRING_ERR: u32 = 14;
    /// `VHOST_USER_GET_PROTOCOL_FEATURES`: the protocol feature bits the
    /// back end offers (reply: u64).
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    /// `VHOST_USER_SET_PROTOCOL_FEATURES`: the protocol feature bits the
    /// front end accepts (u64).
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    /// `VHOST_USER_GET_QUEUE_NUM`: how many queues the back end has
    /// (reply: u64).
    pub const GET_QUEUE_NUM: u32 = 17;
    /// `VHOST_USER_SET_VRING_ENABLE`: enables or disables a queue
    /// (`vring_state`: index, 1 or 0).
    pub const SET_VRING_ENABLE: u32 = 18;
    /// `VHOST_USER_SET_SLAVE_REQ_FD` (`SET_BACKEND_REQ_FD`): the socket for
    /// the back end's own requests ([`super::backend_req`]).
    pub const SET_SLAVE_REQ_FD: u32 = 21;
    /// `VHOST_USER_GET_CONFIG`: reads the device config space (offset,
    /// size, flags, then the bytes; the reply has the same layout).
    pub const GET_CONFIG: u32 = 24;
    /// `VHOST_USER_SET_CONFIG`: writes the device config space (offset,
    /// size, flags, then the bytes).
    pub const SET_CONFIG: u32 = 25;
    /// `VHOST_USER_VRING_KICK`: an in-band kick of a queue (`vring_state`:
    /// index, unused).
    pub const VRING_KICK: u32 = 35;
}

/// Back-end requests (`enum vhost_user_slave_request`).
pub mod backend_req {
    /// `VHOST_USER_SLAVE_CONFIG_CHANGE_MSG`: the device config space
    /// changed.
    pub const CONFIG_CHANGE_MSG: u32 = 2;
    /// `VHOST_USER_SLAVE_VRING_CALL`: an in-band call (used-buffer
    /// interrupt) for a queue (`vring_state`: index, unused); the reply's
    /// u64 is 0 when the front end took it.
    pub const VRING_CALL: u32 = 4;
}

/// Whether a request of this type carries file descriptors (the buffered
/// ones are handed to it; [`MAX_FDS`] bounds how many one message brings).
pub fn carries_fds(request: u32) -> bool {
    matches!(
        request,
        req::SET_MEM_TABLE
            | req::SET_LOG_BASE
            | req::SET_LOG_FD
            | req::SET_VRING_KICK
            | req::SET_VRING_CALL
            | req::SET_VRING_ERR
            | req::SET_SLAVE_REQ_FD
    )
}

/// One message: header fields and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The request type ([`req`] or [`backend_req`]); a reply keeps its
    /// request's.
    pub request: u32,
    /// The version in bits 0-1, [`FLAG_REPLY`], [`FLAG_NEED_REPLY`].
    pub flags: u32,
    /// The payload; its length is the header's `size`.
    pub payload: Vec<u8>,
}

impl Message {
    /// A message of type `request`; [`VERSION`] is added to `flags`.
    pub fn new(request: u32, flags: u32, payload: Vec<u8>) -> Message {
        Message { request, flags: flags | VERSION, payload }
    }

    /// A reply to `self` carrying `payload`.
    pub fn reply(&self, payload: Vec<u8>) -> Message {
        Message { request: self.request, flags: VERSION | FLAG_REPLY, payload }
    }

    /// Whether the sender asked for a reply ([`FLAG_NEED_REPLY`]).
    pub fn need_reply(&self) -> bool {
        self.flags & FLAG_NEED_REPLY != 0
    }

    /// Whether this is a reply ([`FLAG_REPLY`]).
    pub fn is_reply(&self) -> bool {
        self.flags & FLAG_REPLY != 0
    }

    /// Header plus payload, as sent.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN + self.payload.len());
        b.extend_from_slice(&self.request.to_le_bytes());
        b.extend_from_slice(&self.flags.to_le_bytes());
        b.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.payload);
        b
    }

    /// The payload as a u64 (features, ACK status, vring fd index).
    pub fn u64(&self) -> Option<u64> {
        Some(u64::from_le_bytes(self.payload.get(0..8)?.try_into().ok()?))
    }

    /// The payload as `struct vhost_user_vring_state { index, num }`.
    pub fn vring_state(&self) -> Option<(u32, u32)> {
        Some((u32_at(&self.payload, 0)?, u32_at(&self.payload, 4)?))
    }
}

/// The little-endian u32 at byte offset `at` of `b`; `None` past the end.
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The little-endian u64 at byte offset `at` of `b`; `None` past the end.
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// SET_MEM_TABLE's payload (`struct vhost_user_mem_regions`): its
/// regions, one per of the `fds` descriptors that came with it.
pub fn mem_regions(payload: &[u8], fds: usize) -> Result<Vec<Region>, MemTableError> {
    let num = u32_at(payload, 0).ok_or(MemTableError::Short)? as usize;
    if num == 0 || num != fds {
        return Err(MemTableError::RegionCount { regions: num, fds });
    }
    (0..num)
        .map(|i| {
            let at = 8 + 32 * i;
            let field = |k: usize| u64_at(payload, at + 8 * k).ok_or(MemTableError::Short);
            Ok(Region { guest_addr: field(0)?, size: field(1)?, user_addr: field(2)?, mmap_offset: field(3)? })
        })
        .collect()
}

/// `struct vhost_user_vring_state` bytes.
pub fn vring_state(index: u32, num: u32) -> Vec<u8> {
    let mut b = index.to_le_bytes().to_vec();
    b.extend_from_slice(&num.to_le_bytes());
    b
}

/// What [`MsgStream::fill`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Read everything that was there (possibly nothing).
    Drained,
    /// The peer closed the connection.
    Closed,
}

/// A framing buffer over a non-blocking stream socket: bytes and received
/// file descriptors in arrival order.
///
/// File descriptors are handed to the next message whose request type
/// carries them ([`carries_fds`]). The kernel attaches `SCM_RIGHTS` to the
/// first byte of the message they were sent with and never merges them
/// with a later message's data in one read, and every request that carries
/// descriptors is one the front end waits on (REPLY_ACK), so the FIFO
/// assignment is exact for user-mode Linux.
#[derive(Default)]
pub struct MsgStream {
    buf: Vec<u8>,
    fds: VecDeque<OwnedFd>,
    /// The receive buffer, allocated (and zeroed) once: `fill` runs at
    /// every device message, and zeroing a fresh one each time showed in
    /// simcluster's instructions per grant.
    chunk: Vec<u8>,
}

/// Bytes one `recv` takes at most.
const CHUNK: usize = 8192;

impl MsgStream {
    /// Reads whatever is available on `fd` without blocking.
    pub fn fill(&mut self, fd: RawFd) -> io::Result<Fill> {
        if self.chunk.len() != CHUNK {
            self.chunk = vec![0u8; CHUNK];
        }
        let chunk = &mut self.chunk[..];
        loop {
            match recv_with_fds(fd, chunk, &mut self.fds) {
                Ok(0) => return Ok(Fill::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Fill::Drained),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(Fill::Closed),
                Err(e) => return Err(e),
            }
        }
    }

    /// The next complete message and its file descriptors, if one is
    /// buffered. `Err` for a payload larger than [`MAX_PAYLOAD`].
    pub fn next_message(&mut self) -> Result<Option<(Message, Vec<OwnedFd>)>, ProtocolError> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let size = u32_at(&self.buf, 8).unwrap() as usize;
        if size > MAX_PAYLOAD {
            return Err(ProtocolError::PayloadTooLarge { size });
        }
        if self.buf.len() < HEADER_LEN + size {
            return Ok(None);
        }
        let request = u32_at(&self.buf, 0).unwrap();
        let flags = u32_at(&self.buf, 4).unwrap();
        let payload = self.buf[HEADER_LEN..HEADER_LEN + size].to_vec();
        self.buf.drain(..HEADER_LEN + size);
        let fds = if carries_fds(request) { self.fds.drain(..).collect() } else { Vec::new() };
        Ok(Some((Message { request, flags, payload }, fds)))
    }

    /// Drops buffered bytes and descriptors (after a disconnect).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.fds.clear();
    }
}

/// One `recvmsg` with room for [`MAX_FDS`] descriptors, non-blocking;
/// received descriptors (close-on-exec) are appended to `fds`.
pub fn recv_with_fds(fd: RawFd, buf: &mut [u8], fds: &mut VecDeque<OwnedFd>) -> io::Result<usize> {
    let mut cmsg = [0u64; 8]; // 64 bytes: CMSG_SPACE(8 * 4) = 48 on x86-64
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: msghdr is plain data; all pointers set below are valid for
    // the duration of the call.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cmsg.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&cmsg);
    // SAFETY: valid msghdr; the kernel writes at most the given lengths.
    let n = unsafe { libc::recvmsg(fd, &mut mh, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: walking the control messages the kernel wrote into `cmsg`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    fds.push_back(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    if mh.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::other("file descriptors truncated"));
    }
    Ok(n as usize)
}

/// Sends all of `bytes`, with `fds` attached to the first byte. Waits
/// (bounded) for buffer space when the socket is non-blocking and full;
/// messages are small and the peer drains them, so this does not block in
/// practice.
pub fn send_with_fds(fd: RawFd, mut bytes: &[u8], mut fds: &[RawFd]) -> io::Result<()> {
    while !bytes.is_empty() {
        let mut cmsg = [0u64; 8];
        let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() };
        // SAFETY: as in recv_with_fds.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        if !fds.is_empty() {
            assert!(fds.len() <= MAX_FDS);
            // SAFETY: cmsg has room for CMSG_SPACE(MAX_FDS * 4) bytes.
            unsafe {
                let space = libc::CMSG_SPACE((fds.len() * 4) as u32) as usize;
                mh.msg_control = cmsg.as_mut_ptr().cast();
                mh.msg_controllen = space;
                let c = libc::CMSG_FIRSTHDR(&mh);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as usize;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c) as *mut RawFd, fds.len());
            }
        }
        // SAFETY: valid msghdr.
        let n = unsafe { libc::sendmsg(fd, &mh, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    wait_writable(fd)?;
                    continue;
                }
                _ => return Err(e),
            }
        }
        bytes = &bytes[n as usize..];
        fds = &[];
    }
    Ok(())
}

fn wait_writable(fd: RawFd) -> io::Result<()> {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, 10_000) };
    match n {
        0 => Err(io::Error::new(io::ErrorKind::TimedOut, "peer does not read")),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// Sends one message.
pub fn send_message(sock: &impl AsRawFd, msg: &Message, fds: &[RawFd]) -> io::Result<()> {
    send_with_fds(sock.as_raw_fd(), &msg.encode(), fds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn framing_across_partial_reads_and_fds() {
        let (a, b) = UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let m = Message::new(req::SET_SLAVE_REQ_FD, FLAG_NEED_REPLY, vec![]);
        let (x, _y) = UnixStream::pair().unwrap();
        let bytes = m.encode();
        send_with_fds(a.as_raw_fd(), &bytes[..5], &[x.as_raw_fd()]).unwrap();
        let mut s = MsgStream::default();
        assert_eq!(s.fill(b.as_raw_fd()).unwrap(), Fill::Drained);
        assert!(s.next_message().unwrap().is_none());
        send_with_fds(a.as_raw_fd(), &bytes[5..], &[]).unwrap();
        let m2 = Message::new(req::GET_FEATURES, 0, vec![]);
        send_message(&a, &m2, &[]).unwrap();
        s.fill(b.as_raw_fd()).unwrap();
        let (got, fds) = s.next_message().unwrap().unwrap();
        assert_eq!(got, m);
        assert!(got.need_reply());
        assert_eq!(fds.len(), 1);
        let (got2, fds2) = s.next_message().unwrap().unwrap();
        assert_eq!(got2, m2);
        assert!(fds2.is_empty());
        drop(a);
        assert_eq!(s.fill(b.as_raw_fd()).unwrap(), Fill::Closed);
    }

    #[test]
    fn oversized_payload_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut h = Message::new(req::SET_CONFIG, 0, vec![]).encode();
        h[8..12].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        send_with_fds(a.as_raw_fd(), &h, &[]).unwrap();
        let mut s = MsgStream::default();
        s.fill(b.as_raw_fd()).unwrap();
        assert!(s.next_message().is_err());
    }
}
