//! Power losses (`[faults.crash]`): when the next may come, a node's
//! crash and restart, a coordinated power failure, the crash schedule's
//! place, and what each crash of a node with a disk left behind.
//!
//! Invariants: crashes are numbered from 1 in the order they happen (a
//! power failure's in node order); the crash-time stream draws once when
//! the faults begin and once after each chosen crash or power failure;
//! the restart stream draws once per crash of a node whose restart delay
//! is a range, and nowhere else.

use std::collections::BTreeMap;
use std::time::Duration;

use rand_core::RngCore;
use simrng::Rng;

use super::Execution;
use crate::disk::{self, CrashPoint};
use crate::faults::{draw_delay, ScheduledCrash};
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;
use simtime::VirtualTime;

/// The crashes of one execution: their streams, their count and budget
/// gate, the schedule's place, and the crash points.
pub(super) struct Crashes {
    /// Power losses so far; the next one is number `count + 1`.
    count: u32,
    /// Coordinated power failures so far (each counted in `count` once per node).
    power_failures: u32,
    /// Crashes are enabled from this virtual time on (drawn when the
    /// faults begin, and again after each crash; `None` before).
    not_before: Option<VirtualTime>,
    /// When crashes may come next (`not_before`).
    time_rng: Rng,
    /// Restart delays drawn from a range (`[faults.crash] restart_after =
    /// "1s..5s"`), one draw per such crash.
    restart_rng: Rng,
    /// Each crashed node's restart delay drawn at its crash, by node; a
    /// node absent restarts `restart_after` after its crash.
    restart_delays: BTreeMap<NodeId, Duration>,
    /// When faults began: the time `[[faults.crash.schedule]]` counts from.
    schedule_base: Option<VirtualTime>,
    /// The next entry of the crash schedule to apply.
    schedule_next: usize,
    /// What each crash of a node with a disk left behind.
    points: Vec<CrashPoint>,
    /// The crash state a crash is forced into, by crash number: the
    /// spec's (`explore.crash_states`), and a warm-start sibling's
    /// (`Execution::force_crash_state`).
    forced_states: BTreeMap<u32, u64>,
}

impl Crashes {
    /// No crash yet; the streams drawn from `seed`.
    pub fn new(seed: u64, forced_states: BTreeMap<u32, u64>) -> Crashes {
        Crashes {
            count: 0,
            power_failures: 0,
            not_before: None,
            time_rng: simrng::stream(seed, simrng::streams::CRASH_TIME),
            restart_rng: simrng::stream(seed, simrng::streams::RESTART_AFTER),
            restart_delays: BTreeMap::new(),
            schedule_base: None,
            schedule_next: 0,
            points: Vec::new(),
            forced_states,
        }
    }

    /// The streams start again from `seed` (a warm start's boot ends,
    /// before any crash).
    pub fn reseed(&mut self, seed: u64) {
        self.time_rng = simrng::stream(seed, simrng::streams::CRASH_TIME);
        self.restart_rng = simrng::stream(seed, simrng::streams::RESTART_AFTER);
    }

    /// Power losses so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether a crash may come at `now` within a budget of `max`: the
    /// drawn time has come and the budget has one left.
    pub fn due(&self, now: VirtualTime, max: u32) -> bool {
        self.next_possible(max).is_some_and(|t| now >= t)
    }

    /// When crashes become possible, if the budget of `max` has one left.
    pub fn next_possible(&self, max: u32) -> Option<VirtualTime> {
        self.not_before.filter(|_| self.count < max)
    }

    /// Draws when the next crash may come: uniformly within `span` from
    /// `now`.
    pub fn draw_next_time(&mut self, now: VirtualTime, span: Duration) {
        let after = self.time_rng.next_u64() % simtime::span_ns(span).max(1);
        self.not_before = Some(now + Duration::from_nanos(after));
    }

    /// The faults begin at `now`: the crash schedule counts from here.
    pub fn begin_schedule(&mut self, now: VirtualTime) {
        self.schedule_base = Some(now);
    }

    /// The next entry of `schedule` due: its time and index, once faults
    /// have begun.
    pub fn next_scheduled(&self, schedule: &[ScheduledCrash]) -> Option<(VirtualTime, usize)> {
        let base = self.schedule_base?;
        let entry = schedule.get(self.schedule_next)?;
        Some((base + entry.at, self.schedule_next))
    }

