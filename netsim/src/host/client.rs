//! [`HostClient`]: a smoltcp interface on a netsim node of its own, driven
//! by the engine in virtual time, with a non-blocking connection API and an
//! HTTP helper on top.
//!
//! # Engine contract
//! * Deliveries to [`HostClient::node`] go to [`HostClient::receive_frame`].
//! * [`HostClient::poll`] runs the stack at a virtual time; every frame it
//!   emitted is then returned by [`HostClient::take_tx`] and must be passed
//!   to [`Network::send`](crate::Network::send) at that same time.
//! * [`HostClient::poll_at`] is the next virtual time the client needs a
//!   poll even if nothing arrives: a retransmission, a delayed ACK, a
//!   timeout. It is "now" after a frame was received or the workload called
//!   the API, so the engine can treat both as events at the current time.
//! * The workload calls the API between polls; the client takes the time of
//!   the latest poll as "now" for them (a connect timeout starts then).
//! * Time never runs backwards: a `poll` earlier than the previous one runs
//!   at the previous one's time.
//!
//! # Determinism
//! Time is only what `poll` is given (a [`VirtualTime`], truncated to
//! smoltcp's µs at the edge, in `instant`).
//! smoltcp's only randomness (TCP initial sequence numbers, the first IPv4
//! identification) comes from `Config::random_seed`, derived from
//! [`HostConfig::seed`] and the node; ephemeral ports come from the same
//! seed. Connections live in a `BTreeMap` and are processed in id order,
//! smoltcp's `SocketSet` is a slot vector and its neighbour cache a linear
//! map, so the frames emitted depend only on the call sequence.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use simtime::VirtualTime;
use smoltcp::iface::{Config, Interface, PollResult, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

use super::conn::ConnError;
use super::conn::{Conn, ConnId, ConnState, Side};
use super::device::{syn_tuple, FrameQueue};
use super::error::HostError;
use super::http::{HttpError, HttpResponse, ResponseReader};
use crate::addr::NodeId;

const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// How a [`HostClient`] behaves. Spans are of virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// The client's own node: IPv4 `10.0.0.N`, MAC `02:00:0a:00:00:NN`.
    /// Usually the first id after the guests ([`HostConfig::after_guests`]);
    /// the `Network` must be created with room for it.
    pub node: NodeId,
    /// Source of every random choice of the stack.
    pub seed: u64,
    /// Give up a handshake that has not completed after this long (5 s:
    /// Linux retries SYNs for two minutes, a workload wants to know sooner).
    pub connect_timeout: Duration,
    /// Fail a connection whose unacknowledged data (or FIN) sees no progress
    /// for this long; smoltcp itself retransmits forever. 120 s is twice
    /// smoltcp's largest retransmission timeout, so a live but lossy link is
    /// not declared dead between two backed-off retransmissions.
    pub io_timeout: Option<Duration>,
    /// Fail an HTTP exchange with no complete response after this long (30 s).
    pub http_timeout: Option<Duration>,
    /// Per-socket receive buffer, the advertised window (bytes, 64 KiB;
    /// smoltcp panics above 1 GiB).
    pub rx_buffer: usize,
    /// Per-socket transmit buffer (bytes); more is queued outside smoltcp.
    pub tx_buffer: usize,
    /// Nagle's algorithm. Off by default, like the `TCP_NODELAY` that HTTP
    /// clients set: requests go out in one piece without waiting for ACKs.
    pub nagle: bool,
    /// Forget a socket in TIME-WAIT after this long (smoltcp's own limit is
    /// 10 s), so a workload making many short connections does not carry
    /// thousands of lingering sockets.
    pub max_time_wait: Duration,
}

impl HostConfig {
    /// The defaults for a client on `node`; `seed` seeds its TCP initial sequence numbers
    /// and ephemeral ports.
    pub fn new(node: NodeId, seed: u64) -> HostConfig {
        HostConfig {
            node,
            seed,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Some(Duration::from_secs(120)),
            http_timeout: Some(Duration::from_secs(30)),
            rx_buffer: 64 * 1024,
            tx_buffer: 64 * 1024,
            nagle: false,
            max_time_wait: Duration::from_secs(10),
        }
    }

    /// The client on node `guests + 1`, right after a cluster of `guests`.
    pub fn after_guests(guests: u16, seed: u64) -> Option<HostConfig> {
        NodeId::new(guests.checked_add(1)?).map(|n| HostConfig::new(n, seed))
    }
}

