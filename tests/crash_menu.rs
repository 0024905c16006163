//! The rest of the crash menu end to end, on real guests: a process kill
//! (`[faults.kill]`), crashes at fixed times (`[[faults.crash.schedule]]`)
//! and restart delays drawn from a range or set per node
//! (`[faults.crash] restart_after = "1s..5s"`, `restart_after_by_node`).
//!
//! The service on every node appends a line to `/data/log` on the data
//! disk without fsync, so the line sits in the guest's page cache (ext4
//! commits it about 5 s later), and says how many lines it found. A kill
//! leaves the page cache alone: the service comes back and finds both
//! lines. A power loss a second later takes the page cache: the line is
//! gone after the reboot.

mod common;
use common::*;

/// Appends to the log (no fsync), prints the count, then waits forever.
const SERVICE: &str = "echo up >> /data/log; echo \"service up: $(wc -l < /data/log) lines\"; exec sleep 100000";

/// `nodes` nodes with the service and a data disk; the workload (on n1)
/// sleeps `sleep` seconds; `extra` is appended to cluster.toml.
fn service_cluster(nodes: u16, sleep: u32, extra: &str) -> tempfile::TempDir {
    simple(
        nodes,
        Some(SERVICE),
        &format!("sleep {sleep}"),
        &format!("[disk]\nsize_mb = 16\nmount = \"/data\"\n[faults]\nsettle = \"1s\"\n{extra}"),
    )
}

/// The invariant: n2's log holds `lines` lines.
fn log_holds(lines: u32) -> String {
    format!("[[invariant]]\nname = \"log-lines\"\nnode = \"n2\"\ncommand = \"test $(wc -l < /data/log) = {lines}\"\n")
}

fn trace_at(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn events<'a>(trace: &'a [serde_json::Value], kind: &'a str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
    trace.iter().filter(move |e| e["event"] == kind)
}

fn time(e: &serde_json::Value) -> u64 {
    e["time"].as_u64().unwrap()
}

/// When the workload started (its command event on n1).
fn workload_start(trace: &[serde_json::Value]) -> u64 {
    time(events(trace, "command").find(|e| e["name"] == "workload").expect("the workload ran"))
}

/// n2's console lines, in order.
fn console_of_n2(trace: &[serde_json::Value]) -> Vec<String> {
    events(trace, "console").filter(|e| e["node"] == 2).map(|e| e["text"].as_str().unwrap().to_string()).collect()
}

/// A kill takes the service down and it comes back `restart_after` later,
/// with what it wrote before the kill still there (the page cache is the
/// kernel's, and the kernel kept running); the same trace every time.
#[test]
fn a_killed_service_comes_back_and_keeps_what_reached_the_page_cache() {
    let d = service_cluster(
        2,
        3,
        &format!(
            "[faults.kill]\nmax = 1\nnodes = [\"n2\"]\nspan = \"200ms\"\nweight = 1000\nrestart_after = \"500ms\"\n{}",
            log_holds(2)
        ),
    );
    same_trace_every_time(d.path(), 2, &["--seed", "1"], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(j["kills"], 1, "{j}");
        assert_eq!(j["crashes"], 0, "{j}");
    });
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let trace = trace_at(&out.path().join("last/trace.jsonl"));
    let kill = events(&trace, "kill").next().expect("a kill").clone();
    assert_eq!(kill["node"], 2, "{kill}");
    let respawn = events(&trace, "respawn").next().expect("the service started again").clone();
    assert_eq!(respawn["node"], 2);
    assert_eq!(time(&respawn), time(&kill) + 500_000_000, "restart_after later");
    assert_eq!(kill["restart_at"].as_u64(), Some(time(&respawn)), "{kill}");
    // The kill's exit of the start command is no failure of it.
    let exit = events(&trace, "command_done").find(|e| e["node"] == 2 && e["name"] == "start").expect("start exits");
    assert_eq!(exit["status"], 137, "SIGKILL: {exit}");
    assert!(events(&trace, "exit").all(|e| e["node"] != 2), "n2's kernel kept running");
    let console = console_of_n2(&trace);
    assert!(console.iter().any(|l| l == "service up: 1 lines"), "{console:?}");
    let after = console.iter().position(|l| l == "service up: 2 lines").expect("the service came back");
    assert!(console[..after].iter().any(|l| l == "service up: 1 lines"));
    let inv = events(&trace, "invariant").find(|e| e["name"] == "log-lines").expect("the invariant ran");
    assert_eq!(inv["ok"], true, "the line written before the kill is there");
}