    /// Schedule entry `k` is applied now.
    pub fn take_scheduled(&mut self, k: usize) {
        self.schedule_next = k + 1;
    }

    /// When a node that crashed at `crashed_at` restarts: its drawn delay
    /// later, or `default` later.
    pub fn restart_at(&self, node: NodeId, crashed_at: VirtualTime, default: Duration) -> VirtualTime {
        crashed_at + self.restart_delays.get(&node).copied().unwrap_or(default)
    }

    /// The number of the next crash when it is the execution's first with
    /// a disk and no state is forced for it: the one whose crash states a
    /// warm start branches on.
    pub fn first_unforced(&self) -> Option<u32> {
        let crash = self.count + 1;
        (self.points.is_empty() && !self.forced_states.contains_key(&crash)).then_some(crash)
    }

    /// Crash number `crash` leaves its disk in crash state `state`.
    pub fn force_state(&mut self, crash: u32, state: u64) {
        self.forced_states.insert(crash, state);
    }

    /// The forced crash states are `forced` from now on (a warm start's
    /// child takes the run's own spec).
    pub fn set_forced(&mut self, forced: BTreeMap<u32, u64>) {
        self.forced_states = forced;
    }

    /// Counts a power loss of `node`, drawing its restart delay from
    /// `range` if it has one; the crash's number and the state forced for
    /// it.
    fn power_loss(&mut self, node: NodeId, range: Option<(Duration, Duration)>) -> (u32, Option<u64>) {
        self.count += 1;
        if let Some(range) = range {
            let delay = draw_delay(&mut self.restart_rng, range);
            self.restart_delays.insert(node, delay);
        }
        (self.count, self.forced_states.get(&self.count).copied())
    }

    /// Power losses, coordinated failures and crash points, at the end.
    pub fn finish(&mut self) -> (u32, u32, Vec<CrashPoint>) {
        (self.count, self.power_failures, std::mem::take(&mut self.points))
    }
}

