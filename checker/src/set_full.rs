//! The set checker, after Jepsen's `set-full`: every acknowledged add must
//! stay in the set.
//!
//! A history of `add x` and `read -> {set}` operations
//! ([`crate::collection_history`]). For each element added, from the reads
//! that completed `ok`:
//!
//! - its *known time*: when the add completed `ok`, or when the first read
//!   that saw it completed, whichever is earlier;
//! - its *last present* read (the one that began last among those that saw
//!   it) and its *last absent* read (the one that began last among those
//!   that missed it, counting only reads that completed after the add was
//!   invoked).
//!
//! An element is
//!
//! - **stable** when some read saw it and every read that began after the
//!   last one to miss it saw it; its *stable latency* is from its known
//!   time to just after the last read that missed it began (0 when no read
//!   that began after it was known missed it). A stable element with a
//!   stable latency above 0 is **stale**: a read that began after the add
//!   was known missed it, a later one saw it;
//! - **lost** when it was known, and the read that began last among those
//!   that missed it began after it was known and after every read that saw
//!   it: an acknowledged (or seen) element the set no longer holds. Its
//!   *lost latency* is from its known time to just after the last read
//!   that saw it began (0 when none did);
//! - **never read** otherwise: no read began after it was known, or it was
//!   never known (its add failed or ended `info` and no read saw it).
//!
//! As `set-full` does with `:linearizable? true`, [`SetOptions::linearizable`]
//! makes stale elements a failure; otherwise the history fails on lost
//! elements only. Two more failures Jepsen's plain `set` checker and
//! `set-full`'s duplicate count look for: **unexpected** elements (a read
//! holds an element no add ever tried to add) and **duplicated** elements
//! (one read holds an element more than once). A history with no lost,
//! unexpected or duplicated element and no stable one (nothing was ever
//! read, or every add failed) has no verdict ([`SetReport::valid`] is
//! `None`).
//!
//! Times are the history's own (nanoseconds in simcluster); latencies are
//! reported in milliseconds as Jepsen reports them, with the quantiles
//! 0, 0.5, 0.95, 0.99 and 1.

use std::collections::BTreeMap;
#[allow(clippy::disallowed_types)] // looked up only, never iterated: see `held`
use std::collections::HashMap;
use std::fmt;

use crate::collection_history::{self, CollectionHistoryError, CollectionOp, CollectionOperation, Kind, OutcomeCounts};
use crate::register_history::{Outcome, Value};

/// How strict the check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetOptions {
    /// Stale elements fail the history (`[check] consistency =
    /// "linearizable"`, `--consistency linearizable`).
    pub linearizable: bool,
}

/// What became of one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElementOutcome {
    /// Visible to every read after some point.
    Stable,
    /// Known, then missing from every read after some point.
    Lost,
    /// No read began after it was known, or it was never known.
    NeverRead,
}

/// One element's analysis. Operations are named by their id (their index
/// in [`SetReport::ops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementResult {
    /// The element.
    pub element: Value,
    /// Stable, lost or never read.
    pub outcome: ElementOutcome,
    /// The first add of the element (its invoke order).
    pub add: usize,
    /// The op that made it known (an `ok` add or the first read to see
    /// it) and the time it did; `None`: never known.
    pub known: Option<(usize, u64)>,
    /// The read that began last among those that saw it.
    pub last_present: Option<usize>,
    /// The read that began last among those that missed it.
    pub last_absent: Option<usize>,
    /// Lost: the first read to miss it after it was known and after the
    /// last read that saw it. Stale: the first read to see it after the
    /// last one that missed it.
    pub turn: Option<usize>,
    /// Lost: how many reads missed it from `turn` on.
    pub missed_by: usize,
    /// Stable: from its known time to when every read saw it (ns).
    pub stable_latency: Option<u64>,
    /// Lost: from its known time to when no read saw it any more (ns).
    pub lost_latency: Option<u64>,
}

impl ElementResult {
    /// A stable element that a read began after it was known missed.
    pub fn stale(&self) -> bool {
        self.stable_latency.is_some_and(|l| l > 0)
    }
}

/// Latency quantiles (Jepsen's points 0, 0.5, 0.95, 0.99, 1), in ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantiles(pub Vec<(&'static str, u64)>);