/// Handle of an HTTP exchange started by [`HostClient::http_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HttpId(u64);

#[derive(Debug)]
struct Exchange {
    conn: ConnId,
    reader: ResponseReader,
    deadline: Option<VirtualTime>,
    result: Option<Result<HttpResponse, HttpError>>,
}

/// A TCP/IP endpoint on its own netsim node. See the module docs.
pub struct HostClient {
    cfg: HostConfig,
    iface: Interface,
    device: FrameQueue,
    /// Frames delivered by the engine, not yet seen by smoltcp.
    inbox: VecDeque<Vec<u8>>,
    sockets: SocketSet<'static>,
    conns: BTreeMap<ConnId, Conn>,
    exchanges: BTreeMap<HttpId, Exchange>,
    /// Local port -> sockets bound to it (listeners may share a port).
    ports: BTreeMap<u16, usize>,
    next_port: u16,
    next_conn: u64,
    next_http: u64,
    /// The API was called since the last poll.
    dirty: bool,
    /// Latest time seen by `new` or `poll`.
    now: VirtualTime,
}

/// smoltcp's clock, in µs (truncated), from virtual time.
fn instant(t: VirtualTime) -> Instant {
    Instant::from_micros((t.as_ns() / 1000) as i64)
}

/// Virtual time from smoltcp's clock (a negative instant is the boot).
fn from_instant(t: Instant) -> VirtualTime {
    VirtualTime::from_ns(u64::try_from(t.total_micros()).unwrap_or(0).saturating_mul(1000))
}

