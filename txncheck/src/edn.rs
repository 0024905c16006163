//! Jepsen's `history.edn`: one map per line,
//!
//! ```text
//! {:type :invoke, :f :txn, :value [[:append 9 1] [:r 8 nil]], :time 123, :process 0, :index 0}
//! ```
//!
//! possibly written as a record, `#jepsen.history.Op{...}`. Ops of the process
//! `:nemesis` and ops whose `:f` is not `:txn` are skipped. Micro-op functions
//! are keywords (`:append`, `:r`, `:w`); keys are integers, strings or keywords
//! (a keyword key `:x` becomes the string key `x`). Other fields (`:error`, ...)
//! are ignored.

use crate::history::{make_kind, make_mop, Event, FieldProblem, History, Key, Mop, ParseError, RawValue};
use clojure_reader::edn::{self, Edn};

/// Parses a Jepsen `history.edn` and pairs its events into transactions.
/// Blank lines are skipped; an error names the 1-based line.
pub fn parse_edn(text: &str) -> Result<History, ParseError> {
    let mut events = Vec::new();
    let mut position = 0;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') {
            continue;
        }
        let line = i + 1;
        if nesting(trimmed) > MAX_NESTING {
            return Err(ParseError::Syntax { line, msg: format!("nested more than {MAX_NESTING} levels deep") });
        }
        let (value, rest) =
            edn::read(trimmed).map_err(|e| ParseError::Syntax { line, msg: format!("not EDN: {e}") })?;
        let rest = rest.trim();
        if !(rest.is_empty() || rest.starts_with(';')) {
            return Err(ParseError::Syntax { line, msg: format!("unexpected text after the op: {rest:.40}") });
        }
        if let Some(ev) = event(&value, line, position)? {
            events.push(ev);
        }
        position += 1;
    }
    History::from_events(events)
}

/// An op needs four levels (map, ops, op, list read); the reader recurses per
/// level, so a line nested thousands deep would overflow the stack.
const MAX_NESTING: usize = 64;

/// The deepest bracket nesting of an EDN text, outside strings, character
/// literals and comments.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max, mut in_string) = (0usize, 0usize, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (in_string, c) {
            // An escape in a string, or a character literal outside one.
            (_, '\\') => {
                chars.next();
            }
            (true, '"') => in_string = false,
            (true, _) => {}
            (false, '"') => in_string = true,
            (false, ';') => break,
            (false, '(' | '[' | '{') => {
                depth += 1;
                max = max.max(depth);
            }
            (false, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            (false, _) => {}
        }
    }
    max
}

fn field_err(line: usize, field: &'static str, msg: impl Into<String>) -> ParseError {
    ParseError::Field { line, field, msg: msg.into() }
}

/// `Ok(None)`: a line to skip (nemesis, or not a transaction).
fn event(value: &Edn, line: usize, position: usize) -> Result<Option<Event>, ParseError> {
    // A record prints as a tagged map; its tag says nothing we need.
    let value = match value {
        Edn::Tagged(_, inner) => inner.as_ref(),
        v => v,
    };
    let Edn::Map(map) = value else {
        return Err(ParseError::Syntax { line, msg: "expected a map".into() });
    };
    let get = |k: &'static str| map.get(&Edn::Key(k));
    let process = match get("process") {
        Some(Edn::Int(p)) => *p,
        Some(Edn::Key("nemesis")) => return Ok(None),
        Some(other) => return Err(field_err(line, ":process", format!("expected an integer, got {other}"))),
        None => return Err(field_err(line, ":process", "missing")),
    };
    match get("f") {
        Some(Edn::Key("txn")) => {}
        Some(_) => return Ok(None),
        None => return Err(field_err(line, ":f", "missing")),
    }
    let kind = match get("type") {
        Some(Edn::Key(k)) => make_kind(k).map_err(|m| field_err(line, ":type", m.to_string()))?,
        _ => return Err(field_err(line, ":type", "missing or not a keyword")),
    };
    let time = match get("time") {
        Some(Edn::Int(t)) if *t >= 0 => *t as u64,
        _ => return Err(field_err(line, ":time", "missing or not a non-negative integer")),
    };
    let index = match get("index") {
        None => position,
        Some(Edn::Int(i)) if *i >= 0 => *i as usize,
        Some(_) => return Err(field_err(line, ":index", "not a non-negative integer")),
    };
    let mops = match get("value") {
        None | Some(Edn::Nil) => None,
        Some(Edn::Vector(items) | Edn::List(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, m)| mop(m).map_err(|e| field_err(line, ":value", format!("op {}: {e}", i + 1))))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => return Err(field_err(line, ":value", format!("expected a vector of ops, got {other}"))),
    };
    Ok(Some(Event { line, index, process, kind, time, mops }))
}

fn mop(value: &Edn) -> Result<Mop, FieldProblem> {
    let parts = match value {
        Edn::Vector(parts) | Edn::List(parts) if parts.len() == 3 => parts,
        other => return Err(FieldProblem::MopShape(other.to_string())),
    };
    let f = match &parts[0] {
        Edn::Key(f) | Edn::Symbol(f) | Edn::Str(f) => *f,
        other => return Err(FieldProblem::Function(other.to_string())),
    };
    let key = match &parts[1] {
        Edn::Int(i) => Key::Int(*i),
        Edn::Str(s) | Edn::Key(s) | Edn::Symbol(s) => Key::Str(s.to_string()),
        other => return Err(FieldProblem::Key(other.to_string())),
    };
    let raw = match &parts[2] {
        Edn::Nil => RawValue::Nil,
        Edn::Int(v) => RawValue::Int(*v),
        Edn::Vector(items) | Edn::List(items) => RawValue::List(
            items
                .iter()
                .map(|v| match v {
                    Edn::Int(i) => Ok(*i),
                    other => Err(FieldProblem::ListElement(other.to_string())),
                })
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(FieldProblem::Value(other.to_string())),
    };
    make_mop(f, key, raw)
}