impl Quantiles {
    /// The quantiles of `values`; `None` when there are none.
    pub fn of(mut values: Vec<u64>) -> Option<Quantiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let n = values.len();
        let at = |p: f64| values[((n as f64 * p).floor() as usize).min(n - 1)];
        Some(Quantiles(vec![("0", at(0.0)), ("0.5", at(0.5)), ("0.95", at(0.95)), ("0.99", at(0.99)), ("1", at(1.0))]))
    }

    /// Quantile -> milliseconds, for a JSON line.
    pub fn to_json(&self) -> serde_json::Value {
        self.0.iter().map(|(p, ns)| (p.to_string(), serde_json::json!(*ns as f64 / 1e6))).collect()
    }
}

impl fmt::Display for Quantiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(p, ns)| format!("{p}: {}", ms(*ns))).collect();
        write!(f, "{}", parts.join(", "))
    }
}

/// Nanoseconds as milliseconds, for people.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The checker's verdict and evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetReport {
    /// The options it was checked with.
    pub options: SetOptions,
    /// The history's operations, by id.
    pub ops: Vec<CollectionOperation>,
    /// `Some(true)`: passes; `Some(false)`: fails; `None`: no verdict
    /// (no element is stable and nothing failed).
    pub valid: Option<bool>,
    /// Every element an add tried to add, in element order.
    pub elements: Vec<ElementResult>,
    /// Elements some read held that no add tried to add, each with the
    /// first read that held it.
    pub unexpected: Vec<(Value, usize)>,
    /// Elements one read held more than once: element, the most copies a
    /// read held, and the first read that held that many.
    pub duplicated: Vec<(Value, usize, usize)>,
}

impl SetReport {
    /// Elements whose outcome is `o`.
    pub fn with(&self, o: ElementOutcome) -> impl Iterator<Item = &ElementResult> {
        self.elements.iter().filter(move |e| e.outcome == o)
    }

    /// Stale elements.
    pub fn stale(&self) -> impl Iterator<Item = &ElementResult> {
        self.elements.iter().filter(|e| e.stale())
    }

    /// Stable latencies' quantiles.
    pub fn stable_latencies(&self) -> Option<Quantiles> {
        Quantiles::of(self.elements.iter().filter_map(|e| e.stable_latency).collect())
    }

    /// Lost latencies' quantiles.
    pub fn lost_latencies(&self) -> Option<Quantiles> {
        Quantiles::of(self.elements.iter().filter_map(|e| e.lost_latency).collect())
    }

