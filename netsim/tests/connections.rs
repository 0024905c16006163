//! Connection faults in `Network`: a TCP connection tracked from its
//! frames, reset (its frames in flight dropped, an RST to each end with
//! the sequence number that end expects) and stalled (its frames held
//! while another connection on the same link flows, then released in
//! order). And tracking itself changes nothing: same draws, same
//! deliveries.

use netsim::config::{Latency, NetConfig};
use netsim::frame::{internet_checksum, tcp_flags, tcp_ipv4};
use netsim::tcp::{ConnKey, Direction, Endpoint, Segment};
use netsim::{Delivery, Network, NodeId};
use simrng::Rng;
use simtime::VirtualTime;

use tcp_flags::{ACK, PSH, RST, SYN};

fn n(i: u16) -> NodeId {
    NodeId::new(i).unwrap()
}

fn t(ms: u64) -> VirtualTime {
    VirtualTime::from_ns(ms * 1_000_000)
}

fn net() -> Network {
    let c = NetConfig { latency: Latency::Fixed(1_000_000), ..NetConfig::default() };
    let mut net = Network::new(&c, 2).unwrap();
    net.track_connections();
    net
}

fn rng() -> Rng {
    simrng::seeded(1)
}

/// Sends `frame` from `from` and delivers everything due by then + 1 ms.
fn exchange(net: &mut Network, now: u64, from: u16, frame: &[u8]) {
    net.send(t(now), n(from), frame, &mut rng());
    while net.next_delivery_time().is_some_and(|d| d <= t(now + 1)) {
        net.pop_next();
    }
}

/// A connection n1:port <-> n2:80, client ISN `isn`, server ISN 9000, and
/// 5 bytes each way, at `at` ms.
fn connect(net: &mut Network, at: u64, port: u16, isn: u32) -> ConnKey {
    let c = |seq, ack, f, data: &[u8]| tcp_ipv4(n(1), n(2), port, 80, seq, ack, f, data);
    let s = |seq, ack, f, data: &[u8]| tcp_ipv4(n(2), n(1), 80, port, seq, ack, f, data);
    exchange(net, at, 1, &c(isn, 0, SYN, b""));
    exchange(net, at + 2, 2, &s(9000, isn + 1, SYN | ACK, b""));
    exchange(net, at + 4, 1, &c(isn + 1, 9001, ACK, b""));
    exchange(net, at + 6, 1, &c(isn + 1, 9001, ACK | PSH, b"hello"));
    exchange(net, at + 8, 2, &s(9001, isn + 6, ACK | PSH, b"world"));
    ConnKey { a: Endpoint { node: n(1), port }, b: Endpoint { node: n(2), port: 80 } }
}

fn checksums_ok(f: &[u8]) {
    let ip = &f[14..34];
    assert_eq!(internet_checksum(&[ip]), 0, "IPv4 header checksum");
    let tcp = &f[34..];
    let pseudo = [&ip[12..16], &ip[16..20], &[0, 6], &(tcp.len() as u16).to_be_bytes()].concat();
    assert_eq!(internet_checksum(&[&pseudo, tcp]), 0, "TCP checksum");
}

fn seq(d: &Delivery) -> u32 {
    Segment::parse(&d.frame).unwrap().seq()
}

