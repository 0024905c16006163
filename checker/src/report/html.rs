//! The HTML report: one self-contained page (inline CSS and SVG; no
//! JavaScript, no external resources).
//!
//! Layout of the space-time diagram: one vertical lane per guest node, the
//! engine's partitions and notes in a column on the right, virtual time
//! flowing downward. Time is not linear: each row holds the events of one
//! instant (events at the same virtual time on different nodes share a row
//! when nothing orders them), so idle stretches take no space; a dotted
//! line marks a long idle stretch, and a time label starts every row whose
//! time differs from the one above. `Run` events and console lines take no
//! rows (the console log sits beside the diagram).

use super::{
    clip, describe, esc, esc_html, exit_text, fmt_dur, fmt_time, fmt_time_ns, node_label,
    node_name, sanitize, Analysis, ReportMeta,
};
use crate::trace::{DiskOp, Event, EventKind, ENGINE};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Most diagram rows shown; longer traces show the first [`HEAD_ROWS`] and
/// the rows up to [`ROWS_AFTER_FAILURE`] after the failure (or the end),
/// with a marked gap between.
pub const MAX_ROWS: usize = 1500;
pub const HEAD_ROWS: usize = 150;
pub const ROWS_AFTER_FAILURE: usize = 150;
/// Console table, per node (engine included): the first lines, the lines
/// just before the failure (or the end) and just after it.
pub const CONSOLE_HEAD: usize = 100;
pub const CONSOLE_BEFORE_FAILURE: usize = 300;
pub const CONSOLE_AFTER_FAILURE: usize = 50;
/// Fault/check index entries at the top of the page.
pub const MAX_INDEX_ENTRIES: usize = 100;
const LINE_CHARS: usize = 1000;
const TITLE_CHARS: usize = 300;

const ROW_H: i64 = 22;
const GAP_H: i64 = 40;
const BREAK_H: i64 = 14;
const TOP: i64 = 10;
const HEAD_H: i64 = 44;
const GUTTER: i64 = 140;
const LANE_W: i64 = 200;
const NOTES_W: i64 = 320;
const BOX_CHARS: usize = 25;
const LABEL_CHARS: usize = 18;
const NOTE_CHARS: usize = 44;
/// An idle stretch is marked when a row is this much later than the one
/// above (at least; see `idle_threshold`).
const MIN_IDLE_NS: u64 = 50_000_000;

const PALETTE: [&str; 8] = [
    "#1f6fb4", "#2a9d4a", "#8e44ad", "#b9770e", "#148a9c", "#b8336a", "#566573", "#7d6608",
];

struct Row {
    time: u64,
    events: Vec<usize>,
    engine: bool,
}

struct Gap {
    y_top: i64,
    first: usize,
    last: usize,
}

/// Rows, which are shown, and where.
struct Layout {
    rows: Vec<Row>,
    row_of: Vec<Option<usize>>,
    shown: Vec<bool>,
    y: Vec<i64>,
    gaps: Vec<Gap>,
    breaks: Vec<(i64, u64)>,
    height: i64,
    fail_row: Option<usize>,
}

impl Layout {
    fn new(a: &Analysis) -> Layout {
        let events = a.events;
        let mut rows: Vec<Row> = Vec::new();
        let mut row_of = vec![None; events.len()];
        for (i, ev) in events.iter().enumerate() {
            if matches!(ev.kind, EventKind::Run { .. } | EventKind::Console { .. }) {
                continue;
            }
            let engine = ev.node == ENGINE;
            let here = rows.len().wrapping_sub(1);
            let fresh = match rows.last() {
                None => true,
                Some(r) => {
                    r.engine
                        || engine
                        || r.time != ev.time
                        || r.events.iter().any(|&j| events[j].node == ev.node)
                        || a.partner[i].is_some_and(|s| row_of[s] == Some(here))
                }
            };
            if fresh {
                rows.push(Row {
                    time: ev.time,
                    events: Vec::new(),
                    engine,
                });
            }
            let r = rows.len() - 1;
            rows[r].events.push(i);
            row_of[i] = Some(r);
        }
        let total = rows.len();
        let fail_row = a.failure_index().and_then(|f| {
            (0..=f)
                .rev()
                .find_map(|j| row_of[j])
                .or_else(|| (total > 0).then_some(0))
        });

        let mut shown = vec![false; total];
        if total <= MAX_ROWS {
            shown.iter_mut().for_each(|s| *s = true);
        } else {
            let focus = fail_row.unwrap_or(total - 1);
            let end = (focus + 1 + ROWS_AFTER_FAILURE).min(total);
            let start = end.saturating_sub(MAX_ROWS - HEAD_ROWS);
            shown[..HEAD_ROWS].iter_mut().for_each(|s| *s = true);
            shown[start..end].iter_mut().for_each(|s| *s = true);
        }

        let threshold = idle_threshold(&rows);
        let mut y_of = vec![0i64; total];
        let mut gaps = Vec::new();
        let mut breaks = Vec::new();
        let mut y = TOP;
        let mut r = 0;
        while r < total {
            if shown[r] {
                if r > 0 && shown[r - 1] {
                    let d = rows[r].time.saturating_sub(rows[r - 1].time);
                    if d >= threshold {
                        breaks.push((y + BREAK_H / 2, d));
                        y += BREAK_H;
                    }
                }
                y_of[r] = y + ROW_H / 2;
                y += ROW_H;
                r += 1;
            } else {
                let first = r;
                while r < total && !shown[r] {
                    r += 1;
                }
                gaps.push(Gap {
                    y_top: y,
                    first,
                    last: r - 1,
                });
                y_of[first..r].iter_mut().for_each(|v| *v = y + GAP_H / 2);
                y += GAP_H;
            }
        }
        Layout {
            rows,
            row_of,
            shown,
            y: y_of,
            gaps,
            breaks,
            height: y + TOP,
            fail_row,
        }
    }

    /// Centre of the event's row (or of the gap it was elided into).
    fn y(&self, i: usize) -> Option<i64> {
        self.row_of[i].map(|r| self.y[r])
    }

    fn shown(&self, i: usize) -> bool {
        self.row_of[i].is_some_and(|r| self.shown[r])
    }

    /// Top edge of the event's row.
    fn top(&self, i: usize) -> Option<i64> {
        self.row_of[i].map(|r| {
            if self.shown[r] {
                self.y[r] - ROW_H / 2
            } else {
                self.y[r]
            }
        })
    }
}

/// A row gap worth marking: 50 milliseconds, or ten times the median gap
/// between rows when that is more.
fn idle_threshold(rows: &[Row]) -> u64 {
    let mut deltas: Vec<u64> = rows
        .windows(2)
        .map(|w| w[1].time.saturating_sub(w[0].time))
        .filter(|&d| d > 0)
        .collect();
    if deltas.is_empty() {
        return u64::MAX;
    }
    deltas.sort_unstable();
    MIN_IDLE_NS.max(deltas[deltas.len() / 2].saturating_mul(10))
}

