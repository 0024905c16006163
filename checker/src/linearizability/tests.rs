use super::*;
use crate::register_history::Value;

fn v(i: i64) -> Option<Value> {
    Some(Value::Int(i))
}

fn verdict(h: &History) -> CheckResult {
    check(h, &CheckOptions::default()).unwrap()
}

fn violation(h: &History) -> Violation {
    match verdict(h) {
        CheckResult::Violation(v) => v,
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn empty_history_is_linearizable() {
    assert_eq!(verdict(&History::new()), CheckResult::Ok { keys: 0, ops: 0 });
}

#[test]
fn sequential_valid() {
    let mut h = History::new();
    h.invoke(1, 0, Op::read("x", None)).ok(1, 1, Op::read("x", None));
    h.invoke(1, 2, Op::write("x", 1)).ok(1, 3, Op::write("x", 1));
    h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", v(1)));
    h.invoke(2, 6, Op::cas("x", 1, 2)).ok(2, 7, Op::cas("x", 1, 2));
    h.invoke(1, 8, Op::read("x", None)).ok(1, 9, Op::read("x", v(2)));
    assert_eq!(verdict(&h), CheckResult::Ok { keys: 1, ops: 5 });
}

#[test]
fn stale_read_is_a_violation() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
    h.invoke(1, 20, Op::write("x", 2)).ok(1, 30, Op::write("x", 2));
    h.invoke(2, 40, Op::read("x", None)).ok(2, 50, Op::read("x", v(1)));
    let v = violation(&h);
    assert_eq!(v.key, "x");
    assert_eq!(v.linearized.len(), 2);
    assert_eq!(v.stuck.len(), 1);
    assert_eq!(v.stuck[0].0.id, 2);
    let text = v.to_string();
    let expected = "key \"x\" is not linearizable (3 ops on it).
Longest linearizable prefix (2 ops):
    1. #0 p1 write x := 1 [0..10 ns] ok  => 1
    2. #1 p1 write x := 2 [20..30 ns] ok  => 2
With the register at 2, no op can come next:
  #2 p2 read x -> 1 [40..50 ns] ok: reads a value the register does not hold (2)
";
    assert_eq!(text, expected);
    assert!(text.contains("key \"x\" is not linearizable"), "{text}");
    assert!(text.contains("read x -> 1"), "{text}");
    assert!(text.contains("With the register at 2"), "{text}");
}

#[test]
fn long_prefixes_are_shortened_in_text() {
    let mut h = History::new();
    for i in 0..30 {
        h.invoke(1, 10 * i, Op::write("x", i as i64)).ok(1, 10 * i + 1, Op::write("x", i as i64));
    }
    h.invoke(2, 1000, Op::read("x", None)).ok(2, 1001, Op::read("x", v(3)));
    let bad = violation(&h);
    assert_eq!(bad.linearized.len(), 30);
    let text = bad.to_string();
    assert!(text.contains("... 10 earlier ops ..."), "{text}");
    assert!(text.contains(" 30. #29 p1 write x := 29"), "{text}");
    assert!(!text.contains("write x := 9 "), "{text}");
}

#[test]
fn lost_write_is_a_violation() {
    // Two acknowledged writes, then reads see the first one forever: the
    // second write was lost. Concurrent writes, so either order is allowed,
    // but the reads disagree with each other.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).invoke(2, 1, Op::write("x", 2));
    h.ok(1, 10, Op::write("x", 1)).ok(2, 11, Op::write("x", 2));
    h.invoke(3, 20, Op::read("x", None)).ok(3, 21, Op::read("x", v(2)));
    h.invoke(3, 30, Op::read("x", None)).ok(3, 31, Op::read("x", v(1)));
    let bad = violation(&h);
    assert_eq!(bad.linearized.len(), 3, "{bad}");
    assert_eq!(bad.stuck[0].0.op, Op::read("x", v(1)));
}

#[test]
fn cas_anomaly_is_a_violation() {
    // Two CAS 0->1 and 0->2 both succeed: impossible for a register.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 0)).ok(1, 1, Op::write("x", 0));
    h.invoke(1, 2, Op::cas("x", 0, 1)).invoke(2, 3, Op::cas("x", 0, 2));
    h.ok(1, 10, Op::cas("x", 0, 1)).ok(2, 11, Op::cas("x", 0, 2));
    let v = violation(&h);
    assert!(v.to_string().contains("cas expects 0"), "{v}");
}

#[test]
fn failed_cas_never_happened() {
    // The cas failed, so the read of 5 is impossible.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 0)).ok(1, 1, Op::write("x", 0));
    h.invoke(1, 2, Op::cas("x", 0, 5)).fail(1, 3, Op::cas("x", 0, 5));
    h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", v(5)));
    violation(&h);
    // And a failed write is equally absent.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 7)).fail(1, 3, Op::write("x", 7));
    h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", None));
    assert!(verdict(&h).is_ok());
}

#[test]
fn concurrent_overlapping_ops() {
    // Read overlaps the write: may see old or new value.
    for seen in [None, v(1)] {
        let mut h = History::new();
        h.invoke(1, 0, Op::write("x", 1)).invoke(2, 5, Op::read("x", None));
        h.ok(2, 8, Op::read("x", seen.clone())).ok(1, 10, Op::write("x", 1));
        assert!(verdict(&h).is_ok(), "seen {seen:?}");
    }
    // Three concurrent writes and reads that need a particular order
    // (3, then 1, then 2) inside the overlap.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).invoke(2, 0, Op::write("x", 2)).invoke(3, 0, Op::write("x", 3));
    h.invoke(4, 1, Op::read("x", None)).ok(4, 2, Op::read("x", v(3)));
    h.invoke(4, 3, Op::read("x", None)).ok(4, 4, Op::read("x", v(1)));
    h.invoke(4, 5, Op::read("x", None)).ok(4, 6, Op::read("x", v(2)));
    h.ok(1, 10, Op::write("x", 1)).ok(2, 10, Op::write("x", 2)).ok(3, 10, Op::write("x", 3));
    assert!(verdict(&h).is_ok());
    // ...but 3 cannot come back after 1 and 2 are both read since 3's write
    // was read first: 3,1,2,3 would need write 3 twice.
    h.invoke(4, 7, Op::read("x", None)).ok(4, 8, Op::read("x", v(3)));
    violation(&h);
}

#[test]
fn equal_timestamps_are_concurrent_across_processes() {
    // p1's write returns at 10, p2's read is called at 10: concurrent, so
    // reading the old value is fine.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
    h.invoke(2, 10, Op::read("x", None)).ok(2, 12, Op::read("x", None));
    assert!(verdict(&h).is_ok());
    // Same process at the same instant: program order holds.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
    h.invoke(1, 10, Op::read("x", None)).ok(1, 12, Op::read("x", None));
    violation(&h);
}

#[test]
fn info_write_may_have_happened() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).info(1, 5, Op::write("x", 1));
    h.invoke(2, 10, Op::read("x", None)).ok(2, 11, Op::read("x", v(1)));
    assert!(verdict(&h).is_ok());
}

