//! Tests of the trace: folding, hashing, encoding.

use super::*;
use crate::console::LineSplitter;

/// The time `ns` after the boot.
fn at(ns: u64) -> VirtualTime {
    VirtualTime::from_ns(ns)
}

#[test]
fn same_events_same_hash_and_order_matters() {
    let mut a = Trace::new();
    let mut b = Trace::new();
    for t in [&mut a, &mut b] {
        t.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::Boot);
        t.push(at(5), crate::NodeId::new(2).unwrap(), EventKind::Console { text: "hi".into() });
    }
    assert_eq!(a.hash(), b.hash());
    let mut c = Trace::new();
    c.push(at(5), crate::NodeId::new(2).unwrap(), EventKind::Console { text: "hi".into() });
    c.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::Boot);
    assert_ne!(a.hash(), c.hash());
    let mut d = a.clone();
    d.push(at(6), crate::NodeId::new(1).unwrap(), EventKind::run());
    assert_ne!(a.hash(), d.hash());
}

#[test]
fn time_is_part_of_the_hash() {
    let mut a = Trace::new();
    a.push(at(1), crate::NodeId::new(1).unwrap(), EventKind::run());
    let mut b = Trace::new();
    b.push(at(2), crate::NodeId::new(1).unwrap(), EventKind::run());
    assert_ne!(a.hash(), b.hash());
}

#[test]
fn jsonl_round_trip_keeps_hash() {
    let mut a = Trace::new();
    a.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::Boot);
    a.push_engine(at(7), EventKind::Partition { description: "{n1} | {n2,n3}".into() });
    a.push(at(9), crate::NodeId::new(1).unwrap(), EventKind::Exit { status: Some(0), signal: None, panic: false });
    let b = Trace::from_jsonl(&a.to_jsonl()).unwrap();
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.events(), b.events());
}

#[test]
fn typed_fields_encode_as_the_strings_traces_always_had() {
    let mut t = Trace::new();
    for (k, cause) in [DropCause::Partition, DropCause::Loss, DropCause::NodeDown].into_iter().enumerate() {
        t.push(
            at(1),
            crate::NodeId::new(1).unwrap(),
            EventKind::Drop { id: k as u64, to: crate::NodeId::new(2).unwrap(), cause },
        );
    }
    for (k, op) in [DiskOp::Read, DiskOp::Write, DiskOp::Flush].into_iter().enumerate() {
        t.push(at(2), crate::NodeId::new(1).unwrap(), EventKind::Disk { id: k as u64, op, sector: 8, sectors: 1 });
    }
    for fault in
        [DiskFaultKind::CorruptRead, DiskFaultKind::LostFlush, DiskFaultKind::WriteError, DiskFaultKind::Misdirect]
    {
        t.push(at(3), crate::NodeId::new(1).unwrap(), EventKind::DiskFault { id: 0, fault, detail: "d".into() });
    }
    let want = concat!(
        r#"{"time":1,"node":1,"event":"drop","id":0,"to":2,"cause":"partition"}"#,
        "\n",
        r#"{"time":1,"node":1,"event":"drop","id":1,"to":2,"cause":"loss"}"#,
        "\n",
        r#"{"time":1,"node":1,"event":"drop","id":2,"to":2,"cause":"node down"}"#,
        "\n",
        r#"{"time":2,"node":1,"event":"disk","id":0,"op":"read","sector":8,"sectors":1}"#,
        "\n",
        r#"{"time":2,"node":1,"event":"disk","id":1,"op":"write","sector":8,"sectors":1}"#,
        "\n",
        r#"{"time":2,"node":1,"event":"disk","id":2,"op":"flush","sector":8,"sectors":1}"#,
        "\n",
        r#"{"time":3,"node":1,"event":"disk_fault","id":0,"fault":"corrupt_read","detail":"d"}"#,
        "\n",
        r#"{"time":3,"node":1,"event":"disk_fault","id":0,"fault":"lost_flush","detail":"d"}"#,
        "\n",
        r#"{"time":3,"node":1,"event":"disk_fault","id":0,"fault":"write_error","detail":"d"}"#,
        "\n",
        r#"{"time":3,"node":1,"event":"disk_fault","id":0,"fault":"misdirect","detail":"d"}"#,
        "\n",
    );
    assert_eq!(t.to_jsonl(), want);
    let back = Trace::from_jsonl(want).unwrap();
    assert_eq!((back.events(), back.hash()), (t.events(), t.hash()));
    // Display is the same string.
    assert_eq!(DropCause::NodeDown.to_string(), "node down");
    assert_eq!(DiskFaultKind::Misdirect.to_string(), "misdirect");
}

