//! The controller side of user-mode Linux's external time-travel protocol.
//!
//! The wire format is `struct um_timetravel_msg` from
//! `include/uapi/linux/um_timetravel.h` (linux 6.1 and 7.2): three little-endian
//! fields, `op: u32`, `seq: u32`, `time: u64`, 16 bytes in all, over a
//! `SOCK_STREAM` unix socket that the guest connects to
//! (`time-travel=ext:ID:PATH`).
//!
//! Invariants the kernel relies on (arch/um/kernel/time.c):
//! - every message the guest sends (START, REQUEST, WAIT, GET, UPDATE,
//!   GET_TOD) is answered by exactly one ACK carrying the same `seq`; the
//!   guest blocks until it arrives, so while we hold an ACK the guest is
//!   stopped;
//! - after WAIT the guest is stopped until it receives RUN; RUN must carry
//!   exactly the time the guest last REQUESTed (the kernel BUGs otherwise,
//!   unless an interrupt event was queued in between), and the guest ACKs
//!   the RUN.
//!
//! Linux 6.11 added a shared-memory mode ([`SchedShm`]), which simcluster
//! uses with the 7.2 kernel: the ACK of START carries a memfd (and a log
//! descriptor) with SCM_RIGHTS, and from then on the guest keeps its clock
//! and its next request in that page instead of sending GET, UPDATE and
//! REQUEST, and neither side ACKs RUN or WAIT. A grant costs two messages
//! (RUN, WAIT) instead of six to ten.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{fence, Ordering};

/// Size of one message on the wire.
pub const MSG_LEN: usize = 16;

/// Operation codes of `enum um_timetravel_ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// `UM_TIMETRAVEL_ACK` (0): the answer to any message, same `seq`; its
    /// time is the current time for GET, the time of day for GET_TOD, the
    /// client id for START in shared-memory mode.
    Ack,
    /// `UM_TIMETRAVEL_START` (1): the guest opens the connection; its time
    /// is an arbitrary id (in shared-memory mode, its capabilities).
    Start,
    /// `UM_TIMETRAVEL_REQUEST` (2): the guest asks to run at `time`.
    Request,
    /// `UM_TIMETRAVEL_WAIT` (3): the guest waits for the time it last
    /// requested; it is stopped until RUN.
    Wait,
    /// `UM_TIMETRAVEL_GET` (4): the guest asks for the current time (the
    /// ACK carries it).
    Get,
    /// `UM_TIMETRAVEL_UPDATE` (5): the guest tells its clock, `time`.
    Update,
    /// `UM_TIMETRAVEL_RUN` (6): controller to guest: run now, at `time`
    /// (the time it last requested).
    Run,
    /// `UM_TIMETRAVEL_FREE_UNTIL` (7): controller to guest: run freely until
    /// `time`.
    FreeUntil,
    /// `UM_TIMETRAVEL_GET_TOD` (8): the guest asks for the time of day, ns
    /// since the Unix epoch (the ACK carries it).
    GetTod,
}

impl Op {
    /// The operation's value in `enum um_timetravel_ops`.
    pub fn code(self) -> u32 {
        match self {
            Op::Ack => 0,
            Op::Start => 1,
            Op::Request => 2,
            Op::Wait => 3,
            Op::Get => 4,
            Op::Update => 5,
            Op::Run => 6,
            Op::FreeUntil => 7,
            Op::GetTod => 8,
        }
    }

    /// The operation with value `code`; `None` for a value this protocol
    /// version does not have.
    pub fn from_code(code: u32) -> Option<Op> {
        Some(match code {
            0 => Op::Ack,
            1 => Op::Start,
            2 => Op::Request,
            3 => Op::Wait,
            4 => Op::Get,
            5 => Op::Update,
            6 => Op::Run,
            7 => Op::FreeUntil,
            8 => Op::GetTod,
            _ => return None,
        })
    }
}

