//! The small parts: when faults may happen, the grants' counts, stopping
//! at a crash point, and the wall clock.

use std::time::{Duration, Instant};

use super::ctx::Ctx;
use crate::actions::Enabled;
use simtime::VirtualTime;
use vmm::node::FreeRuns;

/// When faults may happen: from their beginning (the workload's start,
/// or `[faults] start_after`) until they stop for good (the quiet period,
/// a calm probe). Each kind's own gate (its drawn time, its budget) is in
/// its part: `Crashes`, `NodeFaults`, `ConnFaults`, `DiskFaults`, and the
/// wire's partitions.
#[derive(Default)]
pub(crate) struct FaultPeriod {
    /// Faults have begun.
    begun: bool,
    /// A guest printed `[faults] start_after`'s name.
    start_after_seen: bool,
    /// Faults have stopped: no fault is enabled or drawn from then on.
    calm: bool,
}

impl FaultPeriod {
    /// Faults begin now.
    pub fn begin(&mut self) {
        self.begun = true;
    }

    /// Faults stop for good.
    pub fn calm(&mut self) {
        self.calm = true;
    }

    /// Whether faults have stopped.
    pub fn is_calm(&self) -> bool {
        self.calm
    }

    /// Whether `[faults] start_after`'s name was printed.
    pub fn start_after_seen(&self) -> bool {
        self.start_after_seen
    }

    /// Whether console `line` is the first to print `[faults]
    /// start_after`'s name and faults are to begin now: at once if the
    /// workload runs (`in_workload`), or else when it starts.
    pub fn starts_with(&mut self, cx: &Ctx, line: &str, in_workload: bool) -> bool {
        let Some(name) = &cx.spec.explore.faults_after else { return false };
        if self.start_after_seen || crate::console::reached_name(line) != Some(name.as_str()) {
            return false;
        }
        self.start_after_seen = true;
        in_workload && !self.begun && !self.calm
    }
}

/// Grants handed to nodes.
#[derive(Default)]
pub(crate) struct Grants {
    /// Every grant, each a node's wake-up at a time the engine chose.
    total: u64,
    /// Grants actually made, each a round trip to a node and back; fewer
    /// than `total` by the wake-ups nodes took under lookahead.
    round_trips: u64,
    /// The wake-ups the node run of the current step took by itself, and
    /// when that grant began (`lookahead`), for the step log.
    free_runs: Option<(VirtualTime, FreeRuns)>,
}

impl Grants {
    /// A node is granted a wake-up.
    pub fn grant(&mut self) {
        self.total += 1;
    }

    /// A grant was made: a round trip to the node and back.
    pub fn round_trip(&mut self) {
        self.round_trips += 1;
    }

    /// The node run of this step, granted at `began`, took `free` wake-ups
    /// by itself: each was a grant too, and the step log takes them in
    /// ([`Self::take_free_runs`]).
    pub fn ran_free(&mut self, began: VirtualTime, free: FreeRuns) {
        self.total += free.count;
        self.free_runs = Some((began, free));
    }

    /// The wake-ups [`Self::ran_free`] left for the step log.
    pub fn take_free_runs(&mut self) -> Option<(VirtualTime, FreeRuns)> {
        self.free_runs.take()
    }

    /// Every grant, and the round trips among them.
    pub fn totals(&self) -> (u64, u64) {
        (self.total, self.round_trips)
    }
}

/// Stopping at the first enumerable power loss for a warm start's
/// crash-state siblings ([`crate::Step::CrashBranch`]).
///
/// Invariant: an action is held only while stopping is on, from the step
/// that chose it to the next, which applies it before anything else.
#[derive(Default)]
pub(crate) struct Branching {
    /// Stop at the first enumerable power loss.
    on: bool,
    /// The action a step chose and left for the next one to apply.
    held: Option<Enabled>,
}

impl Branching {
    /// Stop at the first enumerable power loss from now on, or not.
    pub fn set(&mut self, on: bool) {
        self.on = on;
    }

    /// Whether the steps stop at the first enumerable power loss.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// A step chose `chosen` and stopped before applying it.
    pub fn hold(&mut self, chosen: Enabled) {
        self.held = Some(chosen);
    }

    /// Whether an action waits to be applied.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// The action waiting to be applied, taken out.
    pub fn take_held(&mut self) -> Option<Enabled> {
        self.held.take()
    }
}

/// Wall-clock statistics (never read for anything a guest sees).
pub(crate) struct Wall {
    began: Instant,
    /// The first node's spawn: boot time counts from here, so nothing the
    /// run did before (image build, scratch set-up, node configuration)
    /// is taken for boot time.
    first_spawn: Option<Instant>,
    /// From the first spawn until every agent was ready.
    boot: Option<Duration>,
}

impl Wall {
    /// The execution began at `began`; its first node spawned at
    /// `first_spawn`.
    pub fn new(began: Instant, first_spawn: Option<Instant>) -> Wall {
        Wall { began, first_spawn, boot: None }
    }

    /// Wall time counts from now (a forked child's own run).
    pub fn restart(&mut self) {
        self.began = Instant::now();
    }

    /// Every agent is ready: the boot took until now.
    pub fn booted(&mut self) {
        self.boot = self.first_spawn.map(|t| t.elapsed());
    }

    /// The wall time since the execution began, and the boot's.
    pub fn totals(&self) -> (Duration, Option<Duration>) {
        (self.began.elapsed(), self.boot)
    }
}
