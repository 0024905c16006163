//! `HostClient` end to end: two smoltcp endpoints talking through a
//! `Network`, driven by a tiny virtual-time event loop like the engine's.
//! Node 1 plays the guest (a small HTTP / echo server built on a second
//! `HostClient`), node 2 is the client, the "next id after the guests".

use std::collections::BTreeMap;
use std::time::Duration;

use netsim::config::{Latency, NetConfig};
use netsim::host::{http, ConnError, ConnId, ConnState, HostClient, HostConfig, HttpError, HttpId, HttpResponse};
use netsim::{Network, NodeId, Partition};
use simrng::Rng;
use simtime::VirtualTime;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// The point `d` after the boot.
fn at(d: Duration) -> VirtualTime {
    VirtualTime::ZERO + d
}

fn n(i: u16) -> NodeId {
    NodeId::new(i).unwrap()
}

/// Deterministic body of `len` bytes, so corruption or reordering shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0]).collect()
}

/// One line per frame for `HC_DEBUG=1` runs: ARP, or TCP ports/seq/ack/flags/length.
fn describe(f: &[u8]) -> String {
    if f[12..14] == [8, 6] {
        return format!("ARP op {} for {:?}", f[21], &f[38..42]);
    }
    let ip = &f[14..];
    let tcp = &ip[usize::from(ip[0] & 15) * 4..];
    let be32 = |b: &[u8]| u32::from_be_bytes(b[..4].try_into().unwrap());
    let len = usize::from(u16::from_be_bytes([ip[2], ip[3]])) - (ip.len() - tcp.len()) - usize::from(tcp[12] >> 4) * 4;
    format!(
        "{}->{} seq {} ack {} flags {:02x} len {len}",
        u16::from_be_bytes([tcp[0], tcp[1]]),
        u16::from_be_bytes([tcp[2], tcp[3]]),
        be32(&tcp[4..]),
        be32(&tcp[8..]),
        tcp[13]
    )
}

/// What runs on a node besides its stack: a server, polled after the stack.
enum App {
    Http { port: u16, conns: BTreeMap<ConnId, Vec<u8>>, served: usize },
    Echo { port: u16, conns: Vec<ConnId> },
}

impl App {
    fn http(port: u16) -> App {
        App::Http { port, conns: BTreeMap::new(), served: 0 }
    }

    /// Keeps two listeners open, answers complete requests, releases ended
    /// connections. Paths: `/big/N` (N pattern bytes), `/chunked`, else hello.
    fn run(&mut self, h: &mut HostClient) {
        match self {
            App::Http { port, conns, served } => {
                let mut ended = Vec::new();
                for (&id, req) in conns.iter_mut() {
                    let st = h.state(id).unwrap();
                    if st.is_terminal() {
                        ended.push(id);
                        continue;
                    }
                    req.extend(h.recv(id).unwrap());
                    let Some(end) = req.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&req[..end]).into_owned();
                    req.clear();
                    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                    let resp = if let Some(len) = path.strip_prefix("/big/") {
                        let body = pattern(len.parse().unwrap());
                        let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
                        r.extend(body);
                        r
                    } else if path == "/chunked" {
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nchunk-\r\n7\r\nencoded\r\n0\r\n\r\n"
                            .to_vec()
                    } else {
                        let body = format!("hello from {}", h.node());
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                            .into_bytes()
                    };
                    h.send(id, &resp).unwrap();
                    h.close(id).unwrap();
                    *served += 1;
                }
                for id in ended {
                    conns.remove(&id);
                    h.release(id).unwrap();
                }
                let listening = conns.keys().filter(|&&id| h.state(id) == Ok(ConnState::Listening)).count();
                for _ in listening..2 {
                    conns.insert(h.listen(*port).unwrap(), Vec::new());
                }
            }
            App::Echo { port, conns } => {
                if conns.iter().all(|&id| h.state(id) != Ok(ConnState::Listening)) {
                    conns.push(h.listen(*port).unwrap());
                }
                for &id in conns.iter() {
                    let data = h.recv(id).unwrap();
                    if !data.is_empty() {
                        h.send(id, &data).unwrap();
                    }
                    if h.peer_closed(id).unwrap() && h.state(id) == Ok(ConnState::Established) {
                        h.close(id).unwrap();
                    }
                }
            }
        }
    }
}

/// The engine in miniature: deliveries and client polls in virtual time.
struct Sim {
    net: Network,
    rng: Rng,
    now: VirtualTime,
    hosts: BTreeMap<NodeId, (HostClient, Option<App>)>,
    /// FNV-1a over (time, sender, frame) of every frame handed to the network.
    frame_hash: u64,
    frames: u64,
    /// Every frame sent: (time, sender, bytes).
    log: Vec<(VirtualTime, NodeId, Vec<u8>)>,
}

