//! Which line of cluster.toml a [`KeyPath`] is at.

use toml_edit::Item;

use super::key_path::{KeyPath, Step};

/// The line (1-based) of `text` that `at` names: the deepest of its table,
/// keys and elements that the file writes. That is the key's line, else
/// its element's or table's header (an array of tables' first header when
/// no element is named); `None` when the file does not write the table
/// (a default the checks refuse, say).
pub(super) fn locate_line(text: &str, at: &KeyPath) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let (header, steps) = at.walk();
    let mut cur = doc.as_item();
    let mut offset = None;
    for seg in header {
        cur = cur.as_table_like()?.get(seg)?;
        offset = cur.span().map(|s| s.start).or(offset);
    }
    if let Item::ArrayOfTables(a) = cur {
        offset = a.get(0).and_then(|t| t.span()).map(|s| s.start).or(offset);
    }
    // Owned from here: an element of an inline array is a `Value`.
    let mut cur = cur.clone();
    for step in steps {
        let next = match step {
            Step::Key(k) => {
                let Some((key, item)) = cur.as_table_like().and_then(|t| t.get_key_value(k)) else { break };
                offset = key.span().map(|s| s.start).or(offset);
                item.clone()
            }
            Step::Element { index, .. } => {
                let Some(item) = element(&cur, *index) else { break };
                offset = item.span().map(|s| s.start).or(offset);
                item
            }
        };
        cur = next;
    }
    offset.map(|o| 1 + text[..o.min(text.len())].matches('\n').count())
}

/// Element `i` (0-based) of an array of tables or of an inline array.
fn element(item: &Item, i: usize) -> Option<Item> {
    match item {
        Item::ArrayOfTables(a) => a.get(i).map(|t| Item::Table(t.clone())),
        Item::Value(toml_edit::Value::Array(a)) => a.get(i).map(|v| Item::Value(v.clone())),
        _ => None,
    }
}
