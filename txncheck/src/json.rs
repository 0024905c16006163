//! JSON histories, one event per line:
//!
//! ```text
//! {"type":"invoke","process":0,"time":10,"f":"txn","value":[["append","x",1],["r","y",null]]}
//! {"type":"ok","process":0,"time":25,"f":"txn","value":[["append","x",1],["r","y",[1,2]]]}
//! ```
//!
//! or one JSON array of such events (elle-cli's `.json` files), where an
//! error names the line its event starts on.
//!
//! Read as Jepsen writes them: keys are strings, integers or anything else
//! (an array key such as `["anti",1]` is the key of that text); values are
//! integers or strings; a read may leave out its value (`["r","x"]`, the same
//! as `null`). Lines whose `f` is not `"txn"`, and lines of the process
//! `"nemesis"`, are skipped (they still count for the default index). A line
//! without `f` is a transaction; without `process`, an op of one unnamed process (-1, as
//! Elle reads them); without `time`, timed by line order (when any line lacks `time`, all
//! are). An optional `"index"` field overrides the event's index.

use crate::txn_history::{
    finish, make_kind, make_mop, Event, FieldProblem, History, Key, Mop, ParseError, RawValue, ValueNames, NO_PROCESS,
};
use serde_json::{Map, Value};

/// Parses a JSON history (JSON lines, or one JSON array of events) and pairs
/// its events into transactions. Blank lines are skipped; an error names the
/// 1-based line.
pub fn parse_json_lines(text: &str) -> Result<History, ParseError> {
    let mut reader = Reader::default();
    if text.trim_start().starts_with('[') {
        reader.array(text)?;
    } else {
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line = i + 1;
            let value: Value =
                serde_json::from_str(raw).map_err(|e| ParseError::Syntax { line, msg: format!("not JSON: {e}") })?;
            reader.event(&value, line)?;
        }
    }
    finish(reader.events, reader.untimed)
}

/// The events read so far, and what the lines share.
#[derive(Default)]
struct Reader {
    events: Vec<Event>,
    /// Events read, skipped ones included: the default index.
    position: usize,
    untimed: bool,
    names: ValueNames,
}

impl Reader {
    /// One JSON array of events, each error naming the line its event starts on.
    fn array(&mut self, text: &str) -> Result<(), ParseError> {
        let line_at = |offset: usize| text[..offset].matches('\n').count() + 1;
        let open = text.find('[').unwrap_or(0);
        let mut at = open + 1;
        loop {
            let rest = &text[at..];
            let skipped = rest.len() - rest.trim_start().len();
            at += skipped;
            match text[at..].chars().next() {
                Some(']') => {
                    let after = text[at + 1..].trim();
                    if !after.is_empty() {
                        let msg = format!("unexpected text after the array: {after:.40}");
                        return Err(ParseError::Syntax { line: line_at(at + 1), msg });
                    }
                    return Ok(());
                }
                None => {
                    let msg = "the JSON array is not closed with ]".into();
                    return Err(ParseError::Syntax { line: line_at(text.len()), msg });
                }
                Some(_) => {}
            }
            let line = line_at(at);
            let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
            let value = match values.next() {
                Some(Ok(v)) => v,
                Some(Err(e)) => return Err(ParseError::Syntax { line, msg: format!("not JSON: {e}") }),
                None => return Err(ParseError::Syntax { line, msg: "expected an event".into() }),
            };
            at += values.byte_offset();
            self.event(&value, line)?;
            let rest = &text[at..];
            at += rest.len() - rest.trim_start().len();
            match text[at..].chars().next() {
                Some(',') => at += 1,
                Some(']') => {}
                other => {
                    let msg =
                        format!("expected , or ] after an event, got {}", other.map_or("the end".into(), String::from));
                    return Err(ParseError::Syntax { line: line_at(at), msg });
                }
            }
        }
    }

    /// One event; nemesis ops and ops that are not transactions are counted and skipped.
    fn event(&mut self, value: &Value, line: usize) -> Result<(), ParseError> {
        let position = self.position;
        self.position += 1;
        let Some(obj) = value.as_object() else {
            return Err(ParseError::Syntax { line, msg: "expected a JSON object".into() });
        };
        let process = match obj.get("process") {
            Some(Value::Number(n)) => n.as_i64().ok_or_else(|| field_err(line, "process", "expected an integer"))?,
            Some(Value::String(s)) if s == "nemesis" => return Ok(()),
            None | Some(Value::Null) => NO_PROCESS,
            Some(other) => return Err(field_err(line, "process", format!("expected an integer, got {other}"))),
        };
        match obj.get("f") {
            Some(Value::String(f)) if f == "txn" => {}
            None | Some(Value::Null) => {}
            Some(Value::String(_)) => return Ok(()),
            Some(other) => return Err(field_err(line, "f", format!("expected a string, got {other}"))),
        }
        let kind = match obj.get("type") {
            Some(Value::String(s)) => make_kind(s).map_err(|m| field_err(line, "type", m.to_string()))?,
            _ => return Err(field_err(line, "type", "missing or not a string")),
        };
        let time = match obj.get("time") {
            None | Some(Value::Null) => {
                self.untimed = true;
                0
            }
            Some(t) => t.as_u64().ok_or_else(|| field_err(line, "time", "not a non-negative integer"))?,
        };
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
                    .map(|(i, m)| {
                        mop(m, &mut self.names).map_err(|e| field_err(line, "value", format!("op {}: {e}", i + 1)))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(other) => return Err(field_err(line, "value", format!("expected a list of ops, got {other}"))),
        };
        self.events.push(Event { line, index, process, kind, time, mops });
        Ok(())
    }
}

fn field_err(line: usize, field: &'static str, msg: impl Into<String>) -> ParseError {
    ParseError::Field { line, field, msg: msg.into() }
}

/// An element of a value: an integer, or a string numbered by `names`.
fn element(v: &Value, names: &mut ValueNames) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => Some(names.id(s)),
        _ => None,
    }
}

fn mop(value: &Value, names: &mut ValueNames) -> Result<Mop, FieldProblem> {
    let parts = match value {
        Value::Array(parts) if parts.len() == 3 || (parts.len() == 2 && parts[0] == "r") => parts,
        other => return Err(FieldProblem::MopShape(other.to_string())),
    };
    let f = parts[0].as_str().ok_or_else(|| FieldProblem::Function(parts[0].to_string()))?;
    let key = match &parts[1] {
        Value::String(s) => Key::Str(s.clone()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Key::Int(i),
            None => Key::Str(n.to_string()),
        },
        Value::Null => return Err(FieldProblem::Key("null".into())),
        other => Key::Str(other.to_string()),
    };
    let raw = match parts.get(2).unwrap_or(&Value::Null) {
        Value::Null => RawValue::Nil,
        Value::Array(items) => RawValue::List(
            items
                .iter()
                .map(|v| element(v, names).ok_or_else(|| FieldProblem::ListElement(v.to_string())))
                .collect::<Result<_, _>>()?,
        ),
        v => RawValue::Int(element(v, names).ok_or_else(|| FieldProblem::Value(v.to_string()))?),
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
            crate::txn_history::EventKind::Invoke => "invoke",
            crate::txn_history::EventKind::Ok => "ok",
            crate::txn_history::EventKind::Fail => "fail",
            crate::txn_history::EventKind::Info => "info",
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
