//! The console panel: every node's console lines and the events that are
//! not messages, interleaved by virtual time, with the failure as its own
//! row. Per node it keeps the first [`CONSOLE_HEAD`] lines, the last
//! [`CONSOLE_BEFORE_FAILURE`] before the failure (or the end) and the first
//! [`CONSOLE_AFTER_FAILURE`] after it; each run of left-out lines becomes
//! one "not shown" row.

use super::layout::{Page, View};
use super::{
    CONSOLE_AFTER_FAILURE, CONSOLE_AROUND_FOCUS, CONSOLE_BEFORE_FAILURE, CONSOLE_HEAD, CONSOLE_PART, LINE_CHARS,
};
use crate::report::{describe, esc, fmt_time, node_label};
use engine::trace::EventKind;
use engine::Actor;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A run of left-out lines of one node: (node, lines, first time, last time).
type Elided = (Actor, usize, u64, u64);

/// Which console entries the panel shows.
struct Window {
    /// Indices of the events in the panel (all but runs and messages).
    entries: Vec<usize>,
    /// Per position in `entries`: shown.
    keep: Vec<bool>,
    /// Runs of left-out entries, keyed by the position of their first one.
    runs: BTreeMap<usize, Elided>,
}

pub(super) fn console(p: &Page, h: &mut String) {
    let w = Window::new(p);
    let fail = p.a.failure_index();
    let left_out = w.keep.iter().filter(|k| !**k).count();
    h.push_str("<section class=\"panel console\">\n<h2>Console and events by virtual time</h2>\n");
    if left_out > 0 {
        match p.view {
            View::Main => {
                let _ = writeln!(
                    h,
                    "<p class=\"warn\">{left_out} of {} lines not shown: per node, the first {CONSOLE_HEAD}, {CONSOLE_AROUND_FOCUS} either side of each fault and failing operation, the last {CONSOLE_BEFORE_FAILURE} before the {} and {} are kept.</p>",
                    w.entries.len(),
                    if fail.is_some() { "failure" } else { "end" },
                    if fail.is_some() { format!("the first {CONSOLE_AFTER_FAILURE} after it") } else { "nothing after".to_string() }
                );
            }
            View::Part(_) => {
                let _ = writeln!(
                    h,
                    "<p class=\"warn\">The lines of this part's time span, at most {CONSOLE_PART}; {left_out} of the run's {} lines are in other parts or left out.</p>",
                    w.entries.len()
                );
            }
        }
    }
    h.push_str("<div class=\"scroll\">\n<table class=\"console\">\n<thead><tr><th>time</th><th>node</th><th>line</th></tr></thead>\n<tbody>\n");
    rows(p, &w, h);
    h.push_str("</tbody>\n</table>\n</div>\n</section>\n");
}

