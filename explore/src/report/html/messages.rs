//! Message arrows: a delivery is an arrow from the send to the delivery,
//! coloured by sender (dashed for a duplicate; a stub when the send is not
//! in the trace); a lost frame is a dashed line ending in a cross; a frame
//! still in flight at the end is a short grey arrow with a `?`.

use super::layout::{Page, LANE_W, PALETTE, ROW_H};
use super::{LABEL_CHARS, TITLE_CHARS};
use crate::report::{clip, esc, esc_html, fmt_dur, fmt_time, node_label};
use engine::trace::EventKind;
use std::fmt::Write as _;

/// Every message's arrow, loss or in-flight stub that touches a shown row.
pub(super) fn messages(p: &Page, h: &mut String) {
    for (i, e) in p.events().iter().enumerate() {
        match &e.kind {
            EventKind::Deliver { .. } => delivery(p, i, h),
            EventKind::Drop { .. } => loss(p, i, h),
            EventKind::Send { .. } if p.a.outcome[i] == (0, 0) && p.l.shown(i) => in_flight(p, i, h),
            _ => {}
        }
    }
}

/// Delivery `i`: an arrow from its send when either end is shown, a stub
/// when its send is not in the trace.
fn delivery(p: &Page, i: usize, h: &mut String) {
    let l = &p.l;
    // Most deliveries of a long trace are in no shown row: skip them before
    // looking up a lane.
    if !(l.shown(i) || p.a.partner[i].is_some_and(|s| l.shown(s))) || p.x(p.events()[i].node).is_none() {
        return;
    }
    match p.a.partner[i] {
        Some(s) if l.shown(s) || l.shown(i) => arrow(p, s, i, h),
        Some(_) => {}
        None if l.shown(i) => orphan(p, i, h),
        None => {}
    }
}

/// The arrow from send `s` to delivery `i`, labelled with the summary
/// near its start; a message to self loops out to the right.
fn arrow(p: &Page, s: usize, i: usize, h: &mut String) {
    let (l, m, events) = (&p.l, p.meta(), p.events());
    let (e, snd) = (&events[i], &events[s]);
    let EventKind::Deliver { id, len, summary, .. } = &e.kind else { return };
    let Some(x2) = p.x(e.node) else { return };
    let y2 = l.y(i).unwrap_or(0);
    let x1 = p.x(snd.node).unwrap_or(x2);
    let y1 = l.y(s).unwrap_or(0);
    let k = p.palette_index(snd.node);
    let dup = p.a.dup[i];
    let title = format!(
        "#{id} {} → {}, {len} B, sent {}, delivered {} (+{}){}: {}",
        node_label(m, snd.node),
        node_label(m, e.node),
        fmt_time(snd.time.as_ns()),
        fmt_time(e.time.as_ns()),
        fmt_dur(e.time.as_ns().saturating_sub(snd.time.as_ns())),
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
    let (lx, ly) =
        if x1 == x2 { (x1 + 46, (y1 + y2) / 2) } else { (x1 + (x2 - x1) * 3 / 10, y1 + (y2 - y1) * 3 / 10 - 3) };
    let label = if dup { format!("dup {summary}") } else { summary.clone() };
    let _ = writeln!(h, "<text x=\"{lx}\" y=\"{ly}\">{}</text></g>", esc_html(&clip(&label, LABEL_CHARS)));
}

/// Delivery `i` whose send is not in the trace: a stub from the sender's side.
fn orphan(p: &Page, i: usize, h: &mut String) {
    let (m, e) = (p.meta(), &p.events()[i]);
    let EventKind::Deliver { id, from, len, summary } = &e.kind else { return };
    let Some(x2) = p.x(e.node) else { return };
    let y2 = p.l.y(i).unwrap_or(0);
    let dir = match p.x(*from) {
        Some(fx) if fx < x2 => -1,
        Some(fx) if fx > x2 => 1,
        _ => -1,
    };
    let title = format!(
        "#{id} from {}, {len} B, delivered {} (send not in the trace): {}",
        node_label(m, *from),
        fmt_time(e.time.as_ns()),
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

/// Drop `i`: a dashed line from the send (or the drop itself) part of the
/// way toward the destination, ending in a cross labelled with the cause.
fn loss(p: &Page, i: usize, h: &mut String) {
    let (l, m, events) = (&p.l, p.meta(), p.events());
    let e = &events[i];
    let EventKind::Drop { id, to, cause } = &e.kind else { return };
    if !(l.shown(i) || p.a.partner[i].is_some_and(|s| l.shown(s))) {
        return;
    }
    let Some(x1) = p.x(e.node) else { return };
    let (sy, from_send) = match p.a.partner[i] {
        Some(s) => (l.y(s).unwrap_or(0), Some(s)),
        None => (l.y(i).unwrap_or(0), None),
    };
    let dy = l.y(i).unwrap_or(0);
    let tx = p.x(*to).unwrap_or(x1 + LANE_W);
    let xx = if tx == x1 { x1 + 34 } else { x1 + (tx - x1) * 55 / 100 };
    let k = p.palette_index(e.node);
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
        fmt_time(e.time.as_ns()),
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

/// Send `i`, neither delivered nor dropped by the end: a short grey arrow
/// toward its destination with a `?`.
fn in_flight(p: &Page, i: usize, h: &mut String) {
    let (m, e) = (p.meta(), &p.events()[i]);
    let EventKind::Send { id, to, len, summary } = &e.kind else { return };
    let Some(x1) = p.x(e.node) else { return };
    let y1 = p.l.y(i).unwrap_or(0);
    let tx = p.x(*to).unwrap_or(x1 + LANE_W);
    let x2 = if tx == x1 { x1 + 30 } else { x1 + (tx - x1) * 35 / 100 };
    let title = format!(
        "#{id} {} → {}, {len} B, sent {}, never delivered or dropped: {}",
        node_label(m, e.node),
        node_label(m, *to),
        fmt_time(e.time.as_ns()),
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