#[test]
fn a_reset_drops_the_frames_in_flight_and_sends_each_end_its_rcv_nxt() {
    let mut net = net();
    let key = connect(&mut net, 0, 40000, 1000);
    let other = connect(&mut net, 20, 40001, 3000);
    let table = net.connections().unwrap();
    assert_eq!(table.established().map(|(k, _)| *k).collect::<Vec<_>>(), [key, other]);
    // The client sends 7 more bytes; they are in flight when the reset comes.
    let frame = tcp_ipv4(n(1), n(2), 40000, 80, 1006, 9006, ACK | PSH, b"lost!!!");
    net.send(t(40), n(1), &frame, &mut rng());
    // The other connection's frame in flight stays.
    let keep = tcp_ipv4(n(1), n(2), 40001, 80, 3006, 9006, ACK | PSH, b"kept");
    net.send(t(40), n(1), &keep, &mut rng());
    assert_eq!(net.pending_len(), 2);

    let r = net.reset_connection(&key, t(40)).expect("an established connection");
    assert_eq!(r.dropped, 1);
    assert_eq!(net.stats().dropped.connection_reset, 1);
    assert_eq!(net.pending_len(), 3, "the kept frame and two resets");
    let [to_a, to_b] = r.resets;
    assert_eq!((to_a.from, to_a.to, to_a.time), (n(2), n(1), t(40)));
    assert_eq!((to_b.from, to_b.to, to_b.time), (n(1), n(2), t(40)));
    let a = net.get(to_a.id).unwrap().clone();
    let b = net.get(to_b.id).unwrap().clone();
    for d in [&a, &b] {
        checksums_ok(&d.frame);
    }
    let (sa, sb) = (Segment::parse(&a.frame).unwrap(), Segment::parse(&b.frame).unwrap());
    // The client got "world" (9001..9006); the server got "hello" but not
    // the 7 bytes the reset dropped (1001..1006).
    assert_eq!((sa.src_port(), sa.dst_port(), sa.seq(), sa.flags() & RST), (80, 40000, 9006, RST));
    assert_eq!((sb.src_port(), sb.dst_port(), sb.seq(), sb.flags() & RST), (40000, 80, 1006, RST));
    let table = net.connections().unwrap();
    assert!(table.get(&key).is_none(), "forgotten");
    assert_eq!(table.established().count(), 1);
    assert!(net.reset_connection(&key, t(41)).is_none(), "not twice");
    // Conservation: offered + duplicated == delivered + dropped + pending.
    let s = net.stats();
    assert_eq!(s.offered + s.duplicated, s.delivered + s.dropped.on_wire() + net.pending_len() as u64);
}

#[test]
fn a_stall_holds_one_connection_while_another_on_the_link_flows() {
    let mut net = net();
    let key = connect(&mut net, 0, 40000, 1000);
    connect(&mut net, 20, 40001, 3000);
    // Two segments of each connection client -> server in flight at 40 ms.
    for (k, seq) in [(0u32, 1006u32), (1, 3006), (2, 1011), (3, 3011)] {
        let port = if k % 2 == 0 { 40000 } else { 40001 };
        let f = tcp_ipv4(n(1), n(2), port, 80, seq, 9006, ACK | PSH, b"12345");
        net.send(t(40), n(1), &f, &mut rng());
    }
    assert_eq!(net.stall_connection(&key, Direction::AtoB, t(500)), 2);
    assert!(net.is_stalled(&key, t(499)) && !net.is_stalled(&key, t(500)));
    // Sent during the stall: held too; the server's answer is not (one way).
    let late = tcp_ipv4(n(1), n(2), 40000, 80, 1016, 9006, ACK | PSH, b"12345");
    net.send(t(100), n(1), &late, &mut rng());
    let back = tcp_ipv4(n(2), n(1), 80, 40000, 9006, 1006, ACK, b"");
    net.send(t(100), n(2), &back, &mut rng());
    let order: Vec<(u64, u32)> =
        std::iter::from_fn(|| net.pop_next()).map(|d| (d.time.as_ns() / 1_000_000, seq(&d))).collect();
    assert_eq!(order, [(41, 3006), (41, 3011), (101, 9006), (500, 1006), (500, 1011), (500, 1016)], "held in order");
    // After the stall, frames flow again.
    net.send(t(600), n(1), &late, &mut rng());
    assert_eq!(net.pop_next().unwrap().time, t(601));
}

#[test]
fn tracking_changes_no_draw_and_no_delivery() {
    let c = NetConfig {
        latency: Latency::Uniform { min: 10_000, max: 900_000 },
        loss: 0.1,
        reorder: 0.2,
        duplicate: 0.1,
        ..NetConfig::default()
    };
    let run = |track: bool| {
        let mut net = Network::new(&c, 3).unwrap();
        if track {
            net.track_connections();
        }
        let mut r = rng();
        let mut out = Vec::new();
        for k in 0..300u32 {
            let (a, b) = (1 + (k % 3) as u16, 1 + ((k + 1) % 3) as u16);
            let f = tcp_ipv4(n(a), n(b), 1000 + (k % 5) as u16, 80, k, 0, if k < 5 { SYN } else { ACK }, &[0; 30]);
            net.send(t(u64::from(k)), n(a), &f, &mut r);
            if k % 4 == 0 {
                out.extend(net.pop_next().map(|d| (d.id, d.time)));
            }
        }
        out.extend(std::iter::from_fn(|| net.pop_next()).map(|d| (d.id, d.time)));
        (out, *net.stats())
    };
    assert_eq!(run(false), run(true));
}
