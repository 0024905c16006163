//! The Antithesis SDK's output, read unchanged. The SDKs (Python
//! `antithesis`, Rust `antithesis_sdk`, Go, Java, C++) write one JSON
//! object per line to the file `ANTITHESIS_SDK_LOCAL_OUTPUT` names when no
//! Antithesis hypervisor is present. In a cluster with `[antithesis]` that
//! file is a FIFO the guest agent reads; it prints each line on the node's
//! console as `@antithesis JSON` (see `src/image/rootfs.rs`), so the lines
//! are the guest's own output, stamped at the guest's virtual time, and
//! replay exactly.
//!
//! The objects read (every other key, such as the SDK's version line
//! `antithesis_sdk` or a `send_event`, is kept in the trace and ignored):
//!
//! - `{"antithesis_assert": {"assert_type": "always"|"sometimes"|"reachability",
//!   "display_type": "Always"|"AlwaysOrUnreachable"|"Sometimes"|"Reachable"|"Unreachable"|...,
//!   "condition": bool, "hit": bool, "must_hit": bool, "id": str, "message": str,
//!   "location": {...}, "details": {...}}}`: one assertion evaluated
//!   (`hit: true`) or declared (`hit: false`, the SDK's catalog of every
//!   assertion in the program, emitted at start).
//! - `{"antithesis_guidance": {"guidance_type": ..., "message": str, "id": str,
//!   "maximize": bool, "guidance_data": {...}, "hit": bool}}`: a value the
//!   program would like pushed up (or down).
//! - `{"antithesis_setup": {"status": "complete", "details": ...}}`:
//!   `setup_complete`, the system is ready to be tested.

use serde_json::Value;

/// `[antithesis]` as the engine needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AntithesisSpec {
    /// `@antithesis` lines are read: a violated assertion fails the
    /// execution.
    pub sdk: bool,
    /// The workload starts once every node is ready and some node's SDK
    /// reported `setup_complete`.
    pub await_setup: bool,
}

/// The console prefix of a forwarded SDK line.
pub const PREFIX: &str = "@antithesis ";

/// One SDK line, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum SdkLine {
    /// `antithesis_assert`.
    Assert(Assertion),
    /// `antithesis_guidance`.
    Guidance(Guidance),
    /// `antithesis_setup`.
    Setup {
        /// `complete` from `setup_complete`.
        status: String,
    },
    /// Any other object (the version line, `send_event`).
    Other,
}

/// An `antithesis_assert` object.
#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    /// `always`, `sometimes` or `reachability`.
    pub assert_type: String,
    /// `Always`, `AlwaysOrUnreachable`, `Sometimes`, `Reachable`, `Unreachable`, ...
    pub display_type: String,
    /// The condition evaluated.
    pub condition: bool,
    /// Evaluated at run time (`false`: a declaration).
    pub hit: bool,
    /// The property needs the assertion reached at least once.
    pub must_hit: bool,
    /// The property's identity (the SDKs derive it from the message and,
    /// for some, the location); the message when absent.
    pub id: String,
    /// The assertion's message (its name in reports).
    pub message: String,
    /// `file:line` (or `function`) where the assertion is, if given.
    pub location: String,
    /// The details object, compact JSON (`{}` when absent).
    pub details: String,
}

/// An `antithesis_guidance` object.
#[derive(Debug, Clone, PartialEq)]
pub struct Guidance {
    /// The guidance's identity (its message when absent).
    pub id: String,
    /// Its message.
    pub message: String,
    /// Larger is better (`false`: smaller is).
    pub maximize: bool,
    /// The guided value: for numeric guidance `left - right` (what the
    /// assertion compares), else the first number in `guidance_data`.
    pub value: Option<f64>,
    /// Evaluated at run time (`false`: a declaration).
    pub hit: bool,
}

