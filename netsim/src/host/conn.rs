//! One TCP connection of a [`HostClient`](super::HostClient): the smoltcp
//! socket plus the bookkeeping that turns smoltcp's RFC 793 states into
//! the few facts a workload cares about.
//!
//! Why the extra layer: a smoltcp socket has fixed-size buffers and forgets
//! how it ended (a reset and a clean close both leave it `CLOSED`). A
//! workload wants to queue a whole request at once, read whatever arrived,
//! and learn *why* a connection ended. So each connection keeps an
//! unbounded outbound queue (fed into the socket as space frees up), an
//! inbound buffer (drained from the socket on every poll, which also keeps
//! the advertised window open), and a sticky [`ConnState`] that is decided
//! the moment smoltcp's state is observed to change.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use simtime::VirtualTime;
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp::{self, RecvError, State};

use crate::addr::NodeId;

/// Handle of a connection (or listener) of one `HostClient`. Issued in
/// increasing order, never reused, so it is stable in traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub(crate) u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// How a TCP connection failed. Final: a failed connection never recovers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    /// The peer answered the SYN with a reset: nothing listens on that port.
    #[error("connection refused")]
    Refused,
    /// No answer to the SYN within the connect timeout, or no progress on
    /// outstanding data within the I/O timeout (a partition, a dead node).
    #[error("connection timed out")]
    TimedOut,
    /// The peer reset an established connection (or aborted a half-closed one).
    #[error("connection reset by peer")]
    Reset,
}

/// What a workload can know about a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Waiting for a peer to connect (from [`HostClient::listen`](super::HostClient::listen)).
    Listening,
    /// Handshake in progress.
    Connecting,
    /// Data can flow. The peer may already have finished sending
    /// ([`HostClient::peer_closed`](super::HostClient::peer_closed)).
    Established,
    /// This side closed; the rest of the exchange is in flight.
    Closing,
    /// Ended in order: both sides sent FIN, or the workload aborted it.
    Closed,
    /// Ended by the network or the peer. Bytes received before the failure
    /// can still be read.
    Failed(ConnError),
}

impl ConnState {
    /// `Closed` or `Failed`: nothing will change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, ConnState::Closed | ConnState::Failed(_))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Active,
    Passive,
}

#[derive(Debug)]
pub(crate) struct Conn {
    /// `None` once the socket has been returned to the set.
    pub handle: Option<SocketHandle>,
    pub side: Side,
    pub local_port: u16,
    pub remote: Option<(NodeId, u16)>,
    pub state: ConnState,
    /// Bytes the workload sent that do not fit in the socket yet.
    pub out: VecDeque<u8>,
    /// Bytes received and not yet taken by the workload.
    pub inbound: Vec<u8>,
    /// The peer's FIN arrived; `inbound` holds the rest of its stream.
    pub eof: bool,
    pub close_requested: bool,
    pub fin_queued: bool,
    pub ever_established: bool,
    /// The workload dropped its handle; reap when terminal.
    pub released: bool,
    /// Active side: give up on the handshake at this time.
    pub connect_deadline: Option<VirtualTime>,
    /// Last time anything moved (state, bytes in, bytes acked).
    pub last_progress: VirtualTime,
    /// `send_queue()` at the last look, to notice acknowledgements.
    pub last_sq: usize,
    /// Something of ours is unacknowledged, so silence means trouble.
    pub waiting: bool,
    pub time_wait_since: Option<VirtualTime>,
}

impl Conn {
    pub fn new(handle: SocketHandle, side: Side, local_port: u16, now: VirtualTime) -> Conn {
        Conn {
            handle: Some(handle),
            side,
            local_port,
            remote: None,
            state: match side {
                Side::Active => ConnState::Connecting,
                Side::Passive => ConnState::Listening,
            },
            out: VecDeque::new(),
            inbound: Vec::new(),
            eof: false,
            close_requested: false,
            fin_queued: false,
            ever_established: false,
            released: false,
            connect_deadline: None,
            last_progress: now,
            last_sq: 0,
            waiting: false,
            time_wait_since: None,
        }
    }

