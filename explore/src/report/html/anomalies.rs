//! The anomalies panel: when a transactional history check failed, each
//! dependency cycle drawn as a small space-time diagram of its own, one
//! lane per client process, each transaction a bar from its invocation to
//! its completion (in the order of those times, not to scale), each edge an
//! arrow labelled with its kind and key, and the edges' reasons listed
//! beneath. The check is run again from the trace (the history is in the
//! client's console), so the page needs nothing the engine did not record.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use engine::trace::Event;
use txncheck::{Anomaly, Cycle, EdgeKind, History};

use super::{esc, esc_html};
use checker::history_check::{history_lines, HistoryModel};

/// Cycles drawn per anomaly name (the rest are counted).
const CYCLES_SHOWN: usize = 2;
const LANE_W: usize = 150;
const ROW_H: usize = 26;
const TOP: usize = 34;

/// The panel for the history `node` printed, checked under `model`;
/// nothing for the register model or a history without anomalies.
pub(super) fn panel(events: &[Event], node: engine::NodeId, model: HistoryModel, h: &mut String) {
    let HistoryModel::Txn { model, consistency } = model else { return };
    let Some(text) = history_lines(events, node) else { return };
    let Ok(history) = txncheck::parse_history(&text) else { return };
    let report = txncheck::check(&history, model, consistency);
    if report.valid {
        return;
    }
    let _ = writeln!(
        h,
        "<section class=\"anomalies\">\n<h2>Anomalies: the history is not {} ({})</h2>",
        esc_html(&consistency.to_string()),
        esc_html(&model.to_string())
    );
    for (name, found) in &report.anomalies {
        let count = report.counts.get(name).copied().unwrap_or(found.len());
        let _ = writeln!(h, "<h3>{} &#xD7; {count}</h3>", esc(name, 80));
        for a in found.iter().take(CYCLES_SHOWN) {
            match a {
                Anomaly::Cycle(c) => cycle(&history, c, h),
                Anomaly::Finding(f) => {
                    let _ = writeln!(h, "<p class=\"desc\">{}</p>", esc(&f.reason, 2000));
                }
            }
        }
    }
    h.push_str("</section>\n");
}

fn edge_color(k: EdgeKind) -> &'static str {
    match k {
        EdgeKind::Ww => "#1f77b4",
        EdgeKind::Wr => "#2ca02c",
        EdgeKind::Rw => "#d62728",
        EdgeKind::Process => "#7f7f7f",
        EdgeKind::Realtime => "#9467bd",
    }
}

fn edge_name(k: EdgeKind) -> &'static str {
    match k {
        EdgeKind::Ww => "ww",
        EdgeKind::Wr => "wr",
        EdgeKind::Rw => "rw",
        EdgeKind::Process => "process",
        EdgeKind::Realtime => "realtime",
    }
}

/// One cycle: lanes by process, bars by time rank, arrows by edge.
fn cycle(history: &History, c: &Cycle, h: &mut String) {
    let by_index: BTreeMap<usize, &txncheck::Txn> = history.txns.iter().map(|t| (t.index, t)).collect();
    let lanes: Vec<i64> = {
        let mut p: Vec<i64> = c.txns.iter().map(|t| t.process).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    // Every invocation and completion time of the cycle's transactions, in
    // order: a time's rank is its row.
    let mut times: Vec<u64> = Vec::new();
    for t in &c.txns {
        if let Some(x) = by_index.get(&t.index) {
            times.push(x.invoke_time);
            times.push(x.complete_time.unwrap_or(u64::MAX));
        }
    }
    times.sort_unstable();
    times.dedup();
    let row = |t: u64| times.binary_search(&t).unwrap_or(0);
    // (lane, first row, last row) per transaction, by history index.
    let spans: BTreeMap<usize, (usize, usize, usize)> = c
        .txns
        .iter()
        .filter_map(|t| {
            let x = by_index.get(&t.index)?;
            let lane = lanes.binary_search(&t.process).ok()?;
            Some((t.index, (lane, row(x.invoke_time), row(x.complete_time.unwrap_or(u64::MAX)))))
        })
        .collect();
    let width = lanes.len() * LANE_W + 40;
    let height = TOP + times.len() * ROW_H + 10;
    let _ = writeln!(h, "<svg class=\"cycle\" width=\"{width}\" height=\"{height}\" role=\"img\">");
    for (k, p) in lanes.iter().enumerate() {
        let x = 20 + k * LANE_W + LANE_W / 2;
        let _ = writeln!(
            h,
            "<text x=\"{x}\" y=\"16\" text-anchor=\"middle\">process {p}</text>\
             <line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"#ccc\"/>",
            TOP - 8,
            height - 4
        );
    }
    let y_of = |r: usize| TOP + r * ROW_H;
    for (n, t) in c.txns.iter().enumerate() {
        let Some(&(lane, a, b)) = spans.get(&t.index) else { continue };
        let x = 20 + lane * LANE_W + LANE_W / 2 - 40;
        let _ = writeln!(
            h,
            "<rect x=\"{x}\" y=\"{}\" width=\"80\" height=\"{}\" rx=\"4\" fill=\"#fff8dc\" stroke=\"#555\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">T{}</text>",
            y_of(a),
            (y_of(b) - y_of(a)).max(ROW_H - 6),
            x + 40,
            y_of(a) + 16,
            n
        );
    }
    for e in &c.edges {
        let (Some(&(la, a0, a1)), Some(&(lb, b0, b1))) = (spans.get(&e.from), spans.get(&e.to)) else { continue };
        let (xa, xb) = (20 + la * LANE_W + LANE_W / 2, 20 + lb * LANE_W + LANE_W / 2);
        let (ya, yb) = ((y_of(a0) + y_of(a1)) / 2 + 6, (y_of(b0) + y_of(b1)) / 2 - 6);
        // Between lanes an arrow from bar to bar; within a lane a bow to the side.
        let (x1, x2) = if la == lb {
            (xa + 40, xb + 40)
        } else if xa < xb {
            (xa + 40, xb - 40)
        } else {
            (xa - 40, xb + 40)
        };
        let bow = if la == lb { 60 } else { 0 };
        let color = edge_color(e.kind);
        let key = e.key.as_ref().map(|k| format!(" {k}")).unwrap_or_default();
        let _ = writeln!(
            h,
            "<path d=\"M{x1},{ya} C{},{ya} {},{yb} {x2},{yb}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" \
             marker-end=\"url(#arrow)\"><title>{}</title></path>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\" text-anchor=\"middle\">{}{}</text>",
            x1 + bow,
            x2 + bow,
            esc(&e.reason, 300),
            (x1 + x2) / 2 + bow,
            (ya + yb) / 2,
            edge_name(e.kind),
            esc(&key, 40)
        );
    }
    h.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" \
         markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#333\"/></marker></defs>\n",
    );
    h.push_str("</svg>\n<ul class=\"edges\">\n");
    for (n, t) in c.txns.iter().enumerate() {
        let ops: Vec<String> = t.ops.iter().map(|m| m.to_string()).collect();
        let _ = writeln!(h, "<li>T{n} (process {}): {}</li>", t.process, esc(&ops.join(" "), 400));
    }
    for e in &c.edges {
        let _ = writeln!(h, "<li><b>{}</b>: {}</li>", edge_name(e.kind), esc(&e.reason, 400));
    }
    h.push_str("</ul>\n");
}
