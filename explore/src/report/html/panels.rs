//! The panels above the diagram: the title line, the failure (or pass)
//! box, the count chips, the node table and the index of faults and failed
//! checks.

use super::layout::{part_file, Page, View, PARTS_DIR};
use super::{MAX_INDEX_ENTRIES, TITLE_CHARS};
use crate::report::text::COMMAND_LINES;
use crate::report::{describe, esc, exit_text, fmt_time, fmt_time_ns, node_label, node_name, Counts};
use engine::trace::{Event, EventKind};
use std::fmt::Write as _;

/// Everything above the diagram, in page order.
pub(super) fn header(p: &Page, h: &mut String) {
    title(p, h);
    failure(p, h);
    h.push_str("<section class=\"summary\">\n<p class=\"chips\">");
    chips(p, h);
    h.push_str("</p>\n<div class=\"sumrow\">\n");
    node_table(p, h);
    fault_index(p, h);
    sdk_assertions(p, h);
    composer_commands(p, h);
    h.push_str("</div>\n</section>\n");
}

/// The Antithesis SDK's assertions of the whole execution, declared or
/// evaluated, with their counts and this execution's verdicts (none
/// without `@antithesis` lines).
fn sdk_assertions(p: &Page, h: &mut String) {
    let m = p.meta();
    let props = checker::antithesis::properties_of(p.a.events, |n| node_name(m, n));
    if props.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<details open><summary>Antithesis SDK assertions ({})</summary>\n<table class=\"nodes\">\n\
         <tr><th>assertion</th><th>where</th><th>passing</th><th>failing</th><th>nodes</th><th>in this execution</th></tr>",
        props.len()
    );
    for c in props.values() {
        let verdict = match c.failure() {
            None => "passed".to_string(),
            Some(why) => format!("<b>{why}</b>"),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{verdict}</td></tr>",
            esc(&c.title(), TITLE_CHARS),
            esc(&c.location, TITLE_CHARS),
            c.passes,
            c.fails,
            esc(&c.nodes.join(", "), TITLE_CHARS)
        );
    }
    h.push_str("</table>\n</details>\n");
}

/// Test Composer's commands of the execution: runs, non-zero exits.
fn composer_commands(p: &Page, h: &mut String) {
    let commands = checker::antithesis::composer_commands(p.a.events);
    if commands.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<details open><summary>Test Composer commands ({})</summary>\n<table class=\"nodes\">\n\
         <tr><th>command</th><th>runs</th><th>non-zero</th><th>first non-zero status</th></tr>",
        commands.len()
    );
    for (name, c) in &commands {
        let first = c.first_failed_status.map(|s| format!("<b>{s}</b>")).unwrap_or_default();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{first}</td></tr>",
            esc(name, TITLE_CHARS),
            c.runs,
            c.failed
        );
    }
    h.push_str("</table>\n</details>\n");
}

/// Faults and failed checks: listed in the index at the top of the page,
/// each with an anchor in the diagram.
pub(super) fn is_notable(k: &EventKind) -> bool {
    crate::report::is_fault(k)
        || matches!(k, EventKind::Hung | EventKind::Exit { .. } | EventKind::Invariant { ok: false, .. })
}

/// The heading and the one-line facts of the execution.
fn title(p: &Page, h: &mut String) {
    let (a, m) = (p.a, p.meta());
    let _ = writeln!(
        h,
        "<header>\n<h1>simcluster report: {}</h1>\n<p class=\"meta\">seed <b>{}</b> &#xB7; strategy <b>{}</b> &#xB7; \
         execution <b>{}</b> &#xB7; <b>{}</b> events &#xB7; virtual time <b>{}</b> &#xB7; <b>{}</b> nodes &#xB7; \
         trace <code>{}</code></p>\n</header>",
        esc(&m.cluster, 120),
        m.seed,
        esc(&m.strategy, 200),
        m.execution,
        a.events.len(),
        fmt_time_ns(a.end_time()),
        a.nodes.len(),
        esc(&m.trace_hash, 128)
    );
}