struct Ctx<'a, 'b> {
    a: &'b Analysis<'a>,
    l: Layout,
    lane: BTreeMap<u16, usize>,
    width: i64,
}

impl Ctx<'_, '_> {
    fn x(&self, node: u16) -> Option<i64> {
        self.lane
            .get(&node)
            .map(|&k| GUTTER + LANE_W * k as i64 + LANE_W / 2)
    }
    fn color(&self, node: u16) -> &'static str {
        self.lane
            .get(&node)
            .map(|&k| PALETTE[k % PALETTE.len()])
            .unwrap_or("#555")
    }
    fn cclass(&self, node: u16) -> String {
        match self.lane.get(&node) {
            Some(&k) => format!("c{}", k % PALETTE.len()),
            None => "ce".to_string(),
        }
    }
    fn notes_x(&self) -> i64 {
        GUTTER + LANE_W * self.lane.len() as i64 + 10
    }
    fn meta(&self) -> &ReportMeta {
        self.a.meta
    }
}

/// The HTML report (see the module docs). Deterministic: same input, same
/// bytes. Guest text is escaped and stripped of control characters.
pub fn render_html(meta: &ReportMeta, events: &[Event]) -> String {
    let a = Analysis::new(meta, events);
    let lane: BTreeMap<u16, usize> = a.nodes.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let width = GUTTER + LANE_W * lane.len() as i64 + NOTES_W;
    let cx = Ctx {
        l: Layout::new(&a),
        a: &a,
        lane,
        width,
    };

    let mut h = String::with_capacity(64 * 1024);
    let title = format!(
        "simcluster report: {} seed {} execution {}",
        sanitize(&meta.cluster, 80),
        meta.seed,
        meta.execution
    );
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{}</style>\n</head>\n<body>",
        esc_html(&title),
        css()
    );
    header(&cx, &mut h);
    h.push_str("<div class=\"main\">\n");
    diagram(&cx, &mut h);
    console(&cx, &mut h);
    h.push_str("</div>\n");
    let _ = writeln!(
        h,
        "<footer>Generated by simcluster from trace {}; virtual times in seconds since the \
         cluster booted. Hover over arrows and boxes for details.</footer>\n</body>\n</html>",
        esc(&meta.trace_hash, 80)
    );
    h
}

fn header(cx: &Ctx, h: &mut String) {
    let a = cx.a;
    let m = cx.meta();
    let events = a.events;
    let _ = writeln!(
        h,
        "<header>\n<h1>simcluster report: {}</h1>\n<p class=\"meta\">seed <b>{}</b> &#xB7; strategy <b>{}</b> &#xB7; \
         execution <b>{}</b> &#xB7; <b>{}</b> events &#xB7; virtual time <b>{}</b> &#xB7; <b>{}</b> nodes &#xB7; \
         trace <code>{}</code></p>\n</header>",
        esc(&m.cluster, 120),
        m.seed,
        esc(&m.strategy, 200),
        m.execution,
        events.len(),
        fmt_time_ns(a.end_time()),
        a.nodes.len(),
        esc(&m.trace_hash, 128)
    );

    match &a.failure {
        Some(f) => {
            let _ = writeln!(
                h,
                "<section class=\"failure\">\n<h2>&#x2717; Failure</h2>\n<p class=\"desc\">{}</p>",
                esc(&f.description, 4000)
            );
            if let Some(i) = f.index {
                let ev = &events[i];
                let _ = writeln!(
                    h,
                    "<p>At <b>t={}</b> on <b class=\"{}\">{}</b>, event #{i}: <code>{}</code></p>",
                    fmt_time_ns(ev.time),
                    cx.cclass(ev.node),
                    esc(&node_label(m, ev.node), 80),
                    esc(&describe(m, ev), TITLE_CHARS)
                );
                h.push_str(
                    "<p><a href=\"#failure\">&#x2192; show it in the diagram</a> &#xB7; \
                     <a href=\"#console-failure\">&#x2192; show it in the console log</a></p>\n",
                );
            }
            h.push_str("</section>\n");
        }
        None => {
            h.push_str("<section class=\"pass\"><h2>&#x2713; No failure recorded</h2></section>\n")
        }
    }

    // Counts and nodes.
    let c = &a.counts;
    let panics = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Exit { panic: true, .. }))
        .count();
    h.push_str("<section class=\"summary\">\n<p class=\"chips\">");
    let clock = c.kind("clock_offset") + c.kind("clock_drift") + c.kind("clock_bump") + c.kind("clock_strobe");
    let chips: [(&str, u64, bool); 15] = [
        ("sent", c.sent, false),
        ("delivered", c.delivered, false),
        ("duplicates", c.duplicates, c.duplicates > 0),
        ("dropped", c.dropped, c.dropped > 0),
        ("in flight at end", c.in_flight, false),
        ("partitions", c.kind("partition"), c.kind("partition") > 0),
        ("crashes", c.kind("crash"), c.kind("crash") > 0),
        ("restarts", c.kind("restart"), false),
        ("disk faults", c.kind("disk_fault"), c.kind("disk_fault") > 0),
        ("pauses", c.kind("pause"), c.kind("pause") > 0),
        ("clock faults", clock, clock > 0),
        ("hung", c.kind("hung"), c.kind("hung") > 0),
        ("panics", panics as u64, panics > 0),
        (
            "invariants failed",
            c.invariants_failed,
            c.invariants_failed > 0,
        ),
        ("console lines", c.kind("console"), false),
    ];
    for (k, v, hot) in chips {
        let _ = write!(
            h,
            "<span class=\"chip{}\"><b>{v}</b> {k}</span> ",
            if hot { " hot" } else { "" }
        );
    }
    h.push_str("</p>\n<div class=\"sumrow\">\n<table class=\"nodes\">\n<tr><th>node</th><th>name</th><th>console lines</th><th>sent</th><th>received</th><th>crashes</th><th>final state</th></tr>\n");
    for &n in &a.nodes {
        let mut console = 0;
        let mut sent = 0;
        let mut recv = 0;
        let mut crashes = 0;
        let mut state = String::from("up");
        let mut booted = false;
        for e in events.iter().filter(|e| e.node == n) {
            match &e.kind {
                EventKind::Console { .. } => console += 1,
                EventKind::Send { .. } => sent += 1,
                EventKind::Deliver { .. } => recv += 1,
                EventKind::Crash { .. } => {
                    crashes += 1;
                    state = format!("crashed at {}", fmt_time(e.time));
                }
                EventKind::Boot | EventKind::Restart => {
                    booted = true;
                    state = "up".into();
                }
                EventKind::Ready => state = "up (ready)".into(),
                EventKind::Hung => state = format!("hung at {}", fmt_time(e.time)),
                EventKind::Exit {
                    status,
                    signal,
                    panic,
                } => {
                    state = format!(
                        "{} at {}",
                        exit_text(*status, *signal, *panic),
                        fmt_time(e.time)
                    )
                }
                _ => {}
            }
        }
        if !booted && !events.iter().any(|e| e.node == n) {
            state = "no events".into();
        }
        let _ = writeln!(
            h,
            "<tr><td class=\"{}\"><b>n{n}</b></td><td>{}</td><td>{console}</td><td>{sent}</td><td>{recv}</td><td>{crashes}</td><td>{}</td></tr>",
            cx.cclass(n),
            esc(&node_name(m, n), 80),
            esc(&state, 100)
        );
    }
    h.push_str("</table>\n");

    // An index of faults and checks, linking into the diagram.
    let notable: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| is_notable(&e.kind))
        .map(|(i, _)| i)
        .collect();
    if !notable.is_empty() {
        let _ = writeln!(
            h,
            "<details open><summary>Faults and failed checks ({})</summary>\n<ol class=\"index\">",
            notable.len()
        );
        for &i in notable.iter().take(MAX_INDEX_ENTRIES) {
            let e = &events[i];
            let text = format!(
                "t={} {}: {}",
                fmt_time(e.time),
                node_label(m, e.node),
                describe(m, e)
            );
            let cls = if a.failure_index() == Some(i) {
                " class=\"failitem\""
            } else {
                ""
            };
            if cx.l.shown(i) {
                let _ = writeln!(
                    h,
                    "<li{cls}><a href=\"#ev{i}\">{}</a></li>",
                    esc(&text, TITLE_CHARS)
                );
            } else {
                let _ = writeln!(
                    h,
                    "<li{cls}>{} <i>(not in the diagram window)</i></li>",
                    esc(&text, TITLE_CHARS)
                );
            }
        }
        if notable.len() > MAX_INDEX_ENTRIES {
            let _ = writeln!(
                h,
                "<li><i>… {} more not listed</i></li>",
                notable.len() - MAX_INDEX_ENTRIES
            );
        }
        h.push_str("</ol>\n</details>\n");
    }
    h.push_str("</div>\n</section>\n");
}