impl Execution<'_> {
    /// `node` loses power; the next crash may come a drawn time from now.
    pub(super) fn crash_chosen(&mut self, node: NodeId) -> Result<(), EngineError> {
        self.crash(node)?;
        self.draw_next_crash_time();
        Ok(())
    }

    /// A coordinated power failure: every crashable node that is up loses
    /// power at this instant, in node order, each disk into a crash state
    /// of its own (each a crash of the budget, numbered in that order).
    /// The next crash may come a drawn time from now.
    pub(super) fn power_failure(&mut self) -> Result<(), EngineError> {
        let down: Vec<NodeId> = self.power_failure_nodes();
        self.crash_together(down)?;
        self.draw_next_crash_time();
        Ok(())
    }

    /// Draws when the next crash may come: uniformly within `crash_span`
    /// from now, the crash-time stream's next draw (a power failure takes
    /// one, like a crash). At the start of the faults and after each
    /// crash: a crash is offered at every step while a node has something
    /// at stake, so without a fresh draw a budget of several crashes was
    /// spent within milliseconds of the first (three single crashes in a
    /// row were a coordinated outage in all but name, and a power failure
    /// was no choice of its own).
    pub(crate) fn draw_next_crash_time(&mut self) {
        self.crashes.draw_next_time(self.cx.now, self.cx.spec.explore.crash_span);
    }

    /// Nodes `down` (two or more) lose power at this instant, in node order.
    pub(super) fn crash_together(&mut self, down: Vec<NodeId>) -> Result<(), EngineError> {
        self.crashes.power_failures += 1;
        let nodes: Vec<String> = down.iter().map(|&node| self.cx.nodes[node].name.clone()).collect();
        self.cx.trace.push_engine(self.cx.now, EventKind::PowerFailure { nodes });
        for node in down {
            self.crash(node)?;
        }
        Ok(())
    }

    /// Power-fails `node`: its disk falls into a crash state. With
    /// restart delays per node or drawn from a range, its delay is drawn
    /// now (nothing is drawn for a fixed one).
    pub(super) fn crash(&mut self, node: NodeId) -> Result<(), EngineError> {
        let now = self.cx.now;
        let range = self.cx.spec.explore.restart_ranges.get(node.index()).copied();
        let (crash, forced) = self.crashes.power_loss(node, range);
        let name = self.cx.nodes[node].name.clone();
        if !self.cx.nodes[node].running.is_empty() {
            let text = format!(
                "the crash kills {name}'s running command(s) {}; sent again once {name} is ready",
                self.cx.nodes[node].running.join(", ")
            );
            self.cx.trace.push(now, node, EventKind::Note { text });
        }
        if self.cx.nodes[node].paused_until().is_some() {
            // Its paused processes die with it (`Node::power_off`).
            let text = format!("the crash ends {name}'s pause");
            self.cx.trace.push(now, node, EventKind::Note { text });
        }
        // What the guest's page cache held goes with the power.
        let dirty_files = self.cx.nodes[node].runtime().and_then(|r| r.dirty_files());
        let disk = self.cx.nodes[node].power_off(now)?;
        let detail = match (disk, &self.cx.spec.disk) {
            (Some(disk), Some(ds)) => {
                let (mut point, state) = disk::crash_disk(disk, ds, crash, &name, now, self.cx.seed, forced)
                    .map_err(|source| EngineError::Crash { node: name.clone(), source })?;
                point.dirty_files = dirty_files;
                let which = match point.chosen {
                    Some(k) => format!("crash state {} of {}", k + 1, point.states),
                    None => format!(
                        "a sampled crash state of {}{}",
                        if point.states_exact { "" } else { "at least " },
                        point.states
                    ),
                };
                let cache =
                    dirty_files.map(|f| format!("page cache: dirty data of {f} files lost; ")).unwrap_or_default();
                let d = format!(
                    "power loss; {cache}disk: {which}, {} of {} volatile writes persisted",
                    state.persisted.len(),
                    point.volatile_writes
                );
                self.crashes.points.push(point);
                d
            }
            _ => "power loss".into(),
        };
        self.cx.trace.push(now, node, EventKind::Crash { detail });
        self.wire.node_down(node);
        Ok(())
    }

    /// Powers crashed `node` on again and connects it.
    pub(super) fn restart(&mut self, node: NodeId) -> Result<(), EngineError> {
        let now = self.cx.now;
        self.cx.trace.push(now, node, EventKind::Restart);
        self.cx.nodes[node].boot(self.cx.seed)?;
        self.cx.nodes[node].connect(now, self.cx.spec.connect_timeout)?;
        self.record_node_clock(node);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn the_next_crash_time_is_the_crash_time_streams_draw_within_the_span() {
        let mut c = Crashes::new(5, BTreeMap::new());
        assert!(!c.due(VirtualTime::MAX, 1), "no crash before the faults begin");
        let now = VirtualTime::from_ns(1_000);
        c.draw_next_time(now, SECOND);
        let expected = simrng::stream(5, simrng::streams::CRASH_TIME).next_u64() % 1_000_000_000;
        let at = VirtualTime::from_ns(1_000 + expected);
        assert_eq!(c.next_possible(1), Some(at));
        assert!(!c.due(VirtualTime::from_ns(at.as_ns() - 1), 1) && c.due(at, 1));
        assert!(!c.due(at, 0) && c.next_possible(0).is_none(), "a spent budget gates it");
    }

    #[test]
    fn a_crash_draws_a_restart_delay_only_for_a_range() {
        let mut c = Crashes::new(5, BTreeMap::from([(2, 7)]));
        let (a, b) = (NodeId::at(0), NodeId::at(1));
        let crashed = VirtualTime::from_ns(10);
        assert_eq!(c.power_loss(a, None), (1, None));
        assert_eq!(c.restart_at(a, crashed, SECOND), crashed + SECOND, "a fixed delay: nothing drawn");
        assert_eq!(c.power_loss(b, Some((SECOND, 3 * SECOND))), (2, Some(7)), "crash 2's state is forced");
        let delay = draw_delay(&mut simrng::stream(5, simrng::streams::RESTART_AFTER), (SECOND, 3 * SECOND));
        assert_eq!(c.restart_at(b, crashed, SECOND), crashed + delay);
        assert_eq!(c.count(), 2);
    }

    #[test]
    fn the_branch_point_is_the_first_crash_with_no_state_forced() {
        let mut c = Crashes::new(1, BTreeMap::new());
        assert_eq!(c.first_unforced(), Some(1));
        c.force_state(1, 3);
        assert_eq!(c.first_unforced(), None, "a forced state is no branch point");
        c.set_forced(BTreeMap::new());
        assert_eq!(c.first_unforced(), Some(1));
    }
}
