//! Lookahead: how far a node the engine grants may run by itself.
//!
//! Most grants hand a node its own next wake-up (a timer, or a clock read,
//! which costs a user-mode Linux guest 256 virtual ns and a WAIT) while
//! nothing else in the cluster is due before it: the step that follows has
//! one enabled action, the same node's run, and no choice. Such a step is a
//! round trip to the node and back that decides nothing. With lookahead the
//! engine passes the node a bound ([`Execution::lookahead_bound`]) with the
//! grant, and the node takes its own wake-ups before it without stopping
//! (`vmm::node::NodeRuntime::grant_ahead`), counting them
//! (`vmm::node::FreeRuns`).
//!
//! Why the trace is the same, byte for byte:
//! - *Every wake-up taken that way is a step the engine would have taken,
//!   with no choice to make.* The bound is the earliest time at which
//!   anything other than this node's own run is due: another live node's
//!   requested run, the host client's poll, netsim's next delivery or
//!   partition, any node's oldest disk completion, a restart or a resume,
//!   the time limit, and the time a crash, pause, clock jump, kill or
//!   connection fault becomes possible. At a wake-up at `t` strictly before it, the enabled set is
//!   this node's run alone (the horizon is `t`, the earliest requested
//!   run). A fault that is enabled *now* makes every step a choice point,
//!   so then there is no lookahead at all; one whose time has come but
//!   whose node has nothing at stake (no frames in flight, no volatile
//!   writes) stays disabled, because only visible events change that
//!   (a node's role, which a fault aimed at a role waits for, arrives on
//!   the agent's control line: a device message).
//! - *Nothing visible happens in a skipped step.* The node stops at its
//!   first wake-up after anything the engine must see: console output
//!   (the guest kernel ends its own free run, patch
//!   `7.2/0002-um-time-travel-free-runs.patch`) or a device message (the
//!   engine ends it while the guest waits for the reply). So everything
//!   the grant produced belongs to its last wake-up, as it would have.
//! - *The engine accounts for the skipped steps as it would have taken
//!   them* ([`Execution::account_free_runs`]): the trace's `Run` folds them
//!   (a quiet stretch keeps only the count and the last time), the step
//!   log gets them as quiet steps with the right times, `grants` counts
//!   them, and the clock moves to the last one.
//!
//! A node that stopped early (a device message that needed no reply came
//! a little later than the guest wrote it) changes only how many round
//! trips the same steps took. A critical-transition probe, which changes
//! the execution at a given step index, runs without lookahead until that
//! step.

use vmm::node::FreeRuns;

use std::time::Duration;

use super::Execution;
use crate::spec::{EngineError, Lookahead};
use crate::strategy::{ActionKind, EnabledAction};
use crate::NodeId;
use simtime::VirtualTime;

impl Execution<'_> {
    /// The time before which `node`, granted now, may take its
    /// own wake-ups without stopping; `None` for a plain grant. Call in the
    /// step that runs it, after its enabled set was built: it reads that
    /// step's pending events, which the choice did not change.
    pub(crate) fn lookahead_bound(&self, node: NodeId) -> Option<VirtualTime> {
        if !self.lookahead_allowed() {
            return None;
        }
        self.bound_with(self.choices.pending().earliest_except_run(node))
    }

    /// The bound given `others`, the earliest due time of everything but
    /// the node's own run: no later than the time limit and the next fault,
    /// and `None` where that leaves nothing past now.
    fn bound_with(&self, others: Option<VirtualTime>) -> Option<VirtualTime> {
        let limit = self.cx.spec.time_limit.saturating_add(Duration::from_nanos(1));
        let bound = others.unwrap_or(VirtualTime::MAX).min(limit).min(self.fault_bound()?);
        (bound > self.cx.now).then_some(bound)
    }

    /// Lookahead is on and no critical-transition probe is about to calm
    /// the execution.
    fn lookahead_allowed(&self) -> bool {
        if self.cx.spec.lookahead == Lookahead::Off {
            return false;
        }
        // The calm begins at the start of the step whose index is `at`; the
        // step counter already counts this one, so the next step starts at
        // `choices.steps`: a node running ahead from here would carry the
        // count past `at` and the calm would never begin.
        self.cx.spec.explore.calm_from.is_none_or(|(at, _)| at < self.choices.steps())
    }

    /// The bound handed to `node`: [`Self::lookahead_bound`], or in the
    /// debug mode [`Lookahead::IgnoringFrames`] one that leaves out
    /// netsim's next event.
    pub(crate) fn lookahead_given(&self, node: NodeId, bound: Option<VirtualTime>) -> Option<VirtualTime> {
        if self.cx.spec.lookahead != Lookahead::IgnoringFrames || !self.lookahead_allowed() {
            return bound;
        }
        let mut p = self.choices.pending().clone();
        p.forget_network();
        self.bound_with(p.earliest_except_run(node))
    }

    /// The earliest time a crash, pause, clock jump, kill or connection
    /// fault can become possible;
    /// `None` when one is enabled now (every step is then a choice).
    fn fault_bound(&self) -> Option<VirtualTime> {
        let mut now_enabled = Vec::new();
        let gates = self.fault_gates();
        self.crashes.enabled(&self.cx, &gates, &mut now_enabled);
        self.node_faults.enabled(&self.cx, &gates, &mut now_enabled);
        self.conn_faults.enabled(&self.cx, &gates, &mut now_enabled);
        self.node_faults.enabled_kills(&self.cx, &gates, &mut now_enabled);
        if !now_enabled.is_empty() {
            return None;
        }
        if self.fault_period.is_calm() {
            return Some(VirtualTime::MAX);
        }
        let explore = &self.cx.spec.explore;
        let crash = self.crashes.next_possible(explore.max_crashes);
        let [pause, clock, kill] = self.node_faults.next_possible(explore);
        // A time already past gated nothing: the fault waits for a node
        // with something at stake, which only a visible event brings.
        let conn = self.conn_faults.next_time(&self.cx);
        Some(
            [crash, pause, clock, kill, conn]
                .into_iter()
                .flatten()
                .filter(|&t| t > self.cx.now)
                .min()
                .unwrap_or(VirtualTime::MAX),
        )
    }

    /// Takes in the wake-ups `node` took by itself in the grant that
    /// began at `began` (see the module docs): they were grants (counted
    /// by `Grants::ran_free`), and the clock is at the last of them. The step log is done by
    /// [`Self::log_free_runs`] once the step's visibility is known.
    pub(crate) fn account_free_runs(
        &mut self,
        node: NodeId,
        free: FreeRuns,
        bound: Option<VirtualTime>,
    ) -> Result<(), EngineError> {
        let bound = bound.unwrap_or(self.cx.now);
        if free.last >= bound {
            return Err(EngineError::RanAhead { node, last: free.last.as_ns(), bound: bound.as_ns() });
        }
        let until = Some(free.last);
        self.cx.trace.push(free.last, node, crate::trace::EventKind::Run { grants: free.count, until });
        self.cx.now = free.last;
        Ok(())
    }

    /// The step log's side of [`Self::account_free_runs`]: the grant at
    /// `began` (`desc`) and every wake-up but the last were quiet steps;
    /// the last is the step being logged now, as the run it would have
    /// been. Returns that step's description.
    pub(crate) fn log_free_runs(&mut self, desc: EnabledAction, began: VirtualTime, free: FreeRuns) -> EnabledAction {
        self.choices.log_free_runs(began, desc, free);
        EnabledAction::new(desc.node, ActionKind::RunNode, free.last)
    }
}
