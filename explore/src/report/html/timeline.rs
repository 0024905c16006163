//! The client-operation timeline (after Jepsen's timeline.html): every
//! operation of the history as a bar from its invoke to its completion,
//! coloured by how it ended (ok, fail, info), over virtual time, with the
//! fault periods shaded (partitions, nodes down, paused or killed) and the
//! instantaneous faults marked; the operations on the failing key drawn on
//! top and listed in a table with the faults around them.

use super::layout::Page;
use crate::report::{describe, esc, fmt_dur, fmt_time, node_label, ClientOp, OpEnd};
use engine::trace::EventKind;
use std::fmt::Write as _;

/// Width of the plot, of the label column left of it.
const PLOT_W: i64 = 1100;
const LEFT: i64 = 90;
const LANE_H: i64 = 9;
/// Lanes of operations at most; an operation that fits in none is drawn in
/// the last one.
const MAX_LANES: usize = 24;
/// Operations drawn at most (the failing key's, fails and infos first;
/// then ok ones evenly spread); the rest are counted.
const MAX_OPS: usize = 6000;
/// Rows of the failing key's table.
const MAX_FAILING_ROWS: usize = 60;
/// Failing operations marked below the axis at most.
const MAX_FAILING_MARKS: usize = 12;
/// Height of the band of fault labels above the lanes.
const FAULT_H: i64 = 34;

/// A fault period or instant: (start, end, label, css class, node).
struct Period {
    t0: u64,
    t1: Option<u64>,
    label: String,
    class: &'static str,
}

