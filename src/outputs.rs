//! What a run leaves on disk: traces, console logs, pcaps, failure files
//! and reports. Every file is written atomically (a reader sees the old
//! content or the new, never half).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use engine::strategy::Decision;
use engine::trace::EventKind;
use engine::ExecutionResult;
use explore::failure_file::{self, FailureRecord};
use explore::report;

use crate::cluster::Cluster;

/// Writes a file atomically: a temporary beside it (named for this
/// process, so two processes writing one path do not share it), then a
/// rename. On failure (a full disk, say) the temporary is removed and
/// `path` keeps what it held: nothing half-written is left behind, and the
/// error names the file and the cause ("No space left on device").
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
        .and_then(|()| std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display())));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes each (file name, bytes) pcap into `dir` (created if missing),
/// each file atomically.
pub fn write_pcaps(dir: &Path, pcaps: &[(String, Vec<u8>)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, bytes) in pcaps {
        write_atomic(&dir.join(name), bytes)?;
    }
    Ok(())
}

/// Per-node console logs, each line prefixed with its virtual time.
fn console_logs(cluster: &Cluster, result: &ExecutionResult) -> Vec<(String, String)> {
    let mut logs: Vec<(String, String)> = cluster.node_names().into_iter().map(|n| (n, String::new())).collect();
    for ev in result.trace.events() {
        let line = match &ev.kind {
            EventKind::Console { text } => text.clone(),
            EventKind::Crash { detail } => format!("===== crash: {detail} ====="),
            EventKind::Restart => "===== restart =====".into(),
            _ => continue,
        };
        if let Some((_, log)) = ev.node_id().and_then(|n| logs.get_mut(n.index())) {
            // Colour codes a guest program printed are left out of the log.
            let line = report::strip_ansi(&line);
            log.push_str(&format!("[{:>14.6}] {line}\n", ev.time.as_ns() as f64 / 1e9));
        }
    }
    logs
}

/// Writes an execution's trace and console logs into `dir`.
pub fn write_execution(dir: &Path, cluster: &Cluster, result: &ExecutionResult) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_atomic(&dir.join("trace.jsonl"), result.trace.to_jsonl().as_bytes())?;
    // The client history `[check] history` checked: history.jsonl, or
    // history.edn when the node printed Jepsen's EDN (`simcluster check`
    // reads either by its name).
    if let Some(i) = cluster.history_node {
        if let Some(h) = checker::history_check::history_lines(result.trace.events(), engine::NodeId::at(i)) {
            let name = if txncheck::looks_like_edn(&h) { "history.edn" } else { "history.jsonl" };
            write_atomic(&dir.join(name), h.as_bytes())?;
        }
    }
    for (node, log) in console_logs(cluster, result) {
        write_atomic(&dir.join(format!("console-{node}.log")), log.as_bytes())?;
    }
    Ok(())
}

/// The human-readable report of a failing execution: report.html (a
/// space-time diagram and the interleaved console logs) and report.txt.
/// `extra` lines (a critical transition, shrink figures) go at the top of
/// report.txt.
pub fn write_report(
    dir: &Path,
    cluster: &Cluster,
    result: &ExecutionResult,
    record: &FailureRecord<Decision>,
    extra: &[String],
) -> Result<()> {
    let meta = report::ReportMeta {
        cluster: cluster.name.clone(),
        seed: record.seed,
        strategy: strategy_label(record),
        execution: record.execution_index,
        trace_hash: result.trace_hash.clone(),
        // The engine's verdict: the report marks the event it names.
        failure: result.verdict.failure().cloned(),
        node_names: report_node_names(cluster),
        history: cluster.history_node.map(|n| (engine::NodeId::at(n), cluster.history_model)),
    };
    let events = result.trace.events();
    // report.html, and the whole run in parts under report-parts/ when the
    // report's diagram leaves rows out (parts of an earlier report removed).
    let parts = dir.join(report::html::PARTS_DIR);
    if parts.is_dir() {
        std::fs::remove_dir_all(&parts).with_context(|| format!("cannot remove {}", parts.display()))?;
    }
    for (name, html) in report::html::render_html_all(&meta, events) {
        let path = dir.join(&name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_atomic(&path, html.as_bytes())?;
    }
    let mut text = String::new();
    for l in extra {
        text.push_str(l);
        text.push('\n');
    }
    if !extra.is_empty() {
        text.push('\n');
    }
    text.push_str(&report::render_text(&meta, events));
    write_atomic(&dir.join("report.txt"), text.as_bytes())?;
    Ok(())
}

/// Names of the trace's nodes: the guests, then `host` for the host-side
/// client (node N+1) when the workload runs there.
fn report_node_names(cluster: &Cluster) -> Vec<String> {
    let mut names = cluster.node_names();
    if cluster.host_workload.is_some() {
        names.push("host".into());
    }
    names
}

/// "pct(depth=3, horizon=2000)", "random(seed=1), shrunk".
pub fn strategy_label(record: &FailureRecord<Decision>) -> String {
    let params: Vec<String> = record
        .strategy
        .params
        .iter()
        .filter(|(k, _)| k.as_str() != "weights")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let label = if params.is_empty() {
        record.strategy.name.clone()
    } else {
        format!("{}({})", record.strategy.name, params.join(", "))
    };
    if record.shrunk.is_some() {
        format!("{label}, shrunk")
    } else {
        label
    }
}

/// Everything about a failing execution: the failure file, its trace,
/// console logs, pcaps and report, in `dir`. Returns the failure file.
pub fn write_failure(
    dir: &Path,
    cluster: &Cluster,
    result: &ExecutionResult,
    pcaps: &[(String, Vec<u8>)],
    record: &FailureRecord<Decision>,
    extra: &[String],
) -> Result<PathBuf> {
    write_execution(dir, cluster, result)?;
    write_pcaps(dir, pcaps)?;
    let file = dir.join("failure.json");
    failure_file::save(&file, record)?;
    write_report(dir, cluster, result, record, extra)?;
    Ok(file)
}
