//! One minimal history per anomaly, each with a valid counterpart.

mod common;

use common::*;
use txncheck::{check, Anomaly, CheckReport, Consistency, EdgeKind, History, Model};

fn la(h: &History, c: Consistency) -> CheckReport {
    check(h, Model::ListAppend, c)
}
fn rr(h: &History, c: Consistency) -> CheckReport {
    check(h, Model::RwRegister, c)
}
const SER: Consistency = Consistency::Serializable;
const STRICT: Consistency = Consistency::StrictSerializable;

/// Asserts the forbidden anomalies found are exactly `names`.
fn assert_types(rep: &CheckReport, names: &[&str]) {
    assert_eq!(rep.anomaly_types, names, "report:\n{rep}");
    assert_eq!(rep.valid, names.is_empty(), "report:\n{rep}");
}

fn first_cycle<'r>(rep: &'r CheckReport, name: &str) -> &'r txncheck::Cycle {
    match rep.anomalies.get(name).and_then(|l| l.first()) {
        Some(Anomaly::Cycle(c)) => c,
        other => panic!("no {name} cycle: {other:?}\n{rep}"),
    }
}

/// T1 and T2 each append to x and y, concurrently; T3 reads the orders.
fn g0(y_order: &[i64]) -> History {
    let (t1, t2) = ([a("x", 1), a("y", 2)], [a("x", 2), a("y", 1)]);
    B::new()
        .start(1, &t1)
        .start(2, &t2)
        .finish(1, OK, &t1)
        .finish(2, OK, &t2)
        .txn(3, OK, &[r("x", &[1, 2]), r("y", y_order)])
        .build()
}

#[test]
fn g0_write_cycle() {
    let rep = la(&g0(&[1, 2]), SER);
    assert_types(&rep, &["G0"]);
    let c = first_cycle(&rep, "G0");
    assert_eq!(c.txns.len(), 2);
    assert!(c.edges.iter().all(|e| e.kind == EdgeKind::Ww));
    assert!(c.edges.iter().any(|e| e.reason == "T0 appended 1 to x, T1 appended 2 to x after it: ww on x"), "{rep}");
    // G0 is forbidden even at read uncommitted.
    assert!(!la(&g0(&[1, 2]), Consistency::ReadUncommitted).valid);
    assert_types(&la(&g0(&[2, 1]), STRICT), &[]);
}

/// Each reads the other's append.
fn g1c(t1_reads: &[i64]) -> History {
    let (t1, t2) = ([a("x", 1), r("y", t1_reads)], [a("y", 1), r("x", &[1])]);
    B::new().start(1, &t1).start(2, &t2).finish(1, OK, &t1).finish(2, OK, &t2).build()
}

#[test]
fn g1c_circular_information_flow() {
    let rep = la(&g1c(&[1]), Consistency::ReadCommitted);
    assert_types(&rep, &["G1c"]);
    assert!(first_cycle(&rep, "G1c").edges.iter().all(|e| e.kind == EdgeKind::Wr));
    assert!(la(&g1c(&[1]), Consistency::ReadUncommitted).valid);
    assert_types(&la(&g1c(&[]), STRICT), &[]);
}

/// Both read x empty and append: a lost update, one rw edge.
fn g_single(t2_read: &[i64]) -> History {
    let (t1, t2) = ([r("x", &[]), a("x", 1)], [r("x", t2_read), a("x", 2)]);
    B::new().start(1, &t1).start(2, &t2).finish(1, OK, &t1).finish(2, OK, &t2).txn(3, OK, &[r("x", &[1, 2])]).build()
}

#[test]
fn g_single_read_skew() {
    let rep = la(&g_single(&[]), Consistency::SnapshotIsolation);
    // Both read x = [] and then appended to it: a lost update too (Elle names both).
    assert_types(&rep, &["G-single-item", "lost-update"]);
    let c = first_cycle(&rep, "G-single-item");
    assert_eq!(c.edges.iter().filter(|e| e.kind == EdgeKind::Rw).count(), 1);
    let text = rep.to_string();
    assert!(text.contains("G-single-item (1):"), "{text}");
    assert!(text.contains("T0 (process 1) -ww x-> T1 (process 2) -rw x-> T0"), "{text}");
    assert!(text.contains("T1 read x = [], T0 appended 1 to x after that version: rw on x"), "{text}");
    assert!(!la(&g_single(&[]), Consistency::RepeatableRead).valid);
    assert!(la(&g_single(&[]), Consistency::ReadCommitted).valid);
    assert_types(&la(&g_single(&[1]), STRICT), &[]);
}

