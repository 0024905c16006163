//! The terminal summary.

use super::{describe, fmt_dur, fmt_time, fmt_time_ns, node_label, sanitize, Analysis, OpEnd, ReportMeta};
use engine::trace::{Event, EventKind};
use engine::Actor;
use std::fmt::Write as _;

/// How many events per node the summary lists before the failure.
pub const LAST_EVENTS_PER_NODE: usize = 8;
const LINE_CHARS: usize = 160;

/// A compact terminal summary: what failed and where, counts, and the last
/// `LAST_EVENTS_PER_NODE` events of each node up to the failure (or the
/// end), `Run` omitted. Guest text is stripped of control characters.
pub fn render_text(meta: &ReportMeta, events: &[Event]) -> String {
    let a = Analysis::new(meta, events);
    let mut s = String::new();
    headline(&a, &mut s);
    failure(&a, &mut s);
    command_output(&a, &mut s);
    counts(&a, &mut s);
    faults(&a, &mut s);
    failing_ops(&a, &mut s);
    roles(&a, &mut s);
    last_events(&a, &mut s);
    s
}

/// The run, the trace and the nodes.
fn headline(a: &Analysis, s: &mut String) {
    let meta = a.meta;
    let _ = writeln!(
        s,
        "simcluster report: cluster {} seed {} strategy {} execution {}",
        sanitize(&meta.cluster, 80),
        meta.seed,
        sanitize(&meta.strategy, 80),
        meta.execution
    );
    let nodes: Vec<String> = a.nodes.iter().map(|&n| sanitize(&node_label(meta, n), 40)).collect();
    let _ = writeln!(
        s,
        "trace {}: {} events ({} node runs), virtual time {}, nodes: {}",
        sanitize(&meta.trace_hash, 80),
        a.events.len(),
        a.counts.grants,
        fmt_time(a.end_time()),
        if nodes.is_empty() { "none".to_string() } else { nodes.join(", ") }
    );
}

/// What failed and where, or that the execution passed.
fn failure(a: &Analysis, s: &mut String) {
    let meta = a.meta;
    match &a.failure {
        Some(f) => {
            let _ = writeln!(s, "FAILED: {}", sanitize(&f.description, 400));
            if let Some(i) = f.index {
                let ev = &a.events[i];
                let _ = writeln!(
                    s,
                    "  at t={} on {} (event #{i}): {}",
                    fmt_time_ns(ev.time.as_ns()),
                    sanitize(&node_label(meta, ev.node), 40),
                    sanitize(&describe(meta, ev), LINE_CHARS)
                );
            }
        }
        None => {
            let _ = writeln!(s, "passed: no failure recorded");
        }
    }
}

/// Console lines of the failing command listed at most (the last ones).
pub const COMMAND_LINES: usize = 20;
/// Faults listed at most (the first and the last ones).
pub const FAULTS_LISTED: usize = 40;
/// Operations on the failing key listed at most.
pub const FAILING_OPS_LISTED: usize = 30;

/// The failing command's console lines (see [`super::command_output`]).
fn command_output(a: &Analysis, s: &mut String) {
    let Some((node, name, lines)) = super::command_output(a) else { return };
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "console of {} while {} ran (its output, and anything else the node printed), last {} of {} lines:",
        sanitize(&node_label(a.meta, node), 40),
        sanitize(&name, 80),
        COMMAND_LINES.min(lines.len()),
        lines.len()
    );
    for &i in &lines[lines.len().saturating_sub(COMMAND_LINES)..] {
        if let EventKind::Console { text } = &a.events[i].kind {
            let _ = writeln!(s, "  | {}", sanitize(text, LINE_CHARS));
        }
    }
}