/// One protocol message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    /// The operation.
    pub op: Op,
    /// The sender's sequence number; an ACK carries the one it answers.
    pub seq: u32,
    /// The operation's time argument, ns (or an id; see [`Op`]).
    pub time: u64,
}

/// A message that is not valid on the wire.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The `op` field is no [`Op`]; carries its value.
    #[error("unknown time-travel operation {0}")]
    UnknownOp(u32),
    /// The guest closed the socket at a message boundary (it exited).
    #[error("time-travel connection closed by the guest")]
    Closed,
    /// Reading or writing the socket failed (a message cut short included).
    #[error("time-travel connection: {0}")]
    Io(#[from] io::Error),
}

impl Msg {
    /// A message of `op` with sequence number `seq` and time argument `time`.
    pub fn new(op: Op, seq: u32, time: u64) -> Msg {
        Msg { op, seq, time }
    }

    /// The message's [`MSG_LEN`] bytes on the wire (little-endian `op`,
    /// `seq`, `time`).
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0..4].copy_from_slice(&self.op.code().to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.time.to_le_bytes());
        b
    }

    /// The message in `b`, as [`Msg::encode`] lays it out; an unknown
    /// operation is [`ProtocolError::UnknownOp`].
    pub fn decode(b: &[u8; MSG_LEN]) -> Result<Msg, ProtocolError> {
        let code = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let op = Op::from_code(code).ok_or(ProtocolError::UnknownOp(code))?;
        Ok(Msg {
            op,
            seq: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            time: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        })
    }

    /// Reads exactly one message; a clean EOF at a message boundary is
    /// [`ProtocolError::Closed`] (the guest exited).
    pub fn read_from(r: &mut impl Read) -> Result<Msg, ProtocolError> {
        let mut b = [0u8; MSG_LEN];
        let mut got = 0;
        while got < MSG_LEN {
            match r.read(&mut b[got..]) {
                Ok(0) => return Err(ProtocolError::Closed),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Msg::decode(&b)
    }

    /// Writes the whole message to `w`.
    pub fn write_to(&self, w: &mut impl Write) -> Result<(), ProtocolError> {
        w.write_all(&self.encode())?;
        Ok(())
    }
}

/// `UM_TIMETRAVEL_SCHEDSHM_VERSION`.
const SCHEDSHM_VERSION: u32 = 2;
/// The header is one page (`union { ...; char hdr[4096]; }`).
const HEADER_LEN: usize = 4096;
/// `union um_timetravel_schedshm_client` is 128 bytes.
const CLIENT_LEN: usize = 128;
/// `UM_TIMETRAVEL_SCHEDSHM_CAP_TIME_SHARE`.
const CAP_TIME_SHARE: u32 = 0x1;
/// `UM_TIMETRAVEL_SCHEDSHM_FLAGS_REQ_RUN`.
const FLAG_REQ_RUN: u32 = 0x1;
// Header field offsets (struct um_timetravel_schedshm, naturally aligned).
const OFF_VERSION: usize = 0;
const OFF_LEN: usize = 4;
const OFF_FREE_UNTIL: usize = 8;
const OFF_CURRENT_TIME: usize = 16;
const OFF_RUNNING_ID: usize = 24;
const OFF_MAX_CLIENTS: usize = 26;
// Client field offsets.
const OFF_CAPA: usize = 0;
const OFF_FLAGS: usize = 4;
const OFF_REQ_TIME: usize = 8;
// In the reserved tail of the guest's slot, what patch
// 7.2/0002-um-time-travel-free-runs.patch keeps: the wake-ups the guest
// took without a RUN since we last zeroed it, and its clock just before the
// latest one.
const OFF_FREE_RUNS: usize = 64;
const OFF_FREE_PREV: usize = 72;
// After them, what patch 7.2/0003-um-time-travel-dirty-files.patch keeps:
// how many regular files have dirty pages in the guest's page cache, as of
// its latest WAIT from the idle loop.
const OFF_DIRTY_FILES: usize = 80;

/// The controller's own slot, and the guest's (each node has a page of its
/// own, so the guest is always client 1 and always "running": the engine,
/// not the page, decides who runs).
const CONTROLLER_ID: u16 = 0;
/// The guest's client id in the shared page (the controller is 0).
pub const GUEST_ID: u16 = 1;
const CLIENTS: usize = 2;

/// One node's `struct um_timetravel_schedshm`, shared with its guest
/// kernel (arch/um/kernel/time.c) through a memfd.
///
/// Invariants:
/// - `current_time` holds engine time; at START it is the node's start
///   time, which the guest takes as its offset (0 for a node that boots
///   with the cluster). Requests and the published clock are engine time
///   (the guest adds its offset); RUN's time field is not offset by the
///   guest, so the controller sends it in the guest's domain (engine time
///   less the offset);
/// - `free_until` is engine time, never below the guest's offset: the guest
///   may take its own wake-ups without a RUN while they are before
///   `free_until - offset` in its own domain, computed unsigned (a
///   `free_until` of 0 under a non-zero offset wraps to "forever": a
///   restarted node then ran its timers unseen and never yielded). It
///   equals the offset (no wake-up at all without a RUN) except during a
///   grant with lookahead, where it is the earliest time anything else in
///   the cluster could happen (so no frame can arrive in the guest's past);
///   the guest (console output) and the controller (a device message, read
///   while the guest waits for the reply) put it back to the offset to stop
///   the guest at its next wake-up. The wake-ups taken that way are counted
///   in the guest's slot ([`SchedShm::free_runs`]), zeroed before each RUN;
/// - `running_id` is always [`GUEST_ID`]: the guest asserts that it is the
///   running client whenever it publishes its time, and it publishes
///   requests in the page only while the running client can read it.
/// - The guest writes `current_time` (its clock, where it used to send
///   UPDATE) and its client slot (`flags`, `req_time`) only while it runs
///   or takes an interrupt, that is while the controller waits for its next
///   message; the controller writes `current_time` only while the guest is
///   stopped. Each side's writes are ordered before the socket message that
///   hands control over, so plain volatile accesses with fences suffice.
pub struct SchedShm {
    fd: OwnedFd,
    base: *mut u8,
    map_len: usize,
}

// SAFETY: the mapping is owned by this value and only accessed through it.
unsafe impl Send for SchedShm {}

impl SchedShm {
    /// Creates the page (a memfd) and fills its header.
    pub fn new() -> io::Result<SchedShm> {
        let len = HEADER_LEN + CLIENTS * CLIENT_LEN;
        let map_len = len.next_multiple_of(4096);
        // SAFETY: a NUL-terminated name; the descriptor is checked.
        let raw = unsafe { libc::memfd_create(c"simcluster-schedshm".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), map_len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: mapping our memfd; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let shm = SchedShm { fd, base: base as *mut u8, map_len };
        shm.write_u32(OFF_VERSION, SCHEDSHM_VERSION);
        shm.write_u32(OFF_LEN, len as u32);
        shm.write_u64(OFF_FREE_UNTIL, 0);
        shm.write_u64(OFF_CURRENT_TIME, 0);
        shm.write_u16(OFF_RUNNING_ID, GUEST_ID);
        shm.write_u16(OFF_MAX_CLIENTS, CLIENTS as u16);
        shm.write_u32(client_off(CONTROLLER_ID) + OFF_CAPA, CAP_TIME_SHARE);
        fence(Ordering::SeqCst);
        Ok(shm)
    }

    /// ACKs the guest's START with the page: `time` carries the guest's
    /// client id, SCM_RIGHTS the memfd and the log descriptor (the kernel
    /// receives exactly two and closes the second unused, so it gets a
    /// duplicate of the memfd).
    pub fn send_start_ack(&self, conn: &UnixStream, seq: u32) -> Result<(), ProtocolError> {
        use vmm_sys_util::sock_ctrl_msg::ScmSocket;
        let msg = Msg::new(Op::Ack, seq, u64::from(GUEST_ID)).encode();
        let fd = self.fd.as_raw_fd();
        let sent = conn
            .send_with_fds(&[&msg[..]], &[fd, fd])
            .map_err(|e| ProtocolError::Io(io::Error::from_raw_os_error(e.errno())))?;
        if sent != MSG_LEN {
            return Err(ProtocolError::Io(io::Error::new(io::ErrorKind::WriteZero, "short START ACK")));
        }
        Ok(())
    }

    /// Whether the guest took the page (set its capability after the ACK).
    pub fn guest_attached(&self) -> bool {
        fence(Ordering::SeqCst);
        self.read_u32(client_off(GUEST_ID) + OFF_CAPA) & CAP_TIME_SHARE != 0
    }

    /// The guest's clock as it last published it (or as we set it).
    pub fn current_time(&self) -> u64 {
        fence(Ordering::SeqCst);
        self.read_u64(OFF_CURRENT_TIME)
    }

    /// Prepares the page for a guest that starts at engine time `t`: its
    /// clock reads `t`, which the guest takes as its offset, and
    /// `free_until` is `t` too (see the invariants). Before the START ACK.
    pub fn start_at(&self, t: u64) {
        self.write_u64(OFF_CURRENT_TIME, t);
        self.write_u64(OFF_FREE_UNTIL, t);
        fence(Ordering::SeqCst);
    }

    /// Sets the clock the guest reads (GET) before it runs or takes an
    /// interrupt. Only while the guest is stopped.
    pub fn set_current_time(&self, t: u64) {
        self.write_u64(OFF_CURRENT_TIME, t);
        fence(Ordering::SeqCst);
    }

    /// Lets the guest take its own wake-ups without a RUN while they are
    /// before `t` (engine time, at least the guest's offset).
    pub fn set_free_until(&self, t: u64) {
        self.write_u64(OFF_FREE_UNTIL, t);
        fence(Ordering::SeqCst);
    }

    /// Zeroes the count of wake-ups taken without a RUN. Only while the
    /// guest is stopped, before a RUN.
    pub fn clear_free_runs(&self) {
        self.write_u64(client_off(GUEST_ID) + OFF_FREE_RUNS, 0);
        fence(Ordering::SeqCst);
    }

    /// The wake-ups the guest took without a RUN since the last
    /// [`Self::clear_free_runs`], and its clock (engine time) just before
    /// the latest of them.
    pub fn free_runs(&self) -> (u64, u64) {
        fence(Ordering::SeqCst);
        let c = client_off(GUEST_ID);
        (self.read_u64(c + OFF_FREE_RUNS), self.read_u64(c + OFF_FREE_PREV))
    }

    /// How many regular files have dirty pages in the guest's page cache
    /// (data a power loss would take), as it published at its latest WAIT
    /// from the idle loop. 0 from a kernel without the patch that
    /// publishes it.
    pub fn dirty_files(&self) -> u64 {
        fence(Ordering::SeqCst);
        self.read_u64(client_off(GUEST_ID) + OFF_DIRTY_FILES)
    }

    /// The guest's pending run request, if it published one since its last
    /// RUN (it clears the flag when it receives RUN).
    pub fn request(&self) -> Option<u64> {
        fence(Ordering::SeqCst);
        let c = client_off(GUEST_ID);
        (self.read_u32(c + OFF_FLAGS) & FLAG_REQ_RUN != 0).then(|| self.read_u64(c + OFF_REQ_TIME))
    }

    fn ptr(&self, off: usize) -> *mut u8 {
        assert!(off < self.map_len);
        // SAFETY: in bounds of our mapping (checked above).
        unsafe { self.base.add(off) }
    }
    fn read_u32(&self, off: usize) -> u32 {
        // SAFETY: aligned, in bounds, mapped for our lifetime.
        unsafe { std::ptr::read_volatile(self.ptr(off) as *const u32) }
    }
    fn read_u64(&self, off: usize) -> u64 {
        // SAFETY: as above.
        unsafe { std::ptr::read_volatile(self.ptr(off) as *const u64) }
    }
    fn write_u16(&self, off: usize, v: u16) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.ptr(off) as *mut u16, v) }
    }
    fn write_u32(&self, off: usize, v: u32) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.ptr(off) as *mut u32, v) }
    }
    fn write_u64(&self, off: usize, v: u64) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.ptr(off) as *mut u64, v) }
    }
}

