//! TCP connections seen on the wire, for connection faults
//! (`[faults.connection]`): a typed view of a TCP segment in an Ethernet
//! frame ([`Segment`]), and a table of the connections between nodes
//! ([`ConnTable`]) that follows each end's sequence numbers from the
//! frames it sends and the frames it is handed.
//!
//! What the table knows of an end is what the frames say: the next
//! sequence number it will send (the highest end of a segment it sent),
//! and its `rcv_nxt`: the highest of the acknowledgements it sent and
//! the in-order end of the segments delivered to it (segments delivered
//! out of order are kept as ranges and joined once the hole fills). A
//! reset sent to an end carries exactly its `rcv_nxt`: RFC 5961 (Linux
//! since 3.6) resets a connection only on an RST whose sequence number is
//! `rcv_nxt` (anything else in the window draws a challenge ACK), and
//! every older stack accepts it too.
//!
//! A connection is *established* once each end was handed a segment of
//! the other's that acknowledges something after both sent a SYN (the
//! client got the SYN-ACK, the server the handshake's ACK), and until
//! either end sends a FIN or an RST. Everything is kept in `BTreeMap`s and
//! `Vec`s: the order of connections is that of their endpoints.

use std::collections::BTreeMap;
use std::fmt;

use crate::addr::NodeId;
use crate::frame::{tcp_flags, tcp_ipv4, ETHERTYPE_IPV4};

/// A TCP segment in an IPv4 packet in an Ethernet frame, read in place.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    ip: &'a [u8],
    tcp: &'a [u8],
    payload_len: usize,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<'a> Segment<'a> {
    /// The TCP segment `frame` carries; `None` for anything else (ARP,
    /// UDP, IPv6, a fragment, a header that does not fit).
    pub fn parse(frame: &'a [u8]) -> Option<Segment<'a>> {
        if frame.len() < 14 + 20 || be16(&frame[12..14]) != ETHERTYPE_IPV4 {
            return None;
        }
        let ip_all = &frame[14..];
        let ihl = usize::from(ip_all[0] & 0x0f) * 4;
        let total = usize::from(be16(&ip_all[2..4]));
        // More fragments, or a fragment offset: not a whole segment.
        let fragment = be16(&ip_all[6..8]) & 0x3fff != 0;
        if ip_all[0] >> 4 != 4 || ihl < 20 || total < ihl || total > ip_all.len() || ip_all[9] != 6 || fragment {
            return None;
        }
        let ip = &ip_all[..total];
        let tcp = &ip[ihl..];
        if tcp.len() < 20 {
            return None;
        }
        let off = usize::from(tcp[12] >> 4) * 4;
        if off < 20 || off > tcp.len() {
            return None;
        }
        Some(Segment { ip, tcp, payload_len: tcp.len() - off })
    }

    /// The sender's IPv4 address.
    pub fn src_ip(&self) -> [u8; 4] {
        [self.ip[12], self.ip[13], self.ip[14], self.ip[15]]
    }
    /// The receiver's IPv4 address.
    pub fn dst_ip(&self) -> [u8; 4] {
        [self.ip[16], self.ip[17], self.ip[18], self.ip[19]]
    }
    /// The sender's port.
    pub fn src_port(&self) -> u16 {
        be16(&self.tcp[0..2])
    }
    /// The receiver's port.
    pub fn dst_port(&self) -> u16 {
        be16(&self.tcp[2..4])
    }
    /// The sequence number.
    pub fn seq(&self) -> u32 {
        be32(&self.tcp[4..8])
    }
    /// The acknowledgement number (meaningful with [`tcp_flags::ACK`]).
    pub fn ack(&self) -> u32 {
        be32(&self.tcp[8..12])
    }
    /// The flag bits ([`tcp_flags`]).
    pub fn flags(&self) -> u8 {
        self.tcp[13]
    }
    /// The advertised window (unscaled).
    pub fn window(&self) -> u16 {
        be16(&self.tcp[14..16])
    }
    /// Bytes of data.
    pub fn payload_len(&self) -> usize {
        self.payload_len
    }
    /// The sequence space it takes: its data, plus one for a SYN and one
    /// for a FIN.
    pub fn seq_len(&self) -> u32 {
        let f = self.flags();
        self.payload_len as u32 + u32::from(f & tcp_flags::SYN != 0) + u32::from(f & tcp_flags::FIN != 0)
    }
    fn has(&self, flag: u8) -> bool {
        self.flags() & flag != 0
    }
}

/// `a` comes before `b` in sequence space (RFC 793's modular compare).
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// One end of a connection: a node and a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The node.
    pub node: NodeId,
    /// The TCP port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.node, self.port)
    }
}