    /// Moves queued bytes into the socket and, once they are all in, the
    /// FIN. `true` if anything moved.
    pub fn flush(&mut self, sock: &mut tcp::Socket) -> bool {
        let mut moved = false;
        while !self.out.is_empty() && sock.can_send() {
            let (a, _) = self.out.as_slices();
            match sock.send_slice(a) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.out.drain(..n);
                    moved = true;
                }
            }
        }
        if self.close_requested && self.out.is_empty() && !self.fin_queued && !self.state.is_terminal() {
            sock.close();
            self.fin_queued = true;
            moved = true;
        }
        self.last_sq = sock.send_queue();
        moved
    }

    /// Ends the connection now with `state` (RST to the peer if it was live).
    pub fn abort(&mut self, sock: &mut tcp::Socket, state: ConnState) {
        sock.abort();
        self.out.clear();
        self.state = state;
    }

    /// Drains received bytes and updates the state after smoltcp ran.
    pub fn observe(&mut self, sock: &mut tcp::Socket, now: VirtualTime) {
        let before = (self.inbound.len(), self.state, self.eof);
        while sock.can_recv() {
            let got = sock.recv(|b| {
                self.inbound.extend_from_slice(b);
                (b.len(), b.len())
            });
            if !matches!(got, Ok(n) if n > 0) {
                break;
            }
        }
        if !self.eof && matches!(sock.recv_slice(&mut []), Err(RecvError::Finished)) {
            self.eof = true;
        }
        if self.remote.is_none() {
            self.remote = sock.remote_endpoint().and_then(|ep| {
                // Irrefutable with only `proto-ipv4`, but another crate in the
                // build could turn on `proto-ipv6` through feature unification.
                #[allow(irrefutable_let_patterns)]
                if let smoltcp::wire::IpAddress::Ipv4(a) = ep.addr {
                    NodeId::from_ipv4(a.octets()).map(|n| (n, ep.port))
                } else {
                    None
                }
            });
        }
        let s = sock.state();
        if !matches!(s, State::Closed | State::Listen | State::SynSent | State::SynReceived) {
            self.ever_established = true;
        }
        if s == State::TimeWait && self.time_wait_since.is_none() {
            self.time_wait_since = Some(now);
        }
        if !self.state.is_terminal() {
            self.state = self.map_state(s);
        }
        let sq = sock.send_queue();
        let acked = sq < self.last_sq;
        self.last_sq = sq;
        self.waiting = !self.state.is_terminal()
            && (!self.out.is_empty()
                || sq > 0
                || matches!(s, State::SynReceived | State::FinWait1 | State::Closing | State::LastAck)
                // Nobody will read an orphan: like Linux's tcp_fin_timeout,
                // do not wait forever for the peer's FIN.
                || (self.released && s == State::FinWait2));
        if acked || !self.waiting || before != (self.inbound.len(), self.state, self.eof) {
            self.last_progress = now;
        }
    }

    fn map_state(&self, s: State) -> ConnState {
        match s {
            State::Listen => ConnState::Listening,
            State::SynSent | State::SynReceived => ConnState::Connecting,
            State::Established | State::CloseWait if !self.close_requested => ConnState::Established,
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::FinWait2
            | State::Closing
            | State::LastAck => ConnState::Closing,
            // Our FIN is acknowledged and the peer's received: done, even if
            // the socket lingers to re-acknowledge a retransmitted FIN.
            State::TimeWait => ConnState::Closed,
            State::Closed => {
                if self.close_requested && (self.eof || !self.ever_established) {
                    ConnState::Closed
                } else if !self.ever_established && self.side == Side::Active {
                    ConnState::Failed(ConnError::Refused)
                } else {
                    ConnState::Failed(ConnError::Reset)
                }
            }
        }
    }

    /// Earliest time a timeout of this connection can fire.
    pub fn deadline(&self, io_timeout: Option<Duration>, max_time_wait: Duration) -> Option<VirtualTime> {
        self.handle?;
        if let Some(t) = self.time_wait_since {
            return Some(t.saturating_add(max_time_wait));
        }
        if self.state.is_terminal() {
            return None;
        }
        let connect = match self.state {
            ConnState::Connecting => self.connect_deadline,
            _ => None,
        };
        let io = match (self.waiting, io_timeout) {
            (true, Some(t)) => Some(self.last_progress.saturating_add(t)),
            _ => None,
        };
        match (connect, io) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
