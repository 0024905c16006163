//! Executions side by side (`--jobs N`), observed in an order that does
//! not depend on N or on timing.
//!
//! A run's work is a sequence of units: an execution (with its crash-state
//! siblings), or for dfs a round (see `HybridDfs::one_round`). A unit's
//! outcome depends only on the run's options and its number, never on the
//! units before it, so workers may run units in any order. The dispatcher
//! hands out the shard's units in increasing order; the observer (the
//! calling thread) takes their outcomes strictly in that order, holding
//! early arrivals back, so everything it does (counting, failure files,
//! the progress bar's figures, deciding to stop) is what a one-job run
//! would do. A worker never runs more than `lookahead` units ahead of the
//! observer, which bounds what is held back.
//!
//! When the observer stops (a failure with --until-failure, an exhausted
//! strategy, the execution limit of a dfs run, an error), the units still
//! running are cancelled: the engine checks `ExecutionSpec::cancel`
//! between steps and takes its nodes down; their outcomes are dropped.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::summary::Shard;

/// What the observer says after a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Stop,
}

/// Which units to hand out, and when to stop handing them out.
pub(crate) struct Feed {
    pub shard: Shard,
    /// Hand out only the shard's first `end` units (`None`: unbounded).
    pub end: Option<u64>,
    /// Start no unit after this wall time, except the first.
    pub budget: Option<(Instant, Duration)>,
    /// Units a worker may run ahead of the observer.
    pub lookahead: u64,
    /// What a unit waits for besides the lookahead: strategies whose next
    /// executions depend on earlier ones wait for those to be observed.
    pub gate: Gate,
}

/// Which earlier positions must have been observed before a position may
/// start. Positions, not timing: the dependency is the same for any number
/// of workers, so what a unit sees of the units before it is too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Units are independent.
    None,
    /// Every position after the first waits for the first (delay bounding
    /// measures its horizon on it).
    First,
    /// Positions come in generations of this many: a position waits until
    /// every earlier generation has been observed (coverage's corpus
    /// advances once per generation).
    Generations(u64),
}

impl Gate {
    /// How many positions must have been observed before position `p` starts.
    pub fn needed(self, p: u64) -> u64 {
        match self {
            Gate::None => 0,
            Gate::First => p.min(1),
            Gate::Generations(g) => p / g.max(1) * g.max(1),
        }
    }
}

struct Dispatch {
    /// The next position (0-based among the shard's units) to hand out.
    next: u64,
    /// The time budget ran out when position `next` was asked for.
    closed_at: Option<u64>,
    /// Positions below this have been observed.
    observed: u64,
    stopped: bool,
}

