//! `[antithesis]`: the Antithesis SDK's JSON lines are properties, its
//! `setup_complete` starts the workload, and Test Composer runs a
//! template's commands by Antithesis's rules. The first two tests write
//! the SDK's lines by hand (busybox only); the last runs the real Python
//! SDK from PyPI in the guests (scripts/antithesis-python-sdk.sh).

mod common;
use common::*;

use std::path::Path;

/// One `antithesis_assert` line as the SDKs write it, shell-quoted for
/// `echo ... > $ANTITHESIS_SDK_LOCAL_OUTPUT`.
fn assert_line(kind: &str, display: &str, condition: bool, hit: bool, must_hit: bool, message: &str) -> String {
    format!(
        r#"echo '{{"antithesis_assert": {{"hit": {hit}, "must_hit": {must_hit}, "assert_type": "{kind}", "display_type": "{display}", "message": "{message}", "condition": {condition}, "id": "{message}", "location": {{"file": "/app", "begin_line": 3}}, "details": {{"x": 7}}}}}}' > $ANTITHESIS_SDK_LOCAL_OUTPUT"#
    )
}

const SETUP: &str =
    r#"echo '{"antithesis_setup": {"status": "complete", "details": null}}' > $ANTITHESIS_SDK_LOCAL_OUTPUT"#;

/// Two nodes; n2 reports setup_complete after 1 s, n1's workload writes
/// `lines` and sleeps.
fn sdk_cluster(lines: &[String]) -> tempfile::TempDir {
    let workload = format!("{}; sleep 1", lines.join("; "));
    simple(2, Some(&format!("if [ $NODE_ID = 2 ]; then sleep 1; {SETUP}; fi")), &workload, "[antithesis]\n")
}

/// The trace's console lines and notes, in order.
fn texts(out: &Path) -> Vec<String> {
    let trace = std::fs::read_to_string(out.join("last/trace.jsonl")).unwrap();
    trace
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["text"].as_str().map(str::to_string)
        })
        .collect()
}

fn position(texts: &[String], what: &str) -> usize {
    texts.iter().position(|t| t.contains(what)).unwrap_or_else(|| panic!("no {what:?} in {texts:#?}"))
}