/// What failed, where, with links into the diagram and the console log;
/// or a green box when nothing failed.
fn failure(p: &Page, h: &mut String) {
    let m = p.meta();
    let Some(f) = &p.a.failure else {
        h.push_str("<section class=\"pass\"><h2>&#x2713; No failure recorded</h2></section>\n");
        return;
    };
    let _ = writeln!(
        h,
        "<section class=\"failure\">\n<h2>&#x2717; Failure</h2>\n<p class=\"desc\">{}</p>",
        esc(&f.description, 4000)
    );
    if let Some(i) = f.index {
        let ev = &p.events()[i];
        let _ = writeln!(
            h,
            "<p>At <b>t={}</b> on <b class=\"{}\">{}</b>, event #{i}: <code>{}</code></p>",
            fmt_time_ns(ev.time.as_ns()),
            p.cclass(ev.node),
            esc(&node_label(m, ev.node), 80),
            esc(&describe(m, ev), TITLE_CHARS)
        );
        h.push_str(
            "<p><a href=\"#failure\">&#x2192; show it in the diagram</a> &#xB7; \
             <a href=\"#console-failure\">&#x2192; show it in the console log</a></p>\n",
        );
    }
    if let Some((node, name, lines)) = crate::report::command_output(p.a).filter(|(_, _, l)| !l.is_empty()) {
        let shown = &lines[lines.len().saturating_sub(COMMAND_LINES)..];
        let _ = write!(
            h,
            "<details open><summary>Console of {} while <code>{}</code> ran: its output, and anything else the node \
             printed (last {} of {} lines)</summary><pre class=\"cmdout\">",
            esc(&node_label(m, node), 80),
            esc(&name, 80),
            shown.len(),
            lines.len()
        );
        for &i in shown {
            if let EventKind::Console { text } = &p.events()[i].kind {
                let _ = writeln!(h, "{}", esc(text, TITLE_CHARS * 3));
            }
        }
        h.push_str("</pre></details>\n");
    }
    h.push_str("</section>\n");
}

/// One chip per count; a count that is a fault or a failure is hot when
/// not zero.
fn chips(p: &Page, h: &mut String) {
    for (k, v, hot) in chip_counts(&p.a.counts, p.events()) {
        let _ = write!(h, "<span class=\"chip{}\"><b>{v}</b> {k}</span> ", if hot { " hot" } else { "" });
    }
}

/// (label, count, hot) of each chip, in display order.
fn chip_counts(c: &Counts, events: &[Event]) -> [(&'static str, u64, bool); 18] {
    let panics = events.iter().filter(|e| matches!(e.kind, EventKind::Exit { panic: true, .. })).count();
    let clock = c.kind("clock_offset") + c.kind("clock_drift") + c.kind("clock_bump") + c.kind("clock_strobe");
    let conn = c.kind("conn_reset") + c.kind("conn_stall");
    [
        ("sent", c.sent, false),
        ("delivered", c.delivered, false),
        ("duplicates", c.duplicates, c.duplicates > 0),
        ("dropped", c.dropped, c.dropped > 0),
        ("in flight at end", c.in_flight, false),
        ("partitions", c.kind("partition"), c.kind("partition") > 0),
        ("crashes", c.kind("crash"), c.kind("crash") > 0),
        ("power failures", c.kind("power_failure"), c.kind("power_failure") > 0),
        ("connection faults", conn, conn > 0),
        ("restarts", c.kind("restart"), false),
        ("disk faults", c.kind("disk_fault"), c.kind("disk_fault") > 0),
        ("pauses", c.kind("pause"), c.kind("pause") > 0),
        ("kills", c.kind("kill"), c.kind("kill") > 0),
        ("clock faults", clock, clock > 0),
        ("hung", c.kind("hung"), c.kind("hung") > 0),
        ("panics", panics as u64, panics > 0),
        ("invariants failed", c.invariants_failed, c.invariants_failed > 0),
        ("console lines", c.kind("console"), false),
    ]
}

/// One row per guest node: its counts and how it ended.
fn node_table(p: &Page, h: &mut String) {
    let m = p.meta();
    h.push_str("<table class=\"nodes\">\n<tr><th>node</th><th>name</th><th>console lines</th><th>sent</th><th>received</th><th>crashes</th><th>final state</th></tr>\n");
    for &n in &p.a.nodes {
        let s = NodeSummary::of(p.events(), n);
        let _ = writeln!(
            h,
            "<tr><td class=\"{}\"><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.cclass(n),
            n,
            esc(&node_name(m, n), 80),
            s.console,
            s.sent,
            s.received,
            s.crashes,
            esc(&s.state, 100)
        );
    }
    h.push_str("</table>\n");
}

/// A node's row in the node table.
struct NodeSummary {
    console: u64,
    sent: u64,
    received: u64,
    crashes: u64,
    /// How the node ended: `up`, `up (ready)`, `crashed at ...`, ...
    state: String,
}

impl NodeSummary {
    fn of(events: &[Event], n: engine::NodeId) -> NodeSummary {
        let mut s = NodeSummary { console: 0, sent: 0, received: 0, crashes: 0, state: String::from("up") };
        let mut booted = false;
        for e in events.iter().filter(|e| e.node == n) {
            match &e.kind {
                EventKind::Console { .. } => s.console += 1,
                EventKind::Send { .. } => s.sent += 1,
                EventKind::Deliver { .. } => s.received += 1,
                EventKind::Crash { .. } => {
                    s.crashes += 1;
                    s.state = format!("crashed at {}", fmt_time(e.time.as_ns()));
                }
                EventKind::Boot | EventKind::Restart => {
                    booted = true;
                    s.state = "up".into();
                }
                EventKind::Ready => s.state = "up (ready)".into(),
                EventKind::Hung => s.state = format!("hung at {}", fmt_time(e.time.as_ns())),
                EventKind::Exit { status, signal, panic } => {
                    s.state = format!("{} at {}", exit_text(*status, *signal, *panic), fmt_time(e.time.as_ns()))
                }
                _ => {}
            }
        }
        if !booted && !events.iter().any(|e| e.node == n) {
            s.state = "no events".into();
        }
        s
    }
}

/// An index of faults and checks, linking into the diagram; at most
/// [`MAX_INDEX_ENTRIES`] entries.
fn fault_index(p: &Page, h: &mut String) {
    let (m, events) = (p.meta(), p.events());
    let notable: Vec<usize> = events.iter().enumerate().filter(|(_, e)| is_notable(&e.kind)).map(|(i, _)| i).collect();
    if notable.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<details open><summary>Faults and failed checks ({})</summary>\n<ol class=\"index\">",
        notable.len()
    );
    for &i in notable.iter().take(MAX_INDEX_ENTRIES) {
        let e = &events[i];
        let text = format!("t={} {}: {}", fmt_time(e.time.as_ns()), node_label(m, e.node), describe(m, e));
        let cls = if p.a.failure_index() == Some(i) { " class=\"failitem\"" } else { "" };
        match p.l.row_of[i] {
            Some(r) if p.l.shown[r] || p.parts > 0 => {
                let _ = writeln!(
                    h,
                    "<li{cls}><a href=\"{}\">{}</a>{}</li>",
                    p.link_to_row(r, &format!("ev{i}")),
                    esc(&text, TITLE_CHARS),
                    if p.l.shown[r] { "" } else { " <i>(in a part of the whole run)</i>" }
                );
            }
            _ => {
                let _ = writeln!(h, "<li{cls}>{}</li>", esc(&text, TITLE_CHARS));
            }
        }
    }
    if notable.len() > MAX_INDEX_ENTRIES {
        let _ = writeln!(h, "<li><i>… {} more not listed</i></li>", notable.len() - MAX_INDEX_ENTRIES);
    }
    h.push_str("</ol>\n</details>\n");
}

