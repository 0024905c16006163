//! Small HTTP requests through `HostClient` + `Network`: requests per wall
//! second and wall µs per frame.
//!
//! Plain `std::time::Instant`, no harness: `cargo bench -p netsim --bench
//! host_client`. Node 1 stands in for a guest with a minimal HTTP server on
//! a second `HostClient` (it answers `200 ok` and closes, like busybox
//! httpd); node 2 is the workload's client issuing `GET /` with
//! `HostClient::http_request`, `concurrency` at a time. The loop is the
//! engine's: advance to the earliest of the next delivery and the clients'
//! `poll_at`, deliver, poll, send what they transmitted. Wall time covers
//! both stacks, the server logic and netsim, i.e. what one request costs a
//! simulation in which the client talks to a real guest, plus a second
//! smoltcp in place of the guest's kernel.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use netsim::config::{Latency, NetConfig};
use netsim::host::{http, ConnId, ConnState, HostClient, HostConfig, HttpId};
use netsim::{Network, NodeId};
use simtime::VirtualTime;

fn n(i: u16) -> NodeId {
    NodeId::new(i).unwrap()
}

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

/// Answers each complete request head with `RESPONSE` and closes.
struct Server {
    backlog: usize,
    conns: BTreeMap<ConnId, Vec<u8>>,
}

impl Server {
    fn run(&mut self, h: &mut HostClient) {
        let mut ended = Vec::new();
        let mut listening = 0;
        for (&id, req) in self.conns.iter_mut() {
            match h.state(id).unwrap() {
                s if s.is_terminal() => ended.push(id),
                ConnState::Listening => listening += 1,
                ConnState::Established => {
                    req.extend(h.recv(id).unwrap());
                    if req.windows(4).any(|w| w == b"\r\n\r\n") {
                        req.clear();
                        h.send(id, RESPONSE).unwrap();
                        h.close(id).unwrap();
                    }
                }
                _ => {}
            }
        }
        for id in ended {
            self.conns.remove(&id);
            h.release(id).unwrap();
        }
        for _ in listening..self.backlog {
            self.conns.insert(h.listen(80).unwrap(), Vec::new());
        }
    }
}

struct Figures {
    requests: u64,
    frames: u64,
    virtual_ns: u64,
    secs: f64,
}

fn run(cfg: &NetConfig, requests: u64, concurrency: usize) -> Figures {
    let mut net = Network::new(cfg, 2).unwrap();
    let mut rng = simrng::seeded(1);
    // The server stands in for a guest, whose TIME-WAIT sockets live in its
    // kernel; a short one keeps its socket set small, as in the real setup.
    let server_cfg = HostConfig { max_time_wait: Duration::from_millis(1), ..HostConfig::new(n(1), 7) };
    let mut server = HostClient::new(server_cfg, VirtualTime::ZERO);
    let mut client = HostClient::new(HostConfig::after_guests(1, 8).unwrap(), VirtualTime::ZERO);
    let mut app = Server { backlog: concurrency + 1, conns: BTreeMap::new() };
    let request = http::get(n(1), "/");
    let mut inflight: Vec<HttpId> = Vec::new();
    let (mut started, mut done, mut frames, mut now) = (0u64, 0u64, 0u64, VirtualTime::ZERO);

    let start = Instant::now();
    app.run(&mut server);
    while done < requests {
        while inflight.len() < concurrency && started < requests {
            inflight.push(client.http_request(n(1), 80, &request).unwrap());
            started += 1;
        }
        // Everything due now: deliveries, then polls, until quiet.
        loop {
            while net.next_delivery_time().is_some_and(|t| t <= now) {
                let d = net.pop_next().unwrap();
                if d.to == n(1) { &mut server } else { &mut client }.receive_frame(&d.frame);
            }
            let mut busy = false;
            for (node, h) in [(n(1), &mut server), (n(2), &mut client)] {
                if h.poll_at(now).is_some_and(|t| t <= now) {
                    h.poll(now);
                    if node == n(1) {
                        app.run(h);
                    }
                    busy = true;
                }
                for f in h.take_tx() {
                    frames += 1;
                    net.send(now, node, &f, &mut rng);
                }
            }
            if !busy {
                break;
            }
        }
        inflight.retain(|&id| match client.take_http(id) {
            Some(r) => {
                let r = r.expect("request failed");
                assert_eq!(r.body, b"ok");
                black_box(r);
                done += 1;
                false
            }
            None => true,
        });
        if inflight.len() < concurrency && started < requests {
            continue;
        }
        let next = [net.next_delivery_time(), server.poll_at(now), client.poll_at(now)].into_iter().flatten().min();
        now = next.expect("requests in flight, so something is scheduled").max(now);
    }
    Figures { requests, frames, virtual_ns: now.as_ns(), secs: start.elapsed().as_secs_f64() }
}

fn main() {
    let clean = NetConfig { latency: Latency::Fixed(100_000), ..NetConfig::default() };
    let faulty = NetConfig {
        latency: Latency::Uniform { min: 50_000, max: 500_000 },
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        ..NetConfig::default()
    };
    let requests = 20_000;
    println!("host_client: GET / -> 200 ok (2 B body), {requests} requests per scenario, HostClient x2 + netsim");
    println!(
        "{:<40} {:>10} {:>12} {:>10} {:>12} {:>14}",
        "scenario", "req/s", "frames/req", "us/frame", "us/req", "virt. latency us"
    );
    for (name, cfg, conc) in [
        ("faults off, 1 at a time", &clean, 1),
        ("faults off, 16 concurrent", &clean, 16),
        ("1% loss/dup/reorder, 1 at a time", &faulty, 1),
        ("1% loss/dup/reorder, 16 concurrent", &faulty, 16),
    ] {
        let _ = run(cfg, requests / 10, conc); // warm-up
        let f = run(cfg, requests, conc);
        println!(
            "{:<40} {:>10.0} {:>12.1} {:>10.2} {:>12.1} {:>14.1}",
            name,
            f.requests as f64 / f.secs,
            f.frames as f64 / f.requests as f64,
            f.secs * 1e6 / f.frames as f64,
            f.secs * 1e6 / f.requests as f64,
            f.virtual_ns as f64 / 1e3 / f.requests as f64 * conc as f64,
        );
    }
}
