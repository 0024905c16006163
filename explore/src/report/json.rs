//! The machine-readable summary.

use super::{describe, is_clock_fault, node_name, sanitize, Analysis, Counts, FailureSpot, ReportMeta};
use engine::trace::{Event, EventKind};
use serde_json::{json, Map, Value};

/// Console lines per node in `nodes[].last_console`.
pub const LAST_CONSOLE_LINES: usize = 10;
const TEXT_CHARS: usize = 1000;
/// At most this many entries in `failed_invariants` (the count is in `counts`).
pub const MAX_FAILED_INVARIANTS: usize = 100;

/// A summary for machines:
///
/// ```json
/// { "cluster", "seed", "strategy", "execution", "trace_hash",
///   "events": N, "grants": G, "virtual_end_ns": T,
///   "counts": { "<kind>": n, ... every kind, zeros included },
///   "messages": { "sent", "delivered", "duplicates", "dropped", "in_flight" },
///   "failure": null | { "description", "event_index", "time", "node",
///                       "node_name", "event": "<one-line description>" },
///   "failed_invariants": [ { "name", "node", "time", "event_index" } ],
///   "nodes": [ { "node", "name", "console_lines", "last_console": [...],
///                "crashes", "restarts", "pauses", "kills", "clock_faults", "hung",
///                "exit": null | {...} } ] }
/// ```
///
/// `counts.run` counts `run` events, one per node and quiet stretch of the
/// trace; `grants` counts the node runs they stand for.
///
/// Guest text is stripped of control characters and cut to 1000 characters.
pub fn summary_json(meta: &ReportMeta, events: &[Event]) -> Value {
    let a = Analysis::new(meta, events);
    let c = &a.counts;
    let nodes: Vec<Value> = a.nodes.iter().map(|&n| node_json(meta, events, n)).collect();
    json!({
        "cluster": sanitize(&meta.cluster, 200),
        "seed": meta.seed,
        "strategy": sanitize(&meta.strategy, 200),
        "execution": meta.execution,
        "trace_hash": sanitize(&meta.trace_hash, 200),
        "events": events.len(),
        "grants": c.grants,
        "virtual_end_ns": a.end_time(),
        "counts": counts_json(c),
        "messages": {
            "sent": c.sent,
            "delivered": c.delivered,
            "duplicates": c.duplicates,
            "dropped": c.dropped,
            "in_flight": c.in_flight,
        },
        "failure": failure_json(meta, events, a.failure.as_ref()),
        "failed_invariants": failed_invariants_json(events),
        "nodes": nodes,
        "roles_at_faults": roles_json(meta, events),
    })
}

/// `roles_at_faults`: each fault with the role of the node it hit and every
/// node's role then (`[roles]`); empty without roles.
fn roles_json(meta: &ReportMeta, events: &[Event]) -> Value {
    let faults = super::roles::faults_with_roles(events);
    Value::Array(
        faults
            .iter()
            .map(|f| {
                let roles: Map<String, Value> =
                    f.roles.iter().map(|(n, r)| (node_name(meta, *n), json!(sanitize(r, 64)))).collect();
                json!({
                    "event_index": f.index,
                    "time": events[f.index].time.as_ns(),
                    "node": f.node,
                    "event": sanitize(&describe(meta, &events[f.index]), TEXT_CHARS),
                    "role": f.role.as_deref().map(|r| sanitize(r, 64)),
                    "roles": roles,
                })
            })
            .collect(),
    )
}

/// `counts`: every kind listed, zeros included.
fn counts_json(c: &Counts) -> Map<String, Value> {
    let mut counts = Map::new();
    for k in [
        "boot",
        "run",
        "console",
        "command",
        "command_done",
        "ready",
        "exit",
        "hung",
        "send",
        "deliver",
        "drop",
        "partition",
        "heal",
        "crash",
        "restart",
        "power_failure",
        "invariant",
        "note",
        "pause",
        "kill",
        "respawn",
        "resume",
        "clock_offset",
        "clock_drift",
        "clock_bump",
        "clock_strobe",
        "conn_reset",
        "conn_stall",
        "role",
    ] {
        counts.insert(k.to_string(), json!(c.kind(k)));
    }
    counts
}

/// `failure`: null, or what failed and the failing event when one was found.
fn failure_json(meta: &ReportMeta, events: &[Event], failure: Option<&FailureSpot>) -> Value {
    let Some(f) = failure else { return Value::Null };
    let mut m = Map::new();
    m.insert("description".into(), json!(sanitize(&f.description, TEXT_CHARS)));
    if let Some(engine) = &meta.failure {
        m.insert("kind".into(), json!(engine.kind));
    }
    match f.index {
        Some(i) => {
            let ev = &events[i];
            m.insert("event_index".into(), json!(i));
            m.insert("time".into(), json!(ev.time.as_ns()));
            m.insert("node".into(), json!(ev.node));
            m.insert("node_name".into(), json!(sanitize(&node_name(meta, ev.node), 200)));
            m.insert("event".into(), json!(sanitize(&describe(meta, ev), TEXT_CHARS)));
        }
        None => {
            m.insert("event_index".into(), Value::Null);
        }
    }
    Value::Object(m)
}

/// `failed_invariants`: the first [`MAX_FAILED_INVARIANTS`].
fn failed_invariants_json(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.kind {
            EventKind::Invariant { name, ok: false } => Some(json!({
                "name": sanitize(name, TEXT_CHARS),
                "node": e.node,
                "time": e.time.as_ns(),
                "event_index": i,
            })),
            _ => None,
        })
        .take(MAX_FAILED_INVARIANTS)
        .collect()
}

/// One entry of `nodes`: node `n`'s console tail, faults and exit.
fn node_json(meta: &ReportMeta, events: &[Event], n: engine::NodeId) -> Value {
    let mine = || events.iter().filter(move |e| e.node == n);
    let console: Vec<&str> = mine()
        .filter_map(|e| match &e.kind {
            EventKind::Console { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let last_console: Vec<String> =
        console[console.len().saturating_sub(LAST_CONSOLE_LINES)..].iter().map(|t| sanitize(t, TEXT_CHARS)).collect();
    let exit = events
        .iter()
        .rev()
        .filter(|e| e.node == n)
        .find_map(|e| match &e.kind {
            EventKind::Exit { status, signal, panic } => Some(json!({
                "time": e.time.as_ns(), "status": status, "signal": signal, "panic": panic,
            })),
            _ => None,
        })
        .unwrap_or(Value::Null);
    json!({
        "node": n,
        "name": sanitize(&node_name(meta, n), 200),
        "console_lines": console.len(),
        "last_console": last_console,
        "crashes": mine().filter(|e| matches!(e.kind, EventKind::Crash { .. })).count(),
        "restarts": mine().filter(|e| matches!(e.kind, EventKind::Restart)).count(),
        "pauses": mine().filter(|e| matches!(e.kind, EventKind::Pause { .. })).count(),
        "kills": mine().filter(|e| matches!(e.kind, EventKind::Kill { .. })).count(),
        "clock_faults": mine().filter(|e| is_clock_fault(&e.kind)).count(),
        "hung": mine().any(|e| matches!(e.kind, EventKind::Hung)),
        "exit": exit,
    })
}