/// Faults and failed checks: listed in the index at the top of the page,
/// each with an anchor in the diagram.
fn is_notable(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::Partition { .. }
            | EventKind::Heal
            | EventKind::Crash { .. }
            | EventKind::Restart
            | EventKind::DiskFault { .. }
            | EventKind::Pause { .. }
            | EventKind::ClockBump { .. }
            | EventKind::ClockStrobe { .. }
            | EventKind::Hung
            | EventKind::Exit { .. }
            | EventKind::Invariant { ok: false, .. }
    )
}

/// Pause bars: on the paused node's lane, beside its command bars, from
/// the pause to the resume (or the crash that ended it, or the end of the
/// trace: dashed).
fn pause_bars(cx: &Ctx, h: &mut String) {
    let (l, events, m) = (&cx.l, cx.a.events, cx.meta());
    let mut open: Vec<Option<(usize, i64)>> = vec![None; cx.lane.len()];
    let bar = |h: &mut String, node: u16, from: usize, y0: i64, y1: i64, end: &str, cls: &str| {
        let x = cx.x(node).unwrap_or(0) + 5;
        let title = format!("{}: {}; {end}", node_label(m, node), describe(m, &events[from]));
        let _ = write!(
            h,
            "<rect class=\"pausebar{cls}\" data-kind=\"pause\" x=\"{x}\" y=\"{y0}\" width=\"6\" height=\"{}\"><title>{}</title></rect>",
            (y1 - y0).max(1),
            esc(&title, TITLE_CHARS)
        );
    };
    for (i, e) in events.iter().enumerate() {
        let (Some(&k), Some(y)) = (cx.lane.get(&e.node), l.y(i)) else { continue };
        let end = match e.kind {
            EventKind::Pause { .. } => {
                open[k] = Some((i, y));
                continue;
            }
            EventKind::Resume => format!("resumed at {}", fmt_time(e.time)),
            EventKind::Crash { .. } | EventKind::Exit { .. } | EventKind::Hung => format!("ended by {}", describe(m, e)),
            _ => continue,
        };
        if let Some((from, y0)) = open[k].take() {
            bar(h, e.node, from, y0, y, &end, "");
        }
    }
    for (&n, &k) in cx.lane.iter() {
        if let Some((from, y0)) = open[k] {
            bar(h, n, from, y0, cx.l.height - TOP, "still paused at the end", " open");
        }
    }
    h.push('\n');
}

