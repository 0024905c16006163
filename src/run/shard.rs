//! Shard results (`shard.json`) and `simcluster merge`.
//!
//! Every run writes OUT/shard.json, its [`RunRecord`]: a whole run is shard
//! 1/1. `--shard K/N` runs the executions whose index is K-1 modulo N, the
//! same ones on any machine (an execution's seed and strategy choices
//! depend only on the run's seed and its index). `merge` reads the N
//! shards' records, checks that they are shards of one run (the same
//! [`RunIdentity`], each shard once, none missing), and summarises them as
//! one run: the same line an unsharded run prints, wall figures aside.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::summary::{summarize, RunRecord, Summary, RUN_RECORD_VERSION};
use crate::outputs::write_atomic;
use crate::BadInput;

/// The record's file name under a run's --out.
pub const RECORD_FILE: &str = "shard.json";

/// Writes `record` to OUT/shard.json, atomically.
pub fn write_record(out: &Path, record: &RunRecord) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let mut bytes = serde_json::to_vec_pretty(record)?;
    bytes.push(b'\n');
    write_atomic(&out.join(RECORD_FILE), &bytes)
}

/// Reads a run's record from DIR/shard.json (or from the file itself).
pub fn read_record(path: &Path) -> Result<RunRecord, BadInput> {
    let file = if path.is_dir() { path.join(RECORD_FILE) } else { path.to_path_buf() };
    let text = std::fs::read_to_string(&file).map_err(|e| {
        BadInput(format!(
            "{}: cannot read a shard result ({e}); pass the --out directory of a `simcluster run`",
            file.display()
        ))
    })?;
    // Read untyped first: the format version is checked before the rest,
    // whose shape is that version's (a record of another format would
    // otherwise fail on some field instead of saying which format it is).
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: not a shard result: {e}", file.display())))?;
    match value.get("simcluster_run_record").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(RUN_RECORD_VERSION) => {}
        Some(v) => {
            return Err(BadInput(format!(
                "{}: shard result format {v}; this simcluster reads format {RUN_RECORD_VERSION}",
                file.display()
            )))
        }
        None => {
            return Err(BadInput(format!("{}: not a shard result (no simcluster_run_record field)", file.display())))
        }
    }
    serde_json::from_value(value).map_err(|e| BadInput(format!("{}: a malformed shard result: {e}", file.display())))
}

/// Checks that `records` (read from `paths`) are every shard of one run,
/// and summarises them.
pub fn merge(paths: &[PathBuf], out: PathBuf) -> Result<Summary, BadInput> {
    let mut records = Vec::new();
    for p in paths {
        records.push((p, read_record(p)?));
    }
    let Some((first_path, first)) = records.first() else {
        return Err(BadInput("merge: name at least one shard's --out directory".into()));
    };
    let count = first.shard.count;
    for (p, r) in &records[1..] {
        if r.identity != first.identity {
            // Field by field, through JSON: the message names every
            // identity field that differs, whatever fields there are.
            let (a, b) = (serde_json::to_value(&first.identity).unwrap(), serde_json::to_value(&r.identity).unwrap());
            let differ: Vec<String> = a
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, v)| b.get(k.as_str()) != Some(v))
                .map(|(k, v)| {
                    format!(
                        "{k} = {v} in {}, {} here",
                        first_path.display(),
                        b.get(k.as_str()).unwrap_or(&serde_json::Value::Null)
                    )
                })
                .collect();
            return Err(BadInput(format!("{}: not a shard of the same run: {}", p.display(), differ.join("; "))));
        }
        if r.shard.count != count {
            return Err(BadInput(format!(
                "{}: shard {} of a run split {} ways; {} is shard {} of {count}",
                p.display(),
                r.shard,
                r.shard.count,
                first_path.display(),
                first.shard
            )));
        }
    }
    let mut seen = vec![None::<&PathBuf>; count as usize];
    for (p, r) in &records {
        let slot = &mut seen[(r.shard.index - 1) as usize];
        if let Some(other) = slot {
            return Err(BadInput(format!(
                "{}: shard {} is already given by {}",
                p.display(),
                r.shard,
                other.display()
            )));
        }
        *slot = Some(p);
    }
    let missing: Vec<String> =
        seen.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(k, _)| format!("{}/{count}", k + 1)).collect();
    if !missing.is_empty() {
        return Err(BadInput(format!(
            "merge: shard {} missing (give every shard's --out directory)",
            missing.join(", ")
        )));
    }
    if let Some(note) = mixed_hosts_note(&records) {
        eprintln!("{note}");
    }
    let records: Vec<RunRecord> = records.into_iter().map(|(_, r)| r).collect();
    summarize(&records, out).ok_or_else(|| BadInput("merge: the shards ran no execution".into()))
}

/// A note when the shards ran on hosts of different kinds (vendor, CPUID
/// faulting): their executions are still the same ones for guest programs
/// that do not read CPUID, but a user merging them should know.
fn mixed_hosts_note(records: &[(&PathBuf, RunRecord)]) -> Option<String> {
    let (first_path, first) = records.iter().find(|(_, r)| r.host.is_some())?;
    let first = first.host.as_ref()?;
    let other: Vec<String> = records
        .iter()
        .filter_map(|(p, r)| r.host.as_ref().filter(|h| h.differs_for_replay(first)).map(|h| (p, h)))
        .map(|(p, h)| format!("{} ({})", p.display(), h.class()))
        .collect();
    if other.is_empty() {
        return None;
    }
    Some(format!(
        "note: the shards ran on different kinds of host: {} ({}), and {}; guest programs that read \
         CPUID may have seen different answers (README, \"Determinism across hosts\")",
        first_path.display(),
        first.class(),
        other.join(", ")
    ))
}