#[test]
fn info_write_may_not_have_happened() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).info(1, 5, Op::write("x", 1));
    h.invoke(2, 10, Op::read("x", None)).ok(2, 11, Op::read("x", None));
    assert!(verdict(&h).is_ok());
}

#[test]
fn info_write_may_take_effect_late() {
    // The info write takes effect after the first read, long after the
    // client gave up: still allowed.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).info(1, 5, Op::write("x", 1));
    h.invoke(2, 10, Op::read("x", None)).ok(2, 11, Op::read("x", None));
    h.invoke(2, 20, Op::read("x", None)).ok(2, 21, Op::read("x", v(1)));
    assert!(verdict(&h).is_ok());
    // But not before it was invoked.
    let mut h = History::new();
    h.invoke(2, 0, Op::read("x", None)).ok(2, 1, Op::read("x", v(1)));
    h.invoke(1, 5, Op::write("x", 1)).info(1, 6, Op::write("x", 1));
    violation(&h);
}

#[test]
fn info_cas_with_failed_precondition_is_fine() {
    // A pending cas whose precondition never holds just never happened.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 1, Op::write("x", 1));
    h.invoke(2, 2, Op::cas("x", 9, 10)); // pending forever
    h.invoke(3, 3, Op::read("x", None)).ok(3, 4, Op::read("x", v(1)));
    assert!(verdict(&h).is_ok());
}