/// `n` grants of `node`, `step` ns apart from `t0`.
fn grants(t: &mut Trace, node: u16, t0: u64, step: u64, n: u64) {
    for k in 0..n {
        t.push(at(t0 + k * step), crate::NodeId::new(node).unwrap(), EventKind::run());
    }
}

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[test]
fn quiet_grants_fold_into_one_event_with_their_count() {
    let mut t = Trace::new();
    t.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::Boot);
    grants(&mut t, 1, 10, 5, 1_000_000);
    assert_eq!(t.len(), 2, "a million quiet grants are one event");
    let last = 10 + 999_999 * 5;
    assert_eq!(
        t.events()[1],
        Event {
            time: at(10),
            node: Actor::Node(crate::NodeId::new(1).unwrap()),
            kind: EventKind::Run { grants: 1_000_000, until: Some(at(last)) }
        }
    );
    assert_eq!(t.events()[1].end_time().as_ns(), last);
    assert_eq!(t.visible(), 1);
    assert_eq!(
        t.to_jsonl().lines().nth(1),
        Some(format!(r#"{{"time":10,"node":1,"event":"run","grants":1000000,"until":{last}}}"#).as_str())
    );
}

#[test]
fn a_visible_event_splits_the_fold() {
    let mut t = Trace::new();
    grants(&mut t, 1, 0, 1, 3);
    t.push(at(2), crate::NodeId::new(1).unwrap(), EventKind::Console { text: "x".into() });
    grants(&mut t, 1, 3, 1, 4);
    let kinds: Vec<_> = t.events().iter().map(|e| (e.time.as_ns(), e.kind.clone())).collect();
    assert_eq!(
        kinds,
        vec![
            (0, EventKind::Run { grants: 3, until: Some(at(2)) }),
            (2, EventKind::Console { text: "x".into() }),
            (3, EventKind::Run { grants: 4, until: Some(at(6)) }),
        ]
    );
    assert_eq!(t.visible(), 1);
    // Another node's visible event splits it too.
    let mut u = Trace::new();
    grants(&mut u, 1, 0, 1, 2);
    u.push(
        at(1),
        crate::NodeId::new(2).unwrap(),
        EventKind::Send { id: 1, to: crate::NodeId::new(1).unwrap(), len: 60, summary: "s".into() },
    );
    grants(&mut u, 1, 2, 1, 2);
    assert_eq!(u.events().iter().map(|e| e.kind.grants()).collect::<Vec<_>>(), vec![2, 0, 2]);
}

#[test]
fn interleaved_quiet_nodes_fold_per_node_in_first_grant_order() {
    let mut t = Trace::new();
    for k in 0..1000u64 {
        t.push(at(k), crate::NodeId::new(2).unwrap(), EventKind::run());
        t.push(at(k), crate::NodeId::new(1).unwrap(), EventKind::run());
        if k % 2 == 0 {
            t.push(at(k), crate::NodeId::new(3).unwrap(), EventKind::run());
        }
    }
    let got: Vec<_> = t.events().iter().map(|e| (e.node.number(), e.time.as_ns(), e.kind.clone())).collect();
    assert_eq!(
        got,
        vec![
            (2, 0, EventKind::Run { grants: 1000, until: Some(at(999)) }),
            (1, 0, EventKind::Run { grants: 1000, until: Some(at(999)) }),
            (3, 0, EventKind::Run { grants: 500, until: Some(at(998)) }),
        ]
    );
}

#[test]
fn a_single_grant_encodes_as_it_always_did() {
    let mut t = Trace::new();
    t.push(at(6), crate::NodeId::new(1).unwrap(), EventKind::run());
    t.push(at(7), crate::NodeId::new(1).unwrap(), EventKind::Hung);
    assert_eq!(t.to_jsonl(), "{\"time\":6,\"node\":1,\"event\":\"run\"}\n{\"time\":7,\"node\":1,\"event\":\"hung\"}\n");
    // And an old recording's run parses as one grant.
    let old: Event = serde_json::from_str(r#"{"time":6,"node":1,"event":"run"}"#).unwrap();
    assert_eq!(old.kind, EventKind::run());
}

#[test]
fn folded_hash_is_deterministic_and_counts_are_part_of_it() {
    let build = |n: u64| {
        let mut t = Trace::new();
        t.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::Boot);
        grants(&mut t, 1, 1, 1, n);
        t.push(at(n + 1), crate::NodeId::new(1).unwrap(), EventKind::Console { text: "done".into() });
        t
    };
    assert_eq!(build(500).hash(), build(500).hash());
    assert_eq!(build(500).to_jsonl(), build(500).to_jsonl());
    assert_ne!(build(500).hash(), build(501).hash(), "one more grant is another trace");
    // The last grant's time alone differs: `until` differs.
    let mut a = Trace::new();
    a.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::run());
    a.push(at(5), crate::NodeId::new(1).unwrap(), EventKind::run());
    let mut b = Trace::new();
    b.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::run());
    b.push(at(6), crate::NodeId::new(1).unwrap(), EventKind::run());
    assert_ne!(a.hash(), b.hash());
}

