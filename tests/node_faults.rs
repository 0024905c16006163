//! Process pauses (`[faults.pause]`) and clock faults (`[faults.clock]`)
//! end to end, on real guests: programs that cannot tolerate them fail,
//! tolerant ones pass, the guests' clocks read what the trace says they
//! were given, and every fault replays.
//!
//! The guest program is `tests/probes/faults_probe.c` (see its header).

mod common;
use common::*;

const PROBE: &str = include_str!("probes/faults_probe.c");
const GUEST_EPOCH_NS: i64 = 1_767_225_600 * 1_000_000_000;

/// A cluster of `nodes` with the probe at /usr/local/bin/probe; `None`
/// when this host cannot build it (the test then skips).
fn probe_cluster(nodes: u16, start: Option<&str>, workload: &str, extra: &str) -> Option<tempfile::TempDir> {
    let start = start.map(|s| format!("[node]\nstart = {s:?}\n")).unwrap_or_default();
    let d = cluster(
        &format!(
            "[cluster]\nnodes = {nodes}\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n\
             files = {{ \"/usr/local/bin/probe\" = \"probe\" }}\n{start}[workload]\nnode = \"n1\"\ncommand = {workload:?}\n{extra}"
        ),
        &[],
    );
    gcc_static(d.path(), "probe", PROBE).then_some(d)
}

/// n1 pings n2's UDP server every 100 ms and waits 500 ms for each answer;
/// n2's server pauses for 1-2 s.
fn heartbeat(mode: &str) -> Option<tempfile::TempDir> {
    probe_cluster(
        2,
        Some("/usr/local/bin/probe server 7000"),
        &format!("/usr/local/bin/probe heartbeat 10.0.0.2 7000 30 {mode}"),
        "[faults.pause]\nmax = 1\nnodes = [\"n2\"]\nlength = { min = \"1s\", max = \"2s\" }\nspan = \"1s\"\n",
    )
}

fn trace_of(out: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("last/trace.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn events<'a>(trace: &'a [serde_json::Value], kind: &'a str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
    trace.iter().filter(move |e| e["event"] == kind)
}

#[test]
fn a_client_that_declares_a_paused_server_dead_fails_replays_and_shrinks() {
    let Some(d) = heartbeat("strict") else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failure"]["kind"], "workload", "{r:?}");
    assert!(j["failure"]["message"].as_str().unwrap().contains("the server is dead"), "{r:?}");
    assert_eq!(j["pauses"], 1, "{r:?}");
    // The failure file's trace shows the pause on n2 before the client gave up.
    let file = j["failure_file"].as_str().unwrap().to_string();
    let dir = std::path::Path::new(&file).parent().unwrap();
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let pause = trace.find("\"node\":2,\"event\":\"pause\"").expect("a pause of n2");
    assert!(pause < trace.find("the server is dead").unwrap());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("class=\"pausebar open\""), "the pause is drawn, still on at the failure");
    assert!(std::fs::read_to_string(dir.join("report.txt")).unwrap().contains("node faults: 1 pauses"));

    let rep = run(&["replay", "--quiet", &file, "--out", out.path().join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["reproduced"], true, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);

    // It shrinks like any failure, and the pause stays in it.
    let shrunk = out.path().join("shrink");
    let sh = run(&["shrink", "--quiet", &file, "--out", shrunk.to_str().unwrap()]);
    assert_eq!(sh.code, 0, "{sh:?}");
    let trace = std::fs::read_to_string(shrunk.join("shrunk/trace.jsonl")).unwrap();
    assert!(trace.contains("\"node\":2,\"event\":\"pause\"") && trace.contains("the server is dead"), "{trace}");
}

#[test]
fn a_client_that_retries_survives_pauses() {
    let Some(d) = heartbeat("retry") else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1", "--executions", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!((j["failures"].as_u64(), j["pauses"].as_u64()), (Some(0), Some(1)), "{r:?}");
    let trace = trace_of(out.path());
    let pause = events(&trace, "pause").next().expect("a pause");
    let resume = events(&trace, "resume").next().expect("its resume");
    assert_eq!(pause["node"], 2);
    assert_eq!(resume["time"], pause["resume_at"], "the resume is due at the drawn time");
    let length = resume["time"].as_u64().unwrap() - pause["time"].as_u64().unwrap();
    assert!((1_000_000_000..=2_000_000_000).contains(&length), "{length}");
    // The client saw the silence and carried on.
    let said = events(&trace, "console")
        .filter_map(|e| e["text"].as_str())
        .find(|t| t.contains("heartbeats answered"))
        .unwrap();
    assert!(!said.contains(" 0 silences"), "{said}");
}

#[test]
fn the_quiet_period_resumes_a_paused_node_before_the_checks() {
    // The workload ends 3 s in while n2 is paused for 20 s; the check
    // needs n2's server to answer at once.
    let Some(d) = probe_cluster(
        2,
        Some("/usr/local/bin/probe server 7000"),
        "/usr/local/bin/probe heartbeat 10.0.0.2 7000 1000 retry & sleep 3",
        "[[invariant]]\nname = \"server-answers\"\nnode = \"n1\"\ncommand = \"/usr/local/bin/probe heartbeat 10.0.0.2 7000 1 strict\"\n\
         [faults]\nsettle = \"1s\"\n\
         [faults.pause]\nmax = 1\nnodes = [\"n2\"]\nlength = \"20s\"\nspan = \"1s\"\n",
    ) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["pauses"], 1, "{r:?}");
    let trace = trace_of(out.path());
    let pause = events(&trace, "pause").next().unwrap();
    let resume = events(&trace, "resume").next().expect("resumed");
    let quiet = events(&trace, "note").find(|e| e["text"].as_str().unwrap().starts_with("quiet period")).unwrap();
    assert_eq!(resume["time"], quiet["time"], "resumed when the quiet period began");
    assert!(resume["time"].as_u64() < pause["resume_at"].as_u64());
}

