//! The log of the actions an execution took, for reports and MaceMC's
//! critical-transition search: which action step k was, and when.
//!
//! One entry per step would grow with how often the engine granted a node
//! (millions for a guest that spins), so it folds the way the trace does
//! (see [`crate::trace`]): consecutive *quiet* steps, node runs that added
//! no event but their own `Run` to the trace, are one entry whatever nodes
//! they ran. Every other step is an entry of its own. The log therefore
//! holds at most two entries per visible trace event (plus one), and step
//! indices stay exact: entry `e` covers steps `e.first .. e.first + e.steps`.

use crate::strategy::EnabledAction;
use crate::Actor;
use simtime::VirtualTime;

/// One step, or a stretch of quiet steps.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StepSpan {
    /// Index (0-based, every action counted) of its first step.
    pub first: u64,
    /// Steps it stands for: 1 for a step that was not quiet.
    pub steps: u64,
    /// When its first step took effect.
    pub time: VirtualTime,
    /// When its last step took effect.
    pub until: VirtualTime,
    /// The action of its first step.
    pub action: EnabledAction,
    /// A stretch of quiet node runs (possibly a single one).
    pub quiet: bool,
    /// For a quiet stretch: the nodes it ran, ascending (at most every
    /// node and the host client). Empty otherwise.
    pub nodes: Vec<Actor>,
}

/// Every step of an execution, quiet stretches folded.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StepLog {
    spans: Vec<StepSpan>,
    steps: u64,
}

impl StepLog {
    /// An empty log.
    pub fn new() -> StepLog {
        StepLog::default()
    }

    /// Records the next step: `action` took effect at `time`; `quiet` when
    /// it was a node run that showed nothing (see the module docs).
    pub fn push(&mut self, time: VirtualTime, action: EnabledAction, quiet: bool) {
        let first = self.steps;
        self.steps += 1;
        if quiet {
            if let Some(s) = self.spans.last_mut().filter(|s| s.quiet) {
                s.steps += 1;
                s.until = time;
                if let Err(at) = s.nodes.binary_search(&action.node) {
                    s.nodes.insert(at, action.node);
                }
                return;
            }
        }
        let nodes = if quiet { vec![action.node] } else { Vec::new() };
        self.spans.push(StepSpan { first, steps: 1, time, until: time, action, quiet, nodes });
    }

    /// Records `n` more quiet steps of `node` after a quiet one, the last
    /// at `until` (the wake-ups a node took by itself under lookahead: the
    /// same entry as `n` pushes of quiet runs would make).
    pub fn push_quiet(&mut self, n: u64, until: VirtualTime, node: Actor) {
        if n == 0 {
            return;
        }
        let s = self.spans.last_mut().filter(|s| s.quiet).expect("push_quiet follows a quiet step");
        s.steps += n;
        s.until = until;
        if let Err(at) = s.nodes.binary_search(&node) {
            s.nodes.insert(at, node);
        }
        self.steps += n;
    }

    /// Steps taken (not entries).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The spans, in order.
    pub fn spans(&self) -> &[StepSpan] {
        &self.spans
    }

    /// The entry that holds step `step`, if the execution got that far.
    pub fn at(&self, step: u64) -> Option<&StepSpan> {
        if step >= self.steps {
            return None;
        }
        let i = self.spans.partition_point(|s| s.first <= step);
        self.spans.get(i.checked_sub(1)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::ActionKind::{DeliverFrame, RunNode};
    use crate::NodeId;

    fn n(number: u16) -> NodeId {
        NodeId::new(number).unwrap()
    }

    fn run(node: u16, ns: u64) -> EnabledAction {
        EnabledAction::new(n(node), RunNode, t(ns))
    }

    fn t(ns: u64) -> VirtualTime {
        VirtualTime::from_ns(ns)
    }

    #[test]
    fn quiet_steps_fold_and_step_indices_stay_exact() {
        let mut log = StepLog::new();
        log.push(t(0), run(1, 0), false); // step 0: n1 printed something
        for k in 0..1_000_000u64 {
            log.push(t(10 + k), run(1 + (k % 2) as u16, 10 + k), true); // steps 1..=1_000_000
        }
        log.push(t(2_000_000), EnabledAction::new(n(2), DeliverFrame, t(2_000_000)).with_peer(n(1)), false);
        log.push(t(2_000_001), run(3, 2_000_001), true);
        assert_eq!(log.steps(), 1_000_003);
        assert_eq!(log.spans().len(), 4, "a million quiet grants are one entry");
        let q = log.at(500_000).unwrap();
        assert_eq!((q.first, q.steps, q.time, q.until, q.quiet), (1, 1_000_000, t(10), t(10 + 999_999), true));
        assert_eq!(q.nodes, [n(1), n(2)]);
        assert_eq!(log.at(0).unwrap().first, 0);
        assert_eq!(log.at(1).unwrap().first, 1);
        assert_eq!(log.at(1_000_000).unwrap().first, 1);
        assert_eq!(log.at(1_000_001).unwrap().action.kind, DeliverFrame);
        assert_eq!(log.at(1_000_002).unwrap().nodes, [n(3)]);
        assert!(log.at(1_000_003).is_none());
    }

    #[test]
    fn quiet_steps_pushed_at_once_are_the_same_log_as_one_by_one() {
        // A node that ran ahead over wake-ups at 11, 12, 13 and then
        // printed at 14, after a grant at 10 (lookahead), against the same
        // steps pushed one by one.
        let mut one_by_one = StepLog::new();
        one_by_one.push(t(5), EnabledAction::new(n(2), DeliverFrame, t(5)).with_peer(n(1)), false);
        for ns in 10..14 {
            one_by_one.push(t(ns), run(1, ns), true);
        }
        one_by_one.push(t(14), run(1, 14), false);
        let mut at_once = StepLog::new();
        at_once.push(t(5), EnabledAction::new(n(2), DeliverFrame, t(5)).with_peer(n(1)), false);
        at_once.push(t(10), run(1, 10), true);
        at_once.push_quiet(3, t(13), n(1).into());
        at_once.push(t(14), run(1, 14), false);
        assert_eq!(at_once, one_by_one);
        at_once.push_quiet(0, t(99), n(1).into());
        assert_eq!(at_once, one_by_one, "nothing to add changes nothing");
    }

    #[test]
    fn a_step_that_showed_something_splits_the_fold() {
        let mut log = StepLog::new();
        log.push(t(1), run(1, 1), true);
        log.push(t(2), run(1, 2), false);
        log.push(t(3), run(1, 3), true);
        assert_eq!(
            log.spans().iter().map(|s| (s.first, s.steps, s.quiet)).collect::<Vec<_>>(),
            vec![(0, 1, true), (1, 1, false), (2, 1, true)]
        );
    }
}
