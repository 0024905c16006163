//! A TCP handshake captured to pcap and read back by tshark (when installed).

use std::io::Write;
use std::process::Command;

use netsim::config::{Latency, NetConfig};
use netsim::frame::{tcp_flags::*, tcp_ipv4};
use netsim::pcap::{Capture, MAGIC_NANOS};
use netsim::{Network, NodeId};
use simtime::VirtualTime;

fn copies(o: netsim::SendOutcome) -> Vec<netsim::ScheduledDelivery> {
    o.into_iter().collect()
}

fn n(i: u16) -> NodeId {
    NodeId::new(i).unwrap()
}

/// Runs SYN / SYN-ACK / ACK through a 2-node network with 100 µs latency,
/// with the first SYN sent at 1.000000123 s of virtual time (to check that
/// nanoseconds survive). Returns (node 1, node 2, whole network) captures.
fn handshake() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut net = Network::new(&NetConfig { latency: Latency::Fixed(100_000), ..NetConfig::default() }, 2).unwrap();
    let mut rng = simrng::seeded(0);
    let mut cap = Capture::new();
    cap.add_node(n(1), Vec::new()).unwrap();
    cap.add_node(n(2), Vec::new()).unwrap();
    cap.set_network(Vec::new()).unwrap();
    let steps = [
        (n(1), tcp_ipv4(n(1), n(2), 40000, 5432, 1000, 0, SYN, &[])),
        (n(2), tcp_ipv4(n(2), n(1), 5432, 40000, 7000, 1001, SYN | ACK, &[])),
        (n(1), tcp_ipv4(n(1), n(2), 40000, 5432, 1001, 7001, ACK, &[])),
    ];
    let mut now = VirtualTime::from_ns(1_000_000_123);
    for (from, f) in steps {
        cap.on_send(now, from, &f).unwrap();
        assert_eq!(copies(net.send(now, from, &f, &mut rng)).len(), 1);
        let d = net.pop_next().unwrap();
        cap.on_deliver(&d).unwrap();
        now = d.time;
    }
    let (mut nodes, all) = cap.into_parts();
    (nodes.remove(&n(1)).unwrap(), nodes.remove(&n(2)).unwrap(), all.unwrap())
}

#[test]
fn pcap_bytes() {
    let (a, b, all) = handshake();
    for p in [&a, &b, &all] {
        assert_eq!(&p[..4], &MAGIC_NANOS.to_le_bytes());
        assert_eq!(&p[20..24], &1u32.to_le_bytes(), "LINKTYPE_ETHERNET");
    }
    // First record of node 1: the SYN at 1 s + 123 ns, 54 bytes.
    assert_eq!(&a[24..28], &1u32.to_le_bytes());
    assert_eq!(&a[28..32], &123u32.to_le_bytes());
    assert_eq!(&a[32..36], &54u32.to_le_bytes());
    // Each capture holds 3 frames of 54 bytes (node: 2 sent + 1 received or
    // 1 sent + 2 received; network: 3 sent).
    for p in [&a, &b, &all] {
        assert_eq!(p.len(), 24 + 3 * (16 + 54));
    }
    let (a2, b2, all2) = handshake();
    assert_eq!((a, b, all), (a2, b2, all2), "captures are reproducible");
}

#[test]
fn tshark_reads_handshake() {
    if Command::new("tshark").arg("--version").output().is_err() {
        testkit::skip(
            testkit::Cause::Missing,
            "tshark is not installed (Debian package tshark; scripts/test.sh installs it as root); pcap_bytes checked the header",
        );
        return;
    }
    let (_, b, all) = handshake();
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        let out = Command::new("tshark")
            .args([
                "-n",
                "-o",
                "tcp.check_checksum:TRUE",
                "-o",
                "ip.check_checksum:TRUE",
                "-o",
                "tcp.relative_sequence_numbers:FALSE",
            ])
            .args(["-T", "fields", "-E", "separator=|"])
            .args([
                "-e",
                "frame.time_epoch",
                "-e",
                "ip.src",
                "-e",
                "ip.dst",
                "-e",
                "tcp.flags.str",
                "-e",
                "tcp.checksum.status",
                "-e",
                "ip.checksum.status",
            ])
            .arg("-r")
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
        text
    };
    let text = check("net.pcap", &all);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), 3, "{text}");
    let flags: Vec<String> = rows.iter().map(|r| r[3].replace('\u{b7}', "")).collect();
    assert!(flags[0].ends_with('S') && !flags[0].contains('A'), "SYN: {text}");
    assert!(flags[1].contains('A') && flags[1].ends_with('S'), "SYN-ACK: {text}");
    assert!(flags[2].ends_with('A') && !flags[2].contains('S'), "ACK: {text}");
    assert_eq!((rows[0][1], rows[0][2]), ("10.0.0.1", "10.0.0.2"));
    assert_eq!((rows[1][1], rows[1][2]), ("10.0.0.2", "10.0.0.1"));
    assert!(rows[0][0].starts_with("1.000000123"), "nanosecond virtual timestamp: {text}");
    assert!(rows[1][0].starts_with("1.000100123"), "{text}");
    // Wireshark's checksum status: 0 bad, 1 good, 2 unverified.
    for r in &rows {
        assert_eq!(r[4], "1", "tcp checksum good: {text}");
        assert_eq!(r[5].trim(), "1", "ip checksum good: {text}");
    }
    // And the default summary view names the handshake.
    let path = dir.path().join("n2.pcap");
    std::fs::write(&path, &b).unwrap();
    let out = Command::new("tshark").arg("-n").arg("-r").arg(&path).output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("[SYN]") && summary.contains("[SYN, ACK]") && summary.contains("[ACK]"), "{summary}");
    eprintln!("{summary}");
}
