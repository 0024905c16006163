//! Values as cluster.toml writes them: node names and durations.

use super::{Invalid, KeyPath};

/// Node names are n1..nN; returns the 0-based index.
pub fn parse_node_name(name: &str, nodes: u16) -> Option<usize> {
    engine::NodeId::from_name(name).filter(|n| n.number() <= nodes).map(engine::NodeId::index)
}

/// The names [`parse_node_name`] takes, for messages: `nodes are n1..nN`.
pub(super) fn nodes_are(nodes: u16) -> String {
    format!("nodes are n1..n{nodes}")
}

/// The message for `name`, which names none of the `nodes`:
/// ` = "name": no such node (nodes are n1..nN)`, with `also` (other names
/// the key takes, `, or "all"`) inside the parentheses.
pub(super) fn no_such_node(name: &str, nodes: u16, also: &str) -> String {
    format!(" = {name:?}: no such node ({}{also})", nodes_are(nodes))
}

/// Parses "250ms", "30s", "10m", "1h" or plain seconds into nanoseconds.
pub fn parse_duration_ns(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let ns = v * scale;
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then_some(ns as u64)
}

/// The duration `s` at `key`, in ns.
pub(super) fn duration(key: &KeyPath, s: &str) -> Result<u64, Invalid> {
    parse_duration_ns(s).ok_or_else(|| key.invalid(format!(" = {s:?} is not a duration")))
}

/// The optional duration at `key`, `default` when absent.
pub(super) fn optional_duration(key: &KeyPath, v: &Option<String>, default: u64) -> Result<u64, Invalid> {
    v.as_deref().map_or(Ok(default), |s| duration(key, s))
}

/// The duration or range of durations `s` at `key`, in ns: `"2s"` (both
/// ends 2 s) or `"1s..5s"` (min..max, min <= max).
pub(super) fn duration_range(key: &KeyPath, s: &str) -> Result<(u64, u64), Invalid> {
    let bad = || key.invalid(format!(" = {s:?} is not a duration or a range of them (examples: \"2s\", \"1s..5s\")"));
    match s.split_once("..") {
        None => parse_duration_ns(s).map(|v| (v, v)).ok_or_else(bad),
        Some((lo, hi)) => {
            let (lo, hi) = (parse_duration_ns(lo).ok_or_else(bad)?, parse_duration_ns(hi).ok_or_else(bad)?);
            if lo > hi {
                return Err(key.invalid(format!(" = {s:?}: the range's start is after its end")));
            }
            Ok((lo, hi))
        }
    }
}