/// The SDK line `line` carries, if it is a forwarded one (`@antithesis
/// JSON`); `Err` with the reason when its JSON cannot be read.
pub fn sdk_line(line: &str) -> Option<Result<SdkLine, String>> {
    let json = line.trim().strip_prefix(PREFIX.trim_end())?.trim();
    let v: Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("not JSON: {e}"))),
    };
    Some(Ok(parse(&v)))
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn flag(v: &Value, key: &str, default: bool) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn parse(v: &Value) -> SdkLine {
    if let Some(a) = v.get("antithesis_assert") {
        let message = text(a, "message");
        let id = Some(text(a, "id")).filter(|s| !s.is_empty()).unwrap_or_else(|| message.clone());
        return SdkLine::Assert(Assertion {
            assert_type: text(a, "assert_type"),
            display_type: text(a, "display_type"),
            condition: flag(a, "condition", false),
            hit: flag(a, "hit", true),
            must_hit: flag(a, "must_hit", false),
            id,
            message,
            location: location(a.get("location")),
            details: a.get("details").filter(|d| !d.is_null()).map_or_else(|| "{}".to_string(), Value::to_string),
        });
    }
    if let Some(g) = v.get("antithesis_guidance") {
        let message = text(g, "message");
        let id = Some(text(g, "id")).filter(|s| !s.is_empty()).unwrap_or_else(|| message.clone());
        let data = g.get("guidance_data");
        let num = |k: &str| data.and_then(|d| d.get(k)).and_then(Value::as_f64);
        let value = match (num("left"), num("right")) {
            (Some(l), Some(r)) => Some(l - r),
            _ => data.and_then(|d| match d {
                Value::Object(m) => m.values().find_map(Value::as_f64),
                other => other.as_f64(),
            }),
        };
        return SdkLine::Guidance(Guidance {
            id,
            message,
            maximize: flag(g, "maximize", true),
            value,
            hit: flag(g, "hit", true),
        });
    }
    if let Some(s) = v.get("antithesis_setup") {
        return SdkLine::Setup { status: text(s, "status") };
    }
    SdkLine::Other
}

fn location(l: Option<&Value>) -> String {
    let Some(l) = l else { return String::new() };
    let file = text(l, "file");
    let line = l.get("begin_line").and_then(Value::as_u64);
    let function = text(l, "function");
    match (file.is_empty(), line) {
        (false, Some(n)) => format!("{file}:{n}"),
        (false, None) => file,
        (true, _) => function,
    }
}

/// What kind of property an assertion is, by Antithesis's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyKind {
    /// `always` (must be reached) and `always_or_unreachable` (need not):
    /// false once is a failure.
    Always,
    /// `sometimes`: true at least once in the run.
    Sometimes,
    /// `reachable`: reached at least once in the run.
    Reachable,
    /// `unreachable`: never reached.
    Unreachable,
}

impl Assertion {
    /// Which property this is.
    pub fn kind(&self) -> PropertyKind {
        match self.assert_type.as_str() {
            "always" => PropertyKind::Always,
            "sometimes" => PropertyKind::Sometimes,
            // The SDKs write `unreachable` as a reachability assertion that
            // need not be hit (the Python SDK with condition true, the Rust
            // one with false): the display type or must_hit tells.
            _ if self.display_type == "Unreachable" || !self.must_hit => PropertyKind::Unreachable,
            _ => PropertyKind::Reachable,
        }
    }

    /// Whether this line alone fails the execution: an `always` evaluated
    /// false, or an `unreachable` reached.
    pub fn violated(&self) -> bool {
        self.hit
            && match self.kind() {
                PropertyKind::Always => !self.condition,
                PropertyKind::Unreachable => true,
                PropertyKind::Sometimes | PropertyKind::Reachable => false,
            }
    }

    /// Whether this line satisfies a property that must be shown at least
    /// once in the run (`sometimes` true, `reachable` or `always` reached).
    pub fn satisfies(&self) -> bool {
        self.hit
            && match self.kind() {
                PropertyKind::Sometimes => self.condition,
                PropertyKind::Reachable | PropertyKind::Always => true,
                PropertyKind::Unreachable => false,
            }
    }

