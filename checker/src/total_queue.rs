//! The queue checker, after Jepsen's `total-queue`: what goes in must come
//! out.
//!
//! A history of `enqueue x`, `dequeue -> x` and `drain -> [x ...]`
//! operations ([`crate::collection_history`]); an `ok` drain counts as one
//! dequeue per element it took. With *attempted* the elements of every
//! enqueue invoked, *acknowledged* those of the `ok` enqueues and
//! *dequeued* those of the `ok` dequeues and drains (all multisets: an
//! element enqueued twice counts twice):
//!
//! - **lost**: acknowledged more times than dequeued, an acknowledged
//!   enqueue that never came out;
//! - **unexpected**: dequeued but never attempted, from nowhere;
//! - **duplicated**: dequeued more times than attempted (and attempted at
//!   least once);
//! - **recovered**: dequeued, but its enqueue did not complete `ok` (it
//!   ended `info`, never completed, or, as Jepsen counts it, failed): an
//!   enqueue not acknowledged took effect.
//!
//! Lost and unexpected elements fail the history; duplicated and
//! recovered ones are reported and allowed, as Jepsen allows them (a queue
//! that delivers at least once may deliver twice). The property holds only
//! when the history drains the queue at its end: an element still queued
//! counts as lost. A drain that did not complete `ok` took an unknown set
//! of elements and makes the history unreadable (as in Jepsen).

use std::collections::BTreeMap;
use std::fmt;

use crate::collection_history::{self, CollectionHistoryError, CollectionOp, CollectionOperation, Kind, OutcomeCounts};
use crate::register_history::{Outcome, Value};

/// One element of a category: how many times, and the operations that
/// show it (the enqueues of a lost or recovered element, the dequeues or
/// drains of an unexpected or duplicated one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The element.
    pub element: Value,
    /// How many copies fall in the category.
    pub count: usize,
    /// Operations that show it, by id.
    pub ops: Vec<usize>,
}

/// The checker's verdict and evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueReport {
    /// The history's operations, by id.
    pub ops: Vec<CollectionOperation>,
    /// No lost and no unexpected element.
    pub valid: bool,
    /// Enqueues invoked.
    pub attempt_count: usize,
    /// Enqueues completed `ok`.
    pub acknowledged_count: usize,
    /// Elements dequeued (by `ok` dequeues and drains).
    pub dequeued_count: usize,
    /// Acknowledged, never dequeued.
    pub lost: Vec<Found>,
    /// Dequeued, never attempted.
    pub unexpected: Vec<Found>,
    /// Dequeued more often than attempted.
    pub duplicated: Vec<Found>,
    /// Dequeued, its enqueue not acknowledged.
    pub recovered: Vec<Found>,
    /// The last `ok` dequeue or drain, by start: where a lost element
    /// should have come out at the latest.
    pub last_dequeue: Option<usize>,
}

fn total(found: &[Found]) -> u64 {
    found.iter().map(|f| f.count as u64).sum()
}

impl QueueReport {
    /// Every kind with its count of elements (copies): `lost`,
    /// `unexpected`, `duplicated`, `recovered`.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("lost".to_string(), total(&self.lost)),
            ("unexpected".to_string(), total(&self.unexpected)),
            ("duplicated".to_string(), total(&self.duplicated)),
            ("recovered".to_string(), total(&self.recovered)),
        ])
    }

    /// The kinds that fail the history, those above 0: what a run's JSON
    /// line shows.
    pub fn failing_counts(&self) -> BTreeMap<String, u64> {
        self.counts().into_iter().filter(|(k, c)| *c > 0 && (k == "lost" || k == "unexpected")).collect()
    }

    /// The operations (ids into [`Self::ops`]) that show what fails the
    /// history: each lost element's acknowledged enqueues, each unexpected
    /// element's dequeues, and the last dequeue when anything was lost.
    /// For a report to keep in view.
    pub fn evidence(&self) -> std::collections::BTreeSet<usize> {
        let mut ids: std::collections::BTreeSet<usize> =
            self.lost.iter().chain(&self.unexpected).flat_map(|f| f.ops.iter().copied()).collect();
        if !self.lost.is_empty() {
            ids.extend(self.last_dequeue);
        }
        ids
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let list = |f: &[Found]| -> Vec<serde_json::Value> {
            f.iter().map(|x| serde_json::json!({"element": x.element, "count": x.count})).collect()
        };
        serde_json::json!({
            "valid": self.valid,
            "ops": OutcomeCounts::of(&self.ops),
            "attempt_count": self.attempt_count,
            "acknowledged_count": self.acknowledged_count,
            "dequeued_count": self.dequeued_count,
            "counts": self.counts(),
            "lost": list(&self.lost),
            "unexpected": list(&self.unexpected),
            "duplicated": list(&self.duplicated),
            "recovered": list(&self.recovered),
        })
    }

    /// The first line a run's trace and failure message carry.
    pub fn headline(&self) -> String {
        let c = self.counts();
        let seen = format!(
            "{} enqueues attempted, {} acknowledged, {} dequeued",
            self.attempt_count, self.acknowledged_count, self.dequeued_count
        );
        if self.valid {
            return format!(
                "history: {}: total-queue finds every acknowledged enqueue dequeued ({seen}; {} duplicated, {} \
                 recovered)",
                OutcomeCounts::of(&self.ops),
                c["duplicated"],
                c["recovered"]
            );
        }
        let mut found = Vec::new();
        for (k, f) in [("lost", &self.lost), ("unexpected", &self.unexpected)] {
            if !f.is_empty() {
                let which: Vec<String> = f.iter().take(8).map(|x| x.element.to_string()).collect();
                let more = if f.len() > 8 { " ..." } else { "" };
                found.push(format!("{} {k} ({}{more})", total(f), which.join(" ")));
            }
        }
        format!("history fails total-queue: {}; {seen}", found.join(", "))
    }
}