/// A connection between two nodes, by its ends in order (`a < b`): the
/// same key for the frames of both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnKey {
    /// The lesser end.
    pub a: Endpoint,
    /// The greater end.
    pub b: Endpoint,
}

impl ConnKey {
    /// The key of a segment from `from` to `to`, and whether it goes
    /// from `a` to `b`.
    pub fn of(from: Endpoint, to: Endpoint) -> (ConnKey, bool) {
        if from <= to {
            (ConnKey { a: from, b: to }, true)
        } else {
            (ConnKey { a: to, b: from }, false)
        }
    }
}

impl fmt::Display for ConnKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} <-> {}", self.a, self.b)
    }
}

/// Which way a stall holds a connection's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Frames from `a` to `b`.
    AtoB,
    /// Frames from `b` to `a`.
    BtoA,
    /// Both ways.
    Both,
}

impl Direction {
    /// Does it hold a frame that goes from `a` to `b` (`a_to_b`) or back?
    pub fn holds(self, a_to_b: bool) -> bool {
        match self {
            Direction::Both => true,
            Direction::AtoB => a_to_b,
            Direction::BtoA => !a_to_b,
        }
    }
}

/// The most out-of-order ranges kept per end; beyond it the oldest go
/// (the end's next acknowledgement says where it is anyway).
const MAX_OUT_OF_ORDER: usize = 64;

/// What the frames say about one end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Half {
    /// It sent a SYN.
    pub syn: bool,
    /// It sent a FIN.
    pub fin: bool,
    /// It was handed a segment of the other end's with an ACK, after
    /// both SYNs.
    pub acked: bool,
    /// The next sequence number it sends (after its last segment's end).
    pub snd_nxt: u32,
    /// The next sequence number it expects; `None` before it saw the
    /// other end's SYN.
    pub rcv_nxt: Option<u32>,
    /// The window it last advertised (unscaled).
    pub window: u16,
    /// Segments handed to it beyond `rcv_nxt`: `(start, end)`.
    out_of_order: Vec<(u32, u32)>,
}

impl Half {
    /// A segment of its own leaves it.
    fn sent(&mut self, s: &Segment) {
        let end = s.seq().wrapping_add(s.seq_len());
        if s.has(tcp_flags::SYN) {
            self.syn = true;
            self.snd_nxt = end;
        } else if seq_lt(self.snd_nxt, end) {
            self.snd_nxt = end;
        }
        self.fin |= s.has(tcp_flags::FIN);
        self.window = s.window();
        if s.has(tcp_flags::ACK) {
            match self.rcv_nxt {
                Some(r) if !seq_lt(r, s.ack()) => {}
                _ => self.rcv_nxt = Some(s.ack()),
            }
            self.join();
        }
    }

    /// A segment of the other end's is handed to it.
    fn received(&mut self, s: &Segment) {
        let (start, end) = (s.seq(), s.seq().wrapping_add(s.seq_len()));
        if s.has(tcp_flags::SYN) {
            self.rcv_nxt = Some(end);
            self.out_of_order.clear();
            return;
        }
        let Some(r) = self.rcv_nxt else { return };
        if start == end || !seq_lt(r, end) {
            return; // nothing new
        }
        if seq_lt(r, start) {
            if self.out_of_order.len() == MAX_OUT_OF_ORDER {
                self.out_of_order.remove(0);
            }
            self.out_of_order.push((start, end));
            return;
        }
        self.rcv_nxt = Some(end);
        self.join();
    }