fn diagram(cx: &Ctx, h: &mut String) {
    let a = cx.a;
    let l = &cx.l;
    let m = cx.meta();
    let events = a.events;
    let w = cx.width;
    let nx = cx.notes_x();
    let lanes_right = GUTTER + LANE_W * cx.lane.len() as i64;

    h.push_str("<section class=\"panel diagram\">\n<h2>Space-time diagram</h2>\n");
    h.push_str(
        "<p class=\"legend\">Time flows down; rows are instants with events, so idle time takes no \
         space (<span class=\"lg-idle\">&#x22EF; idle</span> marks a long pause). \
         <span class=\"lg-msg\">&#x2192;</span> message, coloured by sender \
         (<span class=\"lg-dup\">dashed</span>: duplicate delivery); \
         <span class=\"lg-drop\">&#x2715;</span> frame lost; <span class=\"lg-idle\">&#x2192;?</span> never delivered; \
         <span class=\"lg-band\">shaded band</span>: partition; boxes: commands (bar while running), \
         invariants, crash/restart, exit/hang; <span class=\"lg-flush\">&#x25A0;</span> disk flush; \
         <span class=\"lg-fault\">&#x25C6;</span> disk fault (corrupt read, write error, misdirected write, lost flush); \
         <span class=\"lg-pause\">pause (orange bar until resumed)</span>, \
         <span class=\"lg-clock\">clock offset/drift/bump/strobe</span>. Dotted lane: not booted; dashed: down. \
         Hover for details.</p>\n",
    );
    if l.rows.len() > MAX_ROWS {
        let _ = writeln!(
            h,
            "<p class=\"warn\">{} rows; showing the first {} and the {} around the {} (gaps are marked).</p>",
            l.rows.len(),
            HEAD_ROWS,
            l.shown.iter().filter(|s| **s).count() - HEAD_ROWS,
            if l.fail_row.is_some() { "failure" } else { "end" }
        );
    }
    h.push_str("<div class=\"scroll\">\n");

    // Sticky lane headers.
    let _ = write!(
        h,
        "<svg class=\"sticky\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{HEAD_H}\" viewBox=\"0 0 {w} {HEAD_H}\">\
         <rect width=\"{w}\" height=\"{HEAD_H}\" fill=\"#fff\"/>\
         <text class=\"hd\" x=\"{}\" y=\"18\">virtual time</text>",
        GUTTER - 10
    );
    for (&n, _) in cx.lane.iter() {
        let x = cx.x(n).unwrap_or(0);
        let _ = write!(
            h,
            "<text class=\"lane-hd\" x=\"{x}\" y=\"18\" fill=\"{}\">n{n}</text><text class=\"lane-name\" x=\"{x}\" y=\"34\">{}</text>",
            cx.color(n),
            esc_html(&clip(&node_name(m, n), 28))
        );
    }
    let _ = writeln!(
        h,
        "<text class=\"hd2\" x=\"{nx}\" y=\"18\">engine: partitions, notes</text>\
         <line x1=\"0\" y1=\"{y}\" x2=\"{w}\" y2=\"{y}\" stroke=\"#ccc\"/></svg>",
        y = HEAD_H - 1
    );

    let height = l.height;
    h.push_str("<div class=\"body\">\n");
    // Anchors for links (HTML elements, so fragment navigation is reliable).
    if let Some(r) = l.fail_row {
        let _ = writeln!(
            h,
            "<div id=\"failure\" class=\"anchor\" style=\"top:{}px\"></div>",
            (l.y[r] - 300).max(0)
        );
    }
    for (i, e) in events.iter().enumerate() {
        if is_notable(&e.kind) && l.shown(i) {
            let _ = writeln!(
                h,
                "<div id=\"ev{i}\" class=\"anchor\" style=\"top:{}px\"></div>",
                (l.y(i).unwrap_or(0) - 160).max(0)
            );
        }
    }
    let _ = write!(
        h,
        "<svg class=\"st\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\">\n<defs>"
    );
    for (k, c) in PALETTE.iter().enumerate() {
        let _ = write!(
            h,
            "<marker id=\"ah{k}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"{c}\"/></marker>"
        );
    }
    h.push_str(
        "<marker id=\"ahg\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#999\"/></marker>\
         <pattern id=\"hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"8\" height=\"8\" fill=\"#f4f4f4\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#e0e0e0\" stroke-width=\"3\"/></pattern></defs>\n",
    );

    // Lane backgrounds.
    for (_, &k) in cx.lane.iter() {
        if k % 2 == 1 {
            let _ = write!(
                h,
                "<rect class=\"lanebg\" x=\"{}\" y=\"0\" width=\"{LANE_W}\" height=\"{height}\"/>",
                GUTTER + LANE_W * k as i64
            );
        }
    }
    h.push('\n');

    // Partition bands.
    let mut open: Option<usize> = None;
    let mut bands: Vec<(usize, Option<usize>, i64, i64)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match e.kind {
            EventKind::Partition { .. } => {
                if let Some(p) = open.take() {
                    bands.push((p, Some(i), l.top(p).unwrap_or(0), l.top(i).unwrap_or(0)));
                }
                open = Some(i);
            }
            EventKind::Heal => {
                if let Some(p) = open.take() {
                    bands.push((p, Some(i), l.top(p).unwrap_or(0), l.y(i).unwrap_or(0)));
                }
            }
            _ => {}
        }
    }
    if let Some(p) = open {
        bands.push((p, None, l.top(p).unwrap_or(0), height - TOP));
    }
    for (p, end, y0, y1) in bands {
        let desc = match &events[p].kind {
            EventKind::Partition { description } => description.as_str(),
            _ => "",
        };
        let until = match end {
            Some(e) => match events[e].kind {
                EventKind::Heal => format!("healed at {}", fmt_time(events[e].time)),
                _ => format!("replaced at {}", fmt_time(events[e].time)),
            },
            None => "never healed".to_string(),
        };
        let _ = writeln!(
            h,
            "<g class=\"band\" data-kind=\"partition\"><title>partition {} from {}, {}</title>\
             <rect x=\"{GUTTER}\" y=\"{y0}\" width=\"{}\" height=\"{}\"/>\
             <text class=\"bandlbl\" x=\"{nx}\" y=\"{}\">PARTITION {}</text></g>",
            esc(desc, TITLE_CHARS),
            fmt_time(events[p].time),
            until,
            w - GUTTER,
            (y1 - y0).max(2),
            y0 + 15,
            esc_html(&clip(desc, NOTE_CHARS - 12))
        );
    }

    // Elided gaps and idle breaks.
    for g in &l.gaps {
        let n_events: usize = l.rows[g.first..=g.last]
            .iter()
            .map(|r| r.events.len())
            .sum();
        let _ = writeln!(
            h,
            "<g class=\"gap\"><rect x=\"4\" y=\"{}\" width=\"{}\" height=\"{}\"/>\
             <text x=\"{}\" y=\"{}\">&#x22EF; {} rows ({} events) not shown: {} &#x2026; {} &#x22EF;</text></g>",
            g.y_top + 4,
            w - 8,
            GAP_H - 8,
            w / 2,
            g.y_top + GAP_H / 2 + 4,
            g.last - g.first + 1,
            n_events,
            fmt_time(l.rows[g.first].time),
            fmt_time(l.rows[g.last].time)
        );
    }
    for &(y, d) in &l.breaks {
        let _ = write!(
            h,
            "<line class=\"brk\" x1=\"{GUTTER}\" y1=\"{y}\" x2=\"{lanes_right}\" y2=\"{y}\"/>\
             <text class=\"idle\" x=\"{}\" y=\"{}\">&#x22EF; idle +{}</text>",
            GUTTER - 10,
            y + 3,
            fmt_dur(d)
        );
    }
    h.push('\n');

    // Lane lines: dotted before boot, solid while up, dashed when down.
    #[derive(Clone, Copy, PartialEq)]
    enum St {
        Pre,
        Up,
        Down,
        Stopped,
    }
    let mut state: Vec<(St, i64)> = vec![(St::Up, TOP); cx.lane.len()];
    for e in events {
        if matches!(e.kind, EventKind::Boot) {
            if let Some(&k) = cx.lane.get(&e.node) {
                state[k].0 = St::Pre;
            }
        }
    }
    let seg = |h: &mut String, node: u16, st: St, y0: i64, y1: i64| {
        if y1 <= y0 {
            return;
        }
        let x = cx.x(node).unwrap_or(0);
        let (cls, stroke) = match st {
            St::Pre => ("lane-pre", "#bbb"),
            St::Up => ("lane-up", cx.color(node)),
            St::Down => ("lane-down", "#e08a80"),
            St::Stopped => ("lane-stop", "#aaa"),
        };
        let _ = write!(h, "<line class=\"{cls}\" x1=\"{x}\" y1=\"{y0}\" x2=\"{x}\" y2=\"{y1}\" stroke=\"{stroke}\"/>");
    };
    for (e_i, e) in events.iter().enumerate() {
        let new = match e.kind {
            EventKind::Boot | EventKind::Restart => St::Up,
            EventKind::Crash { .. } => St::Down,
            EventKind::Exit { .. } | EventKind::Hung => St::Stopped,
            _ => continue,
        };
        let (Some(&k), Some(y)) = (cx.lane.get(&e.node), l.y(e_i)) else {
            continue;
        };
        let (st, since) = state[k];
        seg(h, e.node, st, since, y);
        state[k] = (new, y);
    }
    for (&n, &k) in cx.lane.iter() {
        let (st, since) = state[k];
        seg(h, n, st, since, height - TOP);
    }
    h.push('\n');

    // Command spans.
    let mut pending: Vec<Vec<(usize, i64)>> = vec![Vec::new(); cx.lane.len()];
    for (i, e) in events.iter().enumerate() {
        let Some(&k) = cx.lane.get(&e.node) else {
            continue;
        };
        let Some(y) = l.y(i) else { continue };
        match &e.kind {
            EventKind::Command { .. } => pending[k].push((i, y)),
            EventKind::CommandDone { name, .. } => {
                let pos = pending[k].iter().rposition(|&(c, _)| matches!(&events[c].kind, EventKind::Command { name: n } if n == name));
                if let Some(p) = pos {
                    let (_, y0) = pending[k].remove(p);
                    let x = cx.x(e.node).unwrap_or(0) - 4;
                    let _ = write!(
                        h,
                        "<rect class=\"span\" x=\"{x}\" y=\"{y0}\" width=\"8\" height=\"{}\"/>",
                        (y - y0).max(1)
                    );
                }
            }
            EventKind::Crash { .. } | EventKind::Exit { .. } | EventKind::Hung => {
                // Commands die with the node.
                for (_, y0) in pending[k].drain(..) {
                    let x = cx.x(e.node).unwrap_or(0) - 4;
                    let _ = write!(h, "<rect class=\"span open\" x=\"{x}\" y=\"{y0}\" width=\"8\" height=\"{}\"/>", (y - y0).max(1));
                }
            }
            _ => {}
        }
    }
    for (&n, &k) in cx.lane.iter() {
        for &(_, y0) in &pending[k] {
            let x = cx.x(n).unwrap_or(0) - 4;
            let _ = write!(
                h,
                "<rect class=\"span open\" x=\"{x}\" y=\"{y0}\" width=\"8\" height=\"{}\"/>",
                (height - TOP - y0).max(1)
            );
        }
    }
    h.push('\n');

    pause_bars(cx, h);

    // The failure row.
    if let Some(r) = l.fail_row {
        let y = l.y[r];
        let _ = writeln!(
            h,
            "<g class=\"failmark\"><rect class=\"failrow\" x=\"0\" y=\"{}\" width=\"{w}\" height=\"{ROW_H}\"/>\
             <text class=\"faillbl\" x=\"4\" y=\"{}\">FAILURE &#x25B8;</text></g>",
            y - ROW_H / 2,
            y + 4
        );
    }

    // Messages, losses, frames still in flight.
    for (i, e) in events.iter().enumerate() {
        match &e.kind {
            EventKind::Deliver {
                id,
                from,
                len,
                summary,
            } => {
                let Some(x2) = cx.x(e.node) else { continue };
                let y2 = l.y(i).unwrap_or(0);
                match a.partner[i] {
                    Some(s) if l.shown(s) || l.shown(i) => {
                        let snd = &events[s];
                        let x1 = cx.x(snd.node).unwrap_or(x2);
                        let y1 = l.y(s).unwrap_or(0);
                        let k = cx.lane.get(&snd.node).copied().unwrap_or(0) % PALETTE.len();
                        let dup = a.dup[i];
                        let title = format!(
                            "#{id} {} → {}, {len} B, sent {}, delivered {} (+{}){}: {}",
                            node_label(m, snd.node),
                            node_label(m, e.node),
                            fmt_time(snd.time),
                            fmt_time(e.time),
                            fmt_dur(e.time.saturating_sub(snd.time)),
                            if dup { ", DUPLICATE delivery" } else { "" },
                            summary
                        );
                        let _ = write!(
                            h,
                            "<g class=\"msg{}\" data-kind=\"{}\"><title>{}</title>",
                            if dup { " dup" } else { "" },
                            if dup { "dup" } else { "deliver" },
                            esc(&title, TITLE_CHARS)
                        );
                        if x1 == x2 {
                            let _ = write!(
                                h,
                                "<path d=\"M{x1},{y1} C{},{y1} {},{y2} {x2},{y2}\" stroke=\"{}\" marker-end=\"url(#ah{k})\"/>",
                                x1 + 50,
                                x2 + 50,
                                PALETTE[k]
                            );
                        } else {
                            let _ = write!(
                                h,
                                "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"{}\" marker-end=\"url(#ah{k})\"/>",
                                PALETTE[k]
                            );
                        }
                        let (lx, ly) = if x1 == x2 {
                            (x1 + 46, (y1 + y2) / 2)
                        } else {
                            (x1 + (x2 - x1) * 3 / 10, y1 + (y2 - y1) * 3 / 10 - 3)
                        };
                        let label = if dup {
                            format!("dup {summary}")
                        } else {
                            summary.clone()
                        };
                        let _ = writeln!(
                            h,
                            "<text x=\"{lx}\" y=\"{ly}\">{}</text></g>",
                            esc_html(&clip(&label, LABEL_CHARS))
                        );
                    }
                    Some(_) => {}
                    None if l.shown(i) => {
                        // Its Send is not in the trace: a stub from the sender's side.
                        let dir = match cx.x(*from) {
                            Some(fx) if fx < x2 => -1,
                            Some(fx) if fx > x2 => 1,
                            _ => -1,
                        };
                        let title = format!(
                            "#{id} from {}, {len} B, delivered {} (send not in the trace): {}",
                            node_label(m, *from),
                            fmt_time(e.time),
                            summary
                        );
                        let _ = writeln!(
                            h,
                            "<g class=\"msg orphan\" data-kind=\"deliver-orphan\"><title>{}</title><line x1=\"{}\" y1=\"{}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"#999\" marker-end=\"url(#ahg)\"/></g>",
                            esc(&title, TITLE_CHARS),
                            x2 + dir * 44,
                            y2 - 10
                        );
                    }
                    None => {}
                }
            }
            EventKind::Drop { id, to, cause } => {
                let Some(x1) = cx.x(e.node) else { continue };
                let (sy, from_send) = match a.partner[i] {
                    Some(s) => (l.y(s).unwrap_or(0), Some(s)),
                    None => (l.y(i).unwrap_or(0), None),
                };
                if !(l.shown(i) || from_send.is_some_and(|s| l.shown(s))) {
                    continue;
                }
                let dy = l.y(i).unwrap_or(0);
                let tx = cx.x(*to).unwrap_or(x1 + LANE_W);
                let xx = if tx == x1 {
                    x1 + 34
                } else {
                    x1 + (tx - x1) * 55 / 100
                };
                let k = cx.lane.get(&e.node).copied().unwrap_or(0) % PALETTE.len();
                let summary = from_send
                    .and_then(|s| match &events[s].kind {
                        EventKind::Send { summary, .. } => Some(summary.as_str()),
                        _ => None,
                    })
                    .unwrap_or("");
                let title = format!(
                    "#{id} {} → {} LOST at {}: {}{}{}",
                    node_label(m, e.node),
                    node_label(m, *to),
                    fmt_time(e.time),
                    cause,
                    if summary.is_empty() { "" } else { "; " },
                    summary
                );
                let anchor = if xx >= x1 { "start" } else { "end" };
                let lx = if xx >= x1 { xx + 8 } else { xx - 8 };
                let _ = writeln!(
                    h,
                    "<g class=\"drop\" data-kind=\"drop\"><title>{}</title>\
                     <line x1=\"{x1}\" y1=\"{sy}\" x2=\"{xx}\" y2=\"{dy}\" stroke=\"{}\"/>\
                     <path class=\"x\" d=\"M{},{}L{},{}M{},{}L{},{}\"/>\
                     <text x=\"{lx}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text></g>",
                    esc(&title, TITLE_CHARS),
                    PALETTE[k],
                    xx - 5,
                    dy - 5,
                    xx + 5,
                    dy + 5,
                    xx - 5,
                    dy + 5,
                    xx + 5,
                    dy - 5,
                    dy + 4,
                    esc_html(&clip(cause.as_str(), LABEL_CHARS))
                );
            }
            EventKind::Send {
                id,
                to,
                len,
                summary,
            } if a.outcome[i] == (0, 0) && l.shown(i) => {
                let Some(x1) = cx.x(e.node) else { continue };
                let y1 = l.y(i).unwrap_or(0);
                let tx = cx.x(*to).unwrap_or(x1 + LANE_W);
                let x2 = if tx == x1 {
                    x1 + 30
                } else {
                    x1 + (tx - x1) * 35 / 100
                };
                let title = format!(
                    "#{id} {} → {}, {len} B, sent {}, never delivered or dropped: {}",
                    node_label(m, e.node),
                    node_label(m, *to),
                    fmt_time(e.time),
                    summary
                );
                let _ = writeln!(
                    h,
                    "<g class=\"inflight\" data-kind=\"inflight\"><title>{}</title><line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{}\" marker-end=\"url(#ahg)\"/><text x=\"{}\" y=\"{}\">?</text></g>",
                    esc(&title, TITLE_CHARS),
                    y1 + ROW_H * 6 / 10,
                    x2 + if x2 >= x1 { 4 } else { -10 },
                    y1 + ROW_H * 6 / 10 + 4
                );
            }
            _ => {}
        }
    }

    // Markers and boxes on the lanes; engine rows in the notes column.
    let fail = a.failure_index();
    for (i, e) in events.iter().enumerate() {
        if !l.shown(i) {
            continue;
        }
        let y = l.y(i).unwrap_or(0);
        let is_fail = fail == Some(i);
        if e.node == ENGINE || cx.x(e.node).is_none() {
            let (cls, text) = match &e.kind {
                EventKind::Partition { .. } => continue, // labelled by its band
                EventKind::Heal => ("note heal", "✓ heal".to_string()),
                EventKind::Note { text } => ("note", format!("• {text}")),
                _ => (
                    "note",
                    format!("{}: {}", node_label(m, e.node), describe(m, e)),
                ),
            };
            let _ = writeln!(
                h,
                "<text class=\"{cls}{}\" data-kind=\"{}\" x=\"{nx}\" y=\"{}\"><title>{}</title>{}</text>",
                if is_fail { " failev" } else { "" },
                super::kind_name(&e.kind),
                y + 4,
                esc(&format!("t={} {}", fmt_time_ns(e.time), describe(m, e)), TITLE_CHARS),
                esc_html(&clip(&text, NOTE_CHARS))
            );
            continue;
        }
        let x = cx.x(e.node).unwrap_or(0);
        let (cls, label): (&str, String) = match &e.kind {
            EventKind::Send { .. } => {
                let _ = write!(
                    h,
                    "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{}\"/>",
                    cx.color(e.node)
                );
                continue;
            }
            EventKind::Disk { op: DiskOp::Flush, .. } => {
                // A flush is a durability point: a small square on the lane.
                let _ = write!(h, "<rect x=\"{}\" y=\"{}\" width=\"6\" height=\"6\" fill=\"#555\"><title>{}</title></rect>", x - 3, y - 3, esc(&describe(m, e), TITLE_CHARS));
                continue;
            }
            EventKind::DiskFault { fault, .. } => {
                // Beside the lane, so the request's own mark stays visible.
                let _ = writeln!(
                    h,
                    "<g class=\"dfault{}\" data-kind=\"disk_fault\"><title>{}</title><path d=\"M{},{} l6,6 l-6,6 l-6,-6z\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
                    if is_fail { " failev" } else { "" },
                    esc(&format!("t={} {}: {}", fmt_time_ns(e.time), node_label(m, e.node), describe(m, e)), TITLE_CHARS),
                    x + 10,
                    y - 6,
                    x + 18,
                    y + 4,
                    esc_html(&clip(fault.as_str(), LABEL_CHARS))
                );
                continue;
            }
            EventKind::Deliver { .. }
            | EventKind::Drop { .. }
            | EventKind::Run { .. }
            | EventKind::Disk { .. }
            | EventKind::Console { .. } => continue,
            EventKind::Boot => ("b-ok", "boot".into()),
            EventKind::Ready => ("b-ok", "ready".into()),
            EventKind::Command { name } => ("b-cmd", format!("▶ {name}")),
            EventKind::CommandDone { name, status } => (
                if *status == 0 { "b-ok" } else { "b-bad" },
                format!("■ {name} → {status}"),
            ),
            EventKind::Exit {
                status,
                signal,
                panic,
            } => {
                let bad = *panic || signal.is_some() || status.is_some_and(|s| s != 0);
                let t = if *panic {
                    "☠ PANIC".to_string()
                } else if let Some(sig) = signal {
                    format!("exit signal {sig}")
                } else {
                    format!("exit {}", status.map(|s| s.to_string()).unwrap_or_default())
                };
                (if bad { "b-bad" } else { "b-stop" }, t)
            }
            EventKind::Hung => ("b-warn", "⏸ HUNG".into()),
            EventKind::Crash { .. } => ("b-crash", "⚡ crash".into()),
            EventKind::Restart => ("b-ok", "↻ restart".into()),
            EventKind::Invariant { name, ok: true } => ("b-ok", format!("✓ {name}")),
            EventKind::Invariant { name, ok: false } => ("b-bad", format!("✗ {name}")),
            EventKind::Pause { .. } => ("b-warn", "⏸ pause".into()),
            EventKind::Resume => ("b-ok", "▶ resume".into()),
            EventKind::ClockOffset { offset_ns } => ("b-clock", format!("clock {}", super::fmt_signed(*offset_ns))),
            EventKind::ClockDrift { ppm } => ("b-clock", format!("drift {ppm:+}ppm")),
            EventKind::ClockBump { delta_ns } => ("b-clock", format!("clock {}", super::fmt_signed(*delta_ns))),
            EventKind::ClockStrobe { delta_ns, .. } => ("b-clock", format!("strobe ±{}", super::fmt_dur(delta_ns.unsigned_abs()))),
            EventKind::Partition { .. } | EventKind::Heal | EventKind::Note { .. } => {
                ("b-stop", describe(m, e))
            }
        };
        let text = clip(&label, BOX_CHARS);
        let bw = (text.chars().count() as i64 * 7 + 12).min(LANE_W - 8);
        let _ = writeln!(
            h,
            "<g class=\"box {cls}{}\" data-kind=\"{}\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{bw}\" height=\"16\" rx=\"3\"/><text x=\"{x}\" y=\"{}\">{}</text></g>",
            if is_fail { " failev" } else { "" },
            super::kind_name(&e.kind),
            esc(&format!("t={} {}: {}", fmt_time_ns(e.time), node_label(m, e.node), describe(m, e)), TITLE_CHARS),
            x - bw / 2,
            y - 8,
            y + 4,
            esc_html(&text)
        );
    }

    // Time labels.
    let mut last: Option<String> = None;
    for (r, row) in l.rows.iter().enumerate() {
        if !l.shown[r] {
            last = None;
            continue;
        }
        let label = fmt_time(row.time);
        if last.as_ref() != Some(&label) {
            let _ = write!(
                h,
                "<text class=\"tl\" x=\"{}\" y=\"{}\"><title>{} ns</title>{label}</text>",
                GUTTER - 10,
                l.y[r] + 4,
                row.time
            );
            last = Some(label);
        }
    }
    h.push_str("\n</svg>\n</div>\n</div>\n</section>\n");
}