impl Window {
    fn new(p: &Page) -> Window {
        let events = p.events();
        let fail = p.a.failure_index();
        // A part's panel holds its time span only.
        let span = match p.view {
            View::Part(_) => {
                let l = &p.l;
                let first = l.shown.iter().position(|s| *s);
                let last = l.shown.iter().rposition(|s| *s);
                match (first, last) {
                    (Some(a), Some(b)) => (l.rows[a].time, l.rows[b].time),
                    _ => (1, 0),
                }
            }
            View::Main => (0, u64::MAX),
        };
        let entries: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| (span.0..=span.1).contains(&e.time.as_ns()))
            .filter(|(_, e)| {
                !matches!(
                    e.kind,
                    EventKind::Run { .. } | EventKind::Send { .. } | EventKind::Deliver { .. } | EventKind::Drop { .. }
                )
            })
            .map(|(i, _)| i)
            .collect();
        // Positions in `entries` of each node's entries.
        let mut per_node: BTreeMap<Actor, Vec<usize>> = BTreeMap::new();
        for (pos, &i) in entries.iter().enumerate() {
            per_node.entry(events[i].node).or_default().push(pos);
        }
        let mut keep = vec![false; entries.len()];
        if let View::Part(_) = p.view {
            // The entries in the part's time span.
            let l = &p.l;
            let shown: Vec<usize> = (0..l.rows.len()).filter(|&r| l.shown[r]).collect();
            if let (Some(&a), Some(&b)) = (shown.first(), shown.last()) {
                let (t0, t1) = (l.rows[a].time, l.rows[b].time);
                let mut n = 0;
                for (pos, &i) in entries.iter().enumerate() {
                    let t = events[i].time.as_ns();
                    if t >= t0 && t <= t1 && n < CONSOLE_PART {
                        keep[pos] = true;
                        n += 1;
                    }
                }
            }
            let mut w = Window { entries, keep, runs: BTreeMap::new() };
            for (&n, list) in &per_node {
                w.note_elided_runs(p, n, list);
            }
            return w;
        }
        // Event indices and times to keep lines around: the faults, the
        // failing operations.
        let story = &p.a.story;
        for list in per_node.values() {
            let by_index = |i: usize| list.partition_point(|&pos| entries[pos] < i);
            let by_time = |t: u64| list.partition_point(|&pos| events[entries[pos]].time.as_ns() < t);
            let centres = story.faults.iter().map(|&i| by_index(i)).chain(story.focus_times().into_iter().map(by_time));
            for c in centres {
                for &pos in &list[c.saturating_sub(CONSOLE_AROUND_FOCUS)..(c + CONSOLE_AROUND_FOCUS).min(list.len())] {
                    keep[pos] = true;
                }
            }
        }
        for list in per_node.values() {
            for &pos in list.iter().take(CONSOLE_HEAD) {
                keep[pos] = true;
            }
            let split = match fail {
                Some(f) => list.partition_point(|&pos| entries[pos] <= f),
                None => list.len(),
            };
            for &pos in &list[split.saturating_sub(CONSOLE_BEFORE_FAILURE)..split] {
                keep[pos] = true;
            }
            if fail.is_some() {
                for &pos in &list[split..(split + CONSOLE_AFTER_FAILURE).min(list.len())] {
                    keep[pos] = true;
                }
            }
        }
        let mut w = Window { entries, keep, runs: BTreeMap::new() };
        for (&n, list) in &per_node {
            w.note_elided_runs(p, n, list);
        }
        w
    }

    /// Runs of left-out lines of node `n` (`list`: its positions), noted
    /// where each run starts.
    fn note_elided_runs(&mut self, p: &Page, n: Actor, list: &[usize]) {
        let events = p.events();
        let mut q = 0;
        while q < list.len() {
            if self.keep[list[q]] {
                q += 1;
                continue;
            }
            let start = q;
            while q < list.len() && !self.keep[list[q]] {
                q += 1;
            }
            self.runs.insert(
                list[start],
                (
                    n,
                    q - start,
                    events[self.entries[list[start]]].time.as_ns(),
                    events[self.entries[list[q - 1]]].time.as_ns(),
                ),
            );
        }
    }
}

/// The table's rows: kept entries, "not shown" rows, and the failure row
/// at the failing event (or where it falls in time).
fn rows(p: &Page, w: &Window, h: &mut String) {
    let m = p.meta();
    let fail = p.a.failure_index();
    // A part shows the failure only where its lines are.
    let mut fail_done = fail.is_none() || matches!(p.view, View::Part(_));
    for (pos, &i) in w.entries.iter().enumerate() {
        if !fail_done && fail.is_some_and(|f| i > f) {
            failure_row(p, h);
            fail_done = true;
        }
        if !w.keep[pos] {
            if let Some(&(n, count, t0, t1)) = w.runs.get(&pos) {
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
            failure_row(p, h);
            fail_done = true;
            continue;
        }
        line_row(p, i, fail.is_some_and(|f| i > f), h);
    }
    if !fail_done {
        failure_row(p, h);
    }
}

/// The failure's row (the target of `#console-failure`).
fn failure_row(p: &Page, h: &mut String) {
    let Some(f) = p.a.failure_index() else { return };
    let m = p.meta();
    let e = &p.events()[f];
    let _ = writeln!(
        h,
        "<tr id=\"console-failure\" class=\"fail\"><td class=\"t\">{}</td><td class=\"{}\">{}</td><td class=\"l\">&#x2717; FAILURE: {}</td></tr>",
        fmt_time(e.time.as_ns()),
        p.cclass(e.node),
        esc(&node_label(m, e.node), 40),
        esc(&describe(m, e), LINE_CHARS)
    );
}

/// A console line or an event; greyed out after the failure.
fn line_row(p: &Page, i: usize, after: bool, h: &mut String) {
    let m = p.meta();
    let e = &p.events()[i];
    let (cls, text) = match &e.kind {
        EventKind::Console { text } => ("", esc(text, LINE_CHARS)),
        EventKind::Crash { .. } | EventKind::Hung | EventKind::Invariant { ok: false, .. } | EventKind::Exit { .. } => {
            ("ev bad", esc(&describe(m, e), LINE_CHARS))
        }
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
        e.time.as_ns(),
        fmt_time(e.time.as_ns()),
        p.cclass(e.node),
        esc(&node_label(m, e.node), 40)
    );
}