/// At most this many elements of each kind in the text report.
const SHOWN: usize = 20;

impl fmt::Display for QueueReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |id: usize| self.ops[id].to_string();
        writeln!(f, "{}", self.headline())?;
        let sections: [(&str, &[Found], &str); 4] = [
            ("lost", &self.lost, "acknowledged by"),
            ("unexpected", &self.unexpected, "never enqueued, dequeued by"),
            ("duplicated", &self.duplicated, "dequeued by"),
            ("recovered", &self.recovered, "enqueued (not acknowledged) by"),
        ];
        for (kind, found, how) in sections {
            for x in found.iter().take(SHOWN) {
                let times = if x.count > 1 { format!(" ({} copies)", x.count) } else { String::new() };
                writeln!(f, "{kind} {}{times}: {how}", x.element)?;
                for &id in x.ops.iter().take(4) {
                    writeln!(f, "  {}", op(id))?;
                }
                if x.ops.len() > 4 {
                    writeln!(f, "  ... {} more", x.ops.len() - 4)?;
                }
            }
            if found.len() > SHOWN {
                writeln!(f, "... {} more {kind}", found.len() - SHOWN)?;
            }
        }
        if !self.lost.is_empty() {
            match self.last_dequeue {
                Some(d) => writeln!(f, "the last dequeue: {}", op(d))?,
                None => writeln!(f, "no dequeue or drain completed ok")?,
            }
        }
        Ok(())
    }
}

/// Parses a queue history (JSON lines or Jepsen's EDN, see
/// [`crate::collection_history`]) and checks it.
pub fn check_text(text: &str) -> Result<QueueReport, CollectionHistoryError> {
    check(collection_history::parse_any(text, Kind::Queue)?)
}