    /// Moves `rcv_nxt` over the out-of-order ranges it now reaches.
    fn join(&mut self) {
        let Some(mut r) = self.rcv_nxt else { return };
        loop {
            let before = r;
            self.out_of_order.retain(|&(start, end)| {
                if !seq_lt(r, start) && seq_lt(r, end) {
                    r = end;
                }
                // Keep only what still lies ahead.
                seq_lt(r, end)
            });
            if r == before {
                break;
            }
        }
        self.rcv_nxt = Some(r);
    }
}

/// A connection as its frames show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conn {
    /// End `a` (the key's lesser).
    pub a: Half,
    /// End `b`.
    pub b: Half,
    /// An RST went either way.
    pub reset: bool,
}

impl Conn {
    /// Both ends completed the handshake and neither has closed or reset
    /// it: a reset or a stall can hit it.
    pub fn established(&self) -> bool {
        let h = |x: &Half| x.syn && x.acked && !x.fin && x.rcv_nxt.is_some();
        !self.reset && h(&self.a) && h(&self.b)
    }

    fn half(&mut self, a: bool) -> &mut Half {
        if a {
            &mut self.a
        } else {
            &mut self.b
        }
    }
}

/// The TCP connections between nodes, by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnTable {
    conns: BTreeMap<ConnKey, Conn>,
}

/// The ends of a segment in `frame` from `from` to `to`, if it is one.
pub fn ends(from: NodeId, to: NodeId, frame: &[u8]) -> Option<(Endpoint, Endpoint, Segment<'_>)> {
    let s = Segment::parse(frame)?;
    Some((Endpoint { node: from, port: s.src_port() }, Endpoint { node: to, port: s.dst_port() }, s))
}

impl ConnTable {
    /// An empty table.
    pub fn new() -> ConnTable {
        ConnTable::default()
    }

    /// `from` sent `frame` to `to` (whatever becomes of it on the way).
    pub fn on_send(&mut self, from: NodeId, to: NodeId, frame: &[u8]) {
        let Some((src, dst, s)) = ends(from, to, frame) else { return };
        let (key, a_to_b) = ConnKey::of(src, dst);
        if s.has(tcp_flags::SYN) && !s.has(tcp_flags::ACK) {
            // A new connection (or the same ports again): start afresh.
            self.conns.insert(key, Conn::default());
        }
        let Some(c) = self.conns.get_mut(&key) else { return };
        if s.has(tcp_flags::RST) {
            c.reset = true;
            return;
        }
        c.half(a_to_b).sent(&s);
    }

    /// `frame` from `from` was handed to `to`.
    pub fn on_deliver(&mut self, from: NodeId, to: NodeId, frame: &[u8]) {
        let Some((src, dst, s)) = ends(from, to, frame) else { return };
        let (key, a_to_b) = ConnKey::of(src, dst);
        let Some(c) = self.conns.get_mut(&key) else { return };
        if s.has(tcp_flags::RST) {
            c.reset = true;
            return;
        }
        let both_syn = c.a.syn && c.b.syn;
        let receiver = c.half(!a_to_b);
        receiver.received(&s);
        if both_syn && s.has(tcp_flags::ACK) {
            receiver.acked = true;
        }
    }

    /// Forgets every connection of `node` (it lost power: its sockets are
    /// gone).
    pub fn node_down(&mut self, node: NodeId) {
        self.conns.retain(|k, _| k.a.node != node && k.b.node != node);
    }

    /// The connection `key`, if tracked.
    pub fn get(&self, key: &ConnKey) -> Option<&Conn> {
        self.conns.get(key)
    }

