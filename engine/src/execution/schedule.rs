//! Crashes at fixed virtual times (`[[faults.crash.schedule]]`): no choice
//! of the strategy, but an event of the timeline that [`Execution::step`]
//! applies when it is the earliest pending one (before anything else due
//! at the same instant).

use super::{Execution, Step};
use crate::actions::Enabled;
use crate::spec::EngineError;
use crate::strategy::{ActionKind, EnabledAction};
use crate::trace::EventKind;
use crate::{Actor, NodeId};
use simtime::VirtualTime;

impl Execution<'_> {
    /// The next scheduled crash's time and its index in the schedule, once
    /// faults have begun (the schedule counts from that moment).
    pub(crate) fn next_scheduled_crash(&self) -> Option<(VirtualTime, usize)> {
        self.crashes.next_scheduled(&self.cx.spec.explore.crash_schedule)
    }

    /// Applies scheduled crash `k` now (a step of its own): its nodes that
    /// are up lose power (two or more: together, a coordinated power
    /// failure). A node already down is left as it is, and once faults have
    /// stopped (the quiet period, a calm probe) nothing happens; the trace
    /// says so. One node's crash is a crash point like a chosen one: with
    /// few enough disk states, a warm start forks its siblings there
    /// ([`Step::CrashBranch`]), as a cold run enumerates them.
    pub(crate) fn scheduled_crash(&mut self, k: usize) -> Result<Step, EngineError> {
        self.crashes.take_scheduled(k);
        self.choices.count_steps(1);
        let entry = &self.cx.spec.explore.crash_schedule[k];
        let names =
            |nodes: &[NodeId]| nodes.iter().map(|&i| self.cx.nodes[i].name.clone()).collect::<Vec<_>>().join(", ");
        let all: Vec<NodeId> = entry.nodes.clone();
        let at = simtime::span_ns(entry.at) as f64 / 1e9;
        let (up, down): (Vec<NodeId>, Vec<NodeId>) = all.iter().partition(|&&i| self.cx.nodes[i].is_up());
        let mut text = format!("scheduled crash of {} at {at} s ([[faults.crash.schedule]])", names(&all));
        if self.fault_period.is_calm() {
            text.push_str(": skipped, faults have stopped");
        } else if !down.is_empty() {
            text.push_str(&format!("; {} already down", names(&down)));
        }
        self.cx.trace.push_engine(self.cx.now, EventKind::Note { text });
        if let (false, &[i]) = (self.fault_period.is_calm(), up.as_slice()) {
            let chosen = Enabled::crash(i, self.cx.now);
            if let Some(branch) = self.crash_branch(&chosen) {
                self.branching.hold(chosen);
                return Ok(Step::CrashBranch(branch));
            }
            return self.apply_chosen(chosen);
        }
        let first = all.first().map_or(Actor::Engine, |&i| Actor::Node(i));
        self.choices.log(self.cx.now, EnabledAction::new(first, ActionKind::Crash, self.cx.now), false);
        if !self.fault_period.is_calm() && up.len() > 1 {
            self.crashes.crash_together(&mut self.cx, &mut self.wire, up)?;
        }
        self.advance_script()?;
        Ok(if self.script.is_decided() { Step::Done } else { Step::Running })
    }
}
