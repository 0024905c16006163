//! `[faults.disk] lost_flush`: a lying disk acknowledges flushes without
//! making anything durable, so writes a program synced stay volatile and a
//! power loss may still lose them. Every lie is a draw from the seed, a
//! note in the trace and a counter in the JSON line.

mod common;
use common::*;

/// rename-safe (it fsyncs the file and the directory before it answers)
/// with `extra` appended to its cluster.toml.
fn rename_safe_with(ex: &std::path::Path, extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    edited_copy(ex, "rename-safe", |toml| format!("{toml}\n{extra}"))
}

#[test]
fn lost_flushes_leave_synced_writes_volatile_and_replay_the_same() {
    let Some(ex) = examples() else { return };
    let (_keep, dir) = rename_safe_with(&ex, "[faults.disk]\nlost_flush = 1.0\n");
    let mut hashes = Vec::new();
    for _ in 0..2 {
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(&dir, out.path(), &["--seed", "1"]);
        assert!(r.code == 0 || r.code == 1, "{r:?}");
        let j = r.json();
        assert!(j["lost_flushes"].as_u64().unwrap() > 5, "every flush lies: {j}");
        let p = &j["crash_points"][0];
        // The writer syncs after every write; only lies leave many volatile.
        assert!(p["volatile_writes"].as_u64().unwrap() > 4, "{p}");
        let trace = std::fs::read_to_string(out.path().join("last/trace.jsonl")).unwrap();
        assert!(trace.contains("acknowledged but not made durable (lost_flush)"));
        hashes.push(j["trace_hash"].as_str().unwrap().to_string());
    }
    assert_eq!(hashes[0], hashes[1]);

    // Honest flushes: nothing lost, few writes volatile at any crash.
    let out = tempfile::tempdir().unwrap();
    let j = run_cluster(&ex.join("rename-safe"), out.path(), &["--seed", "1"]).json();
    assert_eq!(j["lost_flushes"], 0);
    for p in j["crash_points"].as_array().unwrap() {
        assert!(p["volatile_writes"].as_u64().unwrap() <= 2, "{p}");
    }
}

#[test]
fn bad_disk_fault_values_are_bad_input() {
    let Some(ex) = examples() else { return };
    let (_keep, dir) = rename_safe_with(&ex, "[faults.disk]\nlost_flush = 1.5\n");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("lost_flush"), "{}", r.stderr);
    let d = simple(1, None, "true", "[faults.disk]\nlost_flush = 0.5\n");
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no disk"), "{}", r.stderr);
}