    /// The established connections, in key order.
    pub fn established(&self) -> impl Iterator<Item = (&ConnKey, &Conn)> + '_ {
        self.conns.iter().filter(|(_, c)| c.established())
    }

    /// Forgets `key` and returns it.
    pub fn remove(&mut self, key: &ConnKey) -> Option<Conn> {
        self.conns.remove(key)
    }

    /// Every connection tracked, established or not.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// No connection tracked.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }
}

/// The two resets that end `conn` (key `key`): one to `a`, as if from `b`,
/// and one to `b`, as if from `a`, each with the sequence number its
/// receiver expects next (its `rcv_nxt`) and an acknowledgement of what
/// the sender was last known to have received. `None` unless both ends
/// know where they are (an established connection always does).
pub fn resets(key: &ConnKey, conn: &Conn) -> Option<[(NodeId, NodeId, Vec<u8>); 2]> {
    let (a_rcv, b_rcv) = (conn.a.rcv_nxt?, conn.b.rcv_nxt?);
    let flags = tcp_flags::RST | tcp_flags::ACK;
    let (a, b) = (key.a, key.b);
    let to_a = tcp_ipv4(b.node, a.node, b.port, a.port, a_rcv, b_rcv, flags, &[]);
    let to_b = tcp_ipv4(a.node, b.node, a.port, b.port, b_rcv, a_rcv, flags, &[]);
    Some([(b.node, a.node, to_a), (a.node, b.node, to_b)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::internet_checksum;
    use tcp_flags::{ACK, FIN, PSH, RST, SYN};

    fn n(i: u16) -> NodeId {
        NodeId::new(i).unwrap()
    }

    /// Sends and delivers at once.
    fn pass(t: &mut ConnTable, from: u16, to: u16, f: &[u8]) {
        t.on_send(n(from), n(to), f);
        t.on_deliver(n(from), n(to), f);
    }

    #[allow(clippy::too_many_arguments)]
    fn seg(from: u16, to: u16, sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, data: &[u8]) -> Vec<u8> {
        tcp_ipv4(n(from), n(to), sport, dport, seq, ack, flags, data)
    }

    /// A handshake n1:40000 -> n2:80, ISNs 1000 and 5000; returns the key.
    fn handshake(t: &mut ConnTable) -> ConnKey {
        pass(t, 1, 2, &seg(1, 2, 40000, 80, 1000, 0, SYN, b""));
        let key = *t.conns.keys().next().unwrap();
        assert!(!t.conns[&key].established());
        pass(t, 2, 1, &seg(2, 1, 80, 40000, 5000, 1001, SYN | ACK, b""));
        assert!(!t.conns[&key].established(), "the server waits for the handshake's ACK");
        pass(t, 1, 2, &seg(1, 2, 40000, 80, 1001, 5001, ACK, b""));
        key
    }

    fn checksums_ok(f: &[u8]) {
        let ip = &f[14..34];
        assert_eq!(internet_checksum(&[ip]), 0, "IPv4 header checksum");
        let tcp = &f[34..];
        let pseudo = [&ip[12..16], &ip[16..20], &[0, 6], &(tcp.len() as u16).to_be_bytes()].concat();
        assert_eq!(internet_checksum(&[&pseudo, tcp]), 0, "TCP checksum");
    }

    #[test]
    fn a_handshake_establishes_and_resets_carry_each_ends_rcv_nxt() {
        let mut t = ConnTable::new();
        let key = handshake(&mut t);
        assert_eq!(key.a, Endpoint { node: n(1), port: 40000 });
        assert_eq!(key.to_string(), "n1:40000 <-> n2:80");
        assert!(t.conns[&key].established());
        // The client sends 10 bytes, delivered; the server has not acked
        // them yet (a delayed ACK): its rcv_nxt is past them all the same.
        pass(&mut t, 1, 2, &seg(1, 2, 40000, 80, 1001, 5001, ACK | PSH, b"0123456789"));
        // The server answers 4 bytes, sent but still in flight.
        t.on_send(n(2), n(1), &seg(2, 1, 80, 40000, 5001, 1011, ACK | PSH, b"pong"));
        let c = &t.conns[&key];
        assert_eq!((c.a.snd_nxt, c.b.snd_nxt), (1011, 5005));
        assert_eq!((c.a.rcv_nxt, c.b.rcv_nxt), (Some(5001), Some(1011)));
        let [(from_a, to_a, rst_a), (from_b, to_b, rst_b)] = resets(&key, c).unwrap();
        assert_eq!((from_a, to_a, from_b, to_b), (n(2), n(1), n(1), n(2)));
        for f in [&rst_a, &rst_b] {
            checksums_ok(f);
        }
        let (sa, sb) = (Segment::parse(&rst_a).unwrap(), Segment::parse(&rst_b).unwrap());
        assert_eq!((sa.src_port(), sa.dst_port(), sa.seq(), sa.ack(), sa.flags()), (80, 40000, 5001, 1011, RST | ACK));
        assert_eq!((sb.src_port(), sb.dst_port(), sb.seq(), sb.ack(), sb.flags()), (40000, 80, 1011, 5001, RST | ACK));
        assert_eq!((sa.src_ip(), sa.dst_ip()), (n(2).ipv4(), n(1).ipv4()));
        // An RST that passes ends it.
        pass(&mut t, 2, 1, &rst_a);
        assert!(!t.conns[&key].established());
    }

    #[test]
    fn out_of_order_segments_join_when_the_hole_fills_and_acks_win() {
        let mut t = ConnTable::new();
        let key = handshake(&mut t);
        // Two segments, the second handed over first.
        let first = seg(1, 2, 40000, 80, 1001, 5001, ACK, &[7; 100]);
        let second = seg(1, 2, 40000, 80, 1101, 5001, ACK, &[7; 50]);
        t.on_send(n(1), n(2), &first);
        t.on_send(n(1), n(2), &second);
        t.on_deliver(n(1), n(2), &second);
        assert_eq!(t.conns[&key].b.rcv_nxt, Some(1001), "a hole");
        t.on_deliver(n(1), n(2), &first);
        assert_eq!(t.conns[&key].b.rcv_nxt, Some(1151), "joined");
        // A retransmission changes nothing; an ACK further on moves it.
        t.on_deliver(n(1), n(2), &first);
        assert_eq!(t.conns[&key].b.rcv_nxt, Some(1151));
        t.on_send(n(2), n(1), &seg(2, 1, 80, 40000, 5001, 1200, ACK, b""));
        assert_eq!(t.conns[&key].b.rcv_nxt, Some(1200));
        // Sequence numbers wrap.
        let mut h = Half { rcv_nxt: Some(u32::MAX - 9), ..Half::default() };
        let wrap = seg(1, 2, 1, 2, u32::MAX - 9, 0, ACK, &[0; 20]);
        h.received(&Segment::parse(&wrap).unwrap());
        assert_eq!(h.rcv_nxt, Some(10));
    }

    #[test]
    fn fin_crash_and_new_syn_end_or_restart_the_record() {
        let mut t = ConnTable::new();
        let key = handshake(&mut t);
        t.on_send(n(2), n(1), &seg(2, 1, 80, 40000, 5001, 1001, FIN | ACK, b""));
        assert!(!t.conns[&key].established(), "closing");
        assert_eq!(t.established().count(), 0);
        let key2 = handshake(&mut t);
        assert_eq!(key, key2, "the same ports again");
        assert!(t.conns[&key].established(), "a new SYN started afresh");
        t.node_down(n(2));
        assert!(t.is_empty());
        // Not TCP: ignored.
        t.on_send(n(1), n(2), &crate::frame::arp_request(n(1), n(2)));
        assert!(t.is_empty());
        assert!(Segment::parse(&seg(1, 2, 1, 2, 0, 0, RST, b"")[..40]).is_none(), "truncated");
    }
}