#[test]
fn a_crash_ends_a_pause_and_the_node_comes_back_running() {
    // n1 pings n2 (its kernel answers even while its server is paused, so
    // n2 has frames in flight) and heartbeats it with retries; n2 pauses
    // for 5 s and, with seed 1, loses power during the pause.
    let Some(d) = probe_cluster(
        2,
        Some("/usr/local/bin/probe server 7000"),
        "ping -q -c 40 -i 0.1 10.0.0.2 >/dev/null & /usr/local/bin/probe heartbeat 10.0.0.2 7000 20 retry",
        "[faults.pause]\nmax = 1\nnodes = [\"n2\"]\nlength = \"5s\"\nspan = \"1ms\"\n\
         [faults.crash]\nmax = 1\nspan = \"2s\"\nweight = 1000\nrestart_after = \"1s\"\n",
    ) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!((r.json()["pauses"].as_u64(), r.json()["crashes"].as_u64()), (Some(1), Some(1)), "{r:?}");
    let trace = trace_of(out.path());
    let at = |kind: &str| events(&trace, kind).find(|e| e["node"] == 2).map(|e| e["time"].as_u64().unwrap());
    let (pause, crash, restart) = (at("pause").unwrap(), at("crash").unwrap(), at("restart").unwrap());
    assert!(pause < crash && crash < restart, "{pause} {crash} {restart}");
    assert!(events(&trace, "note").any(|e| e["text"] == "the crash ends n2's pause"));
    assert_eq!(at("resume"), None, "nothing is left to resume after the crash");
}

/// n1 watches one of its clocks for 4 s while its wall clock is bumped
/// back (and strobed, with `strobe`).
fn watch(clock: &str, faults: &str) -> Option<tempfile::TempDir> {
    probe_cluster(
        1,
        None,
        &format!("/usr/local/bin/probe {clock} 4"),
        &format!("[faults.clock]\nspan = \"1s\"\n{faults}"),
    )
}

#[test]
fn a_program_that_trusts_the_wall_clock_fails_under_a_bump() {
    let Some(d) = watch("wall", "bump = { min = \"-2s\", max = \"-1s\" }\n") else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!((j["clock_bumps"].as_u64(), j["failure"]["kind"].as_str()), (Some(1), Some("workload")), "{r:?}");
    let trace = trace_of(out.path());
    let bump = events(&trace, "clock_bump").next().expect("a bump").clone();
    let delta = bump["delta_ns"].as_i64().unwrap();
    assert!((-2_000_000_000..=-1_000_000_000).contains(&delta), "{delta}");
    // The program saw its clock go back by the bump, less the 10 ms it slept.
    let said =
        events(&trace, "console").filter_map(|e| e["text"].as_str()).find(|t| t.contains("went back by")).unwrap();
    let back: i64 = said.split_whitespace().nth(6).unwrap().parse().unwrap();
    assert!((-delta - back).abs() < 20_000_000, "{said} against {delta}");
}