/// A kill is one of the failure file's decisions: a check the kill breaks
/// (the service's second start appended a line) fails, and the failure
/// replays to the same trace.
#[test]
fn a_failure_after_a_kill_replays() {
    let d = service_cluster(
        2,
        3,
        &format!(
            "[faults.kill]\nmax = 1\nnodes = [\"n2\"]\nspan = \"200ms\"\nweight = 1000\nrestart_after = \"500ms\"\n{}",
            log_holds(1)
        ),
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "3"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!((j["failure"]["kind"].as_str(), j["kills"].as_u64()), (Some("invariant"), Some(1)), "{j}");
    let file = j["failure_file"].as_str().unwrap().to_string();
    let dir = std::path::Path::new(&file).parent().unwrap().to_path_buf();
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("1 kills, 1 respawns"), "{report}");
    let rep = run(&["replay", "--quiet", &file, "--out", out.path().join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["reproduced"], true, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
}

/// A scheduled crash (`[[faults.crash.schedule]]`) powers n2 off exactly
/// `at` after the workload starts, with no crash budget: the line its
/// service wrote without fsync is lost (the page cache went with the
/// power), the invariant fails, and the failure replays.
#[test]
fn a_scheduled_crash_fires_at_its_time_and_loses_the_page_cache() {
    let d = service_cluster(
        2,
        3,
        &format!(
            "[faults.crash]\nrestart_after = \"500ms\"\n[[faults.crash.schedule]]\nat = \"1s\"\nnodes = [\"n2\"]\n{}",
            log_holds(2)
        ),
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failure"]["kind"], "invariant", "{j}");
    assert_eq!(j["crashes"], 1, "{j}");
    let file = j["failure_file"].as_str().unwrap().to_string();
    let dir = std::path::Path::new(&file).parent().unwrap().to_path_buf();
    let trace = trace_at(&dir.join("trace.jsonl"));
    let crash = events(&trace, "crash").next().expect("a crash").clone();
    assert_eq!(crash["node"], 2);
    assert_eq!(time(&crash), workload_start(&trace) + 1_000_000_000, "at = 1s after the workload starts");
    let restart = events(&trace, "restart").next().expect("a restart");
    assert_eq!(time(restart), time(&crash) + 500_000_000);
    let console = console_of_n2(&trace);
    let lines: Vec<&String> = console.iter().filter(|l| l.starts_with("service up:")).collect();
    assert_eq!(lines, ["service up: 1 lines", "service up: 1 lines"], "the first line was lost: {console:?}");

    // Another seed crashes at the same virtual time: no choice of the strategy.
    let out2 = tempfile::tempdir().unwrap();
    let r2 = run_cluster(d.path(), out2.path(), &["--seed", "2"]);
    assert_eq!(r2.code, 1, "{r2:?}");
    let f2 = r2.json()["failure_file"].as_str().unwrap().to_string();
    let t2 = trace_at(&std::path::Path::new(&f2).parent().unwrap().join("trace.jsonl"));
    assert_eq!(time(events(&t2, "crash").next().unwrap()), workload_start(&t2) + 1_000_000_000);

    let rep = run(&["replay", "--quiet", &file, "--out", out.path().join("replay").to_str().unwrap()]);
    assert_eq!(rep.code, 0, "{rep:?}");
    assert_eq!(rep.json()["reproduced"], true, "{rep:?}");
    assert_eq!(rep.json()["trace_hash"], j["trace_hash"]);
}

/// `restart_after = "1s..5s"` draws each crash's restart delay from the
/// seed: the same for the same seed, different across seeds, always in
/// the range; `restart_after_by_node` sets n3's. Both crash together at
/// their scheduled time (a coordinated power failure).
#[test]
fn a_restart_delay_range_is_drawn_per_crash_from_the_seed() {
    let d = service_cluster(
        3,
        7,
        "[faults.crash]\nrestart_after = \"1s..5s\"\nrestart_after_by_node = { n3 = \"2s\" }\n\
         [[faults.crash.schedule]]\nat = \"500ms\"\nnodes = [\"n2\", \"n3\"]\n",
    );
    let delays = |seed: &str| -> (u64, u64) {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &["--seed", seed]);
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!((r.json()["crashes"].as_u64(), r.json()["power_failures"].as_u64()), (Some(2), Some(1)));
        let trace = trace_at(&out.path().join("last/trace.jsonl"));
        let pf = events(&trace, "power_failure").next().expect("n2 and n3 together");
        assert_eq!(pf["nodes"], serde_json::json!(["n2", "n3"]));
        let down = |node: u64| time(events(&trace, "crash").find(|e| e["node"] == node).unwrap());
        let up = |node: u64| time(events(&trace, "restart").find(|e| e["node"] == node).expect("restarted"));
        assert_eq!(down(2), workload_start(&trace) + 500_000_000);
        (up(2) - down(2), up(3) - down(3))
    };
    let drawn: Vec<(u64, u64)> = ["1", "2", "3", "4"].iter().map(|s| delays(s)).collect();
    for &(n2, n3) in &drawn {
        assert!((1_000_000_000..=5_000_000_000).contains(&n2), "{drawn:?}");
        assert_eq!(n3, 2_000_000_000, "n3's own restart_after: {drawn:?}");
    }
    assert!(drawn.iter().any(|d| d.0 != drawn[0].0), "different seeds, different delays: {drawn:?}");
    assert_eq!(delays("1"), drawn[0], "the same seed, the same delay");
}

#[test]
fn bad_kill_and_schedule_settings_exit_2_naming_the_key() {
    for (start, extra, needle) in [
        (None, "[faults.kill]\nmax = 1\n", "[faults.kill] max = 1: the nodes have no start command"),
        (Some("sleep 1000"), "[faults.kill]\nmax = 1\nrestart_after = \"soon\"\n", "[faults.kill] restart_after"),
        (Some("sleep 1000"), "[faults.kill]\nmax = 1\nnodes = [\"n7\"]\n", "[faults.kill] nodes"),
        (None, "[faults.crash]\nrestart_after = \"5s..1s\"\n", "start is after its end"),
        (None, "[faults.crash]\nrestart_after_by_node = { n9 = \"1s\" }\n", "restart_after_by_node"),
        (None, "[[faults.crash.schedule]]\nat = \"1s\"\nnodes = [\"n1\"]\n", "runs the workload"),
        (
            None,
            "[[faults.crash.schedule]]\nat = \"later\"\nnodes = [\"n2\"]\n",
            "[[faults.crash.schedule]] #1: at = \"later\" is not a duration",
        ),
        (None, "[[faults.crash.schedule]]\nat = \"1s\"\nnodes = []\n", "is empty"),
    ] {
        let d = simple(2, start, "true", extra);
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 2, "{extra}: {r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains(needle), "{extra}: {}", r.stderr);
    }
}

/// A scheduled crash of a node whose disk holds volatile writes is a crash
/// point like a chosen one: its disk states are each explored, in a warm
/// start (siblings forked at the crash) as in a cold one.
#[test]
fn a_scheduled_crash_point_explores_its_disk_states_warm_and_cold() {
    let d = simple(
        2,
        Some("while true; do echo x >> /data/f; sync; sleep 0.01; done"),
        "sleep 2",
        "[disk]\nsize_mb = 16\nmount = \"/data\"\n[faults]\nsettle = \"1s\"\n[faults.crash]\nrestart_after = \"500ms\"\n\
         [[faults.crash.schedule]]\nat = \"1s\"\nnodes = [\"n2\"]\n",
    );
    for mode in [&[][..], &["--warm-start", "cold"][..]] {
        let out = tempfile::tempdir().unwrap();
        let mut args = vec!["--seed", "1"];
        args.extend_from_slice(mode);
        let r = run_cluster(d.path(), out.path(), &args);
        assert_eq!(r.code, 0, "{mode:?}: {r:?}");
        let j = r.json();
        let states = j["crash_points"][0]["states"].as_u64().expect("a crash point");
        assert!(states >= 2, "{mode:?}: volatile writes at the crash: {j}");
        assert_eq!(j["executions"].as_u64(), Some(states), "{mode:?}: one execution per state: {j}");
        assert_eq!(j["crash_states_explored"].as_u64(), Some(states), "{mode:?}: {j}");
    }
}

/// A client-only node (`[cluster] clients`): out of every node's `PEERS`,
/// still in its /etc/hosts with its own address, and the host client after
/// it; it reaches a server by name over the simulated network.
#[test]
fn a_client_only_node_is_out_of_peers_and_reaches_the_servers() {
    let check = "set -e; echo \"PEERS=$PEERS\"; cat /etc/hosts; test \"$PEERS\" = n1,n2; \
                 grep -qx '10.0.0.3 n3' /etc/hosts; grep -qx '10.0.0.4 host' /etc/hosts; ping -c 1 -W 2 n2";
    let dir = cluster(
        &format!(
            "[cluster]\nnodes = 3\nmemory_mb = 128\nclients = [\"n3\"]\n[image]\npackages = [\"busybox-static\"]\n\
             [workload]\nnode = \"n3\"\ncommand = {check:?}\n[[invariant]]\nname = \"server-peers\"\nnode = \"n1\"\n\
             command = \"test \\\"$PEERS\\\" = n1,n2 && grep -qx '10.0.0.3 n3' /etc/hosts\"\n"
        ),
        &[],
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(dir.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// A kill may come from a drawn time on, on any ready node, so that time
/// bounds lookahead like a crash's: a node running ahead past it would
/// skip steps at which the kill was a choice. A service that wakes every
/// 10 ms without a sound gives lookahead long runs to take; each
/// execution's trace is the same with and without it.
#[test]
fn a_kill_bounds_lookahead_so_every_execution_traces_the_same_either_way() {
    let busy = "echo up >> /data/log; while true; do sleep 0.01; done";
    let d = simple(
        2,
        Some(busy),
        "sleep 3",
        "[disk]\nsize_mb = 16\nmount = \"/data\"\n[faults]\nsettle = \"1s\"\n\
         [faults.kill]\nmax = 1\nnodes = [\"n2\"]\nspan = \"2s\"\nweight = 1\nrestart_after = \"500ms\"\n",
    );
    let mut seen = Vec::new();
    for la in ["on", "off"] {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(
            d.path(),
            out.path(),
            &["--seed", "1", "--executions", "2", "--strategy", "random", "--lookahead", la],
        );
        assert_eq!(r.code, 0, "{r:?}");
        let shard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("shard.json")).unwrap()).unwrap();
        let hashes: Vec<String> = shard["executions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["trace_hash"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(hashes.len(), 2, "{shard}");
        seen.push((hashes, r.json()["kills"].as_u64(), r.json()["round_trips"].as_u64()));
    }
    assert_eq!(seen[0].0, seen[1].0, "lookahead on, off: {seen:?}");
    assert!(seen[0].1 >= Some(1), "no kill happened: {seen:?}");
    assert!(seen[0].2 < seen[1].2, "lookahead saved no round trip: {seen:?}");
}