/// Write skew: both read x and y empty, each appends to one.
fn write_skew(t2_sees_t1: bool) -> History {
    let t1 = [r("x", &[]), r("y", &[]), a("x", 1)];
    let t2 = [r("x", if t2_sees_t1 { &[1] } else { &[] }), r("y", &[]), a("y", 1)];
    B::new()
        .start(1, &t1)
        .start(2, &t2)
        .finish(1, OK, &t1)
        .finish(2, OK, &t2)
        .txn(3, OK, &[r("x", &[1]), r("y", &[1])])
        .build()
}

#[test]
fn g2_item_write_skew_and_the_hierarchy() {
    let h = write_skew(false);
    let rep = la(&h, SER);
    assert_types(&rep, &["G2-item"]);
    assert_eq!(first_cycle(&rep, "G2-item").edges.iter().filter(|e| e.kind == EdgeKind::Rw).count(), 2);
    assert!(!la(&h, Consistency::RepeatableRead).valid, "repeatable read forbids G2-item");
    assert!(!la(&h, STRICT).valid);
    let si = la(&h, Consistency::SnapshotIsolation);
    assert!(si.valid, "snapshot isolation allows write skew:\n{si}");
    assert_eq!(si.also_found, vec!["G2-item".to_string()]);
    assert!(la(&h, Consistency::StrongSessionSnapshotIsolation).valid);
    assert!(la(&h, Consistency::ReadCommitted).valid);
    assert_eq!(rep.ruled_out, [STRICT, Consistency::StrongSessionSerializable, SER, Consistency::RepeatableRead]);
    assert_types(&la(&write_skew(true), STRICT), &[]);
}

#[test]
fn g1a_aborted_read() {
    let h = |seen: &[i64]| B::new().txn(1, FAIL, &[a("x", 1)]).txn(2, OK, &[r("x", seen)]).build();
    let rep = la(&h(&[1]), Consistency::ReadCommitted);
    assert_types(&rep, &["G1a"]);
    match &rep.anomalies["G1a"][0] {
        Anomaly::Finding(f) => {
            assert_eq!(f.values, [1]);
            assert_eq!(f.txns.len(), 2);
            assert!(f.reason.contains("T2 read x = [1]"), "{}", f.reason);
        }
        other => panic!("{other:?}"),
    }
    assert!(la(&h(&[1]), Consistency::ReadUncommitted).valid);
    assert_types(&la(&h(&[]), STRICT), &[]);
}

#[test]
fn g1b_intermediate_read() {
    let h = |seen: &[i64]| B::new().txn(1, OK, &[a("x", 1), a("x", 2)]).txn(2, OK, &[r("x", seen)]).build();
    assert_types(&la(&h(&[1]), Consistency::ReadCommitted), &["G1b"]);
    assert_types(&la(&h(&[1, 2]), STRICT), &[]);
}

#[test]
fn internal_inconsistency() {
    let h = |again: &[i64]| B::new().txn(1, OK, &[r("x", &[]), a("x", 1), r("x", again)]).build();
    let rep = la(&h(&[]), Consistency::ReadUncommitted);
    assert_types(&rep, &["internal"]);
    assert_types(&la(&h(&[1]), STRICT), &[]);
    // Appends before the first read: the read must end with them.
    let h = |seen: &[i64]| B::new().txn(1, OK, &[a("x", 2)]).txn(2, OK, &[a("x", 1), r("x", seen)]).build();
    assert_types(&la(&h(&[2]), SER), &["internal"]);
    assert_types(&la(&h(&[2, 1]), STRICT), &[]);
}

#[test]
fn incompatible_order() {
    let h = |other: &[i64]| {
        B::new()
            .txn(1, OK, &[a("x", 1)])
            .txn(2, OK, &[a("x", 2)])
            .txn(3, OK, &[r("x", &[1, 2])])
            .txn(4, OK, &[r("x", other)])
            .build()
    };
    assert_types(&la(&h(&[2, 1]), Consistency::ReadUncommitted), &["incompatible-order"]);
    assert_types(&la(&h(&[1, 2]), STRICT), &[]);
    // A stale prefix is no order anomaly (only a realtime one).
    assert_types(&la(&h(&[1]), SER), &[]);
}