impl Dispatch {
    fn end(&self, feed: &Feed) -> Option<u64> {
        match (feed.end, self.closed_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Runs the feed's units on `cpus.len()` workers (each pinned to its CPU
/// where one is given; the nodes it starts inherit the pin) and hands
/// their outcomes to `observe` in unit order. `init` makes a worker's
/// state (its strategy); `work` runs one unit. `cancel` is set when the
/// observer stops, for the executions still running.
pub(crate) fn run_in_order<S, T>(
    cpus: &[Option<usize>],
    feed: Feed,
    cancel: &AtomicBool,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, u64) -> Result<T> + Sync,
    mut observe: impl FnMut(u64, T) -> Result<Flow>,
) -> Result<()>
where
    T: Send,
{
    let dispatch = Mutex::new(Dispatch { next: 0, closed_at: None, observed: 0, stopped: false });
    let wake = Condvar::new();
    let (tx, rx) = mpsc::channel::<(u64, Result<T>)>();
    std::thread::scope(|scope| {
        for (j, cpu) in cpus.iter().enumerate() {
            let (tx, dispatch, wake, feed, init, work) = (tx.clone(), &dispatch, &wake, &feed, &init, &work);
            std::thread::Builder::new()
                .name(format!("job-{j}"))
                .spawn_scoped(scope, move || {
                    if let Some(c) = cpu {
                        crate::pin::pin_thread(*c);
                    }
                    let mut state = init();
                    while let Some(p) = take(dispatch, wake, feed) {
                        let unit = feed.shard.unit(p);
                        let r = catch_unwind(AssertUnwindSafe(|| work(&mut state, unit)))
                            .unwrap_or_else(|_| Err(anyhow!("the job running unit {unit} panicked")));
                        if tx.send((p, r)).is_err() {
                            return;
                        }
                    }
                })
                .expect("a job thread starts");
        }
        drop(tx);
        let observed = observe_in_order(&rx, &dispatch, &wake, &feed, &mut observe);
        // Whatever ended the run, no worker starts another unit, and the
        // executions still running stop at their next step.
        dispatch.lock().unwrap().stopped = true;
        cancel.store(true, Ordering::Relaxed);
        wake.notify_all();
        observed
    })
}

/// A worker's next position, waiting while it would run too far ahead;
/// `None` when there is no more work.
fn take(dispatch: &Mutex<Dispatch>, wake: &Condvar, feed: &Feed) -> Option<u64> {
    let mut d = dispatch.lock().unwrap();
    loop {
        if d.stopped || d.end(feed).is_some_and(|e| d.next >= e) {
            return None;
        }
        if d.next > 0 && feed.budget.is_some_and(|(began, b)| began.elapsed() >= b) {
            d.closed_at = Some(d.next);
            wake.notify_all();
            return None;
        }
        if d.next < d.observed + feed.lookahead && feed.gate.needed(d.next) <= d.observed {
            d.next += 1;
            return Some(d.next - 1);
        }
        d = wake.wait(d).unwrap();
    }
}

fn observe_in_order<T>(
    rx: &mpsc::Receiver<(u64, Result<T>)>,
    dispatch: &Mutex<Dispatch>,
    wake: &Condvar,
    feed: &Feed,
    observe: &mut impl FnMut(u64, T) -> Result<Flow>,
) -> Result<()> {
    let mut early: BTreeMap<u64, Result<T>> = BTreeMap::new();
    let mut p = 0u64;
    loop {
        if dispatch.lock().unwrap().end(feed).is_some_and(|e| p >= e) {
            return Ok(());
        }
        if let Some(r) = early.remove(&p) {
            let flow = observe(feed.shard.unit(p), r?)?;
            p += 1;
            dispatch.lock().unwrap().observed = p;
            wake.notify_all();
            if flow == Flow::Stop {
                return Ok(());
            }
            continue;
        }
        // Position p is running (a worker will send it) or not yet handed
        // out (a worker is free to take it: p is within the lookahead).
        // When no worker will send anything again, every one of them has
        // ended: the feed ran out.
        match rx.recv() {
            Ok((q, r)) => {
                early.insert(q, r);
            }
            Err(mpsc::RecvError) => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(shard: Shard, end: Option<u64>) -> Feed {
        Feed { shard, end, budget: None, lookahead: 3, gate: Gate::None }
    }

    /// The units two workers hand the observer from `f`, in observed order.
    fn units_seen(f: Feed) -> Vec<u64> {
        let cancel = AtomicBool::new(false);
        let mut seen = Vec::new();
        run_in_order(
            &[None, None],
            f,
            &cancel,
            || (),
            |_, u| Ok(u),
            |u, _| {
                seen.push(u);
                Ok(Flow::Continue)
            },
        )
        .unwrap();
        seen
    }

    /// Units finish in scrambled order; the observer still sees them in
    /// unit order, whatever the number of workers.
    #[test]
    fn outcomes_are_observed_in_unit_order() {
        for jobs in [1, 2, 4] {
            let cancel = AtomicBool::new(false);
            let mut seen = Vec::new();
            run_in_order(
                &vec![None; jobs],
                feed(Shard::ALL, Some(12)),
                &cancel,
                || (),
                |_, u| {
                    std::thread::sleep(Duration::from_millis((u * 7 % 5) * 3));
                    Ok(u * 10)
                },
                |u, v| {
                    seen.push((u, v));
                    Ok(Flow::Continue)
                },
            )
            .unwrap();
            assert_eq!(seen, (0..12).map(|u| (u, u * 10)).collect::<Vec<_>>(), "jobs {jobs}");
            assert!(cancel.load(Ordering::Relaxed));
        }
    }

    #[test]
    fn a_shard_sees_its_own_units() {
        let shard = Shard { index: 2, count: 3 };
        assert_eq!(units_seen(feed(shard, Some(shard.units_below(10)))), vec![1, 4, 7]);
    }

    #[test]
    fn stopping_ends_the_run_and_an_error_is_returned_in_order() {
        let cancel = AtomicBool::new(false);
        let mut seen = Vec::new();
        run_in_order(
            &[None, None],
            feed(Shard::ALL, None),
            &cancel,
            || (),
            |_, u| Ok(u),
            |u, _| {
                seen.push(u);
                Ok(if u == 5 { Flow::Stop } else { Flow::Continue })
            },
        )
        .unwrap();
        assert_eq!(seen, vec![0, 1, 2, 3, 4, 5]);

        let cancel = AtomicBool::new(false);
        let mut seen = Vec::new();
        let e = run_in_order(
            &[None, None],
            feed(Shard::ALL, Some(10)),
            &cancel,
            || (),
            |_, u| if u == 4 { Err(anyhow!("unit four broke")) } else { Ok(u) },
            |u, _| {
                seen.push(u);
                Ok(Flow::Continue)
            },
        )
        .unwrap_err();
        assert_eq!(seen, vec![0, 1, 2, 3], "units before the error are observed, none after");
        assert!(e.to_string().contains("unit four"), "{e}");
    }

    #[test]
    fn a_panicking_unit_is_an_error_not_a_hang() {
        let cancel = AtomicBool::new(false);
        let e = run_in_order(
            &[None, None],
            feed(Shard::ALL, Some(4)),
            &cancel,
            || (),
            |_, u| {
                assert!(u != 2, "boom");
                Ok(u)
            },
            |_, _| Ok(Flow::Continue),
        )
        .unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
    }

    /// A gated unit starts only after the units it depends on were
    /// observed: what it may read of them is the same for any job count.
    #[test]
    fn a_gated_unit_waits_for_the_units_it_depends_on() {
        for gate in [Gate::First, Gate::Generations(3)] {
            for jobs in [1, 2, 4] {
                let cancel = AtomicBool::new(false);
                let observed = std::sync::atomic::AtomicU64::new(0);
                let mut seen = Vec::new();
                run_in_order(
                    &vec![None; jobs],
                    Feed { gate, ..feed(Shard::ALL, Some(9)) },
                    &cancel,
                    || (),
                    |_, u| Ok(observed.load(Ordering::SeqCst) >= gate.needed(u)),
                    |u, ok| {
                        seen.push((u, ok));
                        observed.store(u + 1, Ordering::SeqCst);
                        Ok(Flow::Continue)
                    },
                )
                .unwrap();
                assert_eq!(seen, (0..9).map(|u| (u, true)).collect::<Vec<_>>(), "{gate:?}, jobs {jobs}");
            }
        }
        assert_eq!((0..7).map(|p| Gate::Generations(3).needed(p)).collect::<Vec<_>>(), [0, 0, 0, 3, 3, 3, 6]);
        assert_eq!((0..3).map(|p| Gate::First.needed(p)).collect::<Vec<_>>(), [0, 1, 1]);
    }

    #[test]
    fn the_time_budget_closes_the_feed_after_the_first_unit() {
        let f = Feed { budget: Some((Instant::now(), Duration::ZERO)), ..feed(Shard::ALL, None) };
        assert_eq!(units_seen(f), vec![0]);
    }
}