    /// The failure kinds found and their counts, every kind named:
    /// `lost`, `stale`, `never-read`, `unexpected`, `duplicated`.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let n = |o| self.with(o).count() as u64;
        BTreeMap::from([
            ("lost".to_string(), n(ElementOutcome::Lost)),
            ("stale".to_string(), self.stale().count() as u64),
            ("never-read".to_string(), n(ElementOutcome::NeverRead)),
            ("unexpected".to_string(), self.unexpected.len() as u64),
            ("duplicated".to_string(), self.duplicated.len() as u64),
        ])
    }

    /// The counts of the kinds that fail the history (stale only when
    /// linearizable), those above 0: what a run's JSON line shows.
    pub fn failing_counts(&self) -> BTreeMap<String, u64> {
        let failing = |k: &str| k != "never-read" && (k != "stale" || self.options.linearizable);
        self.counts().into_iter().filter(|(k, c)| *c > 0 && failing(k)).collect()
    }

    /// The operations (ids into [`Self::ops`]) that show what fails the
    /// history: for each lost element its add, the op that made it known,
    /// the last read that saw it and the first that missed it; for each
    /// stale one (when stale fails) its add, the read that missed it and
    /// the first that saw it after; the first read holding an unexpected
    /// or duplicated element. For a report to keep in view.
    pub fn evidence(&self) -> std::collections::BTreeSet<usize> {
        let mut ids = std::collections::BTreeSet::new();
        for e in &self.elements {
            let stale_fails = self.options.linearizable && e.stale();
            if e.outcome == ElementOutcome::Lost || stale_fails {
                ids.insert(e.add);
                ids.extend(e.known.map(|(k, _)| k));
                ids.extend(e.turn);
                ids.extend(if stale_fails { e.last_absent } else { e.last_present });
            }
        }
        ids.extend(self.unexpected.iter().map(|(_, r)| *r));
        ids.extend(self.duplicated.iter().map(|(_, _, r)| *r));
        ids
    }

    /// The report as one JSON object: verdict, counts, the elements of
    /// each kind, latency quantiles in ms.
    pub fn to_json(&self) -> serde_json::Value {
        let els =
            |it: &mut dyn Iterator<Item = &ElementResult>| -> Vec<Value> { it.map(|e| e.element.clone()).collect() };
        serde_json::json!({
            "valid": self.valid,
            "linearizable": self.options.linearizable,
            "ops": OutcomeCounts::of(&self.ops),
            "attempt_count": self.elements.len(),
            "stable_count": self.with(ElementOutcome::Stable).count(),
            "counts": self.counts(),
            "lost": els(&mut self.with(ElementOutcome::Lost)),
            "stale": els(&mut self.stale()),
            "never_read": els(&mut self.with(ElementOutcome::NeverRead)),
            "unexpected": self.unexpected.iter().map(|(v, _)| v.clone()).collect::<Vec<_>>(),
            "duplicated": self
                .duplicated
                .iter()
                .map(|(v, n, _)| serde_json::json!({"element": v, "count": n}))
                .collect::<Vec<_>>(),
            "stable_latencies_ms": self.stable_latencies().map(|q| q.to_json()),
            "lost_latencies_ms": self.lost_latencies().map(|q| q.to_json()),
        })
    }

    /// The first line a run's trace and failure message carry.
    pub fn headline(&self) -> String {
        let c = self.counts();
        let stable = self.with(ElementOutcome::Stable).count();
        let added = self.elements.len();
        match self.valid {
            Some(true) => format!(
                "history: {}: set-full finds {added} elements added, {stable} stable ({} stale), {} never read, none \
                 lost",
                OutcomeCounts::of(&self.ops),
                c["stale"],
                c["never-read"]
            ),
            None => format!(
                "the set-full check could not decide: no element was both added and read ({}, {added} elements \
                 added, {} never read)",
                OutcomeCounts::of(&self.ops),
                c["never-read"]
            ),
            Some(false) => {
                let found: Vec<String> = self
                    .failing_counts()
                    .into_iter()
                    .map(|(k, n)| {
                        let which: Vec<String> = match k.as_str() {
                            "lost" => self.with(ElementOutcome::Lost).map(|e| e.element.to_string()).collect(),
                            "stale" => self.stale().map(|e| e.element.to_string()).collect(),
                            "unexpected" => self.unexpected.iter().map(|(v, _)| v.to_string()).collect(),
                            _ => self.duplicated.iter().map(|(v, _, _)| v.to_string()).collect(),
                        };
                        format!(
                            "{n} {k} ({}{})",
                            which.iter().take(8).cloned().collect::<Vec<_>>().join(" "),
                            if which.len() > 8 { " ..." } else { "" }
                        )
                    })
                    .collect();
                format!("history fails set-full: {} of {added} elements added ({stable} stable)", found.join(", "))
            }
        }
    }
}

/// At most this many elements of each kind in the text report.
const SHOWN: usize = 20;

impl fmt::Display for SetReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |id: usize| self.ops[id].to_string();
        // How the element became known: its acknowledged add, or (the add
        // not acknowledged yet) the first read that saw it.
        let known = |f: &mut fmt::Formatter<'_>, e: &ElementResult| -> fmt::Result {
            match e.known {
                Some((k, _)) if k == e.add => writeln!(f, "  acknowledged by {}", op(k)),
                Some((k, _)) => writeln!(f, "  added by {}\n  first seen by {}", op(e.add), op(k)),
                None => writeln!(f, "  added by {}", op(e.add)),
            }
        };
        writeln!(f, "{}", self.headline())?;
        let lost: Vec<_> = self.with(ElementOutcome::Lost).collect();
        for e in lost.iter().take(SHOWN) {
            writeln!(f, "lost {}:", e.element)?;
            known(f, e)?;
            match e.last_present {
                Some(p) => writeln!(f, "  last seen by {}", op(p))?,
                None => writeln!(f, "  never seen by a read")?,
            }
            if let Some(m) = e.turn {
                let more =
                    if e.missed_by > 1 { format!(" and {} later reads", e.missed_by - 1) } else { String::new() };
                writeln!(f, "  missed by {}{more}", op(m))?;
            }
        }
        if lost.len() > SHOWN {
            writeln!(f, "... {} more lost", lost.len() - SHOWN)?;
        }
        let stale: Vec<_> = self.stale().collect();
        for e in stale.iter().take(SHOWN) {
            let l = e.stable_latency.unwrap_or(0);
            writeln!(f, "stale {} (visible {} after it was known):", e.element, ms(l))?;
            known(f, e)?;
            if let Some(a) = e.last_absent {
                writeln!(f, "  missed by {}", op(a))?;
            }
            if let Some(p) = e.turn {
                writeln!(f, "  seen from {}", op(p))?;
            }
        }
        if stale.len() > SHOWN {
            writeln!(f, "... {} more stale", stale.len() - SHOWN)?;
        }
        for (v, r) in self.unexpected.iter().take(SHOWN) {
            writeln!(f, "unexpected {v}: no add tried to add it, read by {}", op(*r))?;
        }
        for (v, n, r) in self.duplicated.iter().take(SHOWN) {
            writeln!(f, "duplicated {v}: {n} copies in {}", op(*r))?;
        }
        let never: Vec<_> = self.with(ElementOutcome::NeverRead).collect();
        for e in never.iter().take(SHOWN) {
            let why = match e.known {
                Some(_) => "no read began after it was known",
                None => "never known: its add did not complete ok and no read saw it",
            };
            writeln!(f, "never read {} ({why}): added by {}", e.element, op(e.add))?;
        }
        if never.len() > SHOWN {
            writeln!(f, "... {} more never read", never.len() - SHOWN)?;
        }
        if let Some(q) = self.stable_latencies() {
            writeln!(f, "stable latencies: {q}")?;
        }
        if let Some(q) = self.lost_latencies() {
            writeln!(f, "lost latencies: {q}")?;
        }
        Ok(())
    }
}

