//! Bad input: exit code 2, a message naming the file and the problem, and
//! nothing written.

mod common;
use common::*;

fn assert_bad(r: &Run, needles: &[&str]) {
    assert_eq!(r.code, 2, "{r:?}");
    for n in needles {
        assert!(r.stderr.contains(n), "stderr lacks {n:?}: {r:?}");
    }
    assert!(r.stdout.is_empty(), "{r:?}");
}

#[test]
fn a_typo_in_cluster_toml() {
    let d = cluster("[cluster]\nnodes = 2\n[workload]\nnode = \"n1\"\ncomand = \"true\"\n", &[]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), &out.path().join("o"), &[]);
    assert_bad(&r, &["cluster.toml", "comand"]);
    assert!(!out.path().join("o").exists(), "output written for bad input");
}

#[test]
fn a_missing_cluster_directory_and_file() {
    let r = run(&["run", "--images", "/nonexistent/cluster"]);
    assert_bad(&r, &["/nonexistent/cluster", "no such cluster directory"]);
    let d = tempfile::tempdir().unwrap();
    let r = run(&["run", "--images", d.path().to_str().unwrap()]);
    assert_bad(&r, &["cluster.toml", "missing"]);
}

#[test]
fn an_unknown_node_and_a_missing_file() {
    let d = cluster("[cluster]\nnodes = 2\n[workload]\nnode = \"n5\"\ncommand = \"true\"\n", &[]);
    assert_bad(&run(&["run", "--images", d.path().to_str().unwrap()]), &["cluster.toml", "\"n5\": no such node"]);
    let d = cluster(
        "[cluster]\nnodes = 2\n[image]\nfiles = { \"/bin/app\" = \"app\" }\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n",
        &[],
    );
    assert_bad(&run(&["run", "--images", d.path().to_str().unwrap()]), &["cluster.toml", "app", "does not exist"]);
}

#[test]
fn an_unknown_debian_package() {
    let d = cluster(
        "[cluster]\nnodes = 1\n[image]\npackages = [\"no-such-package-simcluster\"]\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n",
        &[],
    );
    assert_bad(&run(&["image", "build", d.path().to_str().unwrap()]), &["cluster.toml", "no-such-package-simcluster"]);
}

#[test]
fn an_unknown_flag_and_a_bad_duration() {
    let r = run(&["run", "--images", ".", "--sede", "1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--sede"));
    let r = run(&["run", "--images", ".", "--time-limit", "soon"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("soon"));
}

#[test]
fn a_missing_or_garbage_failure_file() {
    let r = run(&["replay", "/nonexistent/failure.json"]);
    assert_bad(&r, &["/nonexistent/failure.json"]);
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("failure.json");
    std::fs::write(&f, "not a failure file").unwrap();
    assert_bad(&run(&["replay", f.to_str().unwrap()]), &["failure.json", "not a simcluster failure file"]);
    // shrink reads failure files the same way.
    let out = d.path().join("out");
    assert_bad(&run(&["shrink", f.to_str().unwrap(), "--out", out.to_str().unwrap()]), &["failure.json"]);
    assert!(!out.exists(), "nothing written");
}

#[test]
fn a_failure_file_of_an_older_format_says_what_to_do() {
    // Format 1 (before the run parameters were typed); the version is read
    // before anything else in the file.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("failure.json");
    let payload = "{\"format_version\": 1, \"failure\": \"Workload: exited with status 7\"}\n";
    let header =
        format!("{{\"simcluster_failure_file\":1,\"crc32\":\"00000000\",\"payload_bytes\":{}}}\n", payload.len());
    std::fs::write(&f, header + payload).unwrap();
    let needles = [f.to_str().unwrap(), "version 1", "older simcluster", "record it again"];
    assert_bad(&run(&["replay", f.to_str().unwrap()]), &needles);
    let out = d.path().join("out");
    assert_bad(&run(&["shrink", f.to_str().unwrap(), "--out", out.to_str().unwrap()]), &needles);
}

#[test]
fn help_teaches() {
    let r = run(&["run", "--help"]);
    assert_eq!(r.code, 0);
    for word in [
        "--seed",
        "--executions",
        "--time-limit",
        "--out",
        "--runtime",
        "--strategy",
        "--time-budget",
        "--depth",
        "--window",
    ] {
        assert!(r.stdout.contains(word), "run --help lacks {word}");
    }
    let r = run(&["--help"]);
    assert!(r.stdout.contains("Exit codes") && r.stdout.contains("replay") && r.stdout.contains("shrink"), "{r:?}");
}

fn hardware_virtualization() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
        s.lines().filter(|l| l.starts_with("flags")).any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
    })
}

#[test]
fn runtime_kvm_without_hardware_virtualization_says_why() {
    if hardware_virtualization() {
        testkit::skip(testkit::Cause::Host, "this host has vmx/svm: the no-virtualization path cannot be seen here");
        return;
    }
    let d = cluster("[cluster]\nnodes = 1\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n", &[]);
    let out = tempfile::tempdir().unwrap();
    let r = run(&[
        "run",
        "--images",
        d.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--runtime",
        "kvm",
    ]);
    assert_bad(&r, &["--runtime kvm", "vmx/svm", "--runtime uml"]);
}

#[test]
fn bad_pause_and_clock_values_exit_2_naming_the_key() {
    for (extra, needles) in [
        ("[faults.pause]\nmax = -1\n", &["cluster.toml", "[faults.pause] max = -1"][..]),
        ("[faults.pause]\nmax = 1\nlength = { min = \"2s\", max = \"1s\" }\n", &["[faults.pause] length", "above max"]),
        ("[faults.pause]\nmax = 1\nlength = \"-1s\"\n", &["[faults.pause] length", "\"-1s\"", "at least 1ms"]),
        ("[faults.pause]\nmax = 1\nnodes = [\"n9\"]\n", &["[faults.pause] nodes", "\"n9\": no such node"]),
        ("[faults.clock]\noffset = \"-2 days\"\n", &["[faults.clock] offset", "-2 days"]),
        ("[faults.clock]\ndrift_ppm = -500000\n", &["[faults.clock] drift_ppm"]),
        ("[faults.clock]\nwobble = true\n", &["cluster.toml", "wobble", "line"]),
    ] {
        let d = simple(2, Some("sleep 60"), "true", extra);
        assert_bad(&run(&["run", "--quiet", "--images", d.path().to_str().unwrap()]), needles);
    }
}

#[test]
fn bad_history_models_exit_2_naming_the_key() {
    for (extra, needles) in [
        ("[check]\nhistory = \"n1\"\nmodel = \"bank\"\n", &["cluster.toml", "[check] model = \"bank\"", "line 11"][..]),
        (
            "[check]\nhistory = \"n1\"\nmodel = \"list-append\"\nconsistency = \"sequential\"\n",
            &["cluster.toml", "[check] consistency = \"sequential\"", "line 12"],
        ),
        ("[check]\nhistory = \"n1\"\nconsistency = \"serializable\"\n", &["cluster.toml", "[check] consistency"]),
        ("[check]\nmodel = \"rw-register\"\n", &["cluster.toml", "[check] model: there is no history"]),
    ] {
        let d = simple(1, None, "true", extra);
        let out = tempfile::tempdir().unwrap();
        assert_bad(&run_cluster(d.path(), &out.path().join("o"), &[]), needles);
        assert!(!out.path().join("o").exists(), "output written for bad input");
    }
}
