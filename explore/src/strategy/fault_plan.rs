//! The faults of an execution, and a strategy that keeps to a subset of
//! them: how `simcluster shrink` removes whole faults.
//!
//! A fault the strategy chooses (a crash, a power failure, a pause, a
//! clock jump, a kill, a connection reset or stall) is an action offered
//! "now" at every step while it is possible, and the default scheduler
//! takes it as soon as it is the earliest; a recorded execution has it
//! because the strategy took it, or because it did not decide otherwise.
//! Dropping decisions therefore never removes a fault (with no decisions
//! at all, every fault comes as early as it can). [`FaultPlan`] wraps the
//! replayed strategy and refuses every fault of these kinds that is not in
//! its plan: where the strategy would take one, it takes the default
//! choice among the other actions instead (the non-fault choice). A
//! planned fault is allowed from the virtual time the recorded execution
//! took it at, so the faults that stay come when they came, or as soon
//! after as they are offered.
//!
//! Partitions come from the network's timeline, not from the strategy:
//! one is removed by the engine (`ExploreSpec::skip_partitions`, by its
//! number among the partition starts); its heal then finds nothing to
//! heal. The end of every faulted interval (a restart after a crash, a
//! resume after a pause, a heal) goes with its start.

use serde::{Deserialize, Serialize};

use engine::strategy::{default_order, ActionKind, EnabledAction, Strategy, StrategySpec};
use engine::{Actor, NodeId};
use simtime::VirtualTime;

/// One fault an execution took.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What it is.
    pub kind: ActionKind,
    /// The node (a power failure: the first node it takes down; a
    /// partition: the engine, written 0).
    pub node: Actor,
    /// The other node (a connection's other end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<NodeId>,
    /// When it was taken (serialised as its ns).
    pub time: VirtualTime,
    /// A partition's number (1-based) among the partition starts of the
    /// execution (`ExploreSpec::skip_partitions` numbers them so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// How the trace described it (a partition's shape), for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Fault {
    fn matches(&self, a: &EnabledAction) -> bool {
        (self.kind, self.node, self.peer) == (a.kind, a.node, a.peer)
    }

    /// "Crash n2 at 19.150000 s", with the node names given (1-based
    /// numbers index `names`).
    pub fn describe(&self, names: &[String]) -> String {
        let name = |a: Actor| {
            a.node().and_then(|n| names.get(n.index()).cloned()).unwrap_or_else(|| format!("node {}", a.number()))
        };
        let at = self.time.as_ns() as f64 / 1e9;
        match (self.kind, self.partition) {
            (ActionKind::Partition, Some(k)) => format!("Partition {k} {} at {at:.6} s", self.detail),
            _ => {
                let peer = self.peer.map(|p| format!("-{}", name(p.into()))).unwrap_or_default();
                format!("{} {}{peer} at {at:.6} s", self.kind.name(), name(self.node))
            }
        }
    }
}

/// Wraps a (replaying) strategy: logs the faults it takes, and with a
/// plan refuses every chosen fault that is not planned (see the module).
pub struct FaultPlan<S> {
    inner: S,
    /// The faults it may take (partitions aside); `None`: any.
    plan: Option<Vec<Fault>>,
    used: Vec<bool>,
    /// The faults taken in the last execution, in order (partitions are
    /// not chosen here; see [`partitions_in`]).
    pub taken: Vec<Fault>,
    /// Faults it refused in the last execution (each time it was about to
    /// take one).
    pub refused: u64,
}

impl<S: Strategy> FaultPlan<S> {
    /// `plan`: the faults the strategy may take, each from its time on
    /// (`None`: any, as `inner` decides).
    pub fn new(inner: S, plan: Option<Vec<Fault>>) -> Self {
        let plan: Option<Vec<Fault>> =
            plan.map(|p| p.into_iter().filter(|f| f.kind != ActionKind::Partition).collect());
        let used = vec![false; plan.as_ref().map_or(0, Vec::len)];
        FaultPlan { inner, plan, used, taken: Vec::new(), refused: 0 }
    }

    /// The wrapped strategy.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The planned fault `a` would be, if it may be taken now: the first
    /// unused one of its kind, node and peer, if its time has come.
    fn planned(&self, a: &EnabledAction) -> Option<usize> {
        let plan = self.plan.as_ref()?;
        let i = (0..plan.len()).find(|&i| !self.used[i] && plan[i].matches(a))?;
        (plan[i].time <= a.time).then_some(i)
    }

    fn allowed(&self, a: &EnabledAction) -> bool {
        a.kind == ActionKind::Partition || !a.kind.is_fault_start() || self.plan.is_none() || self.planned(a).is_some()
    }
}

impl<S: Strategy> Strategy for FaultPlan<S> {
    fn spec(&self) -> StrategySpec {
        let mut spec = self.inner.spec();
        if let Some(p) = &self.plan {
            spec.params.insert("fault_plan".into(), p.len().into());
        }
        spec
    }

    fn begin_execution(&mut self, execution: u64) -> bool {
        self.used.iter_mut().for_each(|u| *u = false);
        self.taken.clear();
        self.refused = 0;
        self.inner.begin_execution(execution)
    }