#[test]
fn the_monotonic_clock_never_goes_back_under_bumps_and_strobes() {
    let faults = "bump = { min = \"-2s\", max = \"-1s\" }\nstrobe = { delta = \"-300ms\", period = \"20ms\", length = \"500ms\" }\nmax = 3\n";
    let Some(d) = watch("mono", faults) else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let jumps = j["clock_bumps"].as_u64().unwrap() + j["clock_strobes"].as_u64().unwrap();
    assert_eq!(jumps, 3, "{r:?}");
    assert!(j["clock_strobes"].as_u64().unwrap() >= 1, "seed 1 strobes: {r:?}");
    // The wall clock did go back meanwhile, once per bump and at every
    // half-period of a strobe.
    let trace = trace_of(out.path());
    let said =
        events(&trace, "console").filter_map(|e| e["text"].as_str()).find(|t| t.contains("never went back")).unwrap();
    let back: u64 = said.split_whitespace().nth(11).unwrap().parse().unwrap();
    assert!(back > jumps, "{said}");
}

#[test]
fn clocks_compared_across_nodes_fail_under_an_offset() {
    let skew = "/usr/local/bin/probe skew 10.0.0.2 7000 100";
    let server = Some("/usr/local/bin/probe server 7000");
    // Without clock faults the two clocks agree within the bound...
    let Some(d) = probe_cluster(2, server, skew, "") else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["clock_offsets"], 0);
    // ... and with n2 booted seconds ahead they do not.
    let offset = "[faults.clock]\noffset = { min = \"2s\", max = \"3s\" }\nnodes = [\"n2\"]\n";
    let d = probe_cluster(2, server, skew, offset).unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!((j["clock_offsets"].as_u64(), j["failure"]["kind"].as_str()), (Some(1), Some("workload")), "{r:?}");
}