/// Checks a queue history's operations (from [`collection_history::parse`]
/// with [`Kind::Queue`]); `Err` for a drain that did not complete `ok` or
/// `fail` (it took elements no one knows).
pub fn check(ops: Vec<CollectionOperation>) -> Result<QueueReport, CollectionHistoryError> {
    // element -> op ids
    let mut attempts: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    let mut acked: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    let mut dequeued: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    let mut last_dequeue: Option<usize> = None;
    for o in &ops {
        let mut took = |v: &Value| dequeued.entry(v.clone()).or_default().push(o.id);
        match (&o.op, o.outcome) {
            (CollectionOp::Enqueue(v), outcome) => {
                attempts.entry(v.clone()).or_default().push(o.id);
                if outcome == Outcome::Ok {
                    acked.entry(v.clone()).or_default().push(o.id);
                }
            }
            (CollectionOp::Dequeue(v), Outcome::Ok) => {
                if let Some(v) = v {
                    took(v);
                }
            }
            (CollectionOp::Drain(Some(vs)), Outcome::Ok) => vs.iter().for_each(took),
            (CollectionOp::Drain(_), Outcome::Info | Outcome::Pending) => {
                return Err(CollectionHistoryError {
                    line: o.line,
                    what: format!(
                        "drain did not complete (it ended {}): what it took is unknown, and the queue check needs \
                         every drain to complete ok or fail",
                        if o.outcome == Outcome::Info { "info" } else { "pending" }
                    ),
                });
            }
            _ => continue,
        }
        if matches!(o.op, CollectionOp::Dequeue(_) | CollectionOp::Drain(_))
            && o.outcome == Outcome::Ok
            && last_dequeue.is_none_or(|d| ops[d].call_key() < o.call_key())
        {
            last_dequeue = Some(o.id);
        }
    }
    let n = |m: &BTreeMap<Value, Vec<usize>>, v: &Value| m.get(v).map_or(0, Vec::len);
    let (mut lost, mut unexpected, mut duplicated, mut recovered) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (v, ids) in &acked {
        let missing = ids.len().saturating_sub(n(&dequeued, v));
        if missing > 0 {
            lost.push(Found { element: v.clone(), count: missing, ops: ids.clone() });
        }
    }
    for (v, ids) in &dequeued {
        let attempted = n(&attempts, v);
        if attempted == 0 {
            unexpected.push(Found { element: v.clone(), count: ids.len(), ops: ids.clone() });
            continue;
        }
        if ids.len() > attempted {
            duplicated.push(Found { element: v.clone(), count: ids.len() - attempted, ops: ids.clone() });
        }
        let ok = ids.len().min(attempted);
        let extra = ok.saturating_sub(n(&acked, v));
        if extra > 0 {
            let unacked = attempts[v].iter().copied().filter(|&i| ops[i].outcome != Outcome::Ok).collect();
            recovered.push(Found { element: v.clone(), count: extra, ops: unacked });
        }
    }
    Ok(QueueReport {
        valid: lost.is_empty() && unexpected.is_empty(),
        attempt_count: attempts.values().map(Vec::len).sum(),
        acknowledged_count: acked.values().map(Vec::len).sum(),
        dequeued_count: dequeued.values().map(Vec::len).sum(),
        lost,
        unexpected,
        duplicated,
        recovered,
        last_dequeue,
        ops,
    })
}

