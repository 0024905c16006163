//! Where things go in the space-time diagram: rows (virtual time, downward)
//! and lanes (nodes, across), and [`Page`], what every part of the page
//! reads.

use super::{FOCUS_CONTEXT, HEAD_ROWS, MAX_ROWS, PART_ROWS, ROWS_AFTER_FAILURE};
use crate::report::{Analysis, ReportMeta};
use engine::trace::{Event, EventKind};
use engine::{Actor, NodeId};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Height of a row, of an elided gap, of an idle break.
pub(super) const ROW_H: i64 = 22;
pub(super) const GAP_H: i64 = 40;
pub(super) const BREAK_H: i64 = 14;
/// Margin above the first row and below the last.
pub(super) const TOP: i64 = 10;
/// Height of the sticky lane headers.
pub(super) const HEAD_H: i64 = 44;
/// The time-label column left of the lanes, a lane, the engine's notes
/// column right of them.
pub(super) const GUTTER: i64 = 140;
pub(super) const LANE_W: i64 = 200;
pub(super) const NOTES_W: i64 = 320;
/// An idle stretch is marked when a row is this much later than the one
/// above (at least; see `idle_threshold`).
const MIN_IDLE_NS: u64 = 50_000_000;

/// Lane colours, by lane index modulo the length (CSS classes `c0`..`c7`).
pub(super) const PALETTE: [&str; 8] =
    ["#1f6fb4", "#2a9d4a", "#8e44ad", "#b9770e", "#148a9c", "#b8336a", "#566573", "#7d6608"];

/// One instant of the diagram: events at the same virtual time that share
/// a row (see the module docs of `html`).
pub(super) struct Row {
    pub time: u64,
    pub events: Vec<usize>,
    /// An engine row: engine events get a row of their own.
    pub engine: bool,
}

/// Consecutive rows left out of the diagram window, drawn as one band.
pub(super) struct Gap {
    pub y_top: i64,
    pub first: usize,
    pub last: usize,
}

/// Rows, which are shown, and where.
pub(super) struct Layout {
    pub rows: Rc<Vec<Row>>,
    /// The row of each event; `None` for `Run` and `Console` events.
    pub row_of: Rc<Vec<Option<usize>>>,
    pub shown: Vec<bool>,
    /// Centre of each row (an elided row: centre of its gap).
    pub y: Vec<i64>,
    pub gaps: Vec<Gap>,
    /// Idle breaks: (centre y, the idle duration in ns).
    pub breaks: Vec<(i64, u64)>,
    pub height: i64,
    /// The row of the failing event (or the closest row before it).
    pub fail_row: Option<usize>,
}

/// Vertical positions of the rows, elided gaps and idle breaks.
struct Placement {
    y: Vec<i64>,
    gaps: Vec<Gap>,
    breaks: Vec<(i64, u64)>,
    height: i64,
}

/// Which diagram a page draws: the report's own window, or one part of
/// the whole run ([`PART_ROWS`] consecutive rows, 0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    Main,
    Part(usize),
}

/// How many parts of [`PART_ROWS`] rows the whole run takes; 0 when the
/// report's own diagram shows every row.
pub(super) fn part_count(rows: usize) -> usize {
    if rows <= MAX_ROWS {
        0
    } else {
        rows.div_ceil(PART_ROWS)
    }
}

/// The part that holds `row`.
pub(super) fn part_of(row: usize) -> usize {
    row / PART_ROWS
}

/// The rows of a trace and the row of each event (see [`group_rows`]),
/// shared by the report and its parts.
pub(super) type Rows = (Rc<Vec<Row>>, Rc<Vec<Option<usize>>>);

/// The rows of `a`'s trace.
pub(super) fn rows_of(a: &Analysis) -> Rows {
    let (rows, row_of) = group_rows(a);
    (Rc::new(rows), Rc::new(row_of))
}

impl Layout {
    pub fn new(a: &Analysis, view: View, (rows, row_of): Rows) -> Layout {
        let fail_row = failure_row(a, &row_of, rows.len());
        let shown = match view {
            View::Main => window(a, &rows, &row_of, fail_row),
            View::Part(k) => {
                let mut shown = vec![false; rows.len()];
                let end = ((k + 1) * PART_ROWS).min(rows.len());
                shown[(k * PART_ROWS).min(end)..end].iter_mut().for_each(|s| *s = true);
                shown
            }
        };
        let Placement { y, gaps, breaks, height } = place(&rows, &shown);
        Layout { rows, row_of, shown, y, gaps, breaks, height, fail_row }
    }