/// (virtual time, monotonic ns, realtime ns) of each `tick` line of `node`.
fn ticks(trace: &[serde_json::Value], node: u64) -> Vec<(i64, i64, i64)> {
    events(trace, "console")
        .filter(|e| e["node"] == node)
        .filter_map(|e| {
            let mut w = e["text"].as_str()?.strip_prefix("tick ")?.split(' ');
            Some((e["time"].as_i64()?, w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn offsets_and_drift_are_what_the_guests_clocks_read() {
    // Every node prints its clocks each second of its own for 10 s; n2
    // and n3 boot with an offset and a drift, n1 with neither.
    let faults = "[faults.clock]\noffset = { min = \"-5s\", max = \"5s\" }\ndrift_ppm = { min = -90000, max = 90000 }\nnodes = [\"n2\", \"n3\"]\n";
    let Some(d) = probe_cluster(3, Some("/usr/local/bin/probe ticks 10"), "sleep 12", faults) else { return };
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!((r.json()["clock_offsets"].as_u64(), r.json()["clock_drifts"].as_u64()), (Some(2), Some(2)));
    let trace = trace_of(out.path());
    let given = |kind: &str, key: &str, node: u64| {
        events(&trace, kind).find(|e| e["node"] == node).map(|e| e[key].as_i64().unwrap())
    };
    let mut signs = std::collections::BTreeSet::new();
    for node in 1..=3u64 {
        let (offset, ppm) = (given("clock_offset", "offset_ns", node), given("clock_drift", "ppm", node));
        assert_eq!(offset.is_some(), node > 1, "node {node}");
        let t = ticks(&trace, node);
        assert_eq!(t.len(), 11, "node {node}: {t:?}");
        // At the first tick (init set the drift a moment before) the wall
        // clock is the cluster's date plus virtual time plus the offset.
        let (t0, m0, r0) = t[0];
        let expected = GUEST_EPOCH_NS + t0 + offset.unwrap_or(0);
        assert!((r0 - expected).abs() < 2_000_000, "node {node}: wall clock {r0}, expected {expected}");
        // Over the next 10 s of its own, both clocks ran at 1 + ppm/1e6 of
        // virtual time.
        let (t1, m1, r1) = t[10];
        let rate = (m1 - m0) as f64 / (t1 - t0) as f64;
        let want = 1.0 + ppm.unwrap_or(0) as f64 / 1e6;
        assert!((rate - want).abs() < 1e-5, "node {node}: monotonic at {rate}, expected {want}");
        let wall_rate = (r1 - r0) as f64 / (t1 - t0) as f64;
        assert!((wall_rate - want).abs() < 1e-5, "node {node}: wall clock at {wall_rate}, expected {want}");
        signs.insert(ppm.map(i64::signum));
    }
    assert_eq!(signs.len(), 3, "seed 4 drifts one node fast and one slow: {signs:?}");
}

#[test]
fn every_new_fault_at_once_gives_the_same_trace_every_time() {
    let faults = "[faults.pause]\nmax = 2\nlength = { min = \"300ms\", max = \"1s\" }\nspan = \"1s\"\n\
                  [faults.clock]\noffset = { min = \"-1s\", max = \"1s\" }\ndrift_ppm = { min = -20000, max = 20000 }\n\
                  bump = { min = \"-1s\", max = \"1s\" }\nstrobe = { delta = \"100ms\", period = \"20ms\", length = \"200ms\" }\n\
                  max = 3\nspan = \"1s\"\n";
    let Some(d) = probe_cluster(
        3,
        Some("/usr/local/bin/probe server 7000"),
        "/usr/local/bin/probe heartbeat 10.0.0.2 7000 30 retry",
        faults,
    ) else {
        return;
    };
    same_trace_every_time(d.path(), 5, &["--seed", "3"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert!(j["pauses"].as_u64().unwrap() >= 1, "{r:?}");
        assert_eq!(j["clock_bumps"].as_u64().unwrap() + j["clock_strobes"].as_u64().unwrap(), 3, "{r:?}");
        assert_eq!((j["clock_offsets"].as_u64(), j["clock_drifts"].as_u64()), (Some(3), Some(3)), "{r:?}");
    });
}

#[test]
fn without_a_c_compiler_only_clusters_with_clock_faults_fail_to_build() {
    let no_cc = [("CC", "/nonexistent/simcluster-cc")];
    let build = |d: &std::path::Path| {
        let out = bin().args(["image", "build", "--quiet"]).arg(d).envs(no_cc).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let plain = simple(1, None, "true", "[faults.clock]\noffset = \"1s\"\n");
    assert_eq!(build(plain.path()).0, Some(0), "an offset needs no helper in the guest");
    let bumped = simple(1, None, "true", "[faults.clock]\nbump = \"1s\"\n");
    let (code, stderr) = build(bumped.path());
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("cluster.toml") && stderr.contains("[faults.clock] needs a C compiler"), "{stderr}");
}

/// A coordinated power failure (`[faults.crash] power_failure`): n1 pings
/// n2 and n3 (so both have frames in flight), and both lose power at one
/// instant, each a crash of the budget, then boot again together.
#[test]
fn a_power_failure_takes_several_nodes_down_at_one_instant() {
    let Some(d) = probe_cluster(
        3,
        Some("/usr/local/bin/probe server 7000"),
        "ping -q -c 30 -i 0.1 10.0.0.2 >/dev/null & ping -q -c 30 -i 0.1 10.0.0.3 >/dev/null; wait",
        "[faults.crash]\nmax = 2\nnodes = [\"n2\", \"n3\"]\npower_failure = true\nspan = \"1s\"\nweight = 1000\n\
         restart_after = \"1s\"\n",
    ) else {
        return;
    };
    // A seed whose random walk picks the power failure over a single crash
    // (each is a choice of its own; seeds 1 and 3 of 1-6 do).
    same_trace_every_time(d.path(), 2, &["--seed", "1"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!((j["power_failures"].as_u64(), j["crashes"].as_u64()), (Some(1), Some(2)), "{j}");
    });
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let trace = trace_of(out.path());
    let failure = events(&trace, "power_failure").next().expect("a power failure").clone();
    assert_eq!(failure["nodes"], serde_json::json!(["n2", "n3"]), "{failure}");
    let crashes: Vec<&serde_json::Value> = events(&trace, "crash").collect();
    assert_eq!(crashes.len(), 2);
    assert!(crashes.iter().all(|c| c["time"] == failure["time"]), "one instant: {crashes:?}");
    let restarts: Vec<u64> = events(&trace, "restart").map(|e| e["time"].as_u64().unwrap()).collect();
    let at = failure["time"].as_u64().unwrap();
    assert_eq!(restarts, [at + 1_000_000_000, at + 1_000_000_000], "both boot again restart_after later");
}