#[test]
fn the_hash_is_that_of_the_jsonl_open_stretch_or_not() {
    let mut t = Trace::new();
    t.push(at(0), crate::NodeId::new(1).unwrap(), EventKind::Boot);
    grants(&mut t, 1, 1, 2, 10);
    grants(&mut t, 2, 1, 2, 10);
    assert_eq!(t.hash(), sha(&t.to_jsonl()), "open stretch");
    let before = t.hash();
    grants(&mut t, 2, 30, 1, 1);
    assert_ne!(t.hash(), before, "a grant into the open stretch changes the hash");
    t.push(at(40), crate::NodeId::new(2).unwrap(), EventKind::Ready);
    assert_eq!(t.hash(), sha(&t.to_jsonl()), "sealed stretch");
    let back = Trace::from_jsonl(&t.to_jsonl()).unwrap();
    assert_eq!((back.hash(), back.events()), (t.hash(), t.events()));
    assert_eq!(back.visible(), t.visible());
}

#[test]
fn line_splitter_holds_partial_lines() {
    let mut s = LineSplitter::default();
    assert!(s.feed(b"hel").is_empty());
    assert_eq!(s.feed(b"lo\r\nwor"), vec!["hello".to_string()]);
    assert_eq!(s.feed(b"ld\n\n"), vec!["world".to_string(), String::new()]);
    assert_eq!(s.finish(), None);
    s.feed(b"tail");
    assert_eq!(s.finish().as_deref(), Some("tail"));
}

#[test]
fn wake_ups_counted_in_one_push_hash_as_one_push_each() {
    // Lookahead: a grant at 10, then three wake-ups the node took by
    // itself (11, 12, 13) pushed as one counted run, then its output.
    let mut each = Trace::new();
    each.push(at(0), crate::NodeId::new(2).unwrap(), EventKind::Boot);
    for t in 10..14 {
        each.push(at(t), crate::NodeId::new(1).unwrap(), EventKind::run());
    }
    each.push(at(13), crate::NodeId::new(1).unwrap(), EventKind::Console { text: "x".into() });
    let mut counted = Trace::new();
    counted.push(at(0), crate::NodeId::new(2).unwrap(), EventKind::Boot);
    counted.push(at(10), crate::NodeId::new(1).unwrap(), EventKind::run());
    counted.push(at(13), crate::NodeId::new(1).unwrap(), EventKind::Run { grants: 3, until: Some(at(13)) });
    counted.push(at(13), crate::NodeId::new(1).unwrap(), EventKind::Console { text: "x".into() });
    assert_eq!(counted.to_jsonl(), each.to_jsonl());
    assert_eq!(counted.hash(), each.hash());
}

#[test]
fn actors_and_peers_encode_as_the_numbers_traces_always_had() {
    let n = |k| crate::NodeId::new(k).unwrap();
    let mut t = Trace::new();
    t.push_engine(at(1), EventKind::Partition { description: "{n2} | {n3}".into() });
    t.push(at(2), n(2), EventKind::Send { id: 7, to: n(3), len: 60, summary: "s".into() });
    t.push(at(3), n(3), EventKind::Deliver { id: 7, from: n(2), len: 60, summary: "s".into() });
    let want = concat!(
        r#"{"time":1,"node":0,"event":"partition","description":"{n2} | {n3}"}"#,
        "\n",
        r#"{"time":2,"node":2,"event":"send","id":7,"to":3,"len":60,"summary":"s"}"#,
        "\n",
        r#"{"time":3,"node":3,"event":"deliver","id":7,"from":2,"len":60,"summary":"s"}"#,
        "\n",
    );
    assert_eq!(t.to_jsonl(), want);
    assert_eq!(t.hash(), hex::encode(Sha256::digest(want.as_bytes())), "the hash is of exactly these bytes");
    let back = Trace::from_jsonl(want).unwrap();
    assert_eq!(back.events()[0].node, Actor::Engine);
    assert_eq!(back.events()[1].node_id(), Some(n(2)));
    // A number no node has is refused, as is a peer that is the engine.
    for bad in [
        r#"{"time":1,"node":255,"event":"boot"}"#,
        r#"{"time":1,"node":1,"event":"drop","id":1,"to":0,"cause":"loss"}"#,
    ] {
        assert!(Trace::from_jsonl(bad).is_err(), "{bad}");
    }
}