/// The top of a part of the whole run: its title, where it is, links to
/// the neighbouring parts and back to the report.
pub(super) fn part_header(p: &Page, h: &mut String) {
    let m = p.meta();
    let _ = writeln!(
        h,
        "<header>\n<h1>simcluster report: {}, the whole run</h1>\n<p class=\"meta\">seed <b>{}</b> &#xB7; strategy <b>{}</b> &#xB7; \
         execution <b>{}</b> &#xB7; trace <code>{}</code></p>\n</header>",
        esc(&m.cluster, 120),
        m.seed,
        esc(&m.strategy, 200),
        m.execution,
        esc(&m.trace_hash, 128)
    );
    part_nav(p, h);
}

/// Links through the parts: the report, the first, previous, next and
/// last part, and every part by number with its time span.
pub(super) fn part_nav(p: &Page, h: &mut String) {
    let View::Part(k) = p.view else { return };
    let rows = &p.l.rows;
    let span = |j: usize| {
        let first = j * super::PART_ROWS;
        let last = ((j + 1) * super::PART_ROWS).min(rows.len()) - 1;
        (first, last, rows[first].time, rows[last].time)
    };
    let (first, last, t0, t1) = span(k);
    let _ = write!(h, "<nav class=\"parts\"><a href=\"../report.html\">&#x2191; the report</a> &#xB7; ");
    let link = |j: usize, label: &str| format!("<a href=\"{}\">{label}</a>", part_file(j));
    if k > 0 {
        let _ = write!(h, "{} &#xB7; {} &#xB7; ", link(0, "&#xAB; first"), link(k - 1, "&#x2039; previous"));
    }
    let _ = write!(
        h,
        "<b>part {} of {}</b>: rows {}&#x2013;{} of {}, t={} &#x2026; {}",
        k + 1,
        p.parts,
        first + 1,
        last + 1,
        rows.len(),
        fmt_time(t0),
        fmt_time(t1)
    );
    if k + 1 < p.parts {
        let _ = write!(h, " &#xB7; {} &#xB7; {}", link(k + 1, "next &#x203A;"), link(p.parts - 1, "last &#xBB;"));
    }
    h.push_str("<br>");
    for j in 0..p.parts {
        let (_, _, a, b) = span(j);
        let title = format!("t={} … {}", fmt_time(a), fmt_time(b));
        if j == k {
            let _ = write!(h, "<b title=\"{title}\">{}</b> ", j + 1);
        } else {
            let _ = write!(h, "<a href=\"{}\" title=\"{title}\">{}</a> ", part_file(j), j + 1);
        }
    }
    h.push_str("</nav>\n");
}

/// The line under the report's diagram heading that leads into the parts.
pub(super) fn parts_link(p: &Page) -> String {
    if p.parts == 0 {
        return String::new();
    }
    format!(
        " The whole run, {} rows, is in {} parts: <a href=\"{PARTS_DIR}/{}\">start at part 1</a>, or follow a \
         left-out stretch's link.",
        p.l.rows.len(),
        p.parts,
        part_file(0)
    )
}