fn client_off(id: u16) -> usize {
    HEADER_LEN + usize::from(id) * CLIENT_LEN
}

impl Drop for SchedShm {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedshm_header_is_what_the_kernel_checks() {
        let shm = SchedShm::new().unwrap();
        assert_eq!(shm.read_u32(OFF_VERSION), 2);
        // len must cover clients[GUEST_ID] (struct_size(shm, clients, id + 1)).
        assert!(shm.read_u32(OFF_LEN) as usize >= client_off(GUEST_ID) + CLIENT_LEN);
        assert_eq!(shm.read_u64(OFF_FREE_UNTIL), 0);
        assert_eq!(shm.current_time(), 0);
        assert!(!shm.guest_attached());
        assert_eq!(shm.request(), None);
    }

    #[test]
    fn a_late_start_moves_free_until_with_the_offset() {
        let shm = SchedShm::new().unwrap();
        shm.start_at(2_161_473_615);
        // The guest computes free_until - offset unsigned: it must be 0.
        let offset = shm.current_time();
        assert_eq!(shm.read_u64(OFF_FREE_UNTIL).wrapping_sub(offset), 0);
    }

    #[test]
    fn schedshm_request_needs_the_flag() {
        let shm = SchedShm::new().unwrap();
        let c = client_off(GUEST_ID);
        shm.write_u64(c + OFF_REQ_TIME, 42);
        assert_eq!(shm.request(), None, "a stale req_time without REQ_RUN is no request");
        shm.write_u32(c + OFF_FLAGS, FLAG_REQ_RUN);
        assert_eq!(shm.request(), Some(42));
        shm.set_current_time(7);
        assert_eq!(shm.current_time(), 7);
    }

