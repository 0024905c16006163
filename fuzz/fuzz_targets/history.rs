//! Histories as `simcluster check` reads them, and as the engine checks
//! what a node printed: JSON lines for the register model
//! (`History::from_json_lines`, then the linearizability search), and JSON
//! lines or Jepsen's EDN for the transactional models
//! (`txncheck::parse_history`, then txncheck for list-append and rw-register);
//! and set and queue histories (`set_full::check_text`,
//! `total_queue::check_text`), with their reports written out.
//! The search's step budget is `simcluster check --max-steps 20000`: a
//! history that exhausts it is "unknown", and the fuzzer stays fast.
#![no_main]

use checker::register_history::History;
use checker::linearizability::{check, CheckOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let text = String::from_utf8_lossy(input);
    if let Ok(h) = History::from_json_lines(&text) {
        let _ = check(&h, &CheckOptions { max_steps_per_key: 20_000 });
    }
    if let Ok(h) = txncheck::parse_history(&text) {
        for model in [txncheck::Model::ListAppend, txncheck::Model::RwRegister] {
            let _ = txncheck::check(&h, model, txncheck::Consistency::Serializable);
        }
    }
    for linearizable in [false, true] {
        if let Ok(r) = checker::set_full::check_text(&text, checker::set_full::SetOptions { linearizable }) {
            let _ = (r.to_string(), r.to_json());
        }
    }
    if let Ok(r) = checker::total_queue::check_text(&text) {
        let _ = (r.to_string(), r.to_json());
    }
});
