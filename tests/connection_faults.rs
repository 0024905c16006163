//! Connection faults (`[faults.connection]`) end to end, on real guests:
//! a reset TCP connection makes both programs see "Connection reset by
//! peer", a stalled connection's answers come late while another
//! connection to the same server flows, and each replays to the same
//! trace.
//!
//! The guest program is `tests/probes/conn_probe.c` (see its header).

mod common;
use common::*;

const PROBE: &str = include_str!("probes/conn_probe.c");

/// Two nodes: n2 serves TCP port 7000, n1 runs `workload`; `None` when
/// this host cannot build the probe (the test then skips).
fn conn_cluster(workload: &str, faults: &str) -> Option<tempfile::TempDir> {
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 2\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/conn\" = \"conn\" }}\n[node]\nstart = \"/usr/local/bin/conn server 7000\"\n\
             [workload]\nnode = \"n1\"\ncommand = {workload:?}\n[faults.connection]\n{faults}"
        ),
        &[],
    );
    gcc_static(d.path(), "conn", PROBE).then_some(d)
}

fn trace_of(out: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("last/trace.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn events<'a>(trace: &'a [serde_json::Value], kind: &'a str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
    trace.iter().filter(move |e| e["event"] == kind)
}

/// The console lines of `trace` that contain `text`.
fn console_with(trace: &[serde_json::Value], text: &str) -> Vec<String> {
    events(trace, "console")
        .filter_map(|e| e["line"].as_str().or_else(|| e["text"].as_str()))
        .filter(|l| l.contains(text))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_reset_connection_is_reset_for_both_ends_and_replays() {
    let Some(d) =
        conn_cluster("/usr/local/bin/conn client 10.0.0.2 7000 60 A", "resets = 1\nspan = \"1s\"\nweight = 100000\n")
    else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 1, "the client fails: {r:?}");
    let j = r.json();
    assert_eq!(j["failure"]["kind"], "workload", "{r:?}");
    assert_eq!(j["conn_resets"], 1, "{j}");
    let trace = trace_of(out.path());
    let reset = events(&trace, "conn_reset").next().expect("a conn_reset event").clone();
    assert!(reset["a"].as_str().unwrap().starts_with("n1:"), "{reset}");
    assert_eq!(reset["b"], "n2:7000", "{reset}");
    let client = console_with(&trace, "client A:");
    assert!(client.iter().any(|l| l.contains("Connection reset by peer")), "the client: {client:?}");
    let server = console_with(&trace, "server: read:");
    assert!(server.iter().any(|l| l.contains("Connection reset by peer")), "the server: {server:?}");
    // The RSTs are sends of the engine's, delivered to each end.
    let rsts: Vec<&serde_json::Value> =
        events(&trace, "send").filter(|e| e["summary"].as_str().unwrap().contains("[.R]")).collect();
    assert_eq!(rsts.len(), 2, "{rsts:?}");
    let file = j["failure_file"].as_str().unwrap().to_string();
    let dir = std::path::Path::new(&file).parent().unwrap();
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(text.contains("connection faults: 1 resets, 0 stalls"), "{text}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("connection faults") && html.contains("connection reset: n1:"), "the chip and the event");

    // The failure replays to the same trace.
    let rep = run(&["replay", "--quiet", &file, "--out", out.path().join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["reproduced"], true, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
}

#[test]
fn a_stalled_connection_answers_late_while_another_flows_the_same_every_time() {
    let Some(d) = conn_cluster(
        "/usr/local/bin/conn client 10.0.0.2 7000 40 A & /usr/local/bin/conn client 10.0.0.2 7000 40 B; wait",
        "stalls = 1\nstall_for = \"2s\"\nspan = \"1s\"\nweight = 100000\n",
    ) else {
        return;
    };
    same_trace_every_time(d.path(), 2, &["--seed", "1"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(j["conn_stalls"], 1, "{j}");
    });
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let trace = trace_of(out.path());
    let stall = events(&trace, "conn_stall").next().expect("a conn_stall event").clone();
    let until = stall["until"].as_u64().unwrap();
    assert_eq!(until - stall["time"].as_u64().unwrap(), 2_000_000_000, "{stall}");
    // One client waited out the stall, the other did not notice it.
    let rtt = |name: &str| {
        let line = console_with(&trace, &format!("client {name}: 40 answers")).pop().expect("the client's summary");
        let ms: u64 = line.split("max rtt ").nth(1).unwrap().trim_end_matches(" ms").trim().parse().unwrap();
        ms
    };
    let (a, b) = (rtt("A"), rtt("B"));
    let (slow, fast) = (a.max(b), a.min(b));
    assert!(slow >= 1_500, "the stalled connection's answer waited: A {a} ms, B {b} ms ({stall})");
    assert!(fast < 1_000, "the other connection flowed: A {a} ms, B {b} ms ({stall})");
}
