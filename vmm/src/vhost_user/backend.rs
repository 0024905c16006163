//! The back end: one device behind one listening unix socket.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use virtio_queue::QueueT;
use vm_memory::GuestAddress;

use super::memory::MemTable;
use super::message::*;
use super::protocol_error::ProtocolError;
use crate::virtio::{read_config_padded, DeviceError, Queues, VirtioDevice, VIRTIO_RING_F_EVENT_IDX};

/// Protocol features offered: everything user-mode Linux knows
/// (`VHOST_USER_SUPPORTED_PROTOCOL_F`). REPLY_ACK makes the guest wait for
/// each kick to be processed; SLAVE_REQ plus INBAND_NOTIFICATIONS put both
/// kicks and calls on sockets we control (no eventfds).
pub const OFFERED_PROTOCOL_FEATURES: u64 =
    PROTOCOL_F_REPLY_ACK | PROTOCOL_F_SLAVE_REQ | PROTOCOL_F_CONFIG | PROTOCOL_F_INBAND_NOTIFICATIONS;

/// What happened on the front-end connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceEvent {
    /// The front end connected.
    Connected,
    /// Every queue became ready (configured and enabled): the driver is up.
    Ready,
    /// The guest kicked `queue`; the device already processed it (before
    /// the kick was acknowledged). `interrupt`: the driver wants an
    /// interrupt for `queue` (deliver it with [`VhostUserBackend::send_call`]
    /// while the guest is stopped).
    Kicked {
        /// The queue, 0-based.
        queue: u16,
        /// Whether the driver wants an interrupt for it.
        interrupt: bool,
    },
    /// The front end closed the connection; the device was reset.
    Disconnected,
}

