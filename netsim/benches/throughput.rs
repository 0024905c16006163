//! Frames per second through `send` + `pop_next`, faults off and on.
//!
//! Plain `std::time::Instant`, no harness: `cargo bench -p netsim`.
//! Each scenario keeps a steady state of frames in flight among 8 nodes
//! (one send every 1 µs of virtual time, 100 µs+ latency, so ~100-500
//! pending), popping everything due before each send, like an engine loop.

use std::hint::black_box;
use std::time::{Duration, Instant};

use netsim::config::{Latency, NetConfig};
use netsim::frame::{arp_request, tcp_flags, tcp_ipv4};
use netsim::{Network, NodeId, SendOutcome};
use simtime::VirtualTime;

const NODES: u16 = 8;

fn n(i: u16) -> NodeId {
    NodeId::new(i).unwrap()
}

struct Figures {
    sends: u64,
    delivered: u64,
    secs: f64,
}

fn run(cfg: &NetConfig, payload: usize, sends: u64, broadcast_every: u64) -> Figures {
    let mut net = Network::new(cfg, NODES).unwrap();
    let mut rng = simrng::seeded(1);
    // Pre-build frames so the benchmark measures netsim, not the builder.
    let frames: Vec<Vec<Vec<u8>>> = (1..=NODES)
        .map(|a| {
            (1..=NODES)
                .map(|b| {
                    if a == b {
                        arp_request(n(a), n(a % NODES + 1))
                    } else {
                        tcp_ipv4(n(a), n(b), 1000, 2000, 0, 0, tcp_flags::ACK, &vec![0u8; payload])
                    }
                })
                .collect()
        })
        .collect();
    let mut out = SendOutcome::default();
    let mut delivered = 0u64;
    let mut now = VirtualTime::ZERO;
    let start = Instant::now();
    for k in 0..sends {
        let a = (k % NODES as u64) as u16 + 1;
        let mut b = ((k / NODES as u64) % NODES as u64) as u16 + 1;
        if broadcast_every == 0 || k % broadcast_every != 0 {
            if b == a {
                b = a % NODES + 1;
            }
        } else {
            b = a; // the ARP broadcast slot
        }
        net.send_into(now, n(a), &frames[a as usize - 1][b as usize - 1], &mut rng, &mut out);
        black_box(&out);
        now += Duration::from_micros(1);
        while net.next_delivery_time().is_some_and(|t| t <= now) {
            let d = net.pop_next().unwrap();
            black_box(&d.frame);
            delivered += 1;
        }
    }
    while let Some(d) = net.pop_next() {
        black_box(&d.frame);
        delivered += 1;
    }
    Figures { sends, delivered, secs: start.elapsed().as_secs_f64() }
}

fn main() {
    let off = NetConfig { latency: Latency::Fixed(100_000), ..NetConfig::default() };
    let on = NetConfig {
        latency: Latency::Uniform { min: 50_000, max: 500_000 },
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        bandwidth: Some(125_000_000),
        ..NetConfig::default()
    };
    let tail = NetConfig {
        latency: Latency::Exponential { min: 50_000, mean: 200_000, max: 5_000_000 },
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        ..NetConfig::default()
    };
    let sends = 1_000_000;
    println!("netsim throughput: {NODES} nodes, {sends} sends per scenario, send + pop_next");
    println!("{:<44} {:>12} {:>14} {:>12}", "scenario", "sends/s", "deliveries/s", "ns/frame");
    for (name, cfg, payload, bcast) in [
        ("faults off, 64 B payload", &off, 64, 0),
        ("faults off, 1400 B payload", &off, 1400, 0),
        ("faults on (1% loss/dup/reorder, 1 Gbit/s)", &on, 64, 0),
        ("faults on, 1400 B payload", &on, 1400, 0),
        ("faults on, exp. latency, 5% each", &tail, 64, 0),
        ("faults on, 1 in 100 sends an ARP broadcast", &on, 64, 100),
    ] {
        let _ = run(cfg, payload, sends / 10, bcast); // warm-up
        let f = run(cfg, payload, sends, bcast);
        println!(
            "{:<44} {:>12.0} {:>14.0} {:>12.1}",
            name,
            f.sends as f64 / f.secs,
            f.delivered as f64 / f.secs,
            f.secs * 1e9 / f.sends as f64
        );
    }
}
