//! Generated histories of 2,000 transactions: serializable ones check valid,
//! injected anomalies are found.

use txncheck::gen::{list_append_events, list_append_history, GenOptions, Inject};
use txncheck::{check, parse_json_lines, to_json_lines, Consistency, Model};

fn opts(inject: Option<Inject>) -> GenOptions {
    GenOptions { txns: 2000, inject, ..GenOptions::default() }
}

#[test]
fn serial_histories_are_strict_serializable() {
    for seed in 1..=3 {
        let h = list_append_history(seed, &opts(None));
        assert_eq!(h.txns.len(), 2000);
        let rep = check(&h, Model::ListAppend, Consistency::StrictSerializable);
        assert!(rep.valid, "seed {seed}:\n{rep}");
        assert!(rep.counts.is_empty(), "seed {seed}: {:?}", rep.counts);
        assert!(rep.txns.fail > 0 && rep.txns.info > 0 && rep.txns.info_included > 0, "{:?}", rep.txns);
        assert!(rep.edges["ww"] > 0 && rep.edges["wr"] > 0 && rep.edges["rw"] > 0 && rep.edges["realtime"] > 0);
    }
}

#[test]
fn generation_is_deterministic_and_round_trips_through_json() {
    let events = list_append_events(7, &opts(None));
    assert_eq!(events, list_append_events(7, &opts(None)));
    assert_ne!(events, list_append_events(8, &opts(None)));
    let parsed = parse_json_lines(&to_json_lines(&events)).unwrap();
    assert_eq!(parsed, list_append_history(7, &opts(None)));
}

#[test]
fn injected_write_skew_is_g2_item_only() {
    for seed in 1..=3 {
        let h = list_append_history(seed, &opts(Some(Inject::WriteSkew)));
        let ser = check(&h, Model::ListAppend, Consistency::Serializable);
        assert_eq!(ser.anomaly_types, ["G2-item"], "seed {seed}:\n{ser}");
        assert_eq!(ser.counts["G2-item"], 1);
        let si = check(&h, Model::ListAppend, Consistency::SnapshotIsolation);
        assert!(si.valid, "seed {seed}:\n{si}");
        assert!(!check(&h, Model::ListAppend, Consistency::StrictSerializable).valid);
    }
}

#[test]
fn injected_lost_update_is_g_single() {
    for seed in 1..=3 {
        let h = list_append_history(seed, &opts(Some(Inject::LostUpdate)));
        let si = check(&h, Model::ListAppend, Consistency::SnapshotIsolation);
        // The pair read one snapshot and appended to one key: Elle's lost-update, and a G-single.
        assert_eq!(si.anomaly_types, ["G-single-item", "lost-update"], "seed {seed}:\n{si}");
        assert!(check(&h, Model::ListAppend, Consistency::ReadCommitted).valid);
    }
}
