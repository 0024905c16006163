//! A tiny builder of histories for the tests: `h.txn(p, ok, [a("x", 1), r("y", &[1])])`
//! invokes and completes a transaction; `start` and `finish` split the two to
//! make transactions overlap. Times advance by one per event.

#![allow(dead_code)]

use txncheck::{Event, EventKind, History, Key, Mop, ReadValue};

pub fn a(k: &str, v: i64) -> Mop {
    Mop::Append { key: Key::from(k), value: v }
}
pub fn w(k: &str, v: i64) -> Mop {
    Mop::Write { key: Key::from(k), value: v }
}
/// A list read.
pub fn r(k: &str, l: &[i64]) -> Mop {
    Mop::Read { key: Key::from(k), value: Some(ReadValue::List(l.to_vec())) }
}
/// A register read (`None`: nil).
pub fn rv(k: &str, v: Option<i64>) -> Mop {
    Mop::Read { key: Key::from(k), value: v.map(ReadValue::Int) }
}

pub const OK: EventKind = EventKind::Ok;
pub const FAIL: EventKind = EventKind::Fail;
pub const INFO: EventKind = EventKind::Info;

#[derive(Default)]
pub struct B {
    events: Vec<Event>,
}

impl B {
    pub fn new() -> B {
        B::default()
    }
    fn push(&mut self, process: i64, kind: EventKind, mops: Vec<Mop>) -> &mut B {
        let index = self.events.len();
        let time = 10 * (index as u64 + 1);
        self.events.push(Event { line: index + 1, index, process, kind, time, mops: Some(mops) });
        self
    }
    /// Invoke only; the reads go out as nil.
    pub fn start(&mut self, process: i64, mops: &[Mop]) -> &mut B {
        let blank = mops
            .iter()
            .map(|m| match m {
                Mop::Read { key, .. } => Mop::Read { key: key.clone(), value: None },
                other => other.clone(),
            })
            .collect();
        self.push(process, EventKind::Invoke, blank)
    }
    pub fn finish(&mut self, process: i64, kind: EventKind, mops: &[Mop]) -> &mut B {
        self.push(process, kind, mops.to_vec())
    }
    /// Invoke and complete, back to back.
    pub fn txn(&mut self, process: i64, kind: EventKind, mops: &[Mop]) -> &mut B {
        self.start(process, mops).finish(process, kind, mops)
    }
    pub fn events(&self) -> Vec<Event> {
        self.events.clone()
    }
    pub fn build(&self) -> History {
        History::from_events(self.events.clone()).expect("test history pairs")
    }
}