/// The queue history `node` printed, checked as the engine reports it
/// (`[check] model = "queue"`): the headline first, then the report.
pub fn engine_check(events: &[engine::trace::Event], node: engine::NodeId) -> engine::HistoryOutcome {
    let Some(text) = crate::printed_history::history_lines(events, node) else {
        return engine::HistoryOutcome {
            ok: false,
            note: "no history: the node printed no \"@history begin\" .. \"@history end\" block".into(),
            anomalies: Default::default(),
        };
    };
    match check_text(&text) {
        Err(e) => engine::HistoryOutcome {
            ok: false,
            note: format!("the history cannot be read: {e}"),
            anomalies: Default::default(),
        },
        Ok(r) if r.valid => engine::HistoryOutcome { ok: true, note: r.headline(), anomalies: Default::default() },
        Ok(r) => engine::HistoryOutcome {
            ok: false,
            note: r.to_string().trim_end().to_string(),
            anomalies: r.failing_counts(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(p: u64, kind: &str, t: u64, f: &str, v: &str) -> String {
        format!(r#"{{"process":{p},"type":"{kind}","time":{t},"f":"{f}","value":{v}}}"#)
    }

    fn enq(p: u64, t: u64, v: i64, outcome: &str) -> Vec<String> {
        let mut l = vec![ev(p, "invoke", t, "enqueue", &v.to_string())];
        if outcome != "pending" {
            l.push(ev(p, outcome, t + 1, "enqueue", &v.to_string()));
        }
        l
    }

    fn deq(p: u64, t: u64, v: &str) -> Vec<String> {
        vec![ev(p, "invoke", t, "dequeue", "null"), ev(p, "ok", t + 1, "dequeue", v)]
    }

    fn drain(p: u64, t: u64, v: &str) -> Vec<String> {
        vec![ev(p, "invoke", t, "drain", "null"), ev(p, "ok", t + 1, "drain", v)]
    }

    fn checked(parts: Vec<Vec<String>>) -> QueueReport {
        check_text(&parts.concat().join("\n")).unwrap()
    }

    #[test]
    fn everything_enqueued_comes_out_passes() {
        let r = checked(vec![
            enq(0, 10, 1, "ok"),
            enq(0, 20, 2, "ok"),
            enq(0, 30, 3, "fail"),
            deq(1, 40, "1"),
            deq(1, 50, "null"),
            drain(1, 60, "[2]"),
        ]);
        assert!(r.valid, "{r}");
        assert_eq!(r.counts().values().sum::<u64>(), 0);
        assert_eq!((r.attempt_count, r.acknowledged_count, r.dequeued_count), (3, 2, 2));
        assert_eq!(
            r.headline(),
            "history: 6 operations (5 ok, 0 info, 1 fail): total-queue finds every acknowledged enqueue dequeued (3 \
             enqueues attempted, 2 acknowledged, 2 dequeued; 0 duplicated, 0 recovered)"
        );
    }

    #[test]
    fn an_acknowledged_enqueue_never_dequeued_is_lost_with_its_enqueue() {
        let r = checked(vec![enq(0, 10, 1, "ok"), enq(0, 20, 2, "ok"), enq(0, 30, 2, "ok"), drain(1, 60, "[2]")]);
        assert!(!r.valid);
        assert_eq!(
            r.lost,
            vec![
                Found { element: 1.into(), count: 1, ops: vec![0] },
                Found { element: 2.into(), count: 1, ops: vec![1, 2] }
            ]
        );
        assert_eq!(r.failing_counts(), BTreeMap::from([("lost".to_string(), 2)]));
        let text = r.to_string();
        assert!(
            text.starts_with(
                "history fails total-queue: 2 lost (1 2); 3 enqueues attempted, 3 acknowledged, 1 dequeued\n\
                 lost 1: acknowledged by\n  #0 p0 enqueue 1 [10..11] ok (line 1)\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("the last dequeue: #3 p1 drain -> {2} [60..61] ok (line 7)\n"), "{text}");
        assert_eq!(r.to_json()["lost"], serde_json::json!([{"element": 1, "count": 1}, {"element": 2, "count": 1}]));
        assert_eq!(r.evidence().into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3], "the enqueues and the drain");
    }

    #[test]
    fn dequeues_from_nowhere_are_unexpected_and_twice_duplicated() {
        let r = checked(vec![enq(0, 10, 1, "ok"), deq(1, 20, "1"), deq(1, 30, "1"), deq(1, 40, "7")]);
        assert!(!r.valid, "unexpected fails");
        assert_eq!(r.unexpected, vec![Found { element: 7.into(), count: 1, ops: vec![3] }]);
        assert_eq!(r.duplicated, vec![Found { element: 1.into(), count: 1, ops: vec![1, 2] }]);
        assert_eq!(r.failing_counts(), BTreeMap::from([("unexpected".to_string(), 1)]));
        let text = r.to_string();
        assert!(text.contains("unexpected 7: never enqueued, dequeued by\n  #3 p1 dequeue -> 7"), "{text}");
        assert!(text.contains("duplicated 1: dequeued by\n  #1 p1 dequeue -> 1 [20..21] ok (line 3)\n  #2"), "{text}");

        let dup_only = checked(vec![enq(0, 10, 1, "ok"), deq(1, 20, "1"), deq(1, 30, "1")]);
        assert!(dup_only.valid, "duplicates are allowed, as Jepsen allows them: {dup_only}");
        assert_eq!(dup_only.counts()["duplicated"], 1);
    }

    #[test]
    fn an_unacknowledged_enqueue_that_comes_out_is_recovered() {
        let r = checked(vec![
            enq(0, 10, 1, "info"),
            enq(2, 15, 2, "pending"),
            enq(3, 16, 3, "info"),
            drain(1, 20, "[1,2]"),
        ]);
        assert!(r.valid, "{r}");
        assert_eq!(r.counts()["recovered"], 2);
        assert_eq!(r.recovered[0], Found { element: 1.into(), count: 1, ops: vec![0] });
        assert_eq!(r.to_string().lines().nth(1), Some("recovered 1: enqueued (not acknowledged) by"));
    }

    #[test]
    fn a_drain_that_did_not_complete_makes_the_history_unreadable() {
        let text =
            [enq(0, 10, 1, "ok"), vec![ev(1, "invoke", 20, "drain", "null"), ev(1, "info", 30, "drain", "null")]]
                .concat()
                .join("\n");
        let e = check_text(&text).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("drain did not complete (it ended info)"), "{e}");
    }

    #[test]
    fn the_engine_hook_reports_the_failing_kinds() {
        use engine::trace::{EventKind, Trace};
        let mut t = Trace::new();
        let lines = ["@history begin".to_string()]
            .into_iter()
            .chain([enq(0, 10, 1, "ok"), enq(0, 20, 2, "ok"), drain(1, 30, "[2, 9]")].concat())
            .chain(["@history end".to_string()]);
        for l in lines {
            t.push(simtime::VirtualTime::ZERO, engine::NodeId::new(1).unwrap(), EventKind::Console { text: l });
        }
        let out = engine_check(t.events(), engine::NodeId::new(1).unwrap());
        assert!(!out.ok);
        assert!(out.note.starts_with("history fails total-queue: 1 lost (1), 1 unexpected (9)"), "{}", out.note);
        assert_eq!(out.anomalies, BTreeMap::from([("lost".to_string(), 1), ("unexpected".to_string(), 1)]));
    }
}
