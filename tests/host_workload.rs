//! `[workload.host]`: the workload runs on simcluster's host-side client
//! (smoltcp on node N+1) instead of in a guest. It fetches files from a
//! guest's busybox httpd and checks them; a wrong expectation is a workload
//! failure that names the request; loss and reordering are survived, with
//! the same trace every time; bad settings are bad input; the client's
//! traffic is in `host.pcap`.

mod common;
use common::*;

/// n2 serves /data (109 KB: `seq 1 20000`) and /hello over busybox httpd.
const SERVER: &str = "if [ $NODE_ID = 2 ]; then mkdir -p /www; seq 1 20000 > /www/data; \
                      echo hello-from-n2 > /www/hello; httpd -f -p 8080 -h /www; fi";

fn seq(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

/// A 2-node cluster serving HTTP on n2 whose workload is `host` (the body
/// of `[workload.host]`), with `want.txt` (the expected /data) beside it.
fn host_cluster(host: &str, extra: &str) -> tempfile::TempDir {
    let want = seq(20000);
    cluster(
        &format!(
            "[cluster]\nnodes = 2\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n\
             [node]\nstart = {SERVER:?}\n[workload.host]\n{host}\n{extra}"
        ),
        &[("want.txt", &want)],
    )
}

const FETCH: &str = "start_after = \"1s\"\nrepeat = 2\nrequests = [\n\
    { node = \"n2\", port = 8080, path = \"/data\", body_file = \"want.txt\", body_contains = \"19999\\n20000\" },\n\
    { node = \"n2\", port = 8080, path = \"/hello\", body_contains = \"hello-from-n2\" },\n]";

fn events(out: &std::path::Path) -> Vec<serde_json::Value> {
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn the_host_fetches_a_file_and_checks_it() {
    let d = host_cluster(FETCH, "");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["nodes"], 2, "the host client is not a guest");
    // The host client (node 3) sent and received frames like a guest.
    let ev = events(&out.path().join("last"));
    let sends = ev.iter().filter(|e| e["event"] == "send" && e["node"] == 3).count();
    let delivered = ev.iter().filter(|e| e["event"] == "deliver" && e["node"] == 3).count();
    assert!(sends > 10 && delivered > 70, "host sent {sends}, got {delivered}");
    let notes: Vec<&str> =
        ev.iter().filter(|e| e["event"] == "note" && e["node"] == 3).filter_map(|e| e["text"].as_str()).collect();
    let ok = notes.iter().filter(|t| t.contains(": 200 OK")).count();
    assert_eq!(ok, 4, "two rounds of two requests: {notes:#?}");
    assert!(
        notes.iter().any(|t| t.starts_with("request 1/2 (round 2/2) GET n2:8080/data: 200 OK, 108894 bytes")),
        "{notes:#?}"
    );
    // The workload ran and finished on the host, after the nodes were ready.
    assert!(ev.iter().any(|e| e["event"] == "command_done" && e["node"] == 3 && e["status"] == 0), "no workload done");
    // Its capture opens in tshark and shows the handshake with n2.
    let pcap = out.path().join("last/host.pcap");
    assert!(pcap.is_file(), "no host.pcap");
    match std::process::Command::new("tshark").arg("-r").arg(&pcap).output() {
        Err(_) => testkit::skip(
            testkit::Cause::Missing,
            "the tshark check: tshark is not installed (Debian package tshark; scripts/test.sh installs it as root)",
        ),
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("[SYN]") && text.contains("[SYN, ACK]"), "{text}");
            assert!(text.contains("10.0.0.3") && text.contains("10.0.0.2"), "{text}");
            assert!(text.contains("GET /data"), "{text}");
        }
    }
}

#[test]
fn a_wrong_expectation_fails_the_workload_and_names_the_request() {
    let d = host_cluster(
        "start_after = \"1s\"\nrequests = [\n\
         { node = \"n2\", port = 8080, path = \"/hello\", body_contains = \"hello-from-n2\" },\n\
         { node = \"n2\", port = 8080, path = \"/missing\" },\n]",
        "",
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let f = &r.json()["failure"];
    assert_eq!(f["kind"], "workload", "{f}");
    assert_eq!(f["node"], "host", "{f}");
    let msg = f["message"].as_str().unwrap();
    assert!(msg.contains("request 2/2 GET n2:8080/missing") && msg.contains("expected status 200, got 404"), "{msg}");
    // The report names the client "host".
    let dir = out.path().join("failures/execution-0");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("host"), "the report does not show the host client");
    assert!(dir.join("host.pcap").is_file());

    let d = host_cluster(
        "start_after = \"1s\"\nrequests = [ { node = \"n2\", port = 8080, path = \"/hello\", body_contains = \"goodbye\" } ]",
        "",
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("does not contain \"goodbye\"") && msg.contains("hello-from-n2"), "{msg}");
}

#[test]
fn the_host_workload_survives_loss_and_reordering_with_the_same_trace_every_time() {
    let d = host_cluster(
        FETCH,
        "[faults.network]\nloss = 0.2\nreorder = 0.2\nlatency = { min = \"50us\", max = \"500us\" }\n",
    );
    same_trace_every_time(d.path(), 5, &["--seed", "4"], |r, j| {
        assert_eq!(r.code, 0, "the host workload failed under loss: {r:?}");
        let net = &j["network"];
        assert!(net["dropped"]["loss"].as_u64().unwrap() > 0, "no frame was lost: {net}");
        assert!(net["reordered"].as_u64().unwrap() > 0, "no frame was reordered: {net}");
    });
}

#[test]
fn bad_host_workload_settings_are_bad_input() {
    for (host, want) in [
        ("requests = [ { node = \"n7\", port = 8080 } ]", "\"n7\": no such node"),
        ("requests = [ { node = \"n2\", port = 0 } ]", "port = 0"),
        ("requests = [ { node = \"n2\", port = 80, expect = 200 } ]", "expect"),
    ] {
        let d = host_cluster(host, "");
        let r = run(&["run", "--images", d.path().to_str().unwrap()]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains(want), "{want}: {r:?}");
    }
}

#[test]
fn a_partition_can_cut_the_host_client_off() {
    // The host is cut off from 0.5 s to 3 s: its first SYNs (from 1 s) are
    // lost to the partition, a retransmission after the heal gets through.
    let hello = "start_after = \"1s\"\nrequests = [ { node = \"n2\", port = 8080, path = \"/hello\" } ]";
    let cut = |heal: &str| {
        format!("[[faults.partition]]\nat = \"500ms\"\nheal = \"{heal}\"\ngroups = [[\"host\"], [\"n1\", \"n2\"]]\n")
    };
    let d = host_cluster(hello, &cut("3s"));
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let ev = events(&out.path().join("last"));
    let cut_off = ev.iter().filter(|e| e["event"] == "drop" && e["node"] == 3 && e["cause"] == "partition").count();
    assert!(cut_off >= 1, "no frame of the host was cut by the partition");
    // Cut off for longer than the connect timeout (5 s): the request fails.
    let d = host_cluster(hello, &cut("60s"));
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("request 1/1 GET n2:8080/hello: no response: connection timed out"), "{msg}");
}