impl Sim {
    fn new(cfg: &NetConfig, nodes: u16, seed: u64) -> Sim {
        Sim {
            net: Network::new(cfg, nodes).unwrap(),
            rng: simrng::seeded(seed),
            now: VirtualTime::ZERO,
            hosts: BTreeMap::new(),
            frame_hash: 0xcbf2_9ce4_8422_2325,
            frames: 0,
            log: Vec::new(),
        }
    }

    fn add(&mut self, h: HostClient, app: Option<App>) {
        self.hosts.insert(h.node(), (h, app));
    }

    fn host(&mut self, node: u16) -> &mut HostClient {
        &mut self.hosts.get_mut(&n(node)).unwrap().0
    }

    fn hash(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.frame_hash = (self.frame_hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    /// Everything due at `now`: deliveries, then polls, until quiet.
    fn settle(&mut self) {
        for round in 0.. {
            assert!(round < 10_000, "no progress at t={:?}: something polls in a loop", self.now);
            let mut busy = false;
            while self.net.next_delivery_time().is_some_and(|t| t <= self.now) {
                let d = self.net.pop_next().unwrap();
                if let Some((h, _)) = self.hosts.get_mut(&d.to) {
                    h.receive_frame(&d.frame);
                }
            }
            let nodes: Vec<NodeId> = self.hosts.keys().copied().collect();
            for node in nodes {
                let now = self.now;
                let (h, app) = self.hosts.get_mut(&node).unwrap();
                if h.poll_at(now).is_some_and(|t| t <= now) {
                    h.poll(now);
                    if let Some(app) = app {
                        app.run(h);
                    }
                    busy = true;
                }
                let tx = h.take_tx();
                for f in tx {
                    if std::env::var_os("HC_DEBUG").is_some() {
                        eprintln!("t={now:?} {node} {}", describe(&f));
                    }
                    self.frames += 1;
                    self.hash(&now.as_ns().to_le_bytes());
                    self.hash(&node.number().to_le_bytes());
                    self.hash(&f);
                    self.net.send(now, node, &f, &mut self.rng);
                    self.log.push((now, node, f));
                }
            }
            if !busy {
                return;
            }
        }
    }

    fn next_event(&mut self) -> Option<VirtualTime> {
        let now = self.now;
        let hosts = self.hosts.values_mut().filter_map(|(h, _)| h.poll_at(now));
        self.net.next_delivery_time().into_iter().chain(hosts).min()
    }

    /// Runs until `done` holds (true) or virtual time would pass `until` (false).
    fn run_until(&mut self, until: VirtualTime, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        loop {
            self.settle();
            if done(self) {
                return true;
            }
            match self.next_event() {
                Some(t) if t <= until => self.now = t.max(self.now),
                _ => return false,
            }
        }
    }

    /// Starts `request` from node 2 to node 1:80 and runs until it ends.
    fn http(&mut self, request: &[u8], until: VirtualTime) -> Result<HttpResponse, HttpError> {
        let id: HttpId = self.host(2).http_request(n(1), 80, request).unwrap();
        let mut out = None;
        let finished = self.run_until(until, |s| {
            out = s.host(2).take_http(id);
            out.is_some()
        });
        assert!(finished, "exchange did not end by t={until:?}");
        out.unwrap()
    }
}

fn client_cfg(seed: u64) -> HostConfig {
    let cfg = HostConfig::after_guests(1, seed).unwrap();
    assert_eq!(cfg.node, n(2));
    cfg
}

/// Server on node 1 (port 80 HTTP, or echo on `echo`), client on node 2;
/// the server gets the client's timeouts.
fn sim(net: &NetConfig, seed: u64, client: HostConfig, echo: Option<u16>) -> Sim {
    let mut s = Sim::new(net, 2, seed);
    let app = match echo {
        Some(port) => App::Echo { port, conns: Vec::new() },
        None => App::http(80),
    };
    let server = HostConfig { node: n(1), seed: seed ^ 0x5e, ..client.clone() };
    s.add(HostClient::new(server, VirtualTime::ZERO), Some(app));
    s.add(HostClient::new(client, VirtualTime::ZERO), None);
    s
}

#[test]
fn http_request_response_without_faults() {
    let mut s = sim(&NetConfig::default(), 1, client_cfg(1), None);
    let r = s.http(&http::get(n(1), "/"), at(10 * SEC)).unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "hello from n1"));
    assert_eq!(r.header("content-length"), Some("13"));
    // ARP both ways, handshake, request, response, FINs: well under 5 ms on a 100 µs network.
    assert!(s.now < at(5 * MS), "took {:?} ns", s.now);