/// Errors of the back end. After an error the connection is in an unknown
/// state; the engine should treat the node as broken.
#[derive(Debug, thiserror::Error)]
pub enum VhostUserError {
    /// The listening socket could not be set up.
    #[error("vhost-user socket {path}: {source}")]
    Socket {
        /// The socket file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// I/O on a connection failed.
    #[error("vhost-user {what}: {source}")]
    Io {
        /// What was being done ("accept", "read", "reply", ...).
        what: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// The front end broke the protocol; says how.
    #[error("vhost-user protocol: {0}")]
    Protocol(#[from] ProtocolError),
    /// A request this back end does not serve (or an eventfd where only
    /// in-band notifications are supported); carries the request type.
    #[error("vhost-user request {0} is not supported")]
    Unsupported(u32),
    /// A call was to be sent before the front end gave the back-end
    /// channel.
    #[error("no back-end request channel (SET_SLAVE_REQ_FD not received)")]
    NoBackendChannel,
    /// The device model failed (the guest broke the virtio protocol).
    #[error("device: {0}")]
    Device(#[from] DeviceError),
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> VhostUserError {
    move |source| VhostUserError::Io { what, source }
}

/// Per-queue setup received from the front end.
#[derive(Debug, Clone, Copy, Default)]
struct Vring {
    /// desc, avail, used (guest addresses).
    addr: Option<(GuestAddress, GuestAddress, GuestAddress)>,
    enabled: bool,
}

/// A single-threaded vhost-user back end for one [`VirtioDevice`].
///
/// Invariants:
/// - every front-end message is answered (when it asks for an answer)
///   before [`Self::handle_readable`] returns, and a kick's effects on
///   guest memory are complete before its ACK is written, so the guest,
///   which waits for the ACK, never runs concurrently with device code;
/// - nothing here blocks waiting for the guest: reads are non-blocking,
///   and the back-end channel reply to [`Self::send_call`] is collected by
///   the engine with [`Self::try_call_reply`].
pub struct VhostUserBackend<D: VirtioDevice> {
    path: PathBuf,
    listener: UnixListener,
    conn: Option<UnixStream>,
    inbox: MsgStream,
    channel: Option<UnixStream>,
    channel_inbox: MsgStream,
    calls_in_flight: usize,
    device: D,
    queues: Queues,
    vrings: Vec<Vring>,
    table: Option<MemTable>,
    features: u64,
    protocol_features: u64,
    all_ready: bool,
}

impl<D: VirtioDevice> VhostUserBackend<D> {
    /// Listens on `path` (replacing a stale socket file). user-mode Linux
    /// connects as the client when its virtio_uml driver probes, during
    /// boot, so listen before starting the node.
    pub fn listen(path: &Path, device: D) -> Result<Self, VhostUserError> {
        let sock_err = |source| VhostUserError::Socket { path: path.to_owned(), source };
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).map_err(sock_err)?;
        listener.set_nonblocking(true).map_err(sock_err)?;
        let queues = Queues::new(device.queue_max_sizes());
        let vrings = vec![Vring::default(); queues.queues.len()];
        Ok(VhostUserBackend {
            path: path.to_owned(),
            listener,
            conn: None,
            inbox: MsgStream::default(),
            channel: None,
            channel_inbox: MsgStream::default(),
            calls_in_flight: 0,
            device,
            queues,
            vrings,
            table: None,
            features: 0,
            protocol_features: 0,
            all_ready: false,
        })
    }

    /// The socket file the back end listens on (removed on drop).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device model.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device model, to change it (reseed, read faults, take the
    /// disk); for queue work use [`Self::device_and_queues`].
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// The device with the queues, for engine actions (deliver a frame,
    /// complete a request). Call only while the guest is stopped.
    pub fn device_and_queues(&mut self) -> (&mut D, &mut Queues) {
        (&mut self.device, &mut self.queues)
    }

    /// Whether a front end is connected.
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Accepts the front end's connection if it is pending. `Ok(true)` when
    /// a connection was accepted now.
    pub fn accept(&mut self) -> Result<bool, VhostUserError> {
        if self.conn.is_some() {
            return Ok(false);
        }
        match self.listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(true).map_err(io_err("socket"))?;
                self.conn = Some(s);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(VhostUserError::Io { what: "accept", source: e }),
        }
    }

    /// Descriptors to poll for readability: the listener until the front end
    /// connects, then the connection. (The call-reply channel is separate:
    /// [`Self::call_reply_fd`].)
    pub fn fds(&self) -> Vec<RawFd> {
        match &self.conn {
            Some(c) => vec![c.as_raw_fd()],
            None => vec![self.listener.as_raw_fd()],
        }
    }

    /// Accepts, reads and answers everything the front end sent. Kicks are
    /// processed by the device before they are acknowledged.
    pub fn handle_readable(&mut self) -> Result<Vec<DeviceEvent>, VhostUserError> {
        let mut events = Vec::new();
        if self.accept()? {
            events.push(DeviceEvent::Connected);
        }
        let Some(conn) = &self.conn else {
            return Ok(events);
        };
        let fill = self.inbox.fill(conn.as_raw_fd()).map_err(io_err("read"))?;
        while let Some((msg, fds)) = self.inbox.next_message()? {
            self.handle(msg, fds, &mut events)?;
        }
        if fill == Fill::Closed {
            self.disconnect();
            events.push(DeviceEvent::Disconnected);
        }
        Ok(events)
    }

    /// Writes an in-band interrupt for `queue` (VHOST_USER_SLAVE_VRING_CALL
    /// with NEED_REPLY) on the back-end channel and returns at once. The
    /// guest handles it from its SIGIO handler, talking to its time
    /// controller before it replies; collect the reply with
    /// [`Self::try_call_reply`] while serving the time-travel socket.
    pub fn send_call(&mut self, queue: u16) -> Result<(), VhostUserError> {
        let ch = self.channel.as_ref().ok_or(VhostUserError::NoBackendChannel)?;
        let msg = Message::new(backend_req::VRING_CALL, FLAG_NEED_REPLY, vring_state(queue.into(), 0));
        send_message(ch, &msg, &[]).map_err(io_err("send call"))?;
        self.calls_in_flight += 1;
        Ok(())
    }

    /// Calls sent whose reply has not been collected.
    pub fn calls_in_flight(&self) -> usize {
        self.calls_in_flight
    }

    /// The back-end channel, to poll for the call reply.
    pub fn call_reply_fd(&self) -> Option<RawFd> {
        self.channel.as_ref().map(|c| c.as_raw_fd())
    }

    /// Collects one call reply if it has arrived: `Ok(Some(0))` the guest
    /// took the interrupt, `Ok(Some(n))` it refused it (unknown queue).
    ///
    /// Replies already read from the socket are buffered here, and a
    /// buffered reply does not make [`Self::call_reply_fd`] readable: after
    /// the fd polls readable, call this until it returns `None` (or use
    /// [`Self::take_call_replies`]).
    pub fn try_call_reply(&mut self) -> Result<Option<u64>, VhostUserError> {
        let ch = self.channel.as_ref().ok_or(VhostUserError::NoBackendChannel)?;
        if self.channel_inbox.fill(ch.as_raw_fd()).map_err(io_err("read call reply"))? == Fill::Closed {
            return Err(ProtocolError::ChannelClosed.into());
        }
        match self.channel_inbox.next_message()? {
            None => Ok(None),
            Some((m, _)) if m.is_reply() && m.request == backend_req::VRING_CALL => {
                self.calls_in_flight = self.calls_in_flight.saturating_sub(1);
                Ok(Some(m.u64().ok_or(ProtocolError::ShortCallReply)?))
            }
            Some((m, _)) => Err(ProtocolError::UnexpectedBackendMessage { request: m.request, flags: m.flags }.into()),
        }
    }

    /// Every call reply available now, in order (see [`Self::try_call_reply`]).
    pub fn take_call_replies(&mut self) -> Result<Vec<u64>, VhostUserError> {
        let mut out = Vec::new();
        while let Some(s) = self.try_call_reply()? {
            out.push(s);
        }
        Ok(out)
    }

    /// Forgets the connection and resets the device (the guest is gone or
    /// reset its driver).
    fn disconnect(&mut self) {
        self.conn = None;
        self.channel = None;
        self.inbox.clear();
        self.channel_inbox.clear();
        self.calls_in_flight = 0;
        self.reset_state();
    }

    fn reset_state(&mut self) {
        self.device.reset();
        self.queues = Queues::new(self.device.queue_max_sizes());
        self.vrings = vec![Vring::default(); self.queues.queues.len()];
        self.table = None;
        self.features = 0;
        self.protocol_features = 0;
        self.all_ready = false;
    }

    fn reply(&self, msg: &Message) -> Result<(), VhostUserError> {
        let conn = self.conn.as_ref().expect("replying on a live connection");
        send_message(conn, msg, &[]).map_err(io_err("reply"))
    }

    fn ack(&self, msg: &Message, ok: bool) -> Result<(), VhostUserError> {
        if msg.need_reply() {
            self.reply(&msg.reply((!ok as u64).to_le_bytes().to_vec()))?;
        }
        Ok(())
    }

    fn queue_index(&self, raw: u64) -> Result<usize, VhostUserError> {
        let i = raw as usize;
        if i < self.vrings.len() {
            Ok(i)
        } else {
            Err(ProtocolError::NoSuchQueue(raw).into())
        }
    }

    fn handle(&mut self, msg: Message, fds: Vec<OwnedFd>, events: &mut Vec<DeviceEvent>) -> Result<(), VhostUserError> {
        let short = || VhostUserError::from(ProtocolError::ShortPayload { request: msg.request });
        match msg.request {
            req::GET_FEATURES => {
                let f = self.device.features() | F_PROTOCOL_FEATURES;
                return self.reply(&msg.reply(f.to_le_bytes().to_vec()));
            }
            req::GET_PROTOCOL_FEATURES => {
                return self.reply(&msg.reply(OFFERED_PROTOCOL_FEATURES.to_le_bytes().to_vec()));
            }
            req::GET_QUEUE_NUM => {
                return self.reply(&msg.reply((self.vrings.len() as u64).to_le_bytes().to_vec()));
            }
            req::SET_OWNER => {}
            req::RESET_OWNER => self.reset_state(),
            req::SET_FEATURES => {
                let f = msg.u64().ok_or_else(short)?;
                self.features = f;
                self.device.ack_features(f & !F_PROTOCOL_FEATURES);
                for q in &mut self.queues.queues {
                    q.set_event_idx(f & VIRTIO_RING_F_EVENT_IDX != 0);
                }
            }
            req::SET_PROTOCOL_FEATURES => {
                self.protocol_features = msg.u64().ok_or_else(short)? & OFFERED_PROTOCOL_FEATURES;
            }
            req::SET_MEM_TABLE => {
                let regions = mem_regions(&msg.payload, fds.len()).map_err(ProtocolError::from)?;
                let t = MemTable::map(regions, fds).map_err(ProtocolError::from)?;
                self.queues.mem = t.mem.clone();
                self.table = Some(t);
                self.update_ready(events);
            }
            req::SET_VRING_NUM => {
                let (i, num) = msg.vring_state().ok_or_else(short)?;
                let i = self.queue_index(i.into())?;
                let q = &mut self.queues.queues[i];
                if num == 0 || num > q.max_size() as u32 || !num.is_power_of_two() {
                    return Err(ProtocolError::QueueSize { queue: i, size: num }.into());
                }
                q.set_size(num as u16);
            }
            req::SET_VRING_BASE => {
                let (i, base) = msg.vring_state().ok_or_else(short)?;
                let i = self.queue_index(i.into())?;
                let q = &mut self.queues.queues[i];
                q.set_next_avail(base as u16);
                q.set_next_used(base as u16);
            }
            req::SET_VRING_ADDR => {
                let p = &msg.payload;
                let field = |at| u64_at(p, at).ok_or_else(short);
                let i = self.queue_index(u32_at(p, 0).ok_or_else(short)?.into())?;
                let (desc, used, avail) = (field(8)?, field(16)?, field(24)?);
                let table = self.table.as_ref().ok_or(ProtocolError::AddressBeforeMemTable)?;
                let tr = |a: u64| {
                    table.user_to_guest(a).ok_or_else(|| VhostUserError::from(ProtocolError::RingOutsideMemory(a)))
                };
                self.vrings[i].addr = Some((tr(desc)?, tr(avail)?, tr(used)?));
                self.update_ready(events);
            }
            req::GET_VRING_BASE => {
                let (i, _) = msg.vring_state().ok_or_else(short)?;
                let i = self.queue_index(i.into())?;
                // Stops the ring (vhost-user: GET_VRING_BASE stops it).
                self.vrings[i].enabled = false;
                self.update_ready(events);
                let base = self.queues.queues[i].next_avail();
                return self.reply(&msg.reply(vring_state(i as u32, base.into())));
            }
            req::SET_VRING_ENABLE => {
                let (i, on) = msg.vring_state().ok_or_else(short)?;
                let i = self.queue_index(i.into())?;
                self.vrings[i].enabled = on != 0;
                self.update_ready(events);
            }
            req::SET_VRING_KICK | req::SET_VRING_CALL | req::SET_VRING_ERR => {
                // Only in-band notifications: accept "no descriptor" and
                // refuse descriptors (an eventfd kick would reach us
                // without stopping the guest).
                let v = msg.u64().ok_or_else(short)?;
                self.queue_index(v & VRING_INDEX_MASK)?;
                if v & VRING_NOFD_MASK == 0 || !fds.is_empty() {
                    self.ack(&msg, false)?;
                    return Err(VhostUserError::Unsupported(msg.request));
                }
            }
            req::SET_SLAVE_REQ_FD => {
                let fd = fds.into_iter().next().ok_or(ProtocolError::MissingDescriptor)?;
                let s = UnixStream::from(fd);
                s.set_nonblocking(true).map_err(io_err("back-end channel"))?;
                self.channel = Some(s);
                self.channel_inbox.clear();
                self.calls_in_flight = 0;
            }
            req::GET_CONFIG => {
                let (offset, size) =
                    (u32_at(&msg.payload, 0).ok_or_else(short)?, u32_at(&msg.payload, 4).ok_or_else(short)?);
                let flags = u32_at(&msg.payload, 8).ok_or_else(short)?;
                if size as usize > MAX_PAYLOAD - 12 {
                    return Err(ProtocolError::ConfigTooLarge(size).into());
                }
                let mut p = Vec::with_capacity(12 + size as usize);
                p.extend_from_slice(&offset.to_le_bytes());
                p.extend_from_slice(&size.to_le_bytes());
                p.extend_from_slice(&flags.to_le_bytes());
                p.extend_from_slice(&read_config_padded(&self.device.config(), offset as usize, size as usize));
                return self.reply(&msg.reply(p));
            }
            req::SET_CONFIG => {
                let offset = u32_at(&msg.payload, 0).ok_or_else(short)?;
                let size = u32_at(&msg.payload, 4).ok_or_else(short)? as usize;
                let data = msg.payload.get(12..12 + size).ok_or_else(short)?;
                self.device.write_config(offset, data);
            }
            req::VRING_KICK => {
                let (i, _) = msg.vring_state().ok_or_else(short)?;
                let i = self.queue_index(i.into())?;
                // Process before acknowledging: the guest is blocked until
                // the ACK, so guest memory is quiescent while we touch it.
                let r = if self.queues.is_ready(i) { self.device.queue_notify(i, &mut self.queues) } else { Ok(false) };
                self.ack(&msg, r.is_ok())?;
                events.push(DeviceEvent::Kicked { queue: i as u16, interrupt: r? });
                return Ok(());
            }
            other => {
                self.ack(&msg, false)?;
                return Err(VhostUserError::Unsupported(other));
            }
        }
        self.ack(&msg, true)
    }

    /// Recomputes which queues are ready; emits [`DeviceEvent::Ready`] when
    /// all of them become ready.
    fn update_ready(&mut self, events: &mut Vec<DeviceEvent>) {
        let mem = &self.queues.mem;
        for (q, v) in self.queues.queues.iter_mut().zip(&self.vrings) {
            let ready = match (v.enabled, v.addr) {
                (true, Some((desc, avail, used))) => {
                    q.set_desc_table_address(Some(desc.0 as u32), Some((desc.0 >> 32) as u32));
                    q.set_avail_ring_address(Some(avail.0 as u32), Some((avail.0 >> 32) as u32));
                    q.set_used_ring_address(Some(used.0 as u32), Some((used.0 >> 32) as u32));
                    q.set_ready(true);
                    let ok = q.is_valid(mem);
                    q.set_ready(ok);
                    ok
                }
                _ => false,
            };
            q.set_ready(ready);
        }
        let all = self.queues.queues.iter().all(|q| q.ready());
        if all && !self.all_ready {
            events.push(DeviceEvent::Ready);
        }
        self.all_ready = all;
    }
}

impl<D: VirtioDevice> Drop for VhostUserBackend<D> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