/// Parses a set history (JSON lines or Jepsen's EDN, see
/// [`crate::collection_history`]) and checks it.
pub fn check_text(text: &str, options: SetOptions) -> Result<SetReport, CollectionHistoryError> {
    Ok(check(collection_history::parse_any(text, Kind::Set)?, options))
}

/// A read's elements, each with how many times the read holds it: looked
/// up once per element added and read, never iterated (a history of 10,000
/// elements and 1,000 reads makes ten million look-ups).
#[allow(clippy::disallowed_types)]
fn held(values: &[Value]) -> HashMap<&Value, usize> {
    let mut held: HashMap<&Value, usize> = HashMap::with_capacity(values.len());
    for v in values {
        *held.entry(v).or_default() += 1;
    }
    held
}

/// Per element, while reading the history.
struct Track {
    add: usize,
    add_call: u64,
    /// (time, op) of the earliest completion that made it known.
    known: Option<(u64, usize)>,
    last_present: Option<usize>,
    last_absent: Option<usize>,
}

/// Checks a set history's operations (from [`collection_history::parse`]
/// with [`Kind::Set`]).
pub fn check(ops: Vec<CollectionOperation>, options: SetOptions) -> SetReport {
    let later = |a: Option<usize>, b: usize| match a {
        Some(a) if ops[a].call_key() >= ops[b].call_key() => Some(a),
        _ => Some(b),
    };
    let mut tracks: BTreeMap<Value, Track> = BTreeMap::new();
    for o in &ops {
        if let CollectionOp::Add(v) = &o.op {
            let t = tracks.entry(v.clone()).or_insert(Track {
                add: o.id,
                add_call: o.call,
                known: None,
                last_present: None,
                last_absent: None,
            });
            if let (Outcome::Ok, Some(r)) = (o.outcome, o.ret) {
                if t.known.is_none_or(|(k, _)| r < k) {
                    t.known = Some((r, o.id));
                }
            }
        }
    }
    let reads: Vec<(&CollectionOperation, &Vec<Value>)> = ops
        .iter()
        .filter_map(|o| match (&o.op, o.outcome) {
            (CollectionOp::Read(Some(v)), Outcome::Ok) => Some((o, v)),
            _ => None,
        })
        .collect();
    let mut unexpected: BTreeMap<Value, usize> = BTreeMap::new();
    let mut duplicated: BTreeMap<Value, (usize, usize)> = BTreeMap::new();
    for (r, values) in &reads {
        let held = held(values);
        // In the read's own order: the map is only looked up.
        for v in values.iter() {
            let n = held[v];
            if n > 1 && duplicated.get(v).is_none_or(|(m, _)| n > *m) {
                duplicated.insert(v.clone(), (n, r.id));
            }
            if !tracks.contains_key(v) {
                unexpected.entry(v.clone()).or_insert(r.id);
            }
        }
        let ret = r.ret.expect("an ok read completed");
        for t in tracks.values_mut() {
            let element = &ops[t.add].op;
            let CollectionOp::Add(v) = element else { unreachable!("tracks start at adds") };
            if held.contains_key(v) {
                t.last_present = later(t.last_present, r.id);
                if t.known.is_none_or(|(k, _)| ret < k) {
                    t.known = Some((ret, r.id));
                }
            } else if ret >= t.add_call {
                // A read that completed before the add was invoked could
                // not have seen it, and says nothing.
                t.last_absent = later(t.last_absent, r.id);
            }
        }
    }
    let mut elements: Vec<ElementResult> = tracks
        .into_iter()
        .map(|(element, t)| {
            let call = |id: Option<usize>| id.map(|i| ops[i].call_key());
            let (present, absent) = (call(t.last_present), call(t.last_absent));
            let stable = present.is_some() && absent.is_none_or(|a| Some(a) < present);
            let lost = !stable
                && matches!((t.known, absent), (Some((k, _)), Some(a)) if k < a.0 && present.is_none_or(|p| p < a));
            let known_time = t.known.map_or(0, |(k, _)| k);
            let outcome = if stable {
                ElementOutcome::Stable
            } else if lost {
                ElementOutcome::Lost
            } else {
                ElementOutcome::NeverRead
            };
            let stable_latency = stable.then(|| absent.map_or(0, |a| a.0.saturating_add(1)).saturating_sub(known_time));
            let lost_latency = lost.then(|| present.map_or(0, |p| p.0.saturating_add(1)).saturating_sub(known_time));
            ElementResult {
                element,
                outcome,
                add: t.add,
                known: t.known.map(|(time, id)| (id, time)),
                last_present: t.last_present,
                last_absent: t.last_absent,
                turn: None,
                missed_by: 0,
                stable_latency,
                lost_latency,
            }
        })
        .collect();
    // The read where each lost or stale element turned: for a lost one,
    // the first read to miss it after it was known and after the last read
    // that saw it (and how many did from there); for a stale one, the first
    // to see it after the last read that missed it. A second pass over the
    // reads, so that no read's set outlives its turn.
    let mut turning: Vec<(&mut ElementResult, (u64, usize))> = elements
        .iter_mut()
        .filter_map(|e| {
            let call = |id: Option<usize>| id.map(|i| ops[i].call_key());
            let from = match e.outcome {
                // Strictly after the known time: any line at that time is not after it.
                ElementOutcome::Lost => {
                    let known = (e.known.map_or(0, |(_, t)| t), usize::MAX);
                    call(e.last_present).map_or(known, |p| p.max(known))
                }
                _ if e.stale() => call(e.last_absent)?,
                _ => return None,
            };
            Some((e, from))
        })
        .collect();
    if !turning.is_empty() {
        for (r, values) in &reads {
            let held = held(values);
            for (e, from) in turning.iter_mut() {
                if r.call_key() <= *from {
                    continue;
                }
                let seen = held.contains_key(&e.element);
                if e.outcome == ElementOutcome::Lost && !seen {
                    e.missed_by += 1;
                } else if !(e.outcome == ElementOutcome::Stable && seen) {
                    continue;
                }
                if e.turn.is_none_or(|t| r.call_key() < ops[t].call_key()) {
                    e.turn = Some(r.id);
                }
            }
        }
    }
    let mut report = SetReport {
        options,
        ops,
        valid: None,
        elements,
        unexpected: unexpected.into_iter().collect(),
        duplicated: duplicated.into_iter().map(|(v, (n, r))| (v, n, r)).collect(),
    };
    report.valid = if !report.failing_counts().is_empty() {
        Some(false)
    } else if report.with(ElementOutcome::Stable).next().is_none() {
        None
    } else {
        Some(true)
    };
    report
}

/// The set history `node` printed, checked as the engine reports it
/// (`[check] model = "set"`): the headline first, then the report.
pub fn engine_check(
    events: &[engine::trace::Event],
    node: engine::NodeId,
    options: SetOptions,
) -> engine::HistoryOutcome {
    let Some(text) = crate::printed_history::history_lines(events, node) else {
        return engine::HistoryOutcome {
            ok: false,
            note: "no history: the node printed no \"@history begin\" .. \"@history end\" block".into(),
            anomalies: Default::default(),
        };
    };
    match check_text(&text, options) {
        Err(e) => engine::HistoryOutcome {
            ok: false,
            note: format!("the history cannot be read: {e}"),
            anomalies: Default::default(),
        },
        Ok(r) if r.valid == Some(true) => {
            engine::HistoryOutcome { ok: true, note: r.headline(), anomalies: Default::default() }
        }
        Ok(r) => engine::HistoryOutcome {
            ok: false,
            note: r.to_string().trim_end().to_string(),
            anomalies: r.failing_counts(),
        },
    }
}

#[cfg(test)]
mod tests;