#[test]
fn sdk_lines_are_properties_and_setup_starts_the_workload() {
    let always = |c| assert_line("always", "Always", c, true, true, "x is small");
    let sometimes = |c, hit| assert_line("sometimes", "Sometimes", c, hit, true, "x was big");
    let unreachable = assert_line("reachability", "Unreachable", true, false, false, "never here");

    // Good: exit 0, every property listed with its counts.
    let d = sdk_cluster(&[unreachable.clone(), always(true), sometimes(false, true), sometimes(true, true)]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let props = &j["antithesis"];
    assert_eq!(props["x is small"]["verdict"], "passed", "{props}");
    assert_eq!(
        (props["x is small"]["passes"].as_u64(), props["x is small"]["nodes"][0].as_str()),
        (Some(1), Some("n1"))
    );
    assert_eq!((props["x was big"]["passes"].as_u64(), props["x was big"]["fails"].as_u64()), (Some(1), Some(1)));
    assert_eq!(props["never here"]["verdict"], "passed", "declared, never reached: {props}");
    assert!(r.stderr.contains("passed: Always \"x is small\" at /app:3"), "{r:?}");
    // The workload waited for n2's setup_complete.
    let t = texts(out.path());
    assert!(position(&t, "setup_complete from n2") < position(&t, "x is small"), "{t:#?}");

    // A false always fails the execution, naming message, node and details.
    let d = sdk_cluster(&[always(true), always(false)]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failure"]["kind"], "assertion", "{j}");
    let message = j["failure"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"Antithesis assertion Always "x is small" was false on n1 at /app:3; details: {"x":7}"#),
        "{message}"
    );
    assert_eq!(j["antithesis"]["x is small"]["verdict"], "failed");
    // The report lists the execution's assertions and marks the line.
    let html = std::fs::read_to_string(out.path().join("failures/execution-0/report.html")).unwrap();
    assert!(html.contains("Antithesis SDK assertions (1)") && html.contains("<b>was false</b>"), "report.html");
    let txt = std::fs::read_to_string(out.path().join("failures/execution-0/report.txt")).unwrap();
    assert!(txt.contains(">> #") && txt.contains("console: @antithesis"), "{txt}");
    // The failure replays to the same failure.
    let replay = run(&["replay", "--quiet", j["failure_file"].as_str().unwrap()]);
    assert_eq!(replay.code, 0, "{replay:?}");
    let rj = replay.json();
    assert_eq!(
        (&rj["reproduced"], &rj["trace_hash"], &rj["failure"]["kind"]),
        (&true.into(), &j["trace_hash"], &"assertion".into())
    );

    // A sometimes never true (and a reachable never reached) fails the run
    // at its end, naming each.
    let reachable = assert_line("reachability", "Reachable", false, false, true, "got there");
    let d = sdk_cluster(&[reachable, sometimes(false, false), sometimes(false, true)]);
    let out = tempfile::tempdir().unwrap();
    let xml = out.path().join("junit.xml");
    let r = run_cluster(d.path(), out.path(), &["--executions", "2", "--junit", xml.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["failures"], 0, "no execution failed: {j}");
    // JUnit: one case per assertion, failing with the reason.
    let suites = junit_parser::from_reader(std::io::BufReader::new(std::fs::File::open(&xml).unwrap())).unwrap();
    let case = |name: &str| {
        let cases = &suites.suites[0].cases;
        cases
            .iter()
            .find(|c| c.original_name == name)
            .unwrap_or_else(|| panic!("no case {name}: {cases:?}"))
            .status
            .clone()
    };
    match case("antithesis Sometimes \"x was big\"") {
        junit_parser::TestStatus::Failure(f) => {
            assert_eq!(f.message, "Antithesis assertion Sometimes \"x was big\" was never true", "{f:?}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(j["antithesis_unmet"], serde_json::json!(["got there", "x was big"]), "{j}");
    assert!(
        r.stderr.contains("NOT SATISFIED: Antithesis assertion Sometimes \"x was big\" was never true in 2 executions"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("NOT SATISFIED: Antithesis assertion Reachable \"got there\" was never reached"),
        "{r:?}"
    );
}

#[test]
fn setup_complete_never_reported_is_a_time_limit_that_says_so() {
    let d = simple(1, None, "true", "[run]\ntime_limit = \"3s\"\n[antithesis]\n");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let message = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("no node's Antithesis SDK reported setup_complete"), "{message}");
    // Without the wait the same cluster passes.
    let d = simple(1, None, "true", "[run]\ntime_limit = \"3s\"\n[antithesis]\nsetup_complete = false\n");
    assert_eq!(run_cluster(d.path(), out.path(), &[]).code, 0);
}

/// A Test Composer template of busybox scripts on n2, with `[faults.pause]`
/// on n1 so that "faults begin" shows; `extra` more commands (name, body).
fn composer_cluster(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let mut commands = vec![
        ("first_setup", "echo first-ran; touch /tmp/setup"),
        ("parallel_driver_put", "[ -f /tmp/setup ] || exit 9; echo put >> /tmp/log; sleep 0.2"),
        ("serial_driver_count", "echo count $(wc -l < /tmp/log)"),
        ("anytime_ping", "ping -c 1 -W 1 n1 > /dev/null && echo ping-ok"),
        ("eventually_log", "echo eventually-ran; [ -s /tmp/log ]"),
        ("finally_done", "echo finally-ran"),
    ];
    commands.extend_from_slice(extra);
    let files: Vec<String> =
        commands.iter().map(|(name, _)| format!("\"/opt/antithesis/test/v1/main/{name}\" = \"{name}\"")).collect();
    let bodies: Vec<(String, String)> =
        commands.iter().map(|(name, body)| (name.to_string(), format!("#!/bin/sh\n{body}\n"))).collect();
    let toml = format!(
        "[cluster]\nnodes = 2\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\nfiles = {{ {} }}\n\
         [node]\nstart = {:?}\n[workload]\nnode = \"n2\"\n[faults.pause]\nmax = 1\nnodes = [\"n1\"]\n\
         [antithesis]\ntest_composer = true\ndrive_for = \"2s\"\n",
        files.join(", "),
        format!("[ $NODE_ID = 1 ] && {SETUP}; true"),
    );
    let refs: Vec<(&str, &str)> = bodies.iter().map(|(n, b)| (n.as_str(), b.as_str())).collect();
    cluster(&toml, &refs)
}

#[test]
fn test_composer_runs_a_template_by_the_rules() {
    let d = composer_cluster(&[]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let t = texts(out.path());
    let first = position(&t, "first_setup exited 0");
    let drivers = position(&t, "@reached test-composer-drivers");
    let faults = position(&t, "faults begin: test-composer-drivers");
    let driver = position(&t, "parallel_driver_put exited 0");
    let quiet = position(&t, "quiet period: faults stop");
    let eventually = position(&t, "eventually_log exited 0");
    let finally = position(&t, "finally_done exited 0");
    assert!(first < drivers && drivers < faults && faults < driver, "{t:#?}");
    assert!(driver < quiet && quiet < eventually && eventually < finally, "{t:#?}");
    assert_eq!(t.iter().filter(|l| l.contains("start first_setup")).count(), 1, "first_ runs once");
    let commands = &r.json()["test_composer"];
    for name in ["first_setup", "eventually_log", "finally_done"] {
        assert_eq!(
            (commands[name]["runs"].as_u64(), commands[name]["failed"].as_u64()),
            (Some(1), Some(0)),
            "{commands}"
        );
    }
    assert!(commands["parallel_driver_put"]["runs"].as_u64() >= Some(1), "{commands}");
    assert!(t.iter().any(|l| l == "first-ran") && t.iter().any(|l| l == "finally-ran"), "output on the console");
    // Nothing else starts or ends while a serial driver runs.
    for (i, _) in t.iter().enumerate().filter(|(_, l)| l.contains("serial_driver_count exited")) {
        let started = t[..i].iter().rposition(|x| x.contains("start serial_driver_count")).unwrap();
        let others = t[started + 1..i].iter().filter(|x| x.starts_with("test-composer: ")).count();
        assert_eq!(others, 0, "{:#?}", &t[started..=i]);
    }
    // The same seed runs the same commands in the same order.
    let again = tempfile::tempdir().unwrap();
    let r2 = run_cluster(d.path(), again.path(), &["--seed", "2"]);
    assert_eq!(r2.json()["trace_hash"], r.json()["trace_hash"], "{r2:?}");

    // A driver that exits non-zero fails the execution, naming it.
    let d = composer_cluster(&[("parallel_driver_broken", "echo broken; exit 3")]);
    let r = run_cluster(d.path(), out.path(), &["--seed", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let message = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(message.contains("test-composer: failed: parallel_driver_broken exited 3"), "{message}");
    let broken = &r.json()["test_composer"]["parallel_driver_broken"];
    assert_eq!(broken["first_failed_status"], 3, "{r:?}");
    let html = std::fs::read_to_string(out.path().join("failures/execution-0/report.html")).unwrap();
    assert!(
        html.contains("Test Composer commands (") && html.contains("<td>parallel_driver_broken</td>"),
        "report.html"
    );
    // And so does an eventually_ command, after the faults stopped.
    let d = composer_cluster(&[("eventually_zz_bad", "exit 4")]);
    let r = run_cluster(d.path(), out.path(), &["--seed", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let message = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("invariant test-composer-end failed on n2 (exit status 4"), "{message}");
    assert!(message.contains("eventually_zz_bad exited 4"), "{message}");
}

#[test]
fn test_composer_keys_are_checked() {
    for (keys, expect) in [
        ("[antithesis]\ntest_composer = true\n", "[workload] command"),
        ("[antithesis]\ntemplate = \"main\"\n", "test_composer"),
        ("[antithesis]\ntest_composer = true\ndrive_for = \"soon\"\n", "drive_for"),
        ("[antithesis]\ntest_composer = true\ntemplate = \"a/b\"\n", "template"),
        ("[antithesis]\nsdk = \"yes\"\n", "sdk"),
    ] {
        let d = simple(1, None, "true", keys);
        let r = run(&["run", "--quiet", "--images", d.path().to_str().unwrap()]);
        assert_eq!(r.code, 2, "{keys}: {r:?}");
        assert!(r.stderr.contains("cluster.toml") && r.stderr.contains(expect), "{keys}: {r:?}");
    }
}

/// The real Python SDK (PyPI's `antithesis`) in the guests: a counter
/// server on n1 (reachable, setup_complete), a Test Composer template on
/// n2 whose Python drivers assert on what it answers. `mode` picks the
/// drivers' assertions.
fn python_cluster(sdk: &Path, driver_assertions: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut files: Vec<(String, String)> = Vec::new();
    for entry in walk(sdk) {
        let rel = entry.strip_prefix(sdk).unwrap().to_str().unwrap().to_string();
        files.push((format!("/usr/lib/python3/dist-packages/{rel}"), entry.to_str().unwrap().to_string()));
    }
    let server = "#!/usr/bin/env python3\nimport os, socket\nfrom antithesis.assertions import reachable\n\
        from antithesis.lifecycle import setup_complete\n\
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind(('0.0.0.0', 7000)); s.listen(8)\n\
        reachable('server listening', {'node': os.environ['NODE_NAME']})\n\
        if os.environ['NODE_ID'] == '1':\n    setup_complete({'port': 7000})\n\
        count = 0\nwhile True:\n    c, _ = s.accept(); count += 1\n    c.sendall(f'{count}\\n'.encode()); c.close()\n";
    let driver = format!(
        "#!/usr/bin/env python3\nimport socket\nfrom antithesis.assertions import always, sometimes\n\
         with socket.create_connection(('n1', 7000), timeout=5) as c:\n    n = int(c.makefile().readline())\n\
         print('count', n)\n{driver_assertions}\n"
    );
    std::fs::write(d.path().join("server"), server).unwrap();
    std::fs::write(d.path().join("parallel_driver_count"), driver).unwrap();
    for f in ["server", "parallel_driver_count"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path().join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    files.push(("/usr/local/bin/sdk-server".into(), "server".into()));
    files.push(("/opt/antithesis/test/v1/main/parallel_driver_count".into(), "parallel_driver_count".into()));
    let table: Vec<String> = files.iter().map(|(g, h)| format!("{g:?} = {h:?}")).collect();
    std::fs::write(
        d.path().join("cluster.toml"),
        format!(
            "[cluster]\nnodes = 2\nmemory_mb = 192\n[image]\npackages = [\"python3\"]\n[image.files]\n{}\n\
             [node]\nstart = \"exec python3 /usr/local/bin/sdk-server\"\n[workload]\nnode = \"n2\"\n\
             [antithesis]\ntest_composer = true\ndrive_for = \"2s\"\n",
            table.join("\n")
        ),
    )
    .unwrap();
    d
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The unpacked SDK, or `None` with the skip recorded.
fn python_sdk() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new(repo().join("scripts/antithesis-python-sdk.sh")).output().unwrap();
    if !out.status.success() {
        testkit::skip(
            testkit::Cause::Missing,
            format!(
                "scripts/antithesis-python-sdk.sh could not fetch the Python SDK from PyPI: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return None;
    }
    Some(String::from_utf8(out.stdout).unwrap().trim().into())
}

#[test]
fn the_python_sdk_from_pypi_unchanged() {
    let Some(sdk) = python_sdk() else { return };
    // Good: exit 0, the SDK's own lines as properties, from both nodes.
    let good = "always(n >= 1, 'count is positive', {'count': n})\nsometimes(n >= 2, 'count passed 1', {'count': n})";
    let d = python_cluster(&sdk, good);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let props = &j["antithesis"];
    for p in ["count is positive", "count passed 1", "server listening"] {
        assert_eq!(props[p]["verdict"], "passed", "{p}: {props}");
    }
    let nodes = props["server listening"]["nodes"].as_array().unwrap();
    assert!(nodes.len() == 2 && nodes.contains(&"n1".into()) && nodes.contains(&"n2".into()), "{props}");
    assert_eq!(props["count is positive"]["location"], "/opt/antithesis/test/v1/main/parallel_driver_count:7");
    // The same seed: the same trace, the same verdicts.
    let again = tempfile::tempdir().unwrap();
    let r2 = run_cluster(d.path(), again.path(), &["--seed", "5"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let j2 = r2.json();
    assert_eq!((&j2["trace_hash"], &j2["antithesis"]), (&j["trace_hash"], &j["antithesis"]));

    // A false always: exit 1, naming it, its node and details.
    let d = python_cluster(&sdk, "always(n > 10**6, 'count is huge', {'count': n})");
    let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    let message = j["failure"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"Antithesis assertion Always "count is huge" was false on n2 at /opt/antithesis/test/v1/main/parallel_driver_count:7; details: {"count":1}"#),
        "{message}"
    );
    let replay = run(&["replay", "--quiet", j["failure_file"].as_str().unwrap()]);
    assert_eq!((replay.code, &replay.json()["reproduced"]), (0, &true.into()), "{replay:?}");
    assert_eq!(replay.json()["failure"]["message"], j["failure"]["message"], "{replay:?}");

    // A sometimes never satisfied: exit 1 at the run's end, naming it.
    let d = python_cluster(&sdk, "sometimes(n > 10**6, 'count got huge', {'count': n})");
    let r = run_cluster(d.path(), out.path(), &["--seed", "5"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["antithesis_unmet"], serde_json::json!(["count got huge"]), "{r:?}");
    assert!(
        r.stderr.contains("NOT SATISFIED: Antithesis assertion Sometimes \"count got huge\" was never true"),
        "{r:?}"
    );
}

/// The Rust SDK's program (scripts/antithesis-rust-sdk.sh), or `None` with
/// the skip recorded.
fn rust_sdk_program() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new(repo().join("scripts/antithesis-rust-sdk.sh")).output().unwrap();
    if !out.status.success() {
        testkit::skip(
            testkit::Cause::Missing,
            format!(
                "scripts/antithesis-rust-sdk.sh could not build the Rust SDK's program: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return None;
    }
    Some(String::from_utf8(out.stdout).unwrap().trim().into())
}

#[test]
fn the_rust_sdk_from_crates_io_unchanged() {
    let Some(program) = rust_sdk_program() else { return };
    let body = std::fs::read(&program).unwrap();
    let with_workload = |workload: &str| {
        let d =
            simple(2, Some("if [ $NODE_ID = 2 ]; then /usr/local/bin/sdk-rust setup; fi"), workload, "[antithesis]\n");
        let toml = std::fs::read_to_string(d.path().join("cluster.toml")).unwrap();
        let toml = toml.replace(
            "packages = [\"busybox-static\"]",
            "packages = [\"busybox-static\"]\nfiles = { \"/usr/local/bin/sdk-rust\" = \"sdk-rust\" }",
        );
        std::fs::write(d.path().join("cluster.toml"), toml).unwrap();
        std::fs::write(d.path().join("sdk-rust"), &body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path().join("sdk-rust"), std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    };
    // Good, under the coverage strategy: exit 0; the SDK's catalog declares
    // the unreachable assertion, which passes unreached; the numeric
    // guidance of assert_always_greater_than is a coverage feature.
    let d = with_workload("/usr/local/bin/sdk-rust good && /usr/local/bin/sdk-rust good");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--strategy", "coverage", "--executions", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let props = &j["antithesis"];
    for p in ["rust program ran", "rust mode is not bad", "rust pid above 1", "rust pid positive", "rust never here"] {
        assert_eq!(props[p]["verdict"], "passed", "{p}: {props}");
    }
    assert_eq!(
        (props["rust never here"]["passes"].as_u64(), props["rust never here"]["fails"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(props["rust mode is not bad"]["location"], "src/main.rs:17", "{props}");
    let features = j["coverage"]["first_seen"].to_string();
    assert!(features.contains("guidance rust pid positive"), "{features}");
    assert!(features.contains("sdk Always rust mode is not bad true"), "{features}");

    // A false always: exit 1, naming it.
    let d = with_workload("/usr/local/bin/sdk-rust bad");
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let message = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(
            r#"Antithesis assertion Always "rust mode is not bad" was false on n1 at src/main.rs:17; details: {"mode":"bad"}"#
        ),
        "{message}"
    );
    // An unreachable reached: exit 1, naming it.
    let d = with_workload("/usr/local/bin/sdk-rust never");
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let message = r.json()["failure"]["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(r#"Antithesis assertion Unreachable "rust never here" was reached on n1"#),
        "{message}"
    );
}

#[test]
fn a_thousand_lines_from_two_writers_all_arrive() {
    // Two processes write 500 lines each at once; every line arrives whole.
    let line = assert_line("always", "Always", true, true, true, "x is small");
    let writer = format!("i=0; while [ $i -lt 500 ]; do {line}; i=$((i+1)); done");
    let d = simple(1, None, &format!("( {writer} ) & ( {writer} ) & wait"), "[antithesis]\nsetup_complete = false\n");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["antithesis"]["x is small"]["passes"], 1000, "{r:?}");
    let t = texts(out.path());
    assert!(!t.iter().any(|l| l.contains("cannot be read")), "a line was cut");
}