#[test]
fn info_ops_cannot_take_effect_twice() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 0)).ok(1, 1, Op::write("x", 0));
    h.invoke(2, 2, Op::write("x", 1)).info(2, 3, Op::write("x", 1));
    h.invoke(3, 4, Op::read("x", None)).ok(3, 5, Op::read("x", v(1)));
    h.invoke(3, 6, Op::write("x", 0)).ok(3, 7, Op::write("x", 0));
    h.invoke(3, 8, Op::read("x", None)).ok(3, 9, Op::read("x", v(1)));
    let v = violation(&h);
    assert_eq!(v.linearized.len(), 4, "{v}");
}

#[test]
fn unobserved_info_writes_do_not_blow_up_the_search() {
    // 60 crashed writes nobody ever reads, then a stale read: without
    // dropping them, refuting 2^60 subsets would never finish.
    let mut h = History::new();
    h.invoke(0, 0, Op::write("x", 1)).ok(0, 1, Op::write("x", 1));
    for p in 1..=60u64 {
        h.invoke(p, 2, Op::write("x", 100 + p as i64)).info(p, 3, Op::write("x", 100 + p as i64));
    }
    h.invoke(0, 10, Op::write("x", 2)).ok(0, 11, Op::write("x", 2));
    h.invoke(0, 12, Op::read("x", None)).ok(0, 13, Op::read("x", v(1)));
    let r = check(&h, &CheckOptions { max_steps_per_key: 10_000 }).unwrap();
    assert!(matches!(r, CheckResult::Violation(_)), "{r:?}");
    // An observed one is kept and may explain a read.
    h.invoke(0, 14, Op::read("x", None)).ok(0, 15, Op::read("x", v(107)));
    let r = check(&h, &CheckOptions { max_steps_per_key: 10_000 }).unwrap();
    assert!(matches!(r, CheckResult::Violation(_)), "still stale at 13: {r:?}");
}

#[test]
fn info_write_observed_by_a_cas_is_kept() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 5)).info(1, 1, Op::write("x", 5));
    h.invoke(2, 2, Op::cas("x", 5, 6)).ok(2, 3, Op::cas("x", 5, 6));
    h.invoke(2, 4, Op::read("x", None)).ok(2, 5, Op::read("x", v(6)));
    assert!(verdict(&h).is_ok());
}

#[test]
fn info_reads_are_ignored() {
    let mut h = History::new();
    h.invoke(1, 0, Op::read("x", None)).info(1, 5, Op::read("x", None));
    h.invoke(2, 6, Op::read("x", None)); // pending read
    assert_eq!(verdict(&h), CheckResult::Ok { keys: 1, ops: 0 });
}

#[test]
fn keys_are_independent_and_reported_in_order() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("b", 1)).ok(1, 1, Op::write("b", 1));
    h.invoke(1, 2, Op::write("a", 1)).ok(1, 3, Op::write("a", 1));
    h.invoke(1, 4, Op::read("b", None)).ok(1, 5, Op::read("b", v(1)));
    h.invoke(1, 6, Op::read("a", None)).ok(1, 7, Op::read("a", v(1)));
    assert_eq!(verdict(&h), CheckResult::Ok { keys: 2, ops: 4 });
    h.invoke(1, 8, Op::read("b", None)).ok(1, 9, Op::read("b", v(2)));
    h.invoke(1, 10, Op::read("c", None)).ok(1, 11, Op::read("c", v(2)));
    assert_eq!(violation(&h).key, "b");
}

