//! The diagram's frame: the legend, the sticky lane headers, lane
//! backgrounds and lifelines, elided gaps and idle breaks, and the time
//! labels in the gutter.

use super::layout::View;
use super::layout::{Page, GAP_H, GUTTER, HEAD_H, LANE_W, TOP};
use super::{FOCUS_CONTEXT, HEAD_ROWS, MAX_ROWS, ROWS_AFTER_FAILURE};
use crate::report::{clip, esc_html, fmt_dur, fmt_time, node_name};
use engine::trace::EventKind;
use engine::Actor;
use std::fmt::Write as _;

/// The panel's heading, the legend, a warning when rows were left out,
/// and the opening of the scrolling box.
pub(super) fn intro(p: &Page, h: &mut String) {
    let l = &p.l;
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
    match p.view {
        View::Main if l.rows.len() > MAX_ROWS => {
            let _ = writeln!(
                h,
                "<p class=\"warn\">{} rows; showing {}: the first {HEAD_ROWS} (the boot), up to {FOCUS_CONTEXT} around \
                 each fault and each operation of the failing key, {ROWS_AFTER_FAILURE} after the {} and the ones \
                 leading up to it. Each left-out stretch is a hatched band that says how many rows it holds and \
                 links to them.{}</p>",
                l.rows.len(),
                l.shown.iter().filter(|s| **s).count(),
                if l.fail_row.is_some() { "failure" } else { "end" },
                super::panels::parts_link(p)
            );
        }
        View::Main => {}
        View::Part(_) => {
            let _ = writeln!(
                h,
                "<p class=\"warn\">Rows {} of {}; the hatched bands link to the parts before and after.</p>",
                l.shown.iter().filter(|s| **s).count(),
                l.rows.len()
            );
        }
    }
    h.push_str("<div class=\"scroll\">\n");
}

/// Sticky lane headers: node number and name over each lane.
pub(super) fn headers(p: &Page, h: &mut String) {
    let w = p.width;
    let _ = write!(
        h,
        "<svg class=\"sticky\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{HEAD_H}\" viewBox=\"0 0 {w} {HEAD_H}\">\
         <rect width=\"{w}\" height=\"{HEAD_H}\" fill=\"#fff\"/>\
         <text class=\"hd\" x=\"{}\" y=\"18\">virtual time</text>",
        GUTTER - 10
    );
    for (&n, _) in p.lane.iter() {
        let x = p.x(n).unwrap_or(0);
        let _ = write!(
            h,
            "<text class=\"lane-hd\" x=\"{x}\" y=\"18\" fill=\"{}\">{}</text><text class=\"lane-name\" x=\"{x}\" y=\"34\">{}</text>",
            p.color(n),
            n,
            esc_html(&clip(&node_name(p.meta(), n), 28))
        );
    }
    let _ = writeln!(
        h,
        "<text class=\"hd2\" x=\"{}\" y=\"18\">engine: partitions, notes</text>\
         <line x1=\"0\" y1=\"{y}\" x2=\"{w}\" y2=\"{y}\" stroke=\"#ccc\"/></svg>",
        p.notes_x(),
        y = HEAD_H - 1
    );
}

/// Every other lane shaded.
pub(super) fn backgrounds(p: &Page, h: &mut String) {
    for (_, &k) in p.lane.iter() {
        if k % 2 == 1 {
            let _ = write!(
                h,
                "<rect class=\"lanebg\" x=\"{}\" y=\"0\" width=\"{LANE_W}\" height=\"{}\"/>",
                GUTTER + LANE_W * k as i64,
                p.l.height
            );
        }
    }
    h.push('\n');
}

/// Hatched bands where rows were left out, dotted lines across the lanes
/// at long idle stretches.
pub(super) fn gaps_and_breaks(p: &Page, h: &mut String) {
    let (l, w) = (&p.l, p.width);
    for g in &l.gaps {
        let n_events: usize = l.rows[g.first..=g.last].iter().map(|r| r.events.len()).sum();
        let text = format!(
            "&#x22EF; {} rows elided ({} events): {} &#x2026; {}{} &#x22EF;",
            g.last - g.first + 1,
            n_events,
            fmt_time(l.rows[g.first].time),
            fmt_time(l.rows[g.last].time),
            if p.parts > 0 { " (open them)" } else { "" }
        );
        let body = format!(
            "<rect x=\"4\" y=\"{}\" width=\"{}\" height=\"{}\"/><text x=\"{}\" y=\"{}\">{text}</text>",
            g.y_top + 4,
            w - 8,
            GAP_H - 8,
            w / 2,
            g.y_top + GAP_H / 2 + 4,
        );
        if p.parts > 0 {
            let _ = writeln!(
                h,
                "<a href=\"{}\"><g class=\"gap\">{body}</g></a>",
                esc_html(&p.link_to_row(g.first, &format!("row{}", g.first)))
            );
        } else {
            let _ = writeln!(h, "<g class=\"gap\">{body}</g>");
        }
    }
    let lanes_right = p.lanes_right();
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
}

/// A node's state along its lifeline.
#[derive(Clone, Copy, PartialEq)]
enum Life {
    /// Before its first boot: dotted.
    Pre,
    /// Running: solid, in the node's colour.
    Up,
    /// Crashed: dashed red.
    Down,
    /// Exited or hung: dashed grey.
    Stopped,
}

/// Lane lines: dotted before boot, solid while up, dashed when down.
pub(super) fn lifelines(p: &Page, h: &mut String) {
    let events = p.events();
    // A node with a boot event starts before it; one without was up from the start.
    let mut state: Vec<(Life, i64)> = vec![(Life::Up, TOP); p.lane.len()];
    for e in events {
        if matches!(e.kind, EventKind::Boot) {
            if let Some(&k) = p.lane_of(e.node) {
                state[k].0 = Life::Pre;
            }
        }
    }
    for (e_i, e) in events.iter().enumerate() {
        let new = match e.kind {
            EventKind::Boot | EventKind::Restart => Life::Up,
            EventKind::Crash { .. } => Life::Down,
            EventKind::Exit { .. } | EventKind::Hung => Life::Stopped,
            _ => continue,
        };
        let (Some(&k), Some(y)) = (p.lane_of(e.node), p.l.y(e_i)) else {
            continue;
        };
        let (st, since) = state[k];
        lifeline_segment(p, h, e.node, st, since, y);
        state[k] = (new, y);
    }
    for (&n, &k) in p.lane.iter() {
        let (st, since) = state[k];
        lifeline_segment(p, h, n.into(), st, since, p.l.bottom());
    }
    h.push('\n');
}

fn lifeline_segment(p: &Page, h: &mut String, node: Actor, st: Life, y0: i64, y1: i64) {
    if y1 <= y0 {
        return;
    }
    let x = p.x(node).unwrap_or(0);
    let (cls, stroke) = match st {
        Life::Pre => ("lane-pre", "#bbb"),
        Life::Up => ("lane-up", p.color(node)),
        Life::Down => ("lane-down", "#e08a80"),
        Life::Stopped => ("lane-stop", "#aaa"),
    };
    let _ = write!(h, "<line class=\"{cls}\" x1=\"{x}\" y1=\"{y0}\" x2=\"{x}\" y2=\"{y1}\" stroke=\"{stroke}\"/>");
}

/// A time label in the gutter at each shown row whose (rounded) time
/// differs from the row above.
pub(super) fn time_labels(p: &Page, h: &mut String) {
    let l = &p.l;
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
}