    /// The property as a report names it: `Always "message"`.
    pub fn title(&self) -> String {
        let display = if self.display_type.is_empty() { &self.assert_type } else { &self.display_type };
        format!("{display} {:?}", self.message)
    }

    /// Why a violated assertion fails, for the failure message.
    pub fn describe_violation(&self, node: &str) -> String {
        let what = match self.kind() {
            PropertyKind::Unreachable => "was reached",
            _ => "was false",
        };
        let at = if self.location.is_empty() { String::new() } else { format!(" at {}", self.location) };
        format!("Antithesis assertion {} {what} on {node}{at}; details: {}", self.title(), self.details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assertion(line: &str) -> Assertion {
        match sdk_line(line) {
            Some(Ok(SdkLine::Assert(a))) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_the_python_sdk_lines() {
        // As the Python SDK 0.4 writes them (json.dumps, key order of its dict).
        let a = assertion(
            r#"@antithesis {"antithesis_assert": {"hit": true, "must_hit": true, "assert_type": "always", "display_type": "Always", "message": "counter is positive", "condition": false, "id": "counter is positive", "location": {"class": "", "function": "main", "file": "/opt/t.py", "begin_line": 7, "begin_column": 0}, "details": {"n": -1}}}"#,
        );
        assert_eq!(a.kind(), PropertyKind::Always);
        assert!(a.violated() && a.satisfies());
        assert_eq!(a.location, "/opt/t.py:7");
        assert_eq!(a.details, r#"{"n":-1}"#);
        assert!(a.describe_violation("n2").contains(r#"Always "counter is positive" was false on n2 at /opt/t.py:7"#));
        // Python writes unreachable with condition true, Rust with false.
        for cond in ["true", "false"] {
            let u = assertion(&format!(
                r#"@antithesis {{"antithesis_assert": {{"hit": true, "must_hit": false, "assert_type": "reachability", "display_type": "Unreachable", "message": "m", "condition": {cond}, "id": "m"}}}}"#
            ));
            assert_eq!(u.kind(), PropertyKind::Unreachable);
            assert!(u.violated() && !u.satisfies());
        }
        let s = assertion(
            r#"@antithesis {"antithesis_assert": {"hit": true, "must_hit": true, "assert_type": "sometimes", "display_type": "Sometimes", "message": "s", "condition": false, "id": "s"}}"#,
        );
        assert!(!s.violated() && !s.satisfies());
        let declared = assertion(
            r#"@antithesis {"antithesis_assert": {"hit": false, "must_hit": true, "assert_type": "reachability", "display_type": "Reachable", "message": "r", "condition": false, "id": "r"}}"#,
        );
        assert_eq!(declared.kind(), PropertyKind::Reachable);
        assert!(!declared.violated() && !declared.satisfies());
    }

    #[test]
    fn reads_setup_guidance_and_the_rest() {
        assert_eq!(
            sdk_line(r#"@antithesis {"antithesis_setup": {"status": "complete", "details": null}}"#),
            Some(Ok(SdkLine::Setup { status: "complete".into() }))
        );
        let g = sdk_line(
            r#"@antithesis {"antithesis_guidance": {"guidance_type": "numeric", "message": "lag", "id": "lag", "location": {}, "maximize": false, "guidance_data": {"left": 7, "right": 2}, "hit": true}}"#,
        );
        let Some(Ok(SdkLine::Guidance(g))) = g else { panic!("{g:?}") };
        assert_eq!((g.value, g.maximize), (Some(5.0), false));
        assert_eq!(
            sdk_line(r#"@antithesis {"antithesis_sdk": {"language": {"name": "Python"}, "sdk_version": "0.4.0"}}"#),
            Some(Ok(SdkLine::Other))
        );
        assert!(matches!(sdk_line("@antithesis {oops"), Some(Err(_))));
        assert_eq!(sdk_line("log: @antithesis {}"), None);
        assert_eq!(sdk_line("hello"), None);
    }
}