#[test]
fn string_values() {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", "a")).ok(1, 1, Op::write("x", "a"));
    h.invoke(1, 2, Op::read("x", None)).ok(1, 3, Op::read("x", Some("a".into())));
    assert!(verdict(&h).is_ok());
    h.invoke(1, 4, Op::read("x", None)).ok(1, 5, Op::read("x", Some("b".into())));
    violation(&h);
}

#[test]
fn budget_gives_unknown() {
    let mut h = History::new();
    for p in 0..6 {
        h.invoke(p, 0, Op::write("x", p as i64));
    }
    for p in 0..6 {
        h.ok(p, 10, Op::write("x", p as i64));
    }
    h.invoke(9, 11, Op::read("x", None)).ok(9, 12, Op::read("x", v(99)));
    let r = check(&h, &CheckOptions { max_steps_per_key: 5 }).unwrap();
    assert_eq!(r, CheckResult::Unknown { key: "x".into(), steps: 5 });
    assert!(matches!(verdict(&h), CheckResult::Violation(_)));
}

#[test]
fn history_errors_propagate() {
    let mut h = History::new();
    h.ok(1, 1, Op::write("x", 1));
    assert!(check(&h, &CheckOptions::default()).is_err());
}

#[test]
fn same_process_ops_in_one_clock_tick_keep_program_order() {
    // A coarse guest clock (jiffies) stamps two back-to-back reads of one
    // process, and their calls and returns, with the same time. Each read's
    // return must still come after its own call.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 0)).ok(1, 4, Op::write("x", 0));
    h.invoke(2, 8, Op::read("x", None)).ok(2, 8, Op::read("x", v(0)));
    h.invoke(2, 8, Op::read("x", None)).ok(2, 8, Op::read("x", v(0)));
    h.invoke(2, 8, Op::read("x", None)).ok(2, 8, Op::read("x", v(0)));
    assert_eq!(verdict(&h), CheckResult::Ok { keys: 1, ops: 4 });
}

#[test]
fn two_processes_chaining_in_one_tick_stay_concurrent() {
    // Both processes run a write then a read within one clock tick. Only
    // program order binds them: w1, r1, w2, r2 is a linearization. (Ranks
    // in a total order would have put both writes before both reads.)
    let mut h = History::new();
    h.invoke(1, 8, Op::write("x", 1)).ok(1, 8, Op::write("x", 1));
    h.invoke(2, 8, Op::write("x", 2)).ok(2, 8, Op::write("x", 2));
    h.invoke(1, 8, Op::read("x", None)).ok(1, 8, Op::read("x", v(1)));
    h.invoke(2, 8, Op::read("x", None)).ok(2, 8, Op::read("x", v(2)));
    assert_eq!(verdict(&h), CheckResult::Ok { keys: 1, ops: 4 });
    // Each reading the other's value after its own write is impossible.
    let mut h = History::new();
    h.invoke(1, 8, Op::write("x", 1)).ok(1, 8, Op::write("x", 1));
    h.invoke(2, 8, Op::write("x", 2)).ok(2, 8, Op::write("x", 2));
    h.invoke(1, 8, Op::read("x", None)).ok(1, 8, Op::read("x", v(2)));
    h.invoke(2, 8, Op::read("x", None)).ok(2, 8, Op::read("x", v(1)));
    let bad = violation(&h);
    // The explanation never offers a read before its own process's write.
    for (op, _) in bad.stuck.iter().filter(|(o, _)| o.op.f() == "read") {
        assert!(bad.linearized.iter().any(|(l, _)| l.process == op.process), "{bad}");
    }
}

