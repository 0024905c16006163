//! Boxes and markers: partition bands across the lanes, command bars and
//! pause bars beside a lane, the failure row, and each event's mark (a box
//! on its lane for boots, commands, crashes, exits, checks, pauses and
//! clock faults; a dot for a send, a square for a flush, a diamond for a
//! disk fault; a note in the engine's column for engine events).

use super::layout::{Page, GUTTER, LANE_W, ROW_H};
use super::{BOX_CHARS, LABEL_CHARS, NOTE_CHARS, TITLE_CHARS};
use crate::report::{
    clip, describe, esc, esc_html, fmt_dur, fmt_signed, fmt_time, fmt_time_ns, kind_name, node_label, ReportMeta,
};
use engine::trace::{DiskOp, Event, EventKind};
use engine::Actor;
use std::fmt::Write as _;

/// A shaded band across all lanes from each partition to its heal (or the
/// next partition, or the end), labelled in the notes column.
pub(super) fn partition_bands(p: &Page, h: &mut String) {
    let (l, events) = (&p.l, p.events());
    // (partition, what ended it, top, bottom)
    let mut open: Option<usize> = None;
    let mut bands: Vec<(usize, Option<usize>, i64, i64)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match e.kind {
            EventKind::Partition { .. } => {
                if let Some(start) = open.take() {
                    bands.push((start, Some(i), l.top(start).unwrap_or(0), l.top(i).unwrap_or(0)));
                }
                open = Some(i);
            }
            EventKind::Heal => {
                if let Some(start) = open.take() {
                    bands.push((start, Some(i), l.top(start).unwrap_or(0), l.y(i).unwrap_or(0)));
                }
            }
            _ => {}
        }
    }
    if let Some(start) = open {
        bands.push((start, None, l.top(start).unwrap_or(0), l.bottom()));
    }
    for (part, end, y0, y1) in bands {
        band(p, h, part, end, y0, y1);
    }
}

fn band(p: &Page, h: &mut String, part: usize, end: Option<usize>, y0: i64, y1: i64) {
    let events = p.events();
    let desc = match &events[part].kind {
        EventKind::Partition { description } => description.as_str(),
        _ => "",
    };
    let until = match end {
        Some(e) => match events[e].kind {
            EventKind::Heal => format!("healed at {}", fmt_time(events[e].time.as_ns())),
            _ => format!("replaced at {}", fmt_time(events[e].time.as_ns())),
        },
        None => "never healed".to_string(),
    };
    let _ = writeln!(
        h,
        "<g class=\"band\" data-kind=\"partition\"><title>partition {} from {}, {}</title>\
         <rect x=\"{GUTTER}\" y=\"{y0}\" width=\"{}\" height=\"{}\"/>\
         <text class=\"bandlbl\" x=\"{}\" y=\"{}\">PARTITION {}</text></g>",
        esc(desc, TITLE_CHARS),
        fmt_time(events[part].time.as_ns()),
        until,
        p.width - GUTTER,
        (y1 - y0).max(2),
        p.notes_x(),
        y0 + 15,
        esc_html(&clip(desc, NOTE_CHARS - 12))
    );
}

/// A bar on the lane while a command runs: from the command to its done
/// event; open (orange) when the node crashed, exited or hung first, or
/// the trace ended.
pub(super) fn command_spans(p: &Page, h: &mut String) {
    let (l, events) = (&p.l, p.events());
    let bottom = l.bottom();
    let span = |h: &mut String, node: Actor, y0: i64, y1: i64, cls: &str| {
        let x = p.x(node).unwrap_or(0) - 4;
        let _ =
            write!(h, "<rect class=\"span{cls}\" x=\"{x}\" y=\"{y0}\" width=\"8\" height=\"{}\"/>", (y1 - y0).max(1));
    };
    // Per lane: the running commands (event, top).
    let mut pending: Vec<Vec<(usize, i64)>> = vec![Vec::new(); p.lane.len()];
    for (i, e) in events.iter().enumerate() {
        let Some(&k) = p.lane_of(e.node) else {
            continue;
        };
        let Some(y) = l.y(i) else { continue };
        match &e.kind {
            EventKind::Command { .. } => pending[k].push((i, y)),
            EventKind::CommandDone { name, .. } => {
                let pos = pending[k]
                    .iter()
                    .rposition(|&(c, _)| matches!(&events[c].kind, EventKind::Command { name: n } if n == name));
                if let Some(pos) = pos {
                    let (_, y0) = pending[k].remove(pos);
                    span(h, e.node, y0, y, "");
                }
            }
            EventKind::Crash { .. } | EventKind::Exit { .. } | EventKind::Hung => {
                // Commands die with the node.
                for (_, y0) in pending[k].drain(..) {
                    span(h, e.node, y0, y, " open");
                }
            }
            _ => {}
        }
    }
    for (&n, &k) in p.lane.iter() {
        for &(_, y0) in &pending[k] {
            span(h, n.into(), y0, bottom, " open");
        }
    }
    h.push('\n');
}

