//! The history a node printed: the lines between `@history begin` and
//! `@history end` on its console, which every history model reads (the
//! register, transactional, set and queue checks, and the reports).

use engine::console::{history_marker, HistoryMarker};
use engine::trace::{Event, EventKind};

/// The history lines `node` printed on its console (the last
/// `@history begin` .. `@history end` block).
pub fn history_lines(events: &[Event], node: engine::NodeId) -> Option<String> {
    let mut block: Option<String> = None;
    let mut inside = false;
    for e in events.iter().filter(|e| e.node == node) {
        let EventKind::Console { text } = &e.kind else { continue };
        let l = text.trim();
        match history_marker(l) {
            Some(HistoryMarker::Begin) => {
                inside = true;
                block = Some(String::new());
            }
            Some(HistoryMarker::End) => inside = false,
            None if inside && l.starts_with('{') => {
                let b = block.as_mut().expect("set at begin");
                b.push_str(l);
                b.push('\n');
            }
            None => {}
        }
    }
    block
}
