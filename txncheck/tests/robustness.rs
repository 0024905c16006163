//! Corrupted histories: the check never panics, finds something, and gives the
//! same report every time.

use txncheck::gen::{list_append_history, GenOptions};
use txncheck::{check, Consistency, History, Model, Mop, Outcome, ReadValue};

/// SplitMix64, as in the generator.
struct Rng(simrng::mix::SplitMix64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }
}

/// One random corruption of one committed read, or of one outcome.
fn corrupt(h: &mut History, rng: &mut Rng) {
    let t = rng.below(h.txns.len());
    let txn = &mut h.txns[t];
    if rng.below(4) == 0 {
        txn.outcome = [Outcome::Ok, Outcome::Fail, Outcome::Info][rng.below(3)];
        return;
    }
    let m = rng.below(txn.mops.len());
    let Mop::Read { value: Some(ReadValue::List(list)), .. } = &mut txn.mops[m] else { return };
    match rng.below(5) {
        0 if list.len() > 1 => {
            let (i, j) = (rng.below(list.len()), rng.below(list.len()));
            list.swap(i, j);
        }
        1 if !list.is_empty() => {
            list.remove(rng.below(list.len()));
        }
        2 if !list.is_empty() => list.push(list[rng.below(list.len())]),
        3 => list.push(rng.below(1000) as i64),
        _ => list.truncate(rng.below(list.len() + 1)),
    }
}

#[test]
fn corrupted_histories_never_panic_and_check_deterministically() {
    let base = list_append_history(11, &GenOptions { txns: 400, ..GenOptions::default() });
    assert!(check(&base, Model::ListAppend, Consistency::StrictSerializable).valid);
    let mut rng = Rng(simrng::mix::SplitMix64(5));
    let mut invalid = 0;
    for round in 0..60 {
        let mut h = base.clone();
        for _ in 0..1 + round % 8 {
            corrupt(&mut h, &mut rng);
        }
        for model in [Model::ListAppend, Model::RwRegister] {
            let rep = check(&h, model, Consistency::StrictSerializable);
            assert_eq!(rep, check(&h, model, Consistency::StrictSerializable));
            assert!(!rep.to_string().is_empty());
            serde_json::to_string(&rep).unwrap();
            if model == Model::ListAppend && !rep.valid {
                invalid += 1;
            }
        }
    }
    // Most corruptions are detectable (a truncated read is only stale, an
    // outcome change may go unseen).
    assert!(invalid >= 30, "only {invalid} of 60 corrupted histories were invalid");
}
