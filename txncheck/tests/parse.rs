//! Parsing JSON lines and Jepsen EDN, their errors, and model names.

use txncheck::{check, parse_edn, parse_json_lines, Consistency, Key, Model, Mop, Outcome, ParseError, ReadValue};

/// Write skew, plus a nemesis op, a failed and an indeterminate transaction.
const EDN: &str = r#"{:type :invoke, :f :txn, :value [[:r 9 nil] [:r 8 nil] [:append 9 1]], :time 10, :process 0, :index 0}
{:type :invoke, :f :txn, :value [[:r 9 nil] [:r 8 nil] [:append 8 1]], :time 20, :process 1, :index 1}
{:type :info, :f :start-partition, :value nil, :time 25, :process :nemesis, :index 2}

{:type :ok, :f :txn, :value [[:r 9 []] [:r 8 nil] [:append 9 1]], :time 30, :process 0, :index 3}
#jepsen.history.Op{:type :ok, :f :txn, :value [[:r 9 nil] [:r 8 []] [:append 8 1]], :time 40, :process 1, :index 4}
{:type :invoke, :f :txn, :value [[:append 9 2]], :time 50, :process 0, :index 5}
{:type :fail, :f :txn, :value [[:append 9 2]], :time 60, :process 0, :index 6, :error [:conflict "retry"]}
{:type :invoke, :f :txn, :value [[:append 8 3]], :time 70, :process 1, :index 7}
{:type :info, :f :txn, :value [[:append 8 3]], :time 80, :process 1, :index 8, :error :timeout}
{:type :invoke, :f :txn, :value [[:r 9 nil] [:r 8 nil]], :time 90, :process 2, :index 9}
{:type :ok, :f :txn, :value [[:r 9 [1]] [:r 8 [1]]], :time 100, :process 2, :index 10}
"#;

const JSON: &str = r#"{"type":"invoke","f":"txn","value":[["r",9,null],["r",8,null],["append",9,1]],"time":10,"process":0}
{"type":"invoke","f":"txn","value":[["r",9,null],["r",8,null],["append",8,1]],"time":20,"process":1}
{"type":"info","f":"start-partition","value":null,"time":25,"process":"nemesis"}
{"type":"ok","f":"txn","value":[["r",9,[]],["r",8,null],["append",9,1]],"time":30,"process":0}
{"type":"ok","f":"txn","value":[["r",9,null],["r",8,[]],["append",8,1]],"time":40,"process":1}
{"type":"invoke","f":"txn","value":[["append",9,2]],"time":50,"process":0}
{"type":"fail","f":"txn","value":[["append",9,2]],"time":60,"process":0}
{"type":"invoke","f":"txn","value":[["append",8,3]],"time":70,"process":1}
{"type":"info","f":"txn","value":[["append",8,3]],"time":80,"process":1}
{"type":"invoke","f":"txn","value":[["r",9,null],["r",8,null]],"time":90,"process":2}
{"type":"ok","f":"txn","value":[["r",9,[1]],["r",8,[1]]],"time":100,"process":2}
"#;

#[test]
fn edn_and_json_give_the_same_history_and_verdict() {
    let (e, j) = (parse_edn(EDN).unwrap(), parse_json_lines(JSON).unwrap());
    assert_eq!(e.txns.len(), 5, "the nemesis op is skipped");
    let outcomes: Vec<Outcome> = e.txns.iter().map(|t| t.outcome).collect();
    assert_eq!(outcomes, [Outcome::Ok, Outcome::Ok, Outcome::Fail, Outcome::Info, Outcome::Ok]);
    assert_eq!(e.txns.iter().map(|t| t.index).collect::<Vec<_>>(), [0, 1, 5, 7, 9]);
    // Same transactions, ops and times (only lines differ: EDN has a blank one).
    for (a, b) in e.txns.iter().zip(&j.txns) {
        assert_eq!(
            (a.index, a.process, a.outcome, a.invoke_time, a.complete_time),
            (b.index, b.process, b.outcome, b.invoke_time, b.complete_time)
        );
        assert_eq!(a.mops, b.mops);
    }
    for c in Consistency::ALL {
        let (re, rj) = (check(&e, Model::ListAppend, c), check(&j, Model::ListAppend, c));
        assert_eq!(re, rj, "{c}");
    }
    let ser = check(&e, Model::ListAppend, Consistency::Serializable);
    assert_eq!(ser.anomaly_types, ["G2-item"], "{ser}");
    assert_eq!((ser.txns.fail, ser.txns.info, ser.txns.info_included), (1, 1, 0));
    assert!(check(&e, Model::ListAppend, Consistency::SnapshotIsolation).valid);
}