    #[test]
    fn start_ack_carries_the_id_and_two_descriptors() {
        use vmm_sys_util::sock_ctrl_msg::ScmSocket;
        let shm = SchedShm::new().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        shm.send_start_ack(&a, 9).unwrap();
        let mut buf = [0u8; MSG_LEN];
        let mut fds = [-1; 2];
        let mut iov = [libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: MSG_LEN }];
        // SAFETY: the iovec points at `buf`, which outlives the call.
        let (n, nfds) = unsafe { b.recv_with_fds(&mut iov, &mut fds) }.unwrap();
        assert_eq!((n, nfds), (MSG_LEN, 2));
        assert_eq!(Msg::decode(&buf).unwrap(), Msg::new(Op::Ack, 9, u64::from(GUEST_ID)));
        for fd in fds {
            // SAFETY: received descriptors we now own.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }

    #[test]
    fn round_trip_every_op() {
        for code in 0..=8 {
            let op = Op::from_code(code).unwrap();
            let m = Msg::new(op, 7 + code, 0x0102_0304_0506_0708);
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn wire_layout_is_little_endian_op_seq_time() {
        let m = Msg::new(Op::Run, 2, 1_000_000_000);
        let b = m.encode();
        assert_eq!(&b[0..4], &[6, 0, 0, 0]);
        assert_eq!(&b[4..8], &[2, 0, 0, 0]);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 1_000_000_000);
    }

    #[test]
    fn unknown_op_is_an_error() {
        let mut b = Msg::new(Op::Ack, 1, 0).encode();
        b[0] = 99;
        assert!(matches!(Msg::decode(&b), Err(ProtocolError::UnknownOp(99))));
    }

    #[test]
    fn eof_mid_stream_is_closed() {
        let mut r: &[u8] = &[1, 0, 0];
        assert!(matches!(Msg::read_from(&mut r), Err(ProtocolError::Closed)));
    }
}