#[test]
fn duplicate_elements() {
    let h = |seen: &[i64]| B::new().txn(1, OK, &[a("x", 1)]).txn(2, OK, &[r("x", seen)]).build();
    assert_types(&la(&h(&[1, 1]), Consistency::ReadUncommitted), &["duplicate-elements"]);
    assert_types(&la(&h(&[1]), STRICT), &[]);
}

#[test]
fn dirty_update() {
    let h =
        |seen: &[i64]| B::new().txn(1, FAIL, &[a("x", 1)]).txn(2, OK, &[a("x", 2)]).txn(3, OK, &[r("x", seen)]).build();
    let rep = la(&h(&[1, 2]), Consistency::ReadCommitted);
    assert_types(&rep, &["G1a", "dirty-update"]);
    match &rep.anomalies["dirty-update"][0] {
        Anomaly::Finding(f) => assert_eq!(f.values, [1, 2]),
        other => panic!("{other:?}"),
    }
    assert!(la(&h(&[1, 2]), Consistency::ReadUncommitted).valid);
    assert_types(&la(&h(&[2]), STRICT), &[]);
}

/// T1 appends and completes; T2, invoked afterwards on another process,
/// appends before it (G0-realtime) or reads x without it (G-single-realtime).
#[test]
fn realtime_anomalies_only_under_strict_serializable() {
    let stale = |seen: &[i64]| {
        B::new().txn(1, OK, &[a("x", 1)]).txn(2, OK, &[r("x", seen)]).txn(3, OK, &[r("x", &[1])]).build()
    };
    let h = stale(&[]);
    assert_types(&la(&h, STRICT), &["G-single-item-realtime"]);
    assert!(first_cycle(&la(&h, STRICT), "G-single-item-realtime").edges.iter().any(|e| e.kind == EdgeKind::Realtime));
    for c in [SER, Consistency::StrongSessionSerializable, Consistency::SnapshotIsolation] {
        let rep = la(&h, c);
        assert!(rep.valid, "{rep}");
        assert_eq!(rep.also_found, ["G-single-item-realtime"]);
    }
    assert_types(&la(&stale(&[1]), STRICT), &[]);

    let reordered =
        |order: &[i64]| B::new().txn(1, OK, &[a("x", 1)]).txn(2, OK, &[a("x", 2)]).txn(3, OK, &[r("x", order)]).build();
    assert_types(&la(&reordered(&[2, 1]), STRICT), &["G0-realtime"]);
    assert!(la(&reordered(&[2, 1]), SER).valid);
    assert_types(&la(&reordered(&[1, 2]), STRICT), &[]);
}

/// A process does not see its own earlier append.
#[test]
fn process_anomalies_under_strong_session() {
    let h = |seen: &[i64]| {
        let t3 = [r("x", &[1])];
        B::new().start(3, &t3).txn(1, OK, &[a("x", 1)]).txn(1, OK, &[r("x", seen)]).finish(3, OK, &t3).build()
    };
    let bad = h(&[]);
    assert_types(&la(&bad, Consistency::StrongSessionSerializable), &["G-single-item-process"]);
    assert_types(&la(&bad, Consistency::StrongSessionSnapshotIsolation), &["G-single-item-process"]);
    assert_types(&la(&bad, STRICT), &["G-single-item-process"]);
    assert!(la(&bad, SER).valid);
    assert!(la(&bad, Consistency::SnapshotIsolation).valid);
    assert_types(&la(&h(&[1]), Consistency::StrongSessionSerializable), &[]);
}

#[test]
fn info_transactions_count_only_when_observed() {
    // T1's outcome is unknown, but T3 saw its appends: it is in the graph, and
    // with T2 it forms a write cycle.
    let h = |x_seen: &[i64], y_seen: &[i64]| {
        let (t1, t2) = ([a("x", 1), a("y", 2)], [a("x", 2), a("y", 1)]);
        B::new()
            .start(1, &t1)
            .start(2, &t2)
            .finish(1, INFO, &t1)
            .finish(2, OK, &t2)
            .txn(3, OK, &[r("x", x_seen), r("y", y_seen)])
            .build()
    };
    let rep = la(&h(&[1, 2], &[1, 2]), SER);
    assert_eq!(rep.txns.info, 1);
    assert_eq!(rep.txns.info_included, 1);
    assert_types(&rep, &["G0"]);
    // Never observed: not in the graph.
    let rep = la(&h(&[2], &[1]), STRICT);
    assert_eq!(rep.txns.info_included, 0);
    assert_types(&rep, &[]);
    // An invoke never completed is info too.
    let h = B::new().start(1, &[a("x", 1)]).txn(2, OK, &[r("x", &[1])]).build();
    let rep = la(&h, STRICT);
    assert_eq!((rep.txns.info, rep.txns.info_included), (1, 1));
    assert_types(&rep, &[]);
}

