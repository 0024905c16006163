//! The simulated network with real guests: TCP works, survives loss and
//! reordering, stops at a partition and resumes after the heal, one-way
//! partitions are one-way, traffic is captured as pcap, and faults stay
//! deterministic.

mod common;
use common::*;

/// n2 serves 109 KB over HTTP (busybox httpd); n1 fetches it over TCP and
/// checks every byte against what it expects.
const SERVER: &str = "if [ $NODE_ID = 2 ]; then mkdir -p /www; seq 1 20000 > /www/data; httpd -f -p 8080 -h /www; fi";
const FETCH: &str = "seq 1 20000 > /tmp/want; sleep 1; wget -q -O /tmp/got http://10.0.0.2:8080/data; \
                     test \"$(md5sum < /tmp/got)\" = \"$(md5sum < /tmp/want)\" && echo CONTENT-OK";

fn tcp_cluster(faults: &str) -> tempfile::TempDir {
    simple(2, Some(SERVER), FETCH, faults)
}

#[test]
fn tcp_between_two_nodes_and_its_pcap() {
    let d = tcp_cluster("");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let net = &r.json()["network"];
    assert!(net["delivered"].as_u64().unwrap() > 20, "{net}");
    assert_eq!(net["dropped"]["loss"], 0);
    // The capture opens in tshark and shows the handshake.
    let pcap = out.path().join("last/n1.pcap");
    assert!(pcap.is_file() && out.path().join("last/network.pcap").is_file());
    match std::process::Command::new("tshark").arg("-r").arg(&pcap).output() {
        Err(_) => testkit::skip(
            testkit::Cause::Missing,
            "the tshark check: tshark is not installed (Debian package tshark; scripts/test.sh installs it as root)",
        ),
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("[SYN]") && text.contains("[SYN, ACK]"), "{text}");
            assert!(text.contains("10.0.0.1") && text.contains("10.0.0.2"), "{text}");
        }
    }
}

#[test]
fn tcp_survives_loss_and_reordering_with_the_same_trace_every_time() {
    let d = tcp_cluster("[faults.network]\nloss = 0.2\nreorder = 0.2\nlatency = { min = \"50us\", max = \"500us\" }\n");
    same_trace_every_time(d.path(), 5, &["--seed", "4"], |r, j| {
        assert_eq!(r.code, 0, "transfer failed under loss: {r:?}");
        let net = &j["network"];
        assert!(net["dropped"]["loss"].as_u64().unwrap() > 0, "no frame was lost: {net}");
        assert!(net["reordered"].as_u64().unwrap() > 0, "no frame was reordered: {net}");
    });
}

#[test]
fn a_partition_blocks_connections_until_it_heals() {
    let d = simple(
        2,
        Some("if [ $NODE_ID = 2 ]; then while :; do nc -l -p 5000 </dev/null >/dev/null; done; fi"),
        "sleep 2; if nc -w 3 10.0.0.2 5000 </dev/null; then echo CONNECTED-DURING-PARTITION; exit 1; fi; \
         echo refused-during-partition; sleep 20; nc -w 3 10.0.0.2 5000 </dev/null && echo CONNECTED-AFTER-HEAL",
        "[[faults.partition]]\nat = \"1s\"\nheal = \"15s\"\ngroups = [[\"n1\"], [\"n2\"]]\n",
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let log = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap();
    assert!(log.contains("refused-during-partition") && log.contains("CONNECTED-AFTER-HEAL"), "{log}");
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    assert!(trace.contains("\"event\":\"partition\"") && trace.contains("\"event\":\"heal\""));
    assert!(trace.contains("\"cause\":\"partition\""), "no frame was dropped by the partition");
}

#[test]
fn a_one_way_partition_is_one_way() {
    // n1 -> n2 is cut from 1 s on; n2 -> n1 passes. Both ping each other.
    let d = simple(
        2,
        Some("if [ $NODE_ID = 2 ]; then sleep 2; ping -c 3 10.0.0.1 >/dev/null; fi; true"),
        "sleep 2; ping -c 3 10.0.0.2; true",
        "[[faults.partition]]\nat = \"1s\"\nheal = \"100s\"\nfrom = [\"n1\"]\nto = [\"n2\"]\n",
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let after_cut = |e: &&serde_json::Value| e["time"].as_u64().unwrap() > 1_000_000_000;
    let n2_to_n1 =
        events.iter().filter(after_cut).filter(|e| e["event"] == "deliver" && e["node"] == 1 && e["from"] == 2).count();
    let n1_to_n2 =
        events.iter().filter(after_cut).filter(|e| e["event"] == "deliver" && e["node"] == 2 && e["from"] == 1).count();
    let cut = events.iter().filter(|e| e["event"] == "drop" && e["node"] == 1 && e["cause"] == "partition").count();
    assert!(n2_to_n1 >= 3, "n2's echo requests should reach n1 ({n2_to_n1} did)");
    assert_eq!(n1_to_n2, 0, "a frame crossed the cut direction");
    assert!(cut >= 6, "n1's requests and replies should be cut ({cut} were)");
}

#[test]
fn bad_fault_settings_are_bad_input() {
    let d = simple(2, None, "true", "[faults.network]\nloss = 1.5\n");
    let r = run(&["run", "--images", d.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("loss") && r.stderr.contains("1.5"), "{r:?}");
    let d =
        simple(2, None, "true", "[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\"], [\"n7\"]]\n");
    let r = run(&["run", "--images", d.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("\"n7\": no such node"), "{r:?}");
}
