//! The page's stylesheet. The page carries no JavaScript: hovering shows
//! SVG `<title>`s, links are plain fragment links.

use super::layout::PALETTE;
use std::fmt::Write as _;

/// Every rule but the lane colours (see [`css`]).
const CSS: &str = "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:16px;color:#222;background:#f6f7f9}\
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
footer{margin-top:16px;font-size:12px;color:#777}\
.panel.timeline{margin:0 0 16px}svg.tline{display:block}svg.tline text{font-size:10px}\
rect.op.ok{fill:#58b368}rect.op.fail{fill:#e06c5f}rect.op.info{fill:#f0b341}rect.op.failing{stroke:#000;stroke-width:2}\
.tf rect{fill-opacity:.25}.tf.part rect{fill:#f1948a}.tf.down rect{fill:#7f8c8d}.tf.pause rect{fill:#d68910}.tf.stall rect{fill:#8e44ad}\
.tf text{fill:#a93226;font-weight:bold}.tf line{stroke:#a93226;stroke-dasharray:3 2}\
.tfail line{stroke:#c0392b;stroke-width:2}.tfail text{fill:#c0392b;font-weight:bold;text-anchor:end}\
.tmark line{stroke:#000;stroke-dasharray:2 2}.tmark text{fill:#000;font-weight:bold}.tick line{stroke:#999}.tick text{fill:#666;text-anchor:middle}\
.tl-ok{color:#58b368;font-weight:bold}.tl-fail{color:#e06c5f;font-weight:bold}.tl-info{color:#f0b341;font-weight:bold}.tl-failing{outline:2px solid #000;padding:0 2px}\
table.failing tr.fault td{color:#a93226;font-weight:bold}h3{font-size:14px;margin:10px 0 4px}\
pre.cmdout{background:#fff;border:1px solid #e3e3e3;padding:4px 8px;max-height:320px;overflow:auto;font-size:12px;white-space:pre-wrap}\
nav.parts{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 10px;margin:8px 0;font-size:13px;line-height:1.8}";

/// The stylesheet: [`CSS`] and one colour class per [`PALETTE`] entry
/// (`.c0`..`.c7`, the node labels' colours).
pub(super) fn css() -> String {
    let mut s = String::from(CSS);
    for (k, c) in PALETTE.iter().enumerate() {
        let _ = write!(s, ".c{k}{{color:{c};font-weight:bold}}");
    }
    s
}
