//! JSON-lines histories, one event per line:
//!
//! ```text
//! {"type":"invoke","process":0,"time":10,"f":"txn","value":[["append","x",1],["r","y",null]]}
//! {"type":"ok","process":0,"time":25,"f":"txn","value":[["append","x",1],["r","y",[1,2]]]}
//! ```
//!
//! Keys are strings or integers. Lines whose `f` is not `"txn"`, and lines of the
//! process `"nemesis"`, are skipped (they still count for the default index).
//! An optional `"index"` field overrides the event's index.

use crate::history::{make_kind, make_mop, Event, FieldProblem, History, Key, Mop, ParseError, RawValue};
use serde_json::{Map, Value};

/// Parses a JSON-lines history and pairs its events into transactions.
/// Blank lines are skipped; an error names the 1-based line.
pub fn parse_json_lines(text: &str) -> Result<History, ParseError> {
    let mut events = Vec::new();
    let mut position = 0;
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line = i + 1;
        let value: Value =
            serde_json::from_str(raw).map_err(|e| ParseError::Syntax { line, msg: format!("not JSON: {e}") })?;
        if let Some(ev) = event(&value, line, position)? {
            events.push(ev);
        }
        position += 1;
    }
    History::from_events(events)
}

fn field_err(line: usize, field: &'static str, msg: impl Into<String>) -> ParseError {
    ParseError::Field { line, field, msg: msg.into() }
}

/// `Ok(None)`: a line to skip (nemesis, or not a transaction).
fn event(value: &Value, line: usize, position: usize) -> Result<Option<Event>, ParseError> {
    let Some(obj) = value.as_object() else {
        return Err(ParseError::Syntax { line, msg: "expected a JSON object".into() });
    };
    let process = match obj.get("process") {
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| field_err(line, "process", "expected an integer"))?,
        Some(Value::String(s)) if s == "nemesis" => return Ok(None),
        Some(other) => return Err(field_err(line, "process", format!("expected an integer, got {other}"))),
        None => return Err(field_err(line, "process", "missing")),
    };
    match obj.get("f") {
        Some(Value::String(f)) if f == "txn" => {}
        Some(Value::String(_)) => return Ok(None),
        Some(other) => return Err(field_err(line, "f", format!("expected a string, got {other}"))),
        None => return Err(field_err(line, "f", "missing")),
    }
    let kind = match obj.get("type") {
        Some(Value::String(s)) => make_kind(s).map_err(|m| field_err(line, "type", m.to_string()))?,
        _ => return Err(field_err(line, "type", "missing or not a string")),
    };
    let time = obj
        .get("time")
        .and_then(Value::as_u64)
        .ok_or_else(|| field_err(line, "time", "missing or not a non-negative integer"))?;
    let index = match obj.get("index") {
        None => position,
        Some(v) => v.as_u64().ok_or_else(|| field_err(line, "index", "not a non-negative integer"))? as usize,
    };
    let mops = match obj.get("value") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, m)| mop(m).map_err(|e| field_err(line, "value", format!("op {}: {e}", i + 1))))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => return Err(field_err(line, "value", format!("expected a list of ops, got {other}"))),
    };
    Ok(Some(Event { line, index, process, kind, time, mops }))
}

fn mop(value: &Value) -> Result<Mop, FieldProblem> {
    let parts = match value {
        Value::Array(parts) if parts.len() == 3 => parts,
        other => return Err(FieldProblem::MopShape(other.to_string())),
    };
    let f = parts[0].as_str().ok_or_else(|| FieldProblem::Function(parts[0].to_string()))?;
    let key = match &parts[1] {
        Value::String(s) => Key::Str(s.clone()),
        Value::Number(n) => Key::Int(n.as_i64().ok_or_else(|| FieldProblem::Key(n.to_string()))?),
        other => return Err(FieldProblem::Key(other.to_string())),
    };
    let raw = match &parts[2] {
        Value::Null => RawValue::Nil,
        Value::Number(n) => RawValue::Int(n.as_i64().ok_or_else(|| FieldProblem::Value(n.to_string()))?),
        Value::Array(items) => RawValue::List(
            items
                .iter()
                .map(|v| v.as_i64().ok_or_else(|| FieldProblem::ListElement(v.to_string())))
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(FieldProblem::Value(other.to_string())),
    };
    make_mop(f, key, raw)
}

/// Serialises events back to JSON lines (the format [`parse_json_lines`] reads);
/// used by tests and by whoever wants to store a generated history.
pub fn to_json_lines(events: &[Event]) -> String {
    let mut out = String::new();
    for ev in events {
        let mut obj = Map::new();
        let kind = match ev.kind {
            crate::history::EventKind::Invoke => "invoke",
            crate::history::EventKind::Ok => "ok",
            crate::history::EventKind::Fail => "fail",
            crate::history::EventKind::Info => "info",
        };
        obj.insert("type".into(), kind.into());
        obj.insert("process".into(), ev.process.into());
        obj.insert("time".into(), ev.time.into());
        obj.insert("index".into(), ev.index.into());
        obj.insert("f".into(), "txn".into());
        // Mop serialises as a plain JSON triple; this cannot fail.
        let value = serde_json::to_value(&ev.mops).unwrap_or(Value::Null);
        obj.insert("value".into(), value);
        out.push_str(&Value::Object(obj).to_string());
        out.push('\n');
    }
    out
}