/// The timeline panel, when the execution has a (register) history.
pub(super) fn panel(p: &Page, h: &mut String) {
    let story = &p.a.story;
    if story.ops.is_empty() {
        return;
    }
    let ops = &story.ops;
    let end = p.a.end_time();
    let periods = periods(p, end);
    let t_min =
        ops.iter().map(|o| o.call).min().unwrap_or(0).min(periods.iter().map(|q| q.t0).min().unwrap_or(u64::MAX));
    let t_max = ops
        .iter()
        .map(|o| o.ret)
        .max()
        .unwrap_or(end)
        .max(periods.iter().map(|q| q.t1.unwrap_or(q.t0)).max().unwrap_or(0))
        .max(p.a.failure.as_ref().and_then(|f| f.index).map_or(0, |i| p.events()[i].time.as_ns()));
    let span = (t_max - t_min).max(1);
    let x = |t: u64| LEFT + ((t.saturating_sub(t_min)) as f64 / span as f64 * PLOT_W as f64) as i64;
    let lanes = assign_lanes(ops);
    let n_lanes = lanes.iter().copied().max().map_or(1, |m| m + 1) as i64;
    let height = FAULT_H + n_lanes * LANE_H + 56;
    let width = LEFT + PLOT_W + 20;
    let count = |e: OpEnd| ops.iter().filter(|o| o.end == e).count();
    let _ = writeln!(
        h,
        "<section class=\"panel timeline\">\n<h2>Client operations over time</h2>\n<p class=\"legend\">{} operations \
         of the history: <span class=\"tl-ok\">&#x25A0; ok</span> {}, <span class=\"tl-fail\">&#x25A0; fail</span> {}, \
         <span class=\"tl-info\">&#x25A0; info</span> (indeterminate or never completed) {}; a bar runs from the invoke \
         to the completion. <span class=\"lg-band\">Shaded</span>: fault periods (partitions, nodes down, paused, \
         killed); lines: instantaneous faults; <span class=\"tl-failing\">outlined</span>: the operations on the \
         failing key{}. Hover for details.{}</p>",
        ops.len(),
        count(OpEnd::Ok),
        count(OpEnd::Fail),
        count(OpEnd::Info),
        story.failing_key.as_ref().map(|k| format!(" ({})", esc(k, 80))).unwrap_or_default(),
        story.clock_note.as_ref().map(|n| format!(" Times: {}.", esc(n, 200))).unwrap_or_default()
    );
    let _ = write!(
        h,
        "<div class=\"scroll\"><svg class=\"tline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">"
    );
    // Fault periods and instants behind the operations.
    let bottom = FAULT_H + n_lanes * LANE_H;
    for (k, q) in periods.iter().enumerate() {
        let x0 = x(q.t0);
        let label_y = 10 + (k as i64 % 3) * 10;
        match q.t1 {
            Some(t1) if t1 > q.t0 => {
                let _ = write!(
                    h,
                    "<g class=\"tf {}\"><rect x=\"{x0}\" y=\"{FAULT_H}\" width=\"{}\" height=\"{}\"/><text x=\"{x0}\" y=\"{label_y}\">{}</text><title>{}</title></g>",
                    q.class,
                    (x(t1) - x0).max(1),
                    bottom - FAULT_H,
                    esc(&q.label, 40),
                    esc(&format!("{} .. {}: {}", fmt_time(q.t0), fmt_time(t1), q.label), 300)
                );
            }
            _ => {
                let _ = write!(
                    h,
                    "<g class=\"tf {} inst\"><line x1=\"{x0}\" y1=\"{}\" x2=\"{x0}\" y2=\"{bottom}\"/><text x=\"{x0}\" y=\"{label_y}\">{}</text><title>{}</title></g>",
                    q.class,
                    label_y + 2,
                    esc(&q.label, 40),
                    esc(&format!("{}: {}", fmt_time(q.t0), q.label), 300)
                );
            }
        }
    }
    // The operations: all but the failing key's first, then those on top.
    let drawn = chosen(ops);
    let mut left_out = 0usize;
    for pass in [false, true] {
        for (k, o) in ops.iter().enumerate() {
            if o.failing != pass {
                continue;
            }
            if !drawn[k] {
                left_out += 1;
                continue;
            }
            let y = FAULT_H + lanes[k] as i64 * LANE_H + 1;
            let (x0, x1) = (x(o.call), x(o.ret));
            let _ = write!(
                h,
                "<rect class=\"op {}{}\" x=\"{x0}\" y=\"{y}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                o.end.name(),
                if o.failing { " failing" } else { "" },
                (x1 - x0).max(2),
                LANE_H - 2,
                esc(&op_title(o), 300)
            );
        }
    }
    // The failing key's operations, marked below the axis too (a short
    // operation is a sliver at this scale).
    for (k, o) in story.failing_ops().take(MAX_FAILING_MARKS).enumerate() {
        let x0 = x(o.call);
        let _ = write!(
            h,
            "<g class=\"tmark\"><line x1=\"{x0}\" y1=\"{FAULT_H}\" x2=\"{x0}\" y2=\"{}\"/><text x=\"{x0}\" y=\"{}\">{} {}</text><title>{}</title></g>",
            bottom + 30 + (k as i64 % 2) * 11,
            bottom + 38 + (k as i64 % 2) * 11,
            esc(&o.op.to_string(), 40),
            o.end.name(),
            esc(&op_title(o), 300)
        );
    }
    // The failure.
    if let Some(i) = p.a.failure.as_ref().and_then(|f| f.index) {
        let xf = x(p.events()[i].time.as_ns());
        let _ = write!(
            h,
            "<g class=\"tfail\"><line x1=\"{xf}\" y1=\"{FAULT_H}\" x2=\"{xf}\" y2=\"{bottom}\"/><text x=\"{}\" y=\"{}\">failure</text></g>",
            xf - 2,
            bottom + 12
        );
    }
    // Time axis: ten ticks.
    for k in 0..=10u64 {
        let t = t_min + span * k / 10;
        let _ = write!(
            h,
            "<g class=\"tick\"><line x1=\"{0}\" y1=\"{bottom}\" x2=\"{0}\" y2=\"{1}\"/><text x=\"{0}\" y=\"{2}\">{3}</text></g>",
            x(t),
            bottom + 4,
            bottom + 24,
            fmt_time(t)
        );
    }
    let _ = write!(h, "<text class=\"tl\" x=\"{}\" y=\"{}\">operations</text>", LEFT - 6, FAULT_H + 10);
    h.push_str("</svg></div>\n");
    if left_out > 0 {
        let _ = writeln!(h, "<p class=\"warn\">{left_out} ok operations not drawn (at most {MAX_OPS} are).</p>");
    }
    failing_table(p, &periods, h);
    h.push_str("</section>\n");
}

/// `write k1 := 1, ok: 1.200000s .. 1.203000s (3ms), process 1`.
fn op_title(o: &ClientOp) -> String {
    let end = if o.pending { "never completed".to_string() } else { o.end.name().to_string() };
    format!(
        "{}, {end}: {} .. {} ({}), process {}",
        o.op,
        fmt_time(o.call),
        fmt_time(o.ret),
        fmt_dur(o.ret - o.call),
        o.process
    )
}

/// The failing key's operations, each with the faults that came between
/// it and the next one.
fn failing_table(p: &Page, periods: &[Period], h: &mut String) {
    let story = &p.a.story;
    let Some(key) = &story.failing_key else { return };
    let ops: Vec<&ClientOp> = story.failing_ops().collect();
    if ops.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<h3>Operations on the failing key {} and the faults between them</h3>\n<table class=\"nodes failing\">\
         <tr><th>invoke</th><th>completion</th><th>process</th><th>operation</th><th>outcome</th></tr>",
        esc(key, 80)
    );
    let mut rows = 0;
    for (k, o) in ops.iter().enumerate() {
        if rows >= MAX_FAILING_ROWS {
            let _ = writeln!(h, "<tr><td colspan=\"5\"><i>… {} more</i></td></tr>", ops.len() - k);
            break;
        }
        let _ = writeln!(
            h,
            "<tr class=\"op-{}\"><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            o.end.name(),
            fmt_time(o.call),
            if o.pending { "never".to_string() } else { fmt_time(o.ret) },
            o.process,
            esc(&o.op.to_string(), 200),
            if o.pending { "pending" } else { o.end.name() }
        );
        rows += 1;
        let next = ops.get(k + 1).map_or(u64::MAX, |n| n.call);
        for q in periods.iter().filter(|q| q.t0 >= o.ret && q.t0 < next) {
            let _ = writeln!(
                h,
                "<tr class=\"fault\"><td>{}</td><td>{}</td><td colspan=\"3\">&#x26A1; {} ({} after the completion above)</td></tr>",
                fmt_time(q.t0),
                q.t1.map(fmt_time).unwrap_or_default(),
                esc(&q.label, 200),
                fmt_dur(q.t0 - o.ret)
            );
            rows += 1;
        }
    }
    h.push_str("</table>\n");
}