/// Every fault (up to [`FAULTS_LISTED`]: the first half and the last half
/// of them), the failure among them.
fn faults(a: &Analysis, s: &mut String) {
    let f = &a.story.faults;
    if f.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "faults in order ({}{}):",
        f.len(),
        if f.len() > FAULTS_LISTED { ", the first and last" } else { "" }
    );
    let fail = a.failure_index();
    let mut failure_said = fail.is_none();
    let head = FAULTS_LISTED / 2;
    for (k, &i) in f.iter().enumerate() {
        if f.len() > FAULTS_LISTED && k >= head && k < f.len() - (FAULTS_LISTED - head) {
            if k == head {
                let _ = writeln!(s, "     ... {} more", f.len() - FAULTS_LISTED);
            }
            continue;
        }
        if !failure_said && fail.is_some_and(|x| x < i) {
            failure_line(a, s);
            failure_said = true;
        }
        let ev = &a.events[i];
        let _ = writeln!(
            s,
            "     #{i:<6} t={:<16} {}: {}",
            fmt_time(ev.time.as_ns()),
            sanitize(&node_label(a.meta, ev.node), 40),
            sanitize(&describe(a.meta, ev), LINE_CHARS)
        );
    }
    if !failure_said {
        failure_line(a, s);
    }
}

fn failure_line(a: &Analysis, s: &mut String) {
    let Some(i) = a.failure_index() else { return };
    let ev = &a.events[i];
    let _ = writeln!(
        s,
        "  >> #{i:<6} t={:<16} {}: {} (the failure)",
        fmt_time(ev.time.as_ns()),
        sanitize(&node_label(a.meta, ev.node), 40),
        sanitize(&describe(a.meta, ev), LINE_CHARS)
    );
}

/// The history's counts, and the operations on the failing key with the
/// faults that came between them.
fn failing_ops(a: &Analysis, s: &mut String) {
    let st = &a.story;
    if st.ops.is_empty() {
        return;
    }
    let count = |e: OpEnd| st.ops.iter().filter(|o| o.end == e).count();
    let _ = writeln!(
        s,
        "history: {} operations ({} ok, {} fail, {} info){}",
        st.ops.len(),
        count(OpEnd::Ok),
        count(OpEnd::Fail),
        count(OpEnd::Info),
        st.clock_note.as_ref().map(|n| format!("; {}", sanitize(n, 200))).unwrap_or_default()
    );
    let Some(key) = &st.failing_key else { return };
    let ops: Vec<_> = st.failing_ops().collect();
    let _ = writeln!(
        s,
        "operations on the failing key {} ({}), with the faults between them:",
        sanitize(key, 80),
        ops.len()
    );
    for (k, o) in ops.iter().enumerate().take(FAILING_OPS_LISTED) {
        let _ = writeln!(
            s,
            "     t={} .. {}  {} {} (process {})",
            fmt_time(o.call),
            if o.pending { "never".to_string() } else { fmt_time(o.ret) },
            if o.pending { "pending" } else { o.end.name() },
            sanitize(&o.op.to_string(), 200),
            o.process
        );
        let next = ops.get(k + 1).map_or(u64::MAX, |n| n.call);
        for &i in st.faults.iter().filter(|&&i| {
            let t = a.events[i].time.as_ns();
            t >= o.ret && t < next
        }) {
            let ev = &a.events[i];
            let _ = writeln!(
                s,
                "  !! t={} {}: {} ({} after the completion above)",
                fmt_time(ev.time.as_ns()),
                sanitize(&node_label(a.meta, ev.node), 40),
                sanitize(&describe(a.meta, ev), LINE_CHARS),
                fmt_dur(ev.time.as_ns() - o.ret)
            );
        }
    }
    if ops.len() > FAILING_OPS_LISTED {
        let _ = writeln!(s, "     ... {} more", ops.len() - FAILING_OPS_LISTED);
    }
}