#[test]
fn rw_register_anomalies() {
    // G1a and G1b.
    let h = B::new().txn(1, FAIL, &[w("x", 1)]).txn(2, OK, &[rv("x", Some(1))]).build();
    assert_types(&rr(&h, SER), &["G1a"]);
    let h = B::new().txn(1, OK, &[w("x", 1), w("x", 2)]).txn(2, OK, &[rv("x", Some(1))]).build();
    assert_types(&rr(&h, SER), &["G1b"]);
    // internal: a read after the transaction's own write.
    let h = B::new().txn(1, OK, &[w("x", 1), rv("x", None)]).build();
    assert_types(&rr(&h, Consistency::ReadUncommitted), &["internal"]);
    // Write skew through nil reads: allowed by snapshot isolation.
    let t1 = [rv("x", None), rv("y", None), w("x", 1)];
    let t2 = [rv("x", None), rv("y", None), w("y", 1)];
    let h = B::new()
        .start(1, &t1)
        .start(2, &t2)
        .finish(1, OK, &t1)
        .finish(2, OK, &t2)
        .txn(3, OK, &[rv("x", Some(1)), rv("y", Some(1))])
        .build();
    assert_types(&rr(&h, SER), &["G2-item"]);
    assert!(rr(&h, Consistency::SnapshotIsolation).valid);
    // Lost update: both read x = 1 and overwrote it. Forbidden from snapshot
    // isolation up; a cycle of two rw edges besides.
    let t1 = [rv("x", Some(1)), w("x", 2)];
    let t2 = [rv("x", Some(1)), w("x", 3)];
    let h = B::new().txn(0, OK, &[w("x", 1)]).start(1, &t1).start(2, &t2).finish(1, OK, &t1).finish(2, OK, &t2).build();
    assert_types(&rr(&h, Consistency::SnapshotIsolation), &["lost-update"]);
    assert_types(&rr(&h, SER), &["G2-item", "lost-update"]);
    assert!(rr(&h, Consistency::ReadCommitted).valid);
    // G-single: the last transaction sees T1's write of x but not its write of y
    // (wr one way, rw through the nil read of y the other).
    let h = B::new()
        .txn(0, OK, &[w("x", 1)])
        .txn(1, OK, &[rv("x", Some(1)), w("x", 2), w("y", 1)])
        .txn(2, OK, &[rv("x", Some(2)), rv("y", None)])
        .build();
    assert_types(&rr(&h, Consistency::SnapshotIsolation), &["G-single-item"]);
    let serial = B::new()
        .txn(0, OK, &[w("x", 1)])
        .txn(1, OK, &[rv("x", Some(1)), w("x", 2), w("y", 1)])
        .txn(2, OK, &[rv("x", Some(2)), rv("y", Some(1))])
        .build();
    assert_types(&rr(&serial, STRICT), &[]);
}

#[test]
fn model_mismatch_and_duplicate_writes() {
    let h = B::new().txn(1, OK, &[w("x", 1)]).build();
    assert_types(&la(&h, Consistency::ReadUncommitted), &["model-mismatch"]);
    let h = B::new().txn(1, OK, &[a("x", 1)]).txn(2, OK, &[a("x", 1)]).txn(3, OK, &[r("x", &[1, 1])]).build();
    let rep = la(&h, Consistency::ReadUncommitted);
    assert!(rep.anomaly_types.contains(&"duplicate-writes".to_string()), "{rep}");
}

#[test]
fn report_serialises_with_evidence() {
    let rep = la(&write_skew(false), SER);
    let json = serde_json::to_value(&rep).unwrap();
    assert_eq!(json["valid"], false);
    assert_eq!(json["consistency"], "serializable");
    let cycle = &json["anomalies"]["G2-item"][0];
    assert_eq!(cycle["type"], "cycle");
    assert_eq!(cycle["edges"][0]["kind"], "rw");
    assert_eq!(cycle["txns"][0]["ops"][2], serde_json::json!(["append", "x", 1]));
    assert_eq!(json["counts"]["G2-item"], 1);
}
