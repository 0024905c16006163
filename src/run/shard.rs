//! Shard results (`shard.json`) and `simcluster merge`.
//!
//! Every run writes OUT/shard.json, its [`RunRecord`]: a whole run is shard
//! 1/1. `--shard K/N` runs the executions whose index is K-1 modulo N, the
//! same ones on any machine (an execution's seed and strategy choices
//! depend only on the run's seed and its index). `merge` reads the N
//! shards' records, checks that they are shards of one run (the same
//! [`RunIdentity`](super::summary::RunIdentity), each shard once, none missing), and summarises them as
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

/// `simcluster replay OUT --execution I [--crash-state K]`: the failure
/// file of that execution of the run (or shard) whose --out is `out`,
/// found through its record. Bad input, naming `out`: no record there, no
/// such execution (or sibling), an execution that passed, one whose
/// failure file was not written (the run's failure file budget) or is
/// gone.
pub fn failure_file_of(out: &Path, execution: u64, crash_state: Option<u64>) -> Result<PathBuf, BadInput> {
    if !out.is_dir() {
        return Err(BadInput(format!(
            "{}: not a directory; --execution takes a run's --out directory (a failure file replays without it)",
            out.display()
        )));
    }
    let record = read_record(out)?;
    let which = match crash_state {
        None => format!("execution {execution}"),
        Some(k) => format!("execution {execution} crash state {k}"),
    };
    let Some(e) = record.executions.iter().find(|e| e.execution == execution && e.crash_state == crash_state) else {
        let ran: Vec<u64> = record.executions.iter().filter(|e| e.crash_state.is_none()).map(|e| e.execution).collect();
        let siblings: Vec<String> = record
            .executions
            .iter()
            .filter(|e| e.execution == execution)
            .filter_map(|e| e.crash_state.map(|k| k.to_string()))
            .collect();
        let what = if crash_state.is_some() && ran.contains(&execution) {
            if siblings.is_empty() {
                format!("execution {execution} has no crash-state siblings")
            } else {
                format!("execution {execution}'s crash-state siblings are states {}", siblings.join(", "))
            }
        } else {
            format!("the run's executions are {}", ranges(&ran))
        };
        return Err(BadInput(format!("{}: the run has no {which}: {what}", out.display())));
    };
    if e.figures.failure.is_none() {
        return Err(BadInput(format!(
            "{}: {which} passed (trace hash {}); only a failing execution has a failure file to replay{}",
            out.display(),
            e.figures.trace_hash,
            match record.executions.iter().filter(|e| e.figures.failure.is_some()).map(|e| e.label()).next() {
                Some(l) => format!(" (the first that failed: {l})"),
                None => " (none of its executions failed)".into(),
            }
        )));
    }
    let file = out.join("failures").join(e.label()).join("failure.json");
    if e.failure_file.is_none() {
        let budget = record.failure_files.map_or(String::new(), |f| format!(" of {} MiB", f.budget_bytes >> 20));
        return Err(BadInput(format!(
            "{}: {which} failed, but the run wrote no failure file for it: the failure file budget{budget} was spent \
             (run again with a larger --failure-budget)",
            out.display()
        )));
    }
    if !file.is_file() {
        return Err(BadInput(format!(
            "{}: {which} failed, but its failure file {} is gone",
            out.display(),
            file.display()
        )));
    }
    Ok(file)
}

/// "0-7", "0, 2, 4-6".
fn ranges(xs: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j + 1 < xs.len() && xs[j + 1] == xs[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { xs[i].to_string() } else { format!("{}-{}", xs[i], xs[j]) });
        i = j + 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
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