/// Messages, faults, node faults and checks, one line each.
fn counts(a: &Analysis, s: &mut String) {
    let (c, events) = (&a.counts, a.events);
    let _ = writeln!(
        s,
        "messages: {} sent, {} delivered ({} duplicates), {} dropped, {} in flight at the end",
        c.sent, c.delivered, c.duplicates, c.dropped, c.in_flight
    );
    let _ = writeln!(
        s,
        "faults: {} partitions, {} heals, {} crashes{}, {} restarts, {} disk faults{}, {} hung, {} exits ({} panics)",
        c.kind("partition"),
        c.kind("heal"),
        c.kind("crash"),
        match c.kind("power_failure") {
            0 => String::new(),
            n => format!(" ({n} power failures of several nodes)"),
        },
        c.kind("restart"),
        c.kind("disk_fault"),
        disk_fault_kinds(events),
        c.kind("hung"),
        c.kind("exit"),
        events.iter().filter(|e| matches!(e.kind, EventKind::Exit { panic: true, .. })).count()
    );
    let (resets, stalls) = (c.kind("conn_reset"), c.kind("conn_stall"));
    if resets + stalls > 0 {
        let _ = writeln!(s, "connection faults: {resets} resets, {stalls} stalls");
    }
    let _ = writeln!(
        s,
        "node faults: {} pauses, {} resumes{}; clock: {} offsets, {} drifts, {} bumps, {} strobes",
        c.kind("pause"),
        c.kind("resume"),
        match c.kind("kill") {
            0 => String::new(),
            n => format!(", {n} kills, {} respawns", c.kind("respawn")),
        },
        c.kind("clock_offset"),
        c.kind("clock_drift"),
        c.kind("clock_bump"),
        c.kind("clock_strobe")
    );
    let _ = writeln!(
        s,
        "checks: {} invariants ({} failed), {} commands, {} console lines, {} notes",
        c.kind("invariant"),
        c.invariants_failed,
        c.kind("command"),
        c.kind("console"),
        c.kind("note")
    );
}

/// How many faults the roles section lists at most.
const ROLE_FAULTS: usize = 20;

/// Which node held which role (`[roles]`) when each fault hit; nothing
/// without roles.
fn roles(a: &Analysis, s: &mut String) {
    let faults = super::roles::faults_with_roles(a.events);
    let roles = a.events.iter().filter(|e| matches!(e.kind, EventKind::Role { .. })).count();
    if roles == 0 {
        return;
    }
    let _ = writeln!(s, "roles: {roles} changes; at each fault (up to {ROLE_FAULTS}):");
    for f in faults.iter().take(ROLE_FAULTS) {
        let _ = writeln!(s, "  {}", sanitize(&super::roles::describe_fault(a.meta, a.events, f), LINE_CHARS * 2));
    }
    if faults.is_empty() {
        let _ = writeln!(s, "  no fault");
    }
}

/// The last [`LAST_EVENTS_PER_NODE`] events of the engine and each node up
/// to the failure (or the end), the failing one marked `>>`.
fn last_events(a: &Analysis, s: &mut String) {
    let (meta, events) = (a.meta, a.events);
    let end = a.failure_index().map(|i| i + 1).unwrap_or(events.len());
    let _ = writeln!(
        s,
        "last events {} (up to {} per node, run events omitted):",
        if a.failure_index().is_some() { "up to the failure" } else { "of the execution" },
        LAST_EVENTS_PER_NODE
    );
    let mut order = vec![Actor::Engine];
    order.extend(a.nodes.iter().map(|&n| Actor::Node(n)));
    for node in order {
        let mut last: Vec<usize> = events[..end]
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, e)| e.node == node && !matches!(e.kind, EventKind::Run { .. }))
            .map(|(i, _)| i)
            .take(LAST_EVENTS_PER_NODE)
            .collect();
        if last.is_empty() {
            continue;
        }
        last.reverse();
        let _ = writeln!(s, "  {}:", sanitize(&node_label(meta, node), 40));
        for i in last {
            let ev = &events[i];
            let mark = if Some(i) == a.failure_index() { ">>" } else { "  " };
            let dup = if a.dup[i] { " (duplicate)" } else { "" };
            let _ = writeln!(
                s,
                "  {mark} #{i:<6} t={:<16} {}{dup}",
                fmt_time(ev.time.as_ns()),
                sanitize(&describe(meta, ev), LINE_CHARS)
            );
        }
    }
}

/// ` (2 corrupt_read, 1 misdirect)`: the disk faults by kind, or nothing.
fn disk_fault_kinds(events: &[Event]) -> String {
    let mut by: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for e in events {
        if let EventKind::DiskFault { fault, .. } = &e.kind {
            *by.entry(fault.as_str()).or_insert(0) += 1;
        }
    }
    if by.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = by.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!(" ({})", parts.join(", "))
}
