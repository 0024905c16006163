use super::*;

/// A history from `(process, f, value, call, ret, outcome)` rows: an invoke
/// at `call`, and unless the outcome is pending a completion at `ret`. A
/// read's invoke carries no value; its completion the `value` given.
fn history(rows: &[(u64, &str, &str, u64, u64, &str)]) -> String {
    let mut events: Vec<(u64, String)> = Vec::new();
    for (p, f, v, call, ret, outcome) in rows {
        let inv = if *f == "read" { "null" } else { v };
        events.push((*call, format!(r#"{{"process":{p},"type":"invoke","time":{call},"f":"{f}","value":{inv}}}"#)));
        if *outcome != "pending" {
            events.push((*ret, format!(r#"{{"process":{p},"type":"{outcome}","time":{ret},"f":"{f}","value":{v}}}"#)));
        }
    }
    events.sort_by_key(|(t, _)| *t);
    events.into_iter().map(|(_, l)| l + "\n").collect()
}

fn checked(rows: &[(u64, &str, &str, u64, u64, &str)]) -> SetReport {
    check_text(&history(rows), SetOptions::default()).unwrap()
}

fn element(r: &SetReport, v: i64) -> &ElementResult {
    r.elements.iter().find(|e| e.element == Value::Int(v)).unwrap()
}

#[test]
fn every_acknowledged_add_read_back_passes_with_zero_latencies() {
    let r = checked(&[
        (0, "add", "1", 10, 20, "ok"),
        (1, "add", "2", 15, 25, "ok"),
        (2, "read", "[1,2]", 30, 40, "ok"),
        (2, "read", "[2,1]", 50, 60, "ok"),
    ]);
    assert_eq!(r.valid, Some(true), "{r}");
    assert!(r.elements.iter().all(|e| e.outcome == ElementOutcome::Stable && e.stable_latency == Some(0)));
    assert_eq!(r.failing_counts(), BTreeMap::new());
    assert_eq!(r.counts().values().sum::<u64>(), 0);
    assert_eq!(r.headline(), "history: 4 operations (4 ok, 0 info, 0 fail): set-full finds 2 elements added, 2 stable (0 stale), 0 never read, none lost");
    assert_eq!(
        r.stable_latencies().unwrap().to_string(),
        "0: 0.000 ms, 0.5: 0.000 ms, 0.95: 0.000 ms, 0.99: 0.000 ms, 1: 0.000 ms"
    );
}

#[test]
fn an_acknowledged_add_that_later_reads_miss_is_lost_with_the_reads_that_show_it() {
    let r = checked(&[
        (0, "add", "1", 10, 20, "ok"),
        (0, "add", "2", 30, 2_000_040, "ok"),
        (1, "read", "[1,2]", 3_000_000, 3_000_010, "ok"),
        (1, "read", "[2]", 5_000_000, 5_000_010, "ok"),
        (1, "read", "[2]", 6_000_000, 6_000_010, "ok"),
        // Never seen at all, and missed by a read that began after its ack.
        (0, "add", "3", 7_000_000, 7_000_010, "ok"),
        (1, "read", "[2]", 8_000_000, 8_000_010, "ok"),
    ]);
    assert_eq!(r.valid, Some(false));
    let one = element(&r, 1);
    assert_eq!(one.outcome, ElementOutcome::Lost);
    assert_eq!(one.known, Some((0, 20)), "known when its add completed");
    assert_eq!(one.last_present, Some(2));
    assert_eq!((one.turn, one.missed_by), (Some(3), 3), "the read at 5 ms first missed it, then two more");
    assert_eq!(one.lost_latency, Some(3_000_001 - 20), "to just after the last read that saw it began");
    let three = element(&r, 3);
    assert_eq!((three.outcome, three.last_present, three.lost_latency), (ElementOutcome::Lost, None, Some(0)));
    assert_eq!(element(&r, 2).outcome, ElementOutcome::Stable);
    assert_eq!(r.failing_counts(), BTreeMap::from([("lost".to_string(), 2)]));
    let text = r.to_string();
    assert!(text.starts_with("history fails set-full: 2 lost (1 3) of 3 elements added (1 stable)\n"), "{text}");
    assert!(text.contains("lost 1:\n  acknowledged by #0 p0 add 1 [10..20] ok (line 1)\n  last seen by #2 p1 read -> {1 2} [3000000..3000010] ok"), "{text}");
    assert!(text.contains("  missed by #3 p1 read -> {2} [5000000..5000010] ok (line 7) and 2 later reads"), "{text}");
    assert!(text.contains("lost 3:\n  acknowledged by #5 p0 add 3 [7000000..7000010] ok (line 11)\n  never seen by a read\n  missed by #6"), "{text}");
    assert_eq!(r.to_json()["lost"], serde_json::json!([1, 3]));
    // 1: its add, the read that last saw it, the one that first missed it;
    // 3: its add and the read that missed it.
    assert_eq!(r.evidence().into_iter().collect::<Vec<_>>(), vec![0, 2, 3, 5, 6]);
    assert_eq!(r.to_json()["lost_latencies_ms"]["1"], serde_json::json!(2.999981));
}

#[test]
fn an_element_seen_late_is_stale_and_fails_only_a_linearizable_set() {
    let rows = [
        (0, "add", "1", 10, 20, "ok"),
        (1, "read", "[]", 1_000_000, 1_000_010, "ok"),
        (1, "read", "[1]", 3_000_000, 3_000_010, "ok"),
    ];
    let r = checked(&rows);
    let e = element(&r, 1);
    assert_eq!((e.outcome, e.stale()), (ElementOutcome::Stable, true));
    assert_eq!(e.stable_latency, Some(1_000_001 - 20));
    assert_eq!((e.last_absent, e.turn), (Some(1), Some(2)));
    assert_eq!(r.valid, Some(true), "set-full allows stale reads unless linearizable");
    assert_eq!(r.counts()["stale"], 1);
    let text = r.to_string();
    assert!(text.contains("stale 1 (visible 1.000 ms after it was known):\n  acknowledged by #0"), "{text}");
    assert!(text.contains("  missed by #1 p1 read -> {} [1000000..1000010] ok (line 3)\n  seen from #2"), "{text}");

    let lin = check_text(&history(&rows), SetOptions { linearizable: true }).unwrap();
    assert_eq!(lin.valid, Some(false));
    assert_eq!(lin.failing_counts(), BTreeMap::from([("stale".to_string(), 1)]));
    assert_eq!(lin.evidence().into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(r.evidence().is_empty(), "stale passes without linearizable: nothing to show");
    assert!(lin.headline().starts_with("history fails set-full: 1 stale (1)"), "{}", lin.headline());
}

#[test]
fn elements_no_read_began_after_are_never_read_not_lost() {
    // A read concurrent with the add misses it: it may have come first.
    let r = checked(&[(0, "add", "1", 10, 1000, "ok"), (1, "read", "[]", 20, 1100, "ok")]);
    assert_eq!(element(&r, 1).outcome, ElementOutcome::NeverRead, "{r}");
    assert_eq!(r.valid, None, "nothing stable, nothing lost: no verdict");
    let r = checked(&[
        // The add ended info and no read saw it: never known.
        (0, "add", "2", 1200, 1300, "info"),
        // The add failed.
        (2, "add", "3", 1210, 1250, "fail"),
        (3, "add", "4", 1390, 1450, "ok"),
        (1, "read", "[4]", 1400, 1500, "ok"),
        // Invoked after the last read completed.
        (3, "add", "5", 1600, 1700, "ok"),
    ]);
    for v in [2, 3, 5] {
        assert_eq!(element(&r, v).outcome, ElementOutcome::NeverRead, "{v}: {r}");
    }
    assert_eq!(element(&r, 4).outcome, ElementOutcome::Stable);
    assert_eq!(element(&r, 4).known, Some((2, 1450)), "the add's ok, before the read's");
    assert_eq!(r.valid, Some(true));
    assert_eq!(r.counts()["never-read"], 3);
    let text = r.to_string();
    assert!(
        text.contains(
            "never read 2 (never known: its add did not complete ok and no read saw it): added by #0 p0 add 2 \
             [1200..] info (line 1)\n"
        ),
        "{text}"
    );
    assert!(text.contains("never read 5 (no read began after it was known): added by #4 p3 add 5"), "{text}");
}

#[test]
fn a_read_makes_an_element_known_before_its_add_completes() {
    let r = checked(&[
        (0, "add", "1", 10, 1000, "info"),
        (1, "read", "[1]", 20, 30, "ok"),
        (1, "read", "[]", 40, 50, "ok"),
    ]);
    let e = element(&r, 1);
    assert_eq!(e.known, Some((1, 30)));
    assert_eq!((e.outcome, e.lost_latency), (ElementOutcome::Lost, Some(0)), "{r}");
    let text = r.to_string();
    assert!(
        text.contains("lost 1:\n  added by #0 p0 add 1 [10..] info (line 1)\n  first seen by #1 p1 read -> {1}"),
        "{text}"
    );
}

#[test]
fn reads_of_elements_never_added_or_held_twice_fail() {
    let r = checked(&[
        (0, "add", "1", 10, 20, "ok"),
        (1, "read", "[1,9]", 30, 40, "ok"),
        (1, "read", "[1,1,1]", 50, 60, "ok"),
    ]);
    assert_eq!(r.valid, Some(false));
    assert_eq!(r.unexpected, vec![(Value::Int(9), 1)]);
    assert_eq!(r.duplicated, vec![(Value::Int(1), 3, 2)]);
    assert_eq!(r.failing_counts(), BTreeMap::from([("duplicated".to_string(), 1), ("unexpected".to_string(), 1)]));
    let text = r.to_string();
    assert!(text.contains("unexpected 9: no add tried to add it, read by #1 p1 read -> {1 9}"), "{text}");
    assert!(text.contains("duplicated 1: 3 copies in #2"), "{text}");
    assert_eq!(r.to_json()["duplicated"], serde_json::json!([{"element": 1, "count": 3}]));
    assert_eq!(r.to_json()["unexpected"], serde_json::json!([9]));
}

#[test]
fn a_history_with_nothing_read_has_no_verdict() {
    let r = checked(&[(0, "add", "1", 10, 20, "ok"), (0, "add", "2", 30, 40, "fail")]);
    assert_eq!(r.valid, None);
    assert!(r.headline().starts_with("the set-full check could not decide"), "{}", r.headline());
    assert_eq!(check(Vec::new(), SetOptions::default()).valid, None);
}

#[test]
fn string_elements_and_the_engine_hook() {
    use engine::trace::{EventKind, Trace};
    let mut t = Trace::new();
    let h = history(&[
        (0, "add", "\"a\"", 10, 20, "ok"),
        (0, "add", "\"b\"", 30, 40, "ok"),
        (1, "read", "[\"b\"]", 50, 60, "ok"),
    ]);
    let lines = ["@history begin"].into_iter().chain(h.lines()).chain(["@history end"]);
    for l in lines {
        t.push(simtime::VirtualTime::ZERO, engine::NodeId::new(1).unwrap(), EventKind::Console { text: l.to_string() });
    }
    let out = engine_check(t.events(), engine::NodeId::new(1).unwrap(), SetOptions::default());
    assert!(!out.ok);
    assert!(
        out.note.starts_with("history fails set-full: 1 lost (\"a\") of 2 elements added (1 stable)\nlost \"a\":"),
        "{}",
        out.note
    );
    assert_eq!(out.anomalies, BTreeMap::from([("lost".to_string(), 1)]));
    let none = engine_check(t.events(), engine::NodeId::new(2).unwrap(), SetOptions::default());
    assert!(!none.ok && none.note.starts_with("no history"), "{}", none.note);
}