/// Pause bars: on the paused node's lane, beside its command bars, from
/// the pause to the resume (or the crash that ended it, or the end of the
/// trace: dashed).
pub(super) fn pause_bars(p: &Page, h: &mut String) {
    let (l, events, m) = (&p.l, p.events(), p.meta());
    let mut open: Vec<Option<(usize, i64)>> = vec![None; p.lane.len()];
    let bar = |h: &mut String, node: Actor, from: usize, y0: i64, y1: i64, end: &str, cls: &str| {
        let x = p.x(node).unwrap_or(0) + 5;
        let title = format!("{}: {}; {end}", node_label(m, node), describe(m, &events[from]));
        let _ = write!(
            h,
            "<rect class=\"pausebar{cls}\" data-kind=\"pause\" x=\"{x}\" y=\"{y0}\" width=\"6\" height=\"{}\"><title>{}</title></rect>",
            (y1 - y0).max(1),
            esc(&title, TITLE_CHARS)
        );
    };
    for (i, e) in events.iter().enumerate() {
        let (Some(&k), Some(y)) = (p.lane_of(e.node), l.y(i)) else { continue };
        let end = match e.kind {
            EventKind::Pause { .. } => {
                open[k] = Some((i, y));
                continue;
            }
            EventKind::Resume => format!("resumed at {}", fmt_time(e.time.as_ns())),
            EventKind::Crash { .. } | EventKind::Exit { .. } | EventKind::Hung => {
                format!("ended by {}", describe(m, e))
            }
            _ => continue,
        };
        if let Some((from, y0)) = open[k].take() {
            bar(h, e.node, from, y0, y, &end, "");
        }
    }
    for (&n, &k) in p.lane.iter() {
        if let Some((from, y0)) = open[k] {
            bar(h, n.into(), from, y0, l.bottom(), "still paused at the end", " open");
        }
    }
    h.push('\n');
}

/// The failing row, highlighted across the diagram.
pub(super) fn failure_row(p: &Page, h: &mut String) {
    let Some(r) = p.l.fail_row.filter(|&r| p.l.shown[r]) else { return };
    let y = p.l.y[r];
    let _ = writeln!(
        h,
        "<g class=\"failmark\"><rect class=\"failrow\" x=\"0\" y=\"{}\" width=\"{}\" height=\"{ROW_H}\"/>\
         <text class=\"faillbl\" x=\"4\" y=\"{}\">FAILURE &#x25B8;</text></g>",
        y - ROW_H / 2,
        p.width,
        y + 4
    );
}

/// Each shown event's mark: on its lane, or in the notes column for the
/// engine (and nodes without a lane). Deliveries, drops, runs, console
/// lines and disk requests other than flushes have none.
pub(super) fn event_marks(p: &Page, h: &mut String) {
    let fail = p.a.failure_index();
    for i in 0..p.events().len() {
        if !p.l.shown(i) {
            continue;
        }
        let is_fail = fail == Some(i);
        if p.events()[i].node.is_engine() || p.x(p.events()[i].node).is_none() {
            note(p, i, is_fail, h);
        } else {
            lane_mark(p, i, is_fail, h);
        }
    }
}

/// An engine event as a line of text in the notes column (partitions are
/// labelled by their bands instead).
fn note(p: &Page, i: usize, is_fail: bool, h: &mut String) {
    let (m, e) = (p.meta(), &p.events()[i]);
    let (cls, text) = match &e.kind {
        EventKind::Partition { .. } => return,
        EventKind::Heal => ("note heal", "✓ heal".to_string()),
        EventKind::Note { text } => ("note", format!("• {text}")),
        _ => ("note", format!("{}: {}", node_label(m, e.node), describe(m, e))),
    };
    let _ = writeln!(
        h,
        "<text class=\"{cls}{}\" data-kind=\"{}\" x=\"{}\" y=\"{}\"><title>{}</title>{}</text>",
        if is_fail { " failev" } else { "" },
        kind_name(&e.kind),
        p.notes_x(),
        p.l.y(i).unwrap_or(0) + 4,
        esc(&format!("t={} {}", fmt_time_ns(e.time.as_ns()), describe(m, e)), TITLE_CHARS),
        esc_html(&clip(&text, NOTE_CHARS))
    );
}