impl HostClient {
    /// A client whose stack starts at virtual time `now`.
    pub fn new(cfg: HostConfig, now: VirtualTime) -> HostClient {
        let mut device = FrameQueue::default();
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(cfg.node.mac())));
        let stream = simrng::splitmix64(cfg.seed ^ (u64::from(cfg.node.number()) << 48));
        config.random_seed = stream;
        let mut iface = Interface::new(config, &mut device, instant(now));
        let [a, b, c, d] = cfg.node.ipv4();
        iface.update_ip_addrs(|addrs| {
            addrs.push(IpCidr::new(IpAddress::v4(a, b, c, d), 24)).expect("room for one address");
        });
        let span = EPHEMERAL.end() - EPHEMERAL.start() + 1;
        let next_port = EPHEMERAL.start() + (simrng::splitmix64(stream) % u64::from(span)) as u16;
        HostClient {
            cfg,
            iface,
            device,
            inbox: VecDeque::new(),
            sockets: SocketSet::new(Vec::new()),
            conns: BTreeMap::new(),
            exchanges: BTreeMap::new(),
            ports: BTreeMap::new(),
            next_port,
            next_conn: 0,
            next_http: 0,
            dirty: false,
            now,
        }
    }

    /// The node this client is.
    pub fn node(&self) -> NodeId {
        self.cfg.node
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    // ---- engine side ----

    /// Queues a frame netsim delivered to this node; it is processed by the
    /// next [`HostClient::poll`].
    pub fn receive_frame(&mut self, frame: &[u8]) {
        self.inbox.push_back(frame.to_vec());
    }

    /// Runs the stack at virtual time `now`: timeouts, received frames,
    /// retransmissions, the workload's queued data, HTTP exchanges.
    pub fn poll(&mut self, now: VirtualTime) {
        let now = now.max(self.now);
        self.now = now;
        self.dirty = false;
        self.fire_timeouts(now);
        let _ = self.flush_all();
        self.ingress(now);
        self.egress(now);
        self.observe_all(now);
        // What smoltcp just did can unblock more work at this same instant:
        // a handshake completed (queued bytes may go), a response completed
        // (close its connection), the window opened. Bounded: each round
        // moves bytes or closes connections, which cannot go on forever,
        // and the cap keeps a bug from hanging the engine.
        for _ in 0..8 {
            let http = self.drive_http();
            if !(self.flush_all() | http) {
                break;
            }
            self.egress(now);
            self.observe_all(now);
        }
        self.reap();
    }

    /// Frames transmitted by the polls since the last call, in order.
    pub fn take_tx(&mut self) -> Vec<Vec<u8>> {
        self.device.take_tx()
    }

    /// The next virtual time (>= `now`) at which the client must be polled,
    /// or `None` if only an arriving frame or an API call can give it work.
    pub fn poll_at(&mut self, now: VirtualTime) -> Option<VirtualTime> {
        if self.dirty || !self.inbox.is_empty() {
            return Some(now);
        }
        let stack = self.iface.poll_at(instant(now), &self.sockets).map(from_instant);
        let conns = self.conns.values().filter_map(|c| c.deadline(self.cfg.io_timeout, self.cfg.max_time_wait));
        let http = self.exchanges.values().filter(|x| x.result.is_none()).filter_map(|x| x.deadline);
        stack.into_iter().chain(conns).chain(http).min().map(|t| t.max(now))
    }

    // ---- workload side: connections ----

    /// Starts a TCP connection from an ephemeral port to `to:port`. The SYN
    /// goes out on the next poll; watch [`HostClient::state`].
    pub fn connect(&mut self, to: NodeId, port: u16) -> Result<ConnId, HostError> {
        if port == 0 {
            return Err(HostError::ZeroPort);
        }
        if to == self.cfg.node {
            return Err(HostError::SelfConnect(to));
        }
        let local = self.alloc_port()?;
        let mut sock = self.new_socket();
        let [a, b, c, d] = to.ipv4();
        sock.connect(self.iface.context(), (IpAddress::v4(a, b, c, d), port), local)
            .expect("fresh socket, nonzero ports, address on our subnet");
        let id = self.add(sock, Side::Active, local);
        let conn = self.conns.get_mut(&id).expect("just added");
        conn.remote = Some((to, port));
        conn.connect_deadline = Some(self.now.saturating_add(self.cfg.connect_timeout));
        Ok(id)
    }

    /// A socket accepting one connection on `port`. Call again for each
    /// further connection to accept (several may listen at once: a backlog).
    pub fn listen(&mut self, port: u16) -> Result<ConnId, HostError> {
        if port == 0 {
            return Err(HostError::ZeroPort);
        }
        let mut sock = self.new_socket();
        sock.listen(port).expect("fresh socket, nonzero port");
        *self.ports.entry(port).or_default() += 1;
        Ok(self.add(sock, Side::Passive, port))
    }

    /// Queues `data` for sending; never partial. Accepted while the
    /// connection is listening, connecting or established and not closed.
    pub fn send(&mut self, id: ConnId, data: &[u8]) -> Result<(), HostError> {
        let c = self.conn_mut(id)?;
        match c.state {
            ConnState::Failed(err) => Err(HostError::Failed { id, err }),
            _ if c.close_requested || c.state.is_terminal() => Err(HostError::NotWritable(id)),
            _ => {
                c.out.extend(data);
                self.dirty = true;
                Ok(())
            }
        }
    }

    /// Takes every byte received so far (possibly none). Also works after
    /// the connection ended.
    pub fn recv(&mut self, id: ConnId) -> Result<Vec<u8>, HostError> {
        Ok(std::mem::take(&mut self.conn_mut(id)?.inbound))
    }

    /// Bytes waiting for [`HostClient::recv`].
    pub fn recv_len(&self, id: ConnId) -> Result<usize, HostError> {
        Ok(self.conn(id)?.inbound.len())
    }

    /// The peer finished sending: after the bytes waiting now, no more come.
    pub fn peer_closed(&self, id: ConnId) -> Result<bool, HostError> {
        Ok(self.conn(id)?.eof)
    }

    /// Where connection `id` is in its life.
    pub fn state(&self, id: ConnId) -> Result<ConnState, HostError> {
        Ok(self.conn(id)?.state)
    }

    /// The peer's node and port, once known.
    pub fn remote(&self, id: ConnId) -> Result<Option<(NodeId, u16)>, HostError> {
        Ok(self.conn(id)?.remote)
    }

    /// The ephemeral port connection `id` uses on this client's node.
    pub fn local_port(&self, id: ConnId) -> Result<u16, HostError> {
        Ok(self.conn(id)?.local_port)
    }

    /// Graceful close: FIN after everything queued has been handed to TCP.
    /// Receiving continues until the peer closes too.
    pub fn close(&mut self, id: ConnId) -> Result<(), HostError> {
        self.conn_mut(id)?.close_requested = true;
        self.dirty = true;
        Ok(())
    }

    /// Ends the connection at once with a reset; its state becomes `Closed`.
    pub fn abort(&mut self, id: ConnId) -> Result<(), HostError> {
        let c = self.conns.get_mut(&id).filter(|c| !c.released).ok_or(HostError::UnknownConn(id))?;
        if let (Some(h), false) = (c.handle, c.state.is_terminal()) {
            c.abort(self.sockets.get_mut::<tcp::Socket>(h), ConnState::Closed);
            self.dirty = true;
        }
        Ok(())
    }

    /// Drops the handle. An open connection is closed gracefully first; the
    /// socket and its port are freed when it ends.
    pub fn release(&mut self, id: ConnId) -> Result<(), HostError> {
        let c = self.conn_mut(id)?;
        c.released = true;
        c.inbound = Vec::new();
        if !c.state.is_terminal() {
            c.close_requested = true;
        }
        self.dirty = true;
        Ok(())
    }

    /// smoltcp sockets in use: listeners, open connections, and ended ones
    /// still lingering in TIME-WAIT (for leak checks and benches).
    pub fn socket_count(&self) -> usize {
        self.sockets.iter().count()
    }

    // ---- workload side: HTTP ----

    /// Connects to `to:port`, sends `request` (a complete HTTP/1.1 request,
    /// e.g. from [`http::get`](super::http::get)) and reads one response.
    /// The connection is closed when the response is complete.
    pub fn http_request(&mut self, to: NodeId, port: u16, request: &[u8]) -> Result<HttpId, HostError> {
        let conn = self.connect(to, port)?;
        self.send(conn, request)?;
        let id = HttpId(self.next_http);
        self.next_http += 1;
        let deadline = self.cfg.http_timeout.map(|t| self.now.saturating_add(t));
        self.exchanges.insert(id, Exchange { conn, reader: ResponseReader::new(request), deadline, result: None });
        Ok(id)
    }

    /// The outcome of an exchange once it has one, handed out once.
    pub fn take_http(&mut self, id: HttpId) -> Option<Result<HttpResponse, HttpError>> {
        self.exchanges.get(&id)?.result.as_ref()?;
        self.exchanges.remove(&id).and_then(|x| x.result)
    }

    /// Exchanges started and not yet taken.
    pub fn http_pending(&self) -> usize {
        self.exchanges.len()
    }

    // ---- internals ----

    fn conn(&self, id: ConnId) -> Result<&Conn, HostError> {
        self.conns.get(&id).filter(|c| !c.released).ok_or(HostError::UnknownConn(id))
    }

    fn conn_mut(&mut self, id: ConnId) -> Result<&mut Conn, HostError> {
        self.conns.get_mut(&id).filter(|c| !c.released).ok_or(HostError::UnknownConn(id))
    }

    fn new_socket(&self) -> tcp::Socket<'static> {
        let rx = tcp::SocketBuffer::new(vec![0; self.cfg.rx_buffer]);
        let tx = tcp::SocketBuffer::new(vec![0; self.cfg.tx_buffer]);
        let mut s = tcp::Socket::new(rx, tx);
        s.set_nagle_enabled(self.cfg.nagle);
        s
    }

    fn add(&mut self, sock: tcp::Socket<'static>, side: Side, port: u16) -> ConnId {
        let handle = self.sockets.add(sock);
        let id = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(id, Conn::new(handle, side, port, self.now));
        self.dirty = true;
        id
    }

    /// Next free ephemeral port after the last one handed out: sequential
    /// like Linux's, from a seeded start.
    fn alloc_port(&mut self) -> Result<u16, HostError> {
        let (lo, span) = (*EPHEMERAL.start(), EPHEMERAL.end() - EPHEMERAL.start() + 1);
        for i in 0..span {
            let p = lo + (self.next_port - lo + i) % span;
            if !self.ports.contains_key(&p) {
                self.next_port = lo + (p - lo + 1) % span;
                self.ports.insert(p, 1);
                return Ok(p);
            }
        }
        Err(HostError::NoFreePort)
    }

    fn fire_timeouts(&mut self, now: VirtualTime) {
        for x in self.exchanges.values_mut() {
            if x.result.is_none() && x.deadline.is_some_and(|d| now >= d) {
                x.result = Some(Err(HttpError::TimedOut));
                if let Some(c) = self.conns.get_mut(&x.conn) {
                    c.released = true;
                    if let (Some(h), false) = (c.handle, c.state.is_terminal()) {
                        c.abort(self.sockets.get_mut(h), ConnState::Failed(ConnError::TimedOut));
                    }
                }
            }
        }
        for c in self.conns.values_mut() {
            let Some(h) = c.handle else { continue };
            if c.state.is_terminal() {
                continue;
            }
            let connect = c.state == ConnState::Connecting && c.connect_deadline.is_some_and(|d| now >= d);
            let io = c.waiting && self.cfg.io_timeout.is_some_and(|t| now >= c.last_progress.saturating_add(t));
            if connect || io {
                c.abort(self.sockets.get_mut(h), ConnState::Failed(ConnError::TimedOut));
            }
        }
    }

    /// Hands received frames to smoltcp one at a time, each checked against
    /// the sockets as they are after the frames before it.
    fn ingress(&mut self, now: VirtualTime) {
        self.iface.poll_maintenance(instant(now));
        while let Some(frame) = self.inbox.pop_front() {
            if let Some(t) = syn_tuple(&frame) {
                if self.owned_elsewhere(t) {
                    continue;
                }
            }
            self.device.stage(frame);
            let _ = self.iface.poll_ingress_single(instant(now), &mut self.device, &mut self.sockets);
        }
    }

    /// Lets every socket transmit what it can, like the tail of smoltcp's `poll`.
    fn egress(&mut self, now: VirtualTime) {
        while self.iface.poll_egress(instant(now), &mut self.device, &mut self.sockets) != PollResult::None {}
    }

    /// A SYN for a 4-tuple that a socket past LISTEN already owns: a copy
    /// or retransmission of the one that opened it (see [`syn_tuple`]).
    /// That socket retransmits its SYN-ACK on its own timer if needed.
    fn owned_elsewhere(&self, (peer, peer_port, port): (smoltcp::wire::Ipv4Address, u16, u16)) -> bool {
        self.conns.values().filter_map(|c| c.handle).any(|h| {
            let s = self.sockets.get::<tcp::Socket>(h);
            !matches!(s.state(), tcp::State::Listen | tcp::State::Closed | tcp::State::TimeWait)
                && s.local_endpoint().is_some_and(|l| l.port == port)
                && s.remote_endpoint().is_some_and(|r| r.port == peer_port && r.addr == IpAddress::Ipv4(peer))
        })
    }

    /// `true` if any bytes or FIN moved into a socket.
    fn flush_all(&mut self) -> bool {
        let mut moved = false;
        for c in self.conns.values_mut() {
            if let Some(h) = c.handle {
                moved |= c.flush(self.sockets.get_mut(h));
            }
        }
        moved
    }

    fn observe_all(&mut self, now: VirtualTime) {
        for c in self.conns.values_mut() {
            if let Some(h) = c.handle {
                c.observe(self.sockets.get_mut(h), now);
            }
        }
    }

    /// Feeds received bytes to the HTTP readers; `true` if any connection
    /// was closed or aborted, so the stack should run again.
    fn drive_http(&mut self) -> bool {
        let mut changed = false;
        for x in self.exchanges.values_mut().filter(|x| x.result.is_none()) {
            let Some(c) = self.conns.get_mut(&x.conn) else { continue };
            x.reader.feed(&std::mem::take(&mut c.inbound));
            let outcome = match (x.reader.poll(c.eof), c.state) {
                (Ok(None), ConnState::Failed(e)) => Some(Err(HttpError::Conn(e))),
                (Ok(None), _) => None,
                (r, _) => r.transpose(),
            };
            let Some(outcome) = outcome else { continue };
            c.released = true;
            if let (Some(h), false) = (c.handle, c.state.is_terminal()) {
                let sock = self.sockets.get_mut::<tcp::Socket>(h);
                if outcome.is_ok() {
                    c.close_requested = true;
                } else {
                    c.abort(sock, ConnState::Closed);
                }
                changed = true;
            }
            x.result = Some(outcome);
        }
        changed
    }

    /// Returns finished sockets to the set and forgets released connections.
    fn reap(&mut self) {
        let now = self.now;
        let max_tw = self.cfg.max_time_wait;
        self.conns.retain(|_, c| {
            if let Some(h) = c.handle {
                let sock = self.sockets.get::<tcp::Socket>(h);
                let lingered = c.time_wait_since.is_some_and(|t| now >= t.saturating_add(max_tw));
                if c.state.is_terminal() && (sock.state() == tcp::State::Closed || lingered) {
                    self.sockets.remove(h);
                    c.handle = None;
                    if let Some(n) = self.ports.get_mut(&c.local_port) {
                        *n -= 1;
                        if *n == 0 {
                            self.ports.remove(&c.local_port);
                        }
                    }
                }
            }
            !(c.released && c.handle.is_none())
        });
    }
}
