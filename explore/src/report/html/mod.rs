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
//!
//! The page is built top to bottom by the submodules: `panels` (title,
//! failure, chips, node table, fault index), then the diagram (`lanes`:
//! legend, headers, lifelines, gaps, time labels; `marks`: partition
//! bands, command and pause bars, the failure row, event boxes and markers;
//! `messages`: arrows, losses, frames in flight; all placed by
//! `layout`), then `console`. The stylesheet is in `assets`.

mod anomalies;
mod assets;
mod console;
mod lanes;
mod layout;
mod marks;
mod messages;
mod panels;
mod timeline;

use super::{esc, esc_html, sanitize, Analysis, ReportMeta};
use engine::trace::Event;
pub use layout::PARTS_DIR;
use layout::{part_file, Page, View, PALETTE};
use std::fmt::Write as _;

/// Most diagram rows the report's own diagram shows; a longer trace shows
/// the boot, the faults, the failing operations and the lead-up to the
/// failure (see `layout::window`), with each left-out stretch marked, and
/// the whole run is in parts of [`PART_ROWS`] rows (files under
/// `report-parts/`, linked from the report and from each other).
pub const MAX_ROWS: usize = 1500;
/// Rows shown from the start of a trace longer than [`MAX_ROWS`] (the boot).
pub const HEAD_ROWS: usize = 60;
/// Rows shown after the failure's row in a trace longer than [`MAX_ROWS`].
pub const ROWS_AFTER_FAILURE: usize = 100;
/// Rows shown either side of each fault and failing operation, at most
/// (fewer when there are many of them: together they take at most half of
/// the window).
pub const FOCUS_CONTEXT: usize = 100;
/// Rows per part of the whole run.
pub const PART_ROWS: usize = 1000;
/// Console table, per node (engine included): the first lines, the lines
/// just before the failure (or the end) and just after it.
pub const CONSOLE_HEAD: usize = 100;
/// Console lines kept per node up to and including the failing event (or
/// up to the end).
pub const CONSOLE_BEFORE_FAILURE: usize = 300;
/// Console lines kept per node after the failure; none past the end when
/// the execution passed.
pub const CONSOLE_AFTER_FAILURE: usize = 50;
/// Console lines kept per node either side of each fault and of each
/// failing operation's invoke and completion.
pub const CONSOLE_AROUND_FOCUS: usize = 20;
/// Most console lines in a part of the whole run.
pub const CONSOLE_PART: usize = 2000;
/// Fault/check index entries at the top of the page.
pub const MAX_INDEX_ENTRIES: usize = 100;
/// Most characters of guest text shown: a console line, a hover title, a
/// box label, a message or drop label, an engine note.
const LINE_CHARS: usize = 1000;
const TITLE_CHARS: usize = 300;
const BOX_CHARS: usize = 25;
const LABEL_CHARS: usize = 18;
const NOTE_CHARS: usize = 44;

/// The HTML report (see the module docs). Deterministic: same input, same
/// bytes. Guest text is escaped and stripped of control characters.
pub fn render_html(meta: &ReportMeta, events: &[Event]) -> String {
    let a = Analysis::new(meta, events);
    main_page(&a)
}

/// The report and the parts of the whole run: (path relative to the
/// report's folder, HTML); the parts are under [`PARTS_DIR`], none when
/// the report's diagram shows every row.
pub fn render_html_all(meta: &ReportMeta, events: &[Event]) -> Vec<(String, String)> {
    let a = Analysis::new(meta, events);
    let rows = layout::rows_of(&a);
    let main = Page::new(&a, View::Main, rows.clone());
    let mut out = vec![("report.html".to_string(), page(&main))];
    for k in 0..main.parts {
        let p = Page::new(&a, View::Part(k), rows.clone());
        out.push((format!("{PARTS_DIR}/{}", part_file(k)), page(&p)));
    }
    out
}

fn main_page(a: &Analysis) -> String {
    page(&Page::new(a, View::Main, layout::rows_of(a)))
}

fn page(page: &Page) -> String {
    let meta = page.meta();
    let mut h = String::with_capacity(64 * 1024);
    head(meta, page.view, &mut h);
    match page.view {
        View::Main => {
            panels::header(page, &mut h);
            timeline::panel(page, &mut h);
            if let Some((node, model)) = meta.history {
                anomalies::panel(page.events(), node, model, &mut h);
            }
        }
        View::Part(_) => panels::part_header(page, &mut h),
    }
    h.push_str("<div class=\"main\">\n");
    diagram(page, &mut h);
    console::console(page, &mut h);
    h.push_str("</div>\n");
    if let View::Part(_) = page.view {
        panels::part_nav(page, &mut h);
    }
    foot(meta, &mut h);
    h
}

/// The document's head (title, stylesheet) and the opening of its body.
fn head(meta: &ReportMeta, view: View, h: &mut String) {
    let part = match view {
        View::Main => String::new(),
        View::Part(k) => format!(", part {}", k + 1),
    };
    let title = format!(
        "simcluster report: {} seed {} execution {}{part}",
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
        assets::css()
    );
}

fn foot(meta: &ReportMeta, h: &mut String) {
    let _ = writeln!(
        h,
        "<footer>Generated by simcluster from trace {}; virtual times in seconds since the \
         cluster booted. Hover over arrows and boxes for details.</footer>\n</body>\n</html>",
        esc(&meta.trace_hash, 80)
    );
}

/// The space-time diagram panel, back to front: later steps draw over
/// earlier ones.
fn diagram(p: &Page, h: &mut String) {
    lanes::intro(p, h);
    lanes::headers(p, h);
    h.push_str("<div class=\"body\">\n");
    anchors(p, h);
    svg_start(p, h);
    lanes::backgrounds(p, h);
    marks::partition_bands(p, h);
    lanes::gaps_and_breaks(p, h);
    lanes::lifelines(p, h);
    marks::command_spans(p, h);
    marks::pause_bars(p, h);
    marks::failure_row(p, h);
    messages::messages(p, h);
    marks::event_marks(p, h);
    lanes::time_labels(p, h);
    h.push_str("\n</svg>\n</div>\n</div>\n</section>\n");
}

/// Link targets (`#failure`, `#ev<i>` for each indexed event), as HTML
/// elements so that fragment navigation is reliable; placed a little above
/// their row so it is not under the sticky headers.
fn anchors(p: &Page, h: &mut String) {
    let l = &p.l;
    if let Some(r) = l.fail_row {
        let _ = writeln!(h, "<div id=\"failure\" class=\"anchor\" style=\"top:{}px\"></div>", (l.y[r] - 300).max(0));
    }
    // A part is the target of the report's links to left-out rows.
    if let View::Part(_) = p.view {
        for (r, y) in l.y.iter().enumerate() {
            if l.shown[r] {
                let _ = writeln!(h, "<div id=\"row{r}\" class=\"anchor\" style=\"top:{}px\"></div>", (y - 160).max(0));
            }
        }
    }
    for (i, e) in p.events().iter().enumerate() {
        if panels::is_notable(&e.kind) && l.shown(i) {
            let _ = writeln!(
                h,
                "<div id=\"ev{i}\" class=\"anchor\" style=\"top:{}px\"></div>",
                (l.y(i).unwrap_or(0) - 160).max(0)
            );
        }
    }
}

/// The diagram's `<svg>` and its definitions: an arrowhead per lane
/// colour (`ah0`..`ah7`), a grey one (`ahg`), the hatch of elided gaps.
fn svg_start(p: &Page, h: &mut String) {
    let (w, height) = (p.width, p.l.height);
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
}