    let r = s.http(&http::get(n(1), "/chunked"), s.now + 10 * SEC).unwrap();
    assert_eq!(r.body, b"chunk-encoded");
    let r = s.http(&http::get(n(1), "/big/100000"), s.now + 10 * SEC).unwrap();
    assert_eq!(r.body, pattern(100_000));

    // Everything closes and is reaped: no sockets left on the client once
    // TIME-WAIT (if any) lingered out.
    s.run_until(s.now + 20 * SEC, |_| false);
    assert_eq!(s.host(2).socket_count(), 0);
    assert_eq!(s.host(2).http_pending(), 0);
    assert!(s.hosts[&n(1)].1.as_ref().is_some_and(|a| matches!(a, App::Http { served: 3, .. })));
}

#[test]
fn raw_tcp_echo_close_and_refused() {
    let mut s = sim(&NetConfig::default(), 2, client_cfg(2), Some(7));
    let c = s.host(2).connect(n(1), 7).unwrap();
    assert_eq!(s.host(2).state(c), Ok(ConnState::Connecting));
    let data = pattern(300_000); // several windows' worth: exercises the outbound queue
    s.host(2).send(c, &data).unwrap();
    let mut got = Vec::new();
    assert!(s.run_until(at(60 * SEC), |s| {
        got.extend(s.host(2).recv(c).unwrap());
        got.len() >= data.len()
    }));
    assert_eq!(got, data);
    assert_eq!(s.host(2).state(c), Ok(ConnState::Established));
    assert_eq!(s.host(2).remote(c), Ok(Some((n(1), 7))));

    s.host(2).close(c).unwrap();
    assert_eq!(s.host(2).send(c, b"late"), Err(netsim::host::HostError::NotWritable(c)));
    assert!(s.run_until(s.now + 10 * SEC, |s| s.host(2).state(c) == Ok(ConnState::Closed)));
    assert!(s.host(2).peer_closed(c).unwrap());
    s.host(2).release(c).unwrap();
    assert!(s.host(2).state(c).is_err());

    // Nothing listens on 8: the server's stack answers the SYN with a reset.
    let r = s.host(2).connect(n(1), 8).unwrap();
    assert!(s.run_until(s.now + 10 * SEC, |s| s.host(2).state(r).unwrap().is_terminal()));
    assert_eq!(s.host(2).state(r), Ok(ConnState::Failed(ConnError::Refused)));
}

fn lossy() -> NetConfig {
    NetConfig {
        latency: Latency::Uniform { min: 50_000, max: 500_000 },
        loss: 0.2,
        reorder: 0.2,
        duplicate: 0.05,
        reorder_delay: Latency::Uniform { min: 100_000, max: 3_000_000 },
        ..NetConfig::default()
    }
}

/// 20% loss each way, 20% reordering, some duplicates: one 200 KB GET and a
/// few small ones. Returns (frame hash, frame count, virtual end time).
fn lossy_run(seed: u64) -> (u64, u64, VirtualTime) {
    let mut cfg = client_cfg(seed);
    cfg.http_timeout = Some(3600 * SEC);
    cfg.connect_timeout = 60 * SEC;
    let mut s = sim(&lossy(), seed, cfg, None);
    let r = s.http(&http::get(n(1), "/big/200000"), at(3600 * SEC)).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(200_000), "body corrupted under loss/reordering");
    for _ in 0..3 {
        let r = s.http(&http::get(n(1), "/"), s.now + 3600 * SEC).unwrap();
        assert_eq!(r.text(), "hello from n1");
    }
    let st = s.net.stats();
    assert!(st.dropped.loss > 20 && st.reordered > 20 && st.duplicated > 0, "faults happened: {st:?}");
    eprintln!("seed {seed}: {} frames, {:.3} virtual s, {st:?}", s.frames, s.now.as_secs_f64());
    (s.frame_hash, s.frames, s.now)
}

#[test]
fn transfer_completes_under_loss_and_reordering() {
    for seed in [3, 4, 5] {
        lossy_run(seed);
    }
}

#[test]
fn same_seed_same_frames() {
    let a = lossy_run(11);
    let b = lossy_run(11);
    assert_eq!(a, b, "same seed must give the same frames at the same times");
    let c = lossy_run(12);
    assert_ne!(a.0, c.0, "a different seed explores a different execution");
}