    fn choose(&mut self, step: u64, enabled: &[EnabledAction]) -> usize {
        let mut k = self.inner.choose(step, enabled).min(enabled.len() - 1);
        if !self.allowed(&enabled[k]) {
            // The non-fault choice: the default among what may be taken.
            let other = (0..enabled.len())
                .filter(|&i| self.allowed(&enabled[i]))
                .min_by(|&a, &b| default_order(&enabled[a], &enabled[b]).then(a.cmp(&b)));
            if let Some(i) = other {
                self.refused += 1;
                k = i;
            }
        }
        let a = enabled[k];
        if a.kind.is_fault_start() && a.kind != ActionKind::Partition {
            if let Some(i) = self.planned(&a) {
                self.used[i] = true;
            }
            self.taken.push(Fault {
                kind: a.kind,
                node: a.node,
                peer: a.peer,
                time: a.time,
                partition: None,
                detail: String::new(),
            });
        }
        k
    }
}

/// The partitions an execution's trace shows, started or not (a removed
/// one is a note), numbered as the engine numbers them.
pub fn partitions_in(events: &[engine::trace::Event]) -> Vec<Fault> {
    let mut out = Vec::new();
    for e in events {
        let detail = match &e.kind {
            engine::trace::EventKind::Partition { description } => description.clone(),
            engine::trace::EventKind::Note { text }
                if text.starts_with("partition ") && text.contains(" not started") =>
            {
                if text.ends_with("removed by shrink") {
                    // Counted, but not a fault of the execution.
                    out.push(None);
                    continue;
                }
                text.clone()
            }
            _ => continue,
        };
        out.push(Some(Fault {
            kind: ActionKind::Partition,
            node: Actor::Engine,
            peer: None,
            time: e.time,
            partition: None,
            detail,
        }));
    }
    out.into_iter().enumerate().filter_map(|(i, f)| f.map(|f| Fault { partition: Some(i as u32 + 1), ..f })).collect()
}

/// Every fault of an execution, in time order: those the strategy took
/// (`taken`, from a [`FaultPlan`]) and the partitions of its trace.
pub fn faults_of(taken: &[Fault], events: &[engine::trace::Event]) -> Vec<Fault> {
    let mut all: Vec<Fault> = taken.to_vec();
    all.extend(partitions_in(events));
    // Stable: faults taken at one instant keep their order.
    all.sort_by_key(|f| f.time);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use crate::strategy::Guided;

    fn at(node: u16, kind: ActionKind, t: u64) -> EnabledAction {
        EnabledAction::new(actor(node), kind, VirtualTime::from_ns(t))
    }

    fn fault(node: u16, kind: ActionKind, t: u64) -> Fault {
        Fault {
            kind,
            node: actor(node),
            peer: None,
            time: VirtualTime::from_ns(t),
            partition: None,
            detail: String::new(),
        }
    }

    #[test]
    fn without_a_plan_it_logs_and_changes_nothing() {
        let mut s = FaultPlan::new(Guided::new(&[]), None);
        s.begin_execution(0);
        // The crash is due first: the default takes it.
        assert_eq!(s.choose(0, &[at(1, ActionKind::RunNode, 10), at(2, ActionKind::Crash, 5)]), 1);
        assert_eq!(s.taken, vec![fault(2, ActionKind::Crash, 5)]);
        assert_eq!(s.refused, 0);
    }

    #[test]
    fn an_unplanned_fault_is_refused_for_the_non_fault_choice() {
        let mut s = FaultPlan::new(Guided::new(&[]), Some(vec![]));
        s.begin_execution(0);
        let set = [at(1, ActionKind::RunNode, 10), at(2, ActionKind::Crash, 5), at(3, ActionKind::RunNode, 7)];
        assert_eq!(s.choose(0, &set), 2, "the earliest action that is no fault");
        assert!(s.taken.is_empty());
        assert_eq!(s.refused, 1);
        // A restart (the end of a crash) is never refused.
        assert_eq!(s.choose(1, &[at(1, ActionKind::RunNode, 10), at(2, ActionKind::Restart, 5)]), 1);
    }

    #[test]
    fn a_planned_fault_waits_for_its_time_and_is_taken_once() {
        let mut s = FaultPlan::new(Guided::new(&[]), Some(vec![fault(2, ActionKind::Crash, 6)]));
        s.begin_execution(0);
        let set = |t| [at(1, ActionKind::RunNode, t + 3), at(2, ActionKind::Crash, t)];
        assert_eq!(s.choose(0, &set(5)), 0, "before its time: refused");
        assert_eq!(s.choose(1, &set(6)), 1, "at its time: taken");
        assert_eq!(s.choose(2, &set(7)), 0, "a second crash of n2 is not planned");
        assert_eq!(s.taken, vec![fault(2, ActionKind::Crash, 6)]);
        // Another node's crash is another fault.
        assert_eq!(s.choose(3, &[at(1, ActionKind::RunNode, 9), at(3, ActionKind::Crash, 8)]), 0);
    }

    #[test]
    fn partitions_are_numbered_from_the_trace_removed_ones_included() {
        use engine::trace::{Event, EventKind};
        let ev = |t: u64, kind: EventKind| Event { time: VirtualTime::from_ns(t), node: engine::Actor::Engine, kind };
        let events = vec![
            ev(1, EventKind::Partition { description: "{n1} | {n2,n3}".into() }),
            ev(2, EventKind::Note { text: "partition 2 {n1} | {n2} not started: removed by shrink".into() }),
            ev(3, EventKind::Partition { description: "{n2} | {n1,n3}".into() }),
        ];
        let p = partitions_in(&events);
        assert_eq!(p.iter().map(|f| f.partition).collect::<Vec<_>>(), vec![Some(1), Some(3)]);
        let all = faults_of(&[fault(1, ActionKind::Pause, 2)], &events);
        assert_eq!(
            all.iter().map(|f| f.kind).collect::<Vec<_>>(),
            [ActionKind::Partition, ActionKind::Pause, ActionKind::Partition]
        );
    }
}
