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

use super::ctx::Ctx;
use super::gates::FaultGates;
use super::wire::Wire;
use crate::actions::{Action, Enabled};
use crate::disk::{self, CrashPoint};
use crate::faults::{draw_delay, ScheduledCrash};
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;
use simtime::VirtualTime;

/// The crashes of one execution: their streams, their count and budget
/// gate, the schedule's place, and the crash points.
pub(in crate::execution) struct Crashes {
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
    fn draw_next_time(&mut self, now: VirtualTime, span: Duration) {
        let after = self.time_rng.next_u64() % simtime::span_ns(span).max(1);
        self.not_before = Some(now + Duration::from_nanos(after));
    }

    /// The faults begin at `now`: the crash schedule counts from here.
    fn begin_schedule(&mut self, now: VirtualTime) {
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

/// The actions: each acts at `cx.now`, and a node that loses power is
/// taken off the wire.
impl Crashes {
    /// `node` loses power; the next crash may come a drawn time from now.
    pub fn crash_chosen(&mut self, cx: &mut Ctx, wire: &mut Wire, node: NodeId) -> Result<(), EngineError> {
        self.crash(cx, wire, node)?;
        self.draw_next(cx);
        Ok(())
    }

    /// A coordinated power failure: every crashable node that is up loses
    /// power at this instant, in node order, each disk into a crash state
    /// of its own (each a crash of the budget, numbered in that order).
    /// The next crash may come a drawn time from now.
    pub fn power_failure(&mut self, cx: &mut Ctx, wire: &mut Wire) -> Result<(), EngineError> {
        self.crash_together(cx, wire, power_failure_nodes(cx))?;
        self.draw_next(cx);
        Ok(())
    }

    /// Faults begin: the crash schedule counts from now, and the first
    /// crash may come a drawn time from now.
    pub fn begin(&mut self, cx: &Ctx) {
        self.draw_next(cx);
        self.begin_schedule(cx.now);
    }

    /// Draws when the next crash may come: uniformly within `crash_span`
    /// from now, the crash-time stream's next draw (a power failure takes
    /// one, like a crash). At the start of the faults and after each
    /// crash: a crash is offered at every step while a node has something
    /// at stake, so without a fresh draw a budget of several crashes was
    /// spent within milliseconds of the first (three single crashes in a
    /// row were a coordinated outage in all but name, and a power failure
    /// was no choice of its own).
    fn draw_next(&mut self, cx: &Ctx) {
        self.draw_next_time(cx.now, cx.spec.explore.crash_span);
    }

    /// Nodes `down` (two or more) lose power at this instant, in node order.
    pub fn crash_together(&mut self, cx: &mut Ctx, wire: &mut Wire, down: Vec<NodeId>) -> Result<(), EngineError> {
        self.power_failures += 1;
        let nodes: Vec<String> = down.iter().map(|&node| cx.nodes[node].name.clone()).collect();
        cx.trace.push_engine(cx.now, EventKind::PowerFailure { nodes });
        for node in down {
            self.crash(cx, wire, node)?;
        }
        Ok(())
    }

    /// Power-fails `node`: its disk falls into a crash state. With
    /// restart delays per node or drawn from a range, its delay is drawn
    /// now (nothing is drawn for a fixed one).
    fn crash(&mut self, cx: &mut Ctx, wire: &mut Wire, node: NodeId) -> Result<(), EngineError> {
        let now = cx.now;
        let range = cx.spec.explore.restart_ranges.get(node.index()).copied();
        let (crash, forced) = self.power_loss(node, range);
        let name = cx.nodes[node].name.clone();
        if !cx.nodes[node].running.is_empty() {
            let text = format!(
                "the crash kills {name}'s running command(s) {}; sent again once {name} is ready",
                cx.nodes[node].running.join(", ")
            );
            cx.trace.push(now, node, EventKind::Note { text });
        }
        if cx.nodes[node].paused_until().is_some() {
            // Its paused processes die with it (`Node::power_off`).
            let text = format!("the crash ends {name}'s pause");
            cx.trace.push(now, node, EventKind::Note { text });
        }
        // What the guest's page cache held goes with the power.
        let dirty_files = cx.nodes[node].runtime().and_then(|r| r.dirty_files());
        let disk = cx.nodes[node].power_off(now)?;
        let detail = match (disk, &cx.spec.disk) {
            (Some(disk), Some(ds)) => {
                let (mut point, state) = disk::crash_disk(disk, ds, crash, &name, now, cx.seed, forced)
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
                self.points.push(point);
                d
            }
            _ => "power loss".into(),
        };
        cx.trace.push(now, node, EventKind::Crash { detail });
        wire.node_down(node);
        Ok(())
    }

    /// Powers crashed `node` on again and connects it (its clock hardware
    /// is the node faults' to record).
    pub fn restart(&self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        let now = cx.now;
        cx.trace.push(now, node, EventKind::Restart);
        cx.nodes[node].boot(cx.seed)?;
        cx.nodes[node].connect(now, cx.spec.connect_timeout)?;
        Ok(())
    }
}

/// When crashes are offered.
impl Crashes {
    /// The crashes enabled now ([`Self::enabled_by_stake`]), turned onto
    /// the nodes holding `[faults.crash] target`'s role
    /// ([`Self::target`]).
    pub fn enabled(&self, cx: &Ctx, gates: &FaultGates, into: &mut Vec<Enabled>) {
        self.enabled_by_stake(cx, gates, into);
        self.target(cx, gates, into);
    }

    /// A crash is enabled while the workload runs, within the budget,
    /// from a virtual time drawn uniformly over the first `crash_span` of
    /// the workload (so crashes spread over the run instead of piling up
    /// at its first opportunities), on a node with something at stake.
    ///
    /// With data disks, that is a node whose guest holds file data a power
    /// loss would take (files with dirty pages in its page cache, as the
    /// guest kernel publishes when it idles), whose disk holds volatile
    /// writes (a crash there has several crash states: which of them
    /// reached the platter), or whose flush just completed (nothing is
    /// volatile, and recovery must show all of it). The page cache is
    /// where a program that acknowledges before it syncs keeps its data
    /// until the file system's next commit (ext4: 5 s later): a crash
    /// offered only with volatile disk writes fell at that commit, after
    /// the window, and such a server lost nothing in 19 executions. A
    /// crash just after the node sent something (an acknowledgement) is
    /// weighted up. A crash of a node that merely sends is not offered: a
    /// store that syncs before it answers (etcd) sends all the time, and
    /// offering a crash after every send left db-cluster's crash points
    /// with nothing volatile and one crash state each (tests/disks.rs,
    /// full tier). Without disks, it is a node with frames in flight (the
    /// rest of the cluster may already believe something the node is
    /// about to lose, such as an acknowledgement sent before a replica has
    /// the write). Offering a crash at every step would spend nearly all
    /// of them on idle nodes.
    fn enabled_by_stake(&self, cx: &Ctx, gates: &FaultGates, into: &mut Vec<Enabled>) {
        if !self.due(cx.now, cx.spec.explore.max_crashes) || gates.calm {
            return;
        }
        let (mut offered, mut any_at_risk) = (false, false);
        for &i in &cx.spec.explore.crashable {
            let n = &cx.nodes[i];
            let sending = gates.wire.has_in_flight_from(i);
            let disk = n.data_disk();
            let volatile = disk.and_then(|d| d.disk()).is_some_and(|d| d.volatile_writes().next().is_some());
            // The moments around a durability point: just before a
            // flush completes (its writes are still volatile) and just
            // after (nothing is, and recovery must show all of it).
            let flush_pending =
                disk.is_some_and(|d| d.pending_disk().iter().any(|r| r.kind == disksim::RequestKind::Flush));
            // The guest's page cache: what it holds dirty goes with the
            // power (the disk never saw it).
            let dirty = n.runtime().is_some_and(|r| r.dirty_files().is_some_and(|f| f > 0));
            let at_stake = if cx.spec.disk.is_some() { dirty || volatile || n.flushed_since_run } else { sending };
            if n.is_ready() && at_stake {
                let at_risk = flush_pending || n.flushed_since_run || n.just_sent;
                into.push(Enabled::crash(i, cx.now).at_risk(at_risk));
                any_at_risk |= at_risk;
                offered = true;
            }
        }
        // A coordinated power failure: offered where a single crash is (some
        // node has something at stake), when two or more nodes are up and
        // the budget has a crash for each.
        if !(cx.spec.explore.power_failure && offered) {
            return;
        }
        let down = power_failure_nodes(cx);
        let budget = cx.spec.explore.max_crashes - self.count;
        if down.len() >= 2 && down.len() as u32 <= budget {
            into.push(Enabled::power_failure(down[0], cx.now).at_risk(any_at_risk));
        }
    }

    /// `[faults.crash] target`: the crashes [`Self::enabled_by_stake`]
    /// offered (`into`'s `Crash` entries, by node) become the crashes of
    /// the nodes holding the role: a crashable node that holds it is
    /// offered at every step from the crash time on, within the budget,
    /// and weighted up; no other node's crash is. A coordinated power
    /// failure is left as offered (it takes every node down).
    fn target(&self, cx: &Ctx, gates: &FaultGates, into: &mut Vec<Enabled>) {
        let Some(role) = cx.spec.explore.roles.crash.as_deref() else { return };
        let first = into.iter().position(|e| matches!(e.action, Action::Crash(_) | Action::PowerFailure));
        into.retain(|e| !matches!(e.action, Action::Crash(_)));
        if !self.due(cx.now, cx.spec.explore.max_crashes) || gates.calm {
            return;
        }
        let at = first.unwrap_or(into.len()).min(into.len());
        let crashes = cx.spec.explore.crashable.iter().copied();
        let targeted: Vec<Enabled> = crashes
            .filter(|&node| cx.nodes[node].is_ready() && gates.roles.holds(cx, node, role))
            .map(|node| Enabled::crash(node, cx.now).at_risk(true))
            .collect();
        into.splice(at..at, targeted);
    }
}

/// The nodes a power failure now takes down: every crashable node that is up.
fn power_failure_nodes(cx: &Ctx) -> Vec<NodeId> {
    cx.spec.explore.crashable.iter().copied().filter(|&i| cx.nodes[i].is_up()).collect()
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
        assert_eq!(c.count, 2);
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