/// A guest event's mark on its lane.
fn lane_mark(p: &Page, i: usize, is_fail: bool, h: &mut String) {
    let (m, e) = (p.meta(), &p.events()[i]);
    let x = p.x(e.node).unwrap_or(0);
    let y = p.l.y(i).unwrap_or(0);
    match &e.kind {
        EventKind::Send { .. } => {
            let _ = write!(h, "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{}\"/>", p.color(e.node));
        }
        EventKind::Disk { op: DiskOp::Flush, .. } => {
            // A flush is a durability point: a small square on the lane.
            let _ = write!(
                h,
                "<rect x=\"{}\" y=\"{}\" width=\"6\" height=\"6\" fill=\"#555\"><title>{}</title></rect>",
                x - 3,
                y - 3,
                esc(&describe(m, e), TITLE_CHARS)
            );
        }
        EventKind::DiskFault { fault, .. } => {
            // Beside the lane, so the request's own mark stays visible.
            let _ = writeln!(
                h,
                "<g class=\"dfault{}\" data-kind=\"disk_fault\"><title>{}</title><path d=\"M{},{} l6,6 l-6,6 l-6,-6z\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
                if is_fail { " failev" } else { "" },
                esc(&format!("t={} {}: {}", fmt_time_ns(e.time.as_ns()), node_label(m, e.node), describe(m, e)), TITLE_CHARS),
                x + 10,
                y - 6,
                x + 18,
                y + 4,
                esc_html(&clip(fault.as_str(), LABEL_CHARS))
            );
        }
        _ => {
            if let Some((cls, label)) = box_style(m, e) {
                event_box(p, e, (x, y), cls, &label, is_fail, h);
            }
        }
    }
}

/// A box centred on the lane, as wide as its (clipped) label.
fn event_box(p: &Page, e: &Event, (x, y): (i64, i64), cls: &str, label: &str, is_fail: bool, h: &mut String) {
    let m = p.meta();
    let text = clip(label, BOX_CHARS);
    let bw = (text.chars().count() as i64 * 7 + 12).min(LANE_W - 8);
    let _ = writeln!(
        h,
        "<g class=\"box {cls}{}\" data-kind=\"{}\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{bw}\" height=\"16\" rx=\"3\"/><text x=\"{x}\" y=\"{}\">{}</text></g>",
        if is_fail { " failev" } else { "" },
        kind_name(&e.kind),
        esc(&format!("t={} {}: {}", fmt_time_ns(e.time.as_ns()), node_label(m, e.node), describe(m, e)), TITLE_CHARS),
        x - bw / 2,
        y - 8,
        y + 4,
        esc_html(&text)
    );
}

/// The box of a guest event: its CSS class (`b-ok`, `b-bad`, ...) and its
/// label; `None` for events drawn otherwise or not at all.
fn box_style(m: &ReportMeta, e: &Event) -> Option<(&'static str, String)> {
    Some(match &e.kind {
        EventKind::Send { .. }
        | EventKind::DiskFault { .. }
        | EventKind::Deliver { .. }
        | EventKind::Drop { .. }
        | EventKind::Run { .. }
        | EventKind::Disk { .. }
        | EventKind::Console { .. } => return None,
        EventKind::Boot => ("b-ok", "boot".into()),
        EventKind::Ready => ("b-ok", "ready".into()),
        EventKind::Command { name } => ("b-cmd", format!("▶ {name}")),
        EventKind::CommandDone { name, status } => {
            (if *status == 0 { "b-ok" } else { "b-bad" }, format!("■ {name} → {status}"))
        }
        EventKind::Exit { status, signal, panic } => {
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
        EventKind::Kill { .. } => ("b-crash", "✝ kill".into()),
        EventKind::Respawn => ("b-ok", "↻ respawn".into()),
        EventKind::ClockOffset { offset_ns } => ("b-clock", format!("clock {}", fmt_signed(*offset_ns))),
        EventKind::ClockDrift { ppm } => ("b-clock", format!("drift {ppm:+}ppm")),
        EventKind::ClockBump { delta_ns } => ("b-clock", format!("clock {}", fmt_signed(*delta_ns))),
        EventKind::ClockStrobe { delta_ns, .. } => ("b-clock", format!("strobe ±{}", fmt_dur(delta_ns.unsigned_abs()))),
        EventKind::PowerFailure { .. } => ("b-crash", describe(m, e)),
        EventKind::Role { role } => ("b-cmd", format!("role {role}")),
        EventKind::ConnReset { .. } => ("b-crash", "✂ conn reset".into()),
        EventKind::ConnStall { .. } => ("b-warn", "⏸ conn stall".into()),
        EventKind::Partition { .. } | EventKind::Heal | EventKind::Note { .. } => ("b-stop", describe(m, e)),
    })
}