    /// Centre of the event's row (or of the gap it was elided into).
    pub fn y(&self, i: usize) -> Option<i64> {
        self.row_of[i].map(|r| self.y[r])
    }

    pub fn shown(&self, i: usize) -> bool {
        self.row_of[i].is_some_and(|r| self.shown[r])
    }

    /// Top edge of the event's row.
    pub fn top(&self, i: usize) -> Option<i64> {
        self.row_of[i].map(|r| if self.shown[r] { self.y[r] - ROW_H / 2 } else { self.y[r] })
    }

    /// Where open bars and lane lines end: the bottom of the last row.
    pub fn bottom(&self) -> i64 {
        self.height - TOP
    }
}

/// Rows of the events that take one (all but `Run` and `Console`): an
/// event starts a fresh row unless it is at the same time as the row, on
/// another guest node, and not the delivery of a message sent in that row.
fn group_rows(a: &Analysis) -> (Vec<Row>, Vec<Option<usize>>) {
    let events = a.events;
    let mut rows: Vec<Row> = Vec::new();
    let mut row_of = vec![None; events.len()];
    for (i, ev) in events.iter().enumerate() {
        if matches!(ev.kind, EventKind::Run { .. } | EventKind::Console { .. }) {
            continue;
        }
        let engine = ev.node.is_engine();
        let here = rows.len().wrapping_sub(1);
        let fresh = match rows.last() {
            None => true,
            Some(r) => {
                r.engine
                    || engine
                    || r.time != ev.time.as_ns()
                    || r.events.iter().any(|&j| events[j].node == ev.node)
                    || a.partner[i].is_some_and(|s| row_of[s] == Some(here))
            }
        };
        if fresh {
            rows.push(Row { time: ev.time.as_ns(), events: Vec::new(), engine });
        }
        let r = rows.len() - 1;
        rows[r].events.push(i);
        row_of[i] = Some(r);
    }
    (rows, row_of)
}

/// The row of the failing event, or of the last event before it with a
/// row, or the first row.
fn failure_row(a: &Analysis, row_of: &[Option<usize>], total: usize) -> Option<usize> {
    a.failure_index().and_then(|f| (0..=f).rev().find_map(|j| row_of[j]).or_else(|| (total > 0).then_some(0)))
}

/// Which rows the report's own diagram shows: all of them up to
/// [`MAX_ROWS`]; else the first [`HEAD_ROWS`] (the boot), every fault's
/// row and the rows of the failing operations' invokes and completions
/// with up to [`FOCUS_CONTEXT`] rows either side (less when there are many
/// of them), the failure's row and [`ROWS_AFTER_FAILURE`] after it, and
/// then, while the budget lasts, the rows leading up to the failure (or the
/// end).
fn window(a: &Analysis, rows: &[Row], row_of: &[Option<usize>], fail_row: Option<usize>) -> Vec<bool> {
    let total = rows.len();
    let mut shown = vec![false; total];
    if total <= MAX_ROWS {
        shown.iter_mut().for_each(|s| *s = true);
        return shown;
    }
    let focus = fail_row.unwrap_or(total - 1);
    // Rows to centre on: the faults' (or the closest row before one), and
    // the rows at the failing operations' times.
    let mut marks: Vec<usize> = a
        .story
        .faults
        .iter()
        .filter_map(|&i| (0..=i).rev().find_map(|j| row_of[j]))
        .chain(a.story.focus_times().into_iter().map(|t| rows.partition_point(|r| r.time < t).min(total - 1)))
        .collect();
    marks.sort_unstable();
    marks.dedup();
    let budget = MAX_ROWS - HEAD_ROWS - ROWS_AFTER_FAILURE - 1;
    let context = (budget / 2 / (2 * marks.len() + 1)).min(FOCUS_CONTEXT);
    shown[..HEAD_ROWS].iter_mut().for_each(|s| *s = true);
    for &m in &marks {
        let end = (m + context + 1).min(total);
        shown[m.saturating_sub(context)..end].iter_mut().for_each(|s| *s = true);
    }
    shown[focus..(focus + 1 + ROWS_AFTER_FAILURE).min(total)].iter_mut().for_each(|s| *s = true);
    let mut count = shown.iter().filter(|s| **s).count();
    let mut r = focus;
    while count < MAX_ROWS && r > 0 {
        r -= 1;
        if !shown[r] {
            shown[r] = true;
            count += 1;
        }
    }
    shown
}