/// p1 writes 1; p2's cas from 1 then fails its compare while nothing else
/// writes: the register held 1 all along, so the compare cannot have failed.
fn failed_compare_with_nothing_else_written(marked: bool) -> History {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
    h.invoke(2, 20, Op::cas("x", 1, 2));
    if marked {
        h.compare_failed(2, 30, Op::cas("x", 1, 2));
    } else {
        h.fail(2, 30, Op::cas("x", 1, 2));
    }
    h.invoke(1, 40, Op::read("x", None)).ok(1, 50, Op::read("x", v(1)));
    h
}

#[test]
fn a_failed_compare_is_a_read_of_something_else() {
    // Without the marker a fail cas never happened: linearizable.
    assert!(verdict(&failed_compare_with_nothing_else_written(false)).is_ok());
    // With it, the cas observed x != 1 while x was 1 throughout.
    let bad = violation(&failed_compare_with_nothing_else_written(true));
    assert_eq!(bad.key_ops, 3);
    let text = bad.to_string();
    assert!(text.contains("cas x 1 -> 2 [20..30 ns] fail (compare failed)"), "{text}");
    assert!(text.contains("its compare failed, so the register held something other than 1, but it holds 1"), "{text}");
}

#[test]
fn a_failed_compare_that_saw_another_write_is_consistent() {
    // p3 writes 3 while the cas runs: the compare saw 3; p1 then reads 3.
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
    h.invoke(3, 15, Op::write("x", 3)).ok(3, 25, Op::write("x", 3));
    h.invoke(2, 20, Op::cas("x", 1, 2)).compare_failed(2, 30, Op::cas("x", 1, 2));
    h.invoke(1, 40, Op::read("x", None)).ok(1, 50, Op::read("x", v(3)));
    assert!(verdict(&h).is_ok(), "{:?}", verdict(&h));
    // A compare that failed before the register was ever written saw nil.
    let mut h = History::new();
    h.invoke(2, 0, Op::cas("x", 1, 2)).compare_failed(2, 5, Op::cas("x", 1, 2));
    h.invoke(1, 10, Op::write("x", 1)).ok(1, 20, Op::write("x", 1));
    assert!(verdict(&h).is_ok());
}

/// p1 writes 1 twice; after each a cas from 1 fails its compare. Only info
/// writes (values nobody reads) can explain the failed compares, one each.
fn failed_compares_explained_by_info_writes(info_writes: &[(u64, i64)]) -> History {
    let mut h = History::new();
    h.invoke(1, 0, Op::write("x", 1)).ok(1, 10, Op::write("x", 1));
    for (k, &(call, value)) in info_writes.iter().enumerate() {
        h.invoke(10 + k as u64, call, Op::write("x", value));
    }
    h.invoke(2, 20, Op::cas("x", 1, 2)).compare_failed(2, 30, Op::cas("x", 1, 2));
    h.invoke(1, 40, Op::write("x", 1)).ok(1, 50, Op::write("x", 1));
    h.invoke(2, 60, Op::cas("x", 1, 2)).compare_failed(2, 70, Op::cas("x", 1, 2));
    h
}

#[test]
fn unobserved_info_writes_stay_when_a_failed_compare_may_need_them() {
    // Two info writes, one per failed compare (the third, called last, is
    // not needed and may go).
    let h = failed_compares_explained_by_info_writes(&[(12, 5), (13, 6), (14, 7)]);
    assert!(verdict(&h).is_ok(), "{:?}", verdict(&h));
    // One info write explains one failed compare, not both.
    let bad = violation(&failed_compares_explained_by_info_writes(&[(12, 5)]));
    assert!(bad.to_string().contains("its compare failed"), "{bad}");
    // Info writes called after the second cas returned explain neither...
    let late = failed_compares_explained_by_info_writes(&[(80, 5), (90, 6)]);
    assert!(!verdict(&late).is_ok());
    // ...and one called in time explains the second only.
    assert!(!verdict(&failed_compares_explained_by_info_writes(&[(55, 5), (80, 6)])).is_ok());
    assert!(verdict(&failed_compares_explained_by_info_writes(&[(15, 5), (55, 6)])).is_ok());
}