#[test]
fn connect_times_out_during_partition_and_works_after_heal() {
    let mut s = sim(&NetConfig::default(), 6, client_cfg(6), None);
    s.net.partition(Partition::symmetric([[n(1)], [n(2)]])).unwrap();
    let start = s.now;
    let e = s.http(&http::get(n(1), "/"), at(60 * SEC)).unwrap_err();
    assert_eq!(e, HttpError::Conn(ConnError::TimedOut));
    let waited = s.now - start;
    assert!((5 * SEC..6 * SEC).contains(&waited), "fails at the 5 s connect timeout, not {waited:?}");
    assert!(s.net.stats().dropped.partition_send > 0, "ARP/SYN attempts hit the partition");
    // The failed attempt leaves nothing behind that would keep polling.
    assert_eq!(s.host(2).socket_count(), 0);
    let now = s.now;
    assert_eq!(s.host(2).poll_at(now), None);

    // A raw connection fails the same way.
    let c = s.host(2).connect(n(1), 80).unwrap();
    assert!(s.run_until(s.now + 60 * SEC, |s| s.host(2).state(c).unwrap().is_terminal()));
    assert_eq!(s.host(2).state(c), Ok(ConnState::Failed(ConnError::TimedOut)));
    s.host(2).release(c).unwrap();

    s.net.heal();
    let r = s.http(&http::get(n(1), "/"), s.now + 60 * SEC).unwrap();
    assert_eq!(r.text(), "hello from n1");
}

#[test]
fn stalled_transfer_times_out_when_partitioned_mid_flight() {
    let mut cfg = client_cfg(7);
    cfg.io_timeout = Some(10 * SEC);
    let mut s = sim(&NetConfig::default(), 7, cfg, Some(7));
    let c = s.host(2).connect(n(1), 7).unwrap();
    assert!(s.run_until(at(10 * SEC), |s| s.host(2).state(c) == Ok(ConnState::Established)));
    s.net.partition(Partition::isolate(n(2))).unwrap();
    s.host(2).send(c, b"into the void").unwrap();
    let t0 = s.now;
    assert!(s.run_until(s.now + 60 * SEC, |s| s.host(2).state(c).unwrap().is_terminal()));
    assert_eq!(s.host(2).state(c), Ok(ConnState::Failed(ConnError::TimedOut)));
    assert!(s.now - t0 >= 10 * SEC && s.now - t0 < 11 * SEC);
}

#[test]
fn many_short_requests_with_light_faults() {
    let net = NetConfig {
        latency: Latency::Uniform { min: 50_000, max: 500_000 },
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        ..NetConfig::default()
    };
    let mut s = sim(&net, 9, client_cfg(9), None);
    for i in 0..3000 {
        let r = s.http(&http::get(n(1), "/"), s.now + 600 * SEC);
        assert_eq!(r.map(|r| r.text()), Ok("hello from n1".to_string()), "request {i} at t={:?}", s.now);
    }
}

/// A copy of a connection's SYN arriving after the connection is up must not
/// reach a spare listener of the same port: smoltcp gives a segment to the
/// first socket that accepts it, the listener would take the copy, and then
/// answer the connection's next ACK with a reset.
#[test]
fn duplicate_syn_does_not_reset_a_connection_behind_a_listener() {
    let mut s = sim(&NetConfig::default(), 10, client_cfg(10), Some(7));
    let up = |s: &mut Sim, c| s.run_until(s.now + SEC, |s| s.host(2).state(c) == Ok(ConnState::Established));
    // x takes the server's first socket slot, y the second, and the echo app
    // then listens on a third; aborting x frees slot 0, and the listener
    // added after z connects takes it: a free listener ahead of y.
    let x = s.host(2).connect(n(1), 7).unwrap();
    assert!(up(&mut s, x));
    let y = s.host(2).connect(n(1), 7).unwrap();
    assert!(up(&mut s, y));
    s.host(2).abort(x).unwrap();
    s.run_until(s.now + 10 * MS, |_| false);
    let z = s.host(2).connect(n(1), 7).unwrap();
    assert!(up(&mut s, z));
    s.run_until(s.now + 10 * MS, |_| false);

    let y_port = s.host(2).local_port(y).unwrap();
    let syn = s
        .log
        .iter()
        .find(|(_, from, f)| *from == n(2) && netsim::host::device::syn_tuple(f).is_some_and(|t| t.1 == y_port))
        .map(|(_, _, f)| f.clone())
        .unwrap();
    s.host(1).receive_frame(&syn);
    s.host(2).send(y, b"still there?").unwrap();
    let mut got = Vec::new();
    assert!(s.run_until(s.now + 10 * SEC, |s| {
        got.extend(s.host(2).recv(y).unwrap());
        got.len() >= 12 || s.host(2).state(y).unwrap().is_terminal()
    }));
    assert_eq!(s.host(2).state(y), Ok(ConnState::Established));
    assert_eq!(got, b"still there?");
}
