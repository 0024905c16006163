//! Jepsen's `history.edn`: one map per line,
//!
//! ```text
//! {:type :invoke, :f :txn, :value [[:append 9 1] [:r 8 nil]], :time 123, :process 0, :index 0}
//! ```
//!
//! possibly written as a record, `#jepsen.history.Op{...}`. Ops of the process
//! `:nemesis` and ops whose `:f` is not `:txn` are skipped. Micro-op functions
//! are keywords (`:append`, `:r`, `:w`); keys are integers, strings, keywords
//! (a keyword key `:x` becomes the string key `x`) or anything else (a vector
//! key `[:anti 1]` is the key of that text); values are integers, strings or
//! keywords. A read may leave out its value (`[:r :x]`, the same as `nil`).
//! An op without `:f` is a transaction; without `:process`, an op of one unnamed
//! process (-1, as Elle reads them); without `:time`, timed by line order (when any op lacks
//! `:time`, all are). Other fields (`:error`, ...) are ignored.

use crate::txn_history::{
    finish, make_kind, make_mop, Event, FieldProblem, History, Key, Mop, ParseError, RawValue, ValueNames, NO_PROCESS,
};
use clojure_reader::edn::{self, Edn};

/// Parses a Jepsen `history.edn` and pairs its events into transactions.
/// Blank lines are skipped; an error names the 1-based line.
pub fn parse_edn(text: &str) -> Result<History, ParseError> {
    let mut events = Vec::new();
    let (mut position, mut untimed, mut names) = (0, false, ValueNames::default());
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
        if let Some((ev, timed)) = event(&value, line, position, &mut names)? {
            untimed |= !timed;
            events.push(ev);
        }
        position += 1;
    }
    finish(events, untimed)
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

/// `Ok(None)`: a line to skip (nemesis, or not a transaction); else the event
/// and whether it had a time.
fn event(
    value: &Edn,
    line: usize,
    position: usize,
    names: &mut ValueNames,
) -> Result<Option<(Event, bool)>, ParseError> {
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
        None | Some(Edn::Nil) => NO_PROCESS,
        Some(other) => return Err(field_err(line, ":process", format!("expected an integer, got {other}"))),
    };
    match get("f") {
        Some(Edn::Key("txn")) | None | Some(Edn::Nil) => {}
        Some(_) => return Ok(None),
    }
    let kind = match get("type") {
        Some(Edn::Key(k)) => make_kind(k).map_err(|m| field_err(line, ":type", m.to_string()))?,
        _ => return Err(field_err(line, ":type", "missing or not a keyword")),
    };
    let (time, timed) = match get("time") {
        Some(Edn::Int(t)) if *t >= 0 => (*t as u64, true),
        None | Some(Edn::Nil) => (0, false),
        _ => return Err(field_err(line, ":time", "not a non-negative integer")),
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
                .map(|(i, m)| mop(m, names).map_err(|e| field_err(line, ":value", format!("op {}: {e}", i + 1))))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => return Err(field_err(line, ":value", format!("expected a vector of ops, got {other}"))),
    };
    Ok(Some((Event { line, index, process, kind, time, mops }, timed)))
}

/// An element of a value: an integer, or a string or keyword numbered by `names`.
fn element(v: &Edn, names: &mut ValueNames) -> Option<i64> {
    match v {
        Edn::Int(i) => Some(*i),
        Edn::Str(s) => Some(names.id(s)),
        Edn::Key(k) => Some(names.id(&format!(":{k}"))),
        _ => None,
    }
}

fn mop(value: &Edn, names: &mut ValueNames) -> Result<Mop, FieldProblem> {
    let parts = match value {
        Edn::Vector(parts) | Edn::List(parts)
            if parts.len() == 3 || (parts.len() == 2 && matches!(parts[0], Edn::Key("r") | Edn::Symbol("r"))) =>
        {
            parts
        }
        other => return Err(FieldProblem::MopShape(other.to_string())),
    };
    let f = match &parts[0] {
        Edn::Key(f) | Edn::Symbol(f) | Edn::Str(f) => *f,
        other => return Err(FieldProblem::Function(other.to_string())),
    };
    let key = match &parts[1] {
        Edn::Int(i) => Key::Int(*i),
        Edn::Str(s) | Edn::Key(s) | Edn::Symbol(s) => Key::Str(s.to_string()),
        Edn::Nil => return Err(FieldProblem::Key("nil".into())),
        other => Key::Str(other.to_string()),
    };
    let raw = match parts.get(2).unwrap_or(&Edn::Nil) {
        Edn::Nil => RawValue::Nil,
        Edn::Vector(items) | Edn::List(items) => RawValue::List(
            items
                .iter()
                .map(|v| element(v, names).ok_or_else(|| FieldProblem::ListElement(v.to_string())))
                .collect::<Result<_, _>>()?,
        ),
        v => RawValue::Int(element(v, names).ok_or_else(|| FieldProblem::Value(v.to_string()))?),
    };
    make_mop(f, key, raw)
}