fn err_json(text: &str) -> ParseError {
    parse_json_lines(text).expect_err("should not parse")
}

#[test]
fn json_errors_name_the_line() {
    let good = r#"{"type":"invoke","f":"txn","value":[["append","x",1]],"time":1,"process":0}"#;
    let e = err_json(&format!("\n{good}\n{{\"type\": "));
    assert_eq!(e.line(), 3, "{e}");
    assert!(e.to_string().starts_with("line 3: not JSON"), "{e}");

    let e = err_json(r#"{"type":"invoke","f":"txn","value":[],"process":0,"time":"soon"}"#);
    assert!(matches!(e, ParseError::Field { line: 1, field: "time", .. }), "{e}");

    let e = err_json(r#"{"type":"invoke","f":"txn","value":[["frob","x",1]],"time":1,"process":0}"#);
    assert_eq!(e.to_string(), "line 1: field value: op 1: unknown micro-op \"frob\" (expected append, r or w)");

    let e = err_json(r#"{"type":"invoke","f":"txn","value":[["append","x",[1]]],"time":1,"process":0}"#);
    assert!(e.to_string().contains("append on key x needs an integer value"), "{e}");

    let e = err_json(r#"{"type":"ok","f":"txn","time":1,"process":4}"#);
    assert!(e.to_string().contains("a completion without an invoke needs its ops"), "{e}");

    let e = err_json(&format!("{good}\n{good}"));
    assert_eq!(e, ParseError::DoubleInvoke { line: 2, process: 0, open: 1 });

    let ok = r#"{"type":"ok","f":"txn","value":[["append","x",2]],"time":5,"process":0}"#;
    let e = err_json(&format!("{good}\n{ok}"));
    assert!(matches!(e, ParseError::Mismatch { line: 2, invoke_line: 1, op: 1, .. }), "{e}");

    let early = r#"{"type":"fail","f":"txn","value":null,"time":0,"process":0}"#;
    let e = err_json(&format!("{good}\n{early}"));
    assert!(matches!(e, ParseError::TimeWentBackwards { line: 2, .. }), "{e}");
}

#[test]
fn edn_errors_name_the_line() {
    let good = "{:type :invoke, :f :txn, :value [[:append 1 1]], :time 1, :process 0}";
    let e = parse_edn(&format!("{good}\n{{:type :invoke, :f :txn")).unwrap_err();
    assert_eq!(e.line(), 2, "{e}");
    assert!(matches!(e, ParseError::Syntax { .. }), "{e}");
    let e = parse_edn(&format!("{good} {good}")).unwrap_err();
    assert!(e.to_string().contains("unexpected text after the op"), "{e}");
    let e = parse_edn("{:type :invoke, :f :txn, :value [[:append 1 {:a 1}]], :time 1, :process 0}").unwrap_err();
    assert!(matches!(e, ParseError::Field { line: 1, field: ":value", .. }), "{e}");
    let e = parse_edn("[1 2 3]").unwrap_err();
    assert_eq!(e.to_string(), "line 1: expected a map");
    // Strings and character literals do not count as nesting.
    let quoted = r#"{:type :invoke, :f :txn, :value [[:append 1 1]], :time 1, :process 0, :error "DEEP\"", :c \[}"#;
    let quoted = quoted.replace("DEEP", &"[".repeat(100));
    assert!(parse_edn(&quoted).is_ok(), "{:?}", parse_edn(&quoted));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let (open, close) = ("[".repeat(100_000), "]".repeat(100_000));
    let deep = format!("{{:type :invoke, :f :txn, :value {open}{close}, :time 1, :process 0}}");
    let e = parse_edn(&format!("\n{deep}")).unwrap_err();
    assert_eq!(e.to_string(), "line 2: nested more than 64 levels deep");
    let deep = format!("{{\"value\": {open}{close}}}");
    assert_eq!(parse_json_lines(&deep).unwrap_err().line(), 1);
}

#[test]
fn names_parse_both_ways() {
    for c in Consistency::ALL {
        assert_eq!(c.name().parse::<Consistency>(), Ok(c));
        assert_eq!(serde_json::to_value(c).unwrap(), c.name());
    }
    assert_eq!("snapshot-isolation".parse(), Ok(Consistency::SnapshotIsolation));
    let e = "linearizable".parse::<Consistency>().unwrap_err();
    assert!(e.to_string().contains("unknown consistency model \"linearizable\""), "{e}");
    assert_eq!("rw-register".parse(), Ok(Model::RwRegister));
    assert!("list".parse::<Model>().is_err());
}

#[test]
fn the_hierarchy_is_nested() {
    use Consistency::*;
    let weaker = [
        (StrictSerializable, StrongSessionSerializable),
        (StrongSessionSerializable, Serializable),
        (Serializable, RepeatableRead),
        (RepeatableRead, SnapshotIsolation),
        (StrongSessionSnapshotIsolation, SnapshotIsolation),
        (StrongSessionSerializable, StrongSessionSnapshotIsolation),
        (SnapshotIsolation, ReadCommitted),
        (ReadCommitted, ReadUncommitted),
    ];
    for (strong, weak) in weaker {
        for name in weak.forbidden() {
            assert!(strong.forbids(name), "{strong} should forbid {name}, as {weak} does");
        }
    }
    assert!(RepeatableRead.forbids("G2-item") && !SnapshotIsolation.forbids("G2-item"));
    assert!(!Serializable.forbids("G-single-item-realtime") && StrictSerializable.forbids("G-single-item-realtime"));
    assert!(!Serializable.forbids("G0-process") && StrongSessionSerializable.forbids("G0-process"));
    for always in ["internal", "incompatible-order", "duplicate-elements"] {
        assert!(ReadUncommitted.forbids(always));
    }
    for rc in ["G1a", "G1b", "G1c", "dirty-update"] {
        assert!(ReadCommitted.forbids(rc) && !ReadUncommitted.forbids(rc));
    }
}

/// What Jepsen, Elle's tests and elle-cli write, beyond the full form: no
/// `:f`, no `:time`, no `:process` on some ops, completions without invokes,
/// two-element reads, vector keys, string values, a JSON array.
#[test]
fn jepsen_shapes_all_read() {
    // elle-cli's rw-register.edn: no :time, so line order; no :f.
    let h = parse_edn(
        "{:type :invoke, :value [[:w :x 2]], :process 0, :index 1}\n\
         {:type :ok, :value [[:w :x 2]], :process 0, :index 2}\n\
         {:type :invoke, :value [[:r :x]], :process 1, :index 3}\n\
         {:type :ok, :value [[:r :x 2]], :process 1, :index 4}",
    )
    .unwrap();
    assert_eq!(h.txns.len(), 2);
    assert_eq!((h.txns[0].invoke_time, h.txns[0].complete_time), (1, Some(2)));
    assert_eq!(h.txns[1].mops, [Mop::Read { key: "x".into(), value: Some(ReadValue::Int(2)) }]);

    // Completions only (Elle's test histories), one with no process.
    let h = parse_edn("{:type :ok, :value [[:append :x 1]], :process 0}\n{:type :ok, :value [[:r :x [1]]]}").unwrap();
    assert_eq!(h.txns.len(), 2);
    assert!(h.txns.iter().all(|t| t.outcome == Outcome::Ok && t.invoke_time == 0));
    assert_eq!(h.txns[1].process, txncheck::txn_history::NO_PROCESS);

    // Vector keys and string values, EDN and JSON alike.
    let edn = parse_edn("{:type :ok, :process 0, :time 1, :value [[:append [:anti 1] \"a\"] [:r [:anti 1] [\"a\"]]]}")
        .unwrap();
    let json = parse_json_lines(
        r#"{"type":"ok","process":0,"time":1,"value":[["append",["anti",1],"a"],["r",["anti",1],["a"]]]}"#,
    )
    .unwrap();
    for h in [&edn, &json] {
        let (Mop::Append { value, .. }, Mop::Read { value: Some(ReadValue::List(l)), .. }) =
            (&h.txns[0].mops[0], &h.txns[0].mops[1])
        else {
            panic!("{h:?}")
        };
        assert_eq!(l, &[*value], "the string is one value wherever it appears");
    }
    assert_eq!(edn.txns[0].mops[0].key(), &Key::Str("[:anti 1]".into()));
    assert_eq!(json.txns[0].mops[0].key(), &Key::Str("[\"anti\",1]".into()));

    // elle-cli's JSON array, and its errors name the line the event starts on.
    let array = "[{\"index\":0,\"process\":1,\"type\":\"invoke\",\"value\":[[\"append\",253,1]]},\n\
                 {\"index\":1,\"process\":1,\"type\":\"ok\",\"value\":[[\"append\",253,1]]}]\n";
    let h = parse_json_lines(array).unwrap();
    assert_eq!((h.txns.len(), h.txns[0].outcome), (1, Outcome::Ok));
    let e = parse_json_lines(&array.replace("\"ok\"", "\"done\"")).unwrap_err();
    assert_eq!(e.line(), 2, "{e}");
    let e = parse_json_lines(&array.replace("}]", "}")).unwrap_err();
    assert_eq!(e.to_string(), "line 3: expected , or ] after an event, got the end");
}