/// Stacks the rows top to bottom: a shown row takes [`ROW_H`] (after an
/// idle break of [`BREAK_H`] when it is long after the row above), a run
/// of hidden rows one gap of [`GAP_H`].
fn place(rows: &[Row], shown: &[bool]) -> Placement {
    let total = rows.len();
    let threshold = idle_threshold(rows);
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
            gaps.push(Gap { y_top: y, first, last: r - 1 });
            y_of[first..r].iter_mut().for_each(|v| *v = y + GAP_H / 2);
            y += GAP_H;
        }
    }
    Placement { y: y_of, gaps, breaks, height: y + TOP }
}

/// A row gap worth marking: 50 milliseconds, or ten times the median gap
/// between rows when that is more.
fn idle_threshold(rows: &[Row]) -> u64 {
    let mut deltas: Vec<u64> =
        rows.windows(2).map(|w| w[1].time.saturating_sub(w[0].time)).filter(|&d| d > 0).collect();
    if deltas.is_empty() {
        return u64::MAX;
    }
    deltas.sort_unstable();
    MIN_IDLE_NS.max(deltas[deltas.len() / 2].saturating_mul(10))
}

/// What every part of the page reads: the analysis, the diagram's rows,
/// and the lane of each guest node (left to right, ascending node ids).
pub(super) struct Page<'a, 'b> {
    pub a: &'b Analysis<'a>,
    pub l: Layout,
    /// Lane index of each guest node.
    pub lane: BTreeMap<NodeId, usize>,
    /// Width of the diagram: gutter, lanes, notes column.
    pub width: i64,
    /// The report's own window or a part of the whole run.
    pub view: View,
    /// How many parts the whole run takes (0: the report shows every row).
    pub parts: usize,
}

impl<'a, 'b> Page<'a, 'b> {
    pub fn new(a: &'b Analysis<'a>, view: View, rows: Rows) -> Page<'a, 'b> {
        let lane: BTreeMap<NodeId, usize> = a.nodes.iter().enumerate().map(|(k, &n)| (n, k)).collect();
        let width = GUTTER + LANE_W * lane.len() as i64 + NOTES_W;
        let l = Layout::new(a, view, rows);
        let parts = part_count(l.rows.len());
        Page { l, a, lane, width, view, parts }
    }

    /// The node's lane; `None` for the engine and unknown nodes.
    pub fn lane_of(&self, node: impl Into<Actor>) -> Option<&usize> {
        node.into().node().and_then(|n| self.lane.get(&n))
    }

    /// Centre of the node's lane; `None` for the engine and unknown nodes.
    pub fn x(&self, node: impl Into<Actor>) -> Option<i64> {
        self.lane_of(node).map(|&k| GUTTER + LANE_W * k as i64 + LANE_W / 2)
    }

    pub fn color(&self, node: impl Into<Actor>) -> &'static str {
        self.lane_of(node).map(|&k| PALETTE[k % PALETTE.len()]).unwrap_or("#555")
    }

    /// The node's colour class (`c<k>`; `ce` for the engine).
    pub fn cclass(&self, node: impl Into<Actor>) -> String {
        match self.lane_of(node) {
            Some(&k) => format!("c{}", k % PALETTE.len()),
            None => "ce".to_string(),
        }
    }

    /// Index into [`PALETTE`] of the node's colour (0 for a node without a lane).
    pub fn palette_index(&self, node: impl Into<Actor>) -> usize {
        self.lane_of(node).copied().unwrap_or(0) % PALETTE.len()
    }

    /// Left edge of the engine's notes column.
    pub fn notes_x(&self) -> i64 {
        GUTTER + LANE_W * self.lane.len() as i64 + 10
    }

    /// Right edge of the last lane.
    pub fn lanes_right(&self) -> i64 {
        GUTTER + LANE_W * self.lane.len() as i64
    }

    pub fn meta(&self) -> &ReportMeta {
        self.a.meta
    }

    pub fn events(&self) -> &'a [Event] {
        self.a.events
    }

    /// The link to row `row` from this page: `#<fragment>` when this page
    /// shows it, else the part file that does (`report-parts/part-007.html`
    /// from the report, `part-007.html` from another part).
    pub fn link_to_row(&self, row: usize, fragment: &str) -> String {
        if self.l.shown.get(row).copied().unwrap_or(false) || self.parts == 0 {
            return format!("#{fragment}");
        }
        let file = part_file(part_of(row));
        match self.view {
            View::Main => format!("{PARTS_DIR}/{file}#{fragment}"),
            View::Part(_) => format!("{file}#{fragment}"),
        }
    }
}

/// The folder beside report.html that holds the parts.
pub const PARTS_DIR: &str = "report-parts";

/// A part's file name (`part-001.html` for part 0).
pub fn part_file(k: usize) -> String {
    format!("part-{:03}.html", k + 1)
}