fn console(cx: &Ctx, h: &mut String) {
    let a = cx.a;
    let m = cx.meta();
    let events = a.events;
    let fail = a.failure_index();
    let entries: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            !matches!(
                e.kind,
                EventKind::Run { .. }
                    | EventKind::Send { .. }
                    | EventKind::Deliver { .. }
                    | EventKind::Drop { .. }
            )
        })
        .map(|(i, _)| i)
        .collect();
    let mut per_node: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (p, &i) in entries.iter().enumerate() {
        per_node.entry(events[i].node).or_default().push(p);
    }
    let mut keep = vec![false; entries.len()];
    for list in per_node.values() {
        for &p in list.iter().take(CONSOLE_HEAD) {
            keep[p] = true;
        }
        let split = match fail {
            Some(f) => list.partition_point(|&p| entries[p] <= f),
            None => list.len(),
        };
        for &p in &list[split.saturating_sub(CONSOLE_BEFORE_FAILURE)..split] {
            keep[p] = true;
        }
        if fail.is_some() {
            for &p in &list[split..(split + CONSOLE_AFTER_FAILURE).min(list.len())] {
                keep[p] = true;
            }
        }
    }
    // Runs of left-out lines, noted where each run starts.
    let mut runs: BTreeMap<usize, (u16, usize, u64, u64)> = BTreeMap::new();
    for (&n, list) in &per_node {
        let mut q = 0;
        while q < list.len() {
            if keep[list[q]] {
                q += 1;
                continue;
            }
            let start = q;
            while q < list.len() && !keep[list[q]] {
                q += 1;
            }
            runs.insert(
                list[start],
                (
                    n,
                    q - start,
                    events[entries[list[start]]].time,
                    events[entries[list[q - 1]]].time,
                ),
            );
        }
    }
    let left_out = keep.iter().filter(|k| !**k).count();

    h.push_str("<section class=\"panel console\">\n<h2>Console and events by virtual time</h2>\n");
    if left_out > 0 {
        let _ = writeln!(
            h,
            "<p class=\"warn\">{left_out} of {} lines not shown: per node, the first {CONSOLE_HEAD}, the last {CONSOLE_BEFORE_FAILURE} before the {} and {} are kept.</p>",
            entries.len(),
            if fail.is_some() { "failure" } else { "end" },
            if fail.is_some() { format!("the first {CONSOLE_AFTER_FAILURE} after it") } else { "nothing after".to_string() }
        );
    }
    h.push_str("<div class=\"scroll\">\n<table class=\"console\">\n<thead><tr><th>time</th><th>node</th><th>line</th></tr></thead>\n<tbody>\n");
    let mut fail_done = fail.is_none();
    let fail_row = |h: &mut String| {
        if let Some(f) = fail {
            let e = &events[f];
            let _ = writeln!(
                h,
                "<tr id=\"console-failure\" class=\"fail\"><td class=\"t\">{}</td><td class=\"{}\">{}</td><td class=\"l\">&#x2717; FAILURE: {}</td></tr>",
                fmt_time(e.time),
                cx.cclass(e.node),
                esc(&node_label(m, e.node), 40),
                esc(&describe(m, e), LINE_CHARS)
            );
        }
    };
    for (p, &i) in entries.iter().enumerate() {
        let e = &events[i];
        if !fail_done && fail.is_some_and(|f| i > f) {
            fail_row(h);
            fail_done = true;
        }
        if !keep[p] {
            if let Some(&(n, count, t0, t1)) = runs.get(&p) {
                let _ = writeln!(
                    h,
                    "<tr class=\"elided\"><td colspan=\"3\">&#x22EF; {count} lines of {} not shown ({} &#x2026; {}) &#x22EF;</td></tr>",
                    esc(&node_label(m, n), 40),
                    fmt_time(t0),
                    fmt_time(t1)
                );
            }
            continue;
        }
        if fail == Some(i) {
            fail_row(h);
            fail_done = true;
            continue;
        }
        let after = fail.is_some_and(|f| i > f);
        let (cls, text) = match &e.kind {
            EventKind::Console { text } => ("", esc(text, LINE_CHARS)),
            EventKind::Crash { .. }
            | EventKind::Hung
            | EventKind::Invariant { ok: false, .. }
            | EventKind::Exit { .. } => ("ev bad", esc(&describe(m, e), LINE_CHARS)),
            EventKind::Partition { .. } | EventKind::Heal | EventKind::DiskFault { .. } => {
                ("ev net", esc(&describe(m, e), LINE_CHARS))
            }
            _ => ("ev", esc(&describe(m, e), LINE_CHARS)),
        };
        let cls = match (cls, after) {
            ("", false) => String::new(),
            ("", true) => " class=\"after\"".to_string(),
            (c, false) => format!(" class=\"{c}\""),
            (c, true) => format!(" class=\"{c} after\""),
        };
        let _ = writeln!(
            h,
            "<tr{cls}><td class=\"t\" title=\"{} ns\">{}</td><td class=\"{}\">{}</td><td class=\"l\">{text}</td></tr>",
            e.time,
            fmt_time(e.time),
            cx.cclass(e.node),
            esc(&node_label(m, e.node), 40)
        );
    }
    if !fail_done {
        fail_row(h);
    }
    h.push_str("</tbody>\n</table>\n</div>\n</section>\n");
}