/// A lane for each operation: the first lane free at its invoke (lanes in
/// use until the op's completion); past [`MAX_LANES`], the last lane.
fn assign_lanes(ops: &[ClientOp]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&k| (ops[k].call, k));
    let mut free_at: Vec<u64> = Vec::new();
    let mut lane = vec![0; ops.len()];
    for k in order {
        let o = &ops[k];
        let end = o.ret.max(o.call + 1);
        match free_at.iter().position(|&f| f <= o.call) {
            Some(l) => {
                free_at[l] = end;
                lane[k] = l;
            }
            None if free_at.len() < MAX_LANES => {
                free_at.push(end);
                lane[k] = free_at.len() - 1;
            }
            None => lane[k] = MAX_LANES - 1,
        }
    }
    lane
}

/// Which operations are drawn: every one up to [`MAX_OPS`]; else the
/// failing key's, the fails and infos, and ok ones evenly spread.
fn chosen(ops: &[ClientOp]) -> Vec<bool> {
    if ops.len() <= MAX_OPS {
        return vec![true; ops.len()];
    }
    let mut drawn: Vec<bool> = ops.iter().map(|o| o.failing || o.end != OpEnd::Ok).collect();
    let must = drawn.iter().filter(|d| **d).count();
    let oks = ops.len() - must;
    let room = MAX_OPS.saturating_sub(must);
    if room > 0 {
        let mut seen = 0usize;
        for (k, o) in ops.iter().enumerate() {
            if drawn[k] || o.end != OpEnd::Ok {
                continue;
            }
            // Every (oks / room)-th ok op.
            if seen * room / oks != (seen + 1) * room / oks {
                drawn[k] = true;
            }
            seen += 1;
        }
    }
    drawn
}

/// The fault periods (partition to heal, crash to restart, pause to
/// resume, kill to respawn, a stall to its end) and instants (power
/// failures, connection resets, disk faults, clock jumps).
fn periods(p: &Page, end: u64) -> Vec<Period> {
    let (m, events) = (p.meta(), p.events());
    let mut out: Vec<Period> = Vec::new();
    let mut open: Vec<(engine::Actor, &'static str, usize)> = Vec::new();
    for e in events {
        let t = e.time.as_ns();
        let who = if e.node.is_engine() { String::new() } else { format!("{} ", node_label(m, e.node)) };
        // (opens a period of this kind on this node, closes one, label, class)
        let (opens, closes, label, class): (Option<&'static str>, Option<&'static str>, String, &'static str) =
            match &e.kind {
                EventKind::Partition { description } => {
                    (Some("partition"), Some("partition"), format!("partition {description}"), "part")
                }
                EventKind::Heal => (None, Some("partition"), String::new(), ""),
                EventKind::Crash { .. } => (Some("down"), None, format!("{who}down (crash)"), "down"),
                EventKind::Restart => (None, Some("down"), String::new(), ""),
                EventKind::Pause { .. } => (Some("pause"), None, format!("{who}paused"), "pause"),
                EventKind::Resume => (None, Some("pause"), String::new(), ""),
                EventKind::Kill { .. } => (Some("kill"), None, format!("{who}killed"), "down"),
                EventKind::Respawn => (None, Some("kill"), String::new(), ""),
                EventKind::ConnStall { until, .. } => {
                    out.push(Period {
                        t0: t,
                        t1: Some(until.as_ns()),
                        label: format!("{who}{}", describe(m, e)),
                        class: "stall",
                    });
                    continue;
                }
                k if crate::report::is_fault(k) => {
                    out.push(Period { t0: t, t1: None, label: format!("{who}{}", describe(m, e)), class: "inst" });
                    continue;
                }
                _ => continue,
            };
        if let Some(what) = closes {
            if let Some(k) = open.iter().position(|(n, w, _)| *n == e.node && *w == what) {
                let (_, _, at) = open.remove(k);
                out[at].t1 = Some(t);
            }
        }
        if let Some(what) = opens {
            open.push((e.node, what, out.len()));
            out.push(Period { t0: t, t1: Some(end), label, class });
        }
    }
    out
}