fn css() -> String {
    let mut s = String::from(
        "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:16px;color:#222;background:#f6f7f9}\
h1{font-size:20px;margin:0 0 6px}h2{font-size:16px;margin:0 0 6px}\
code,.mono,table.console,svg text{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace}\
.meta{margin:0;color:#444;font-size:13px}\
.sumrow{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.sumrow details{flex:1 1 420px}\
.failure{border:2px solid #c0392b;background:#fdecea;padding:8px 12px;margin:12px 0;border-radius:6px}\
.failure h2{color:#a93226}.failure .desc{font-size:15px;font-weight:600;white-space:pre-wrap;margin:4px 0}\
.pass{border:2px solid #2a9d4a;background:#eaf7ee;padding:8px 12px;margin:12px 0;border-radius:6px}\
.summary{margin:8px 0 12px}.chips{margin:4px 0}.chip{display:inline-block;background:#fff;border:1px solid #ddd;border-radius:10px;padding:0 8px;margin:2px;font-size:13px}\
.chip.hot{border-color:#c0392b;background:#fdecea}\
table.nodes{border-collapse:collapse;font-size:13px;background:#fff;margin:0}table.nodes td,table.nodes th{border:1px solid #e3e3e3;padding:1px 8px;text-align:left}\
details{font-size:13px}ol.index{margin:4px 0;max-height:132px;overflow:auto;background:#fff;border:1px solid #e3e3e3;padding:4px 4px 4px 36px}\
li.failitem{font-weight:bold;background:#f9c6c0}\
.main{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}\
.panel{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px;box-sizing:border-box}\
.panel.diagram{flex:0 1 auto;max-width:100%}.panel.console{flex:1 1 560px;min-width:420px}\
.scroll{overflow:auto;max-height:85vh;position:relative}\
.legend{font-size:12px;color:#555;margin:0 0 6px;max-width:900px}.warn{font-size:12px;color:#8a5a00;margin:0 0 6px}\
.lg-msg{color:#1f6fb4;font-weight:bold}.lg-dup{color:#8e44ad}.lg-drop{color:#c0392b;font-weight:bold}.lg-idle{color:#888}.lg-band{background:#f8d7d3;padding:0 3px}\
svg.sticky{position:sticky;top:0;z-index:2;display:block}.body{position:relative}.anchor{position:absolute;left:0;width:1px;height:1px}\
svg.st{display:block}svg text{font-size:11px}\
.hd{text-anchor:end;fill:#666;font-size:11px}.hd2{fill:#666}.lane-hd{text-anchor:middle;font-weight:bold;font-size:13px}.lane-name{text-anchor:middle;fill:#444}\
.lanebg{fill:#f7f9fc}\
.lane-up{stroke-width:2}.lane-pre{stroke-dasharray:2 4;stroke-width:1.5}.lane-down{stroke-dasharray:6 4;stroke-width:2}.lane-stop{stroke-dasharray:3 5;stroke-width:1.5}\
.band rect{fill:#f1948a;fill-opacity:.22;stroke:#e6a39b;stroke-dasharray:4 3}.bandlbl{fill:#a93226;font-weight:bold}\
.gap rect{fill:url(#hatch);stroke:#ccc}.gap text{text-anchor:middle;fill:#666;font-style:italic}\
.brk{stroke:#bbb;stroke-dasharray:1 3}.idle{text-anchor:end;fill:#999;font-style:italic;font-size:9px}\
.msg line,.msg path{fill:none;stroke-width:1.3}.msg.dup line,.msg.dup path{stroke-dasharray:5 3}\
.msg text{font-size:9px;fill:#555;text-anchor:middle;paint-order:stroke;stroke:#fff;stroke-width:3px}\
.msg:hover line,.msg:hover path{stroke-width:3}.msg:hover text{fill:#000;font-weight:bold}\
.drop line{stroke-dasharray:4 3;stroke-width:1.2}.drop .x{stroke:#c0392b;stroke-width:2.5;fill:none}\
.drop text{fill:#c0392b;font-size:9px;paint-order:stroke;stroke:#fff;stroke-width:3px}.drop:hover line{stroke-width:3}\
.inflight line{stroke:#999;stroke-dasharray:1 3;stroke-width:1.3}.inflight text{fill:#999;font-weight:bold}\
.span{fill:#3b6fb6;fill-opacity:.22}.span.open{fill:#d68910}\
.box rect{fill:#fff;stroke:#888}.box text{text-anchor:middle}\
.b-ok rect{fill:#e8f6ec;stroke:#2a9d4a}.b-cmd rect{fill:#e8f0fb;stroke:#3b6fb6}\
.b-bad rect{fill:#fbe3e0;stroke:#c0392b}.b-bad text{fill:#a02a1d;font-weight:bold}\
.b-warn rect{fill:#fff1d6;stroke:#d68910}.b-warn text{fill:#8a5a00;font-weight:bold}\
.b-stop rect{fill:#f0f0f0;stroke:#999}\
.b-crash rect{fill:#c0392b;stroke:#7b241c}.b-crash text{fill:#fff;font-weight:bold}\
.dfault path{fill:#e67e22;stroke:#a04000}.dfault text{fill:#a04000;font-size:10px}.dfault.failev path{stroke:#c0392b;stroke-width:3}\
.lg-fault{color:#e67e22;font-weight:bold}.lg-flush{color:#555}\
.b-clock rect{fill:#f3e8fb;stroke:#8e44ad}.b-clock text{fill:#6c3483}\
.pausebar{fill:#d68910;fill-opacity:.45;stroke:#b9770e}.pausebar.open{stroke-dasharray:3 2}\
.lg-pause{color:#b9770e;font-weight:bold}.lg-clock{color:#8e44ad;font-weight:bold}\
.box.failev rect{stroke:#c0392b;stroke-width:3}.note.failev{fill:#c0392b;font-weight:bold}\
.failrow{fill:#f9c6c0;fill-opacity:.7}.faillbl{fill:#c0392b;font-weight:bold;font-size:10px}\
.tl{text-anchor:end;fill:#444}.note{fill:#555}.note.heal{fill:#2a7d46;font-weight:bold}\
table.console{border-collapse:collapse;font-size:12px;width:100%}\
table.console th{position:sticky;top:0;background:#eef0f3;text-align:left;padding:2px 6px;z-index:1}\
table.console td{padding:1px 6px;vertical-align:top;border-bottom:1px solid #f0f0f0}\
td.t{color:#666;white-space:nowrap}td.l{white-space:pre-wrap;word-break:break-all}\
tr.ev td.l{color:#555;font-style:italic}tr.ev.bad td.l{color:#a93226;font-weight:bold}tr.ev.net td.l{color:#a93226}\
tr.fail td{background:#f9c6c0;font-weight:bold;border-top:2px solid #c0392b;border-bottom:2px solid #c0392b}\
tr.after{opacity:.55}tr.elided td{color:#888;text-align:center;background:#f4f4f4;font-style:italic}\
.ce{color:#555;font-weight:bold}\
footer{margin-top:16px;font-size:12px;color:#777}",
    );
    for (k, c) in PALETTE.iter().enumerate() {
        let _ = write!(s, ".c{k}{{color:{c};font-weight:bold}}");
    }
    s
}
