//! The strategy vocabulary: how the engine describes the actions it may
//! take next ([`EnabledAction`], [`ActionKind`]), the default scheduler's
//! order ([`default_choice`]), the choice function it asks ([`Strategy`]),
//! and what a run records of the answers ([`Decision`], [`StrategySpec`]).
//! The strategies themselves (random walk, PCT, delay bounding, DPOR,
//! guided replay, ...) live in the `checker` crate.
//!
//! Strategies are pure functions of their parameters, the execution index,
//! the step and the enabled sets: no host time or randomness, so an
//! execution replays from (strategy spec, execution index) alone.
//!
//! Invariant the engine keeps: for the same state, the enabled list is
//! presented in the same order (index choices are only meaningful then).

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::{Actor, NodeId};
use simtime::VirtualTime;

/// What an enabled action does. The order of variants is the tie-break
/// order of the default scheduler.
///
/// Each kind has a fixed number, its [`code`](ActionKind::code): PCT hashes
/// it into a thread's priority, so a code never changes and a removed
/// kind's number is never reused. Code 3 was `FireTimer` ("fire a node's
/// virtual timer"), which the engine never offered (a guest's timer is part
/// of running it) and which is gone; failure files written before still
/// name it in a random walk's weights (see [`StrategySpec::params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum ActionKind {
    /// Let a node's vCPU run until its next exit/event.
    RunNode = 0,
    /// Deliver a frame to `node` (from `peer`).
    DeliverFrame = 1,
    /// Complete an outstanding disk request on `node`.
    CompleteDisk = 2,
    /// Power-fail `node`.
    Crash = 4,
    /// Boot a crashed `node` again.
    Restart = 5,
    /// Cut the link `node`-`peer` (or isolate `node` when `peer` is None).
    Partition = 6,
    /// Restore the link `node`-`peer` (or all of `node`'s links).
    Heal = 7,
    /// Stop `node`'s start command (SIGSTOP to its process group).
    Pause = 8,
    /// Continue a paused `node`'s start command (SIGCONT).
    Resume = 9,
    /// Jump `node`'s wall clock (once, or back and forth for a while: a
    /// strobe).
    ClockJump = 10,
    /// Power-fail every crashable node that is up, at one instant (a rack
    /// or a datacenter feed): `node` is the first of them.
    PowerFailure = 11,
    /// SIGKILL `node`'s start command (its process group); the kernel,
    /// page cache and disk stay; the start command runs again later
    /// (that restart is a [`ActionKind::Restart`] of the node).
    Kill = 12,
    /// Reset a TCP connection between `node` and `peer`
    /// (`[faults.connection]`): an RST to both ends, its frames in flight
    /// lost.
    ConnReset = 13,
    /// Stall a TCP connection between `node` and `peer` for a while (one
    /// way or both) while the others flow.
    ConnStall = 14,
}

impl ActionKind {
    /// Every kind, in tie-break order.
    pub const ALL: [ActionKind; 14] = [
        ActionKind::RunNode,
        ActionKind::DeliverFrame,
        ActionKind::CompleteDisk,
        ActionKind::Crash,
        ActionKind::Restart,
        ActionKind::Partition,
        ActionKind::Heal,
        ActionKind::Pause,
        ActionKind::Resume,
        ActionKind::ClockJump,
        ActionKind::PowerFailure,
        ActionKind::Kill,
        ActionKind::ConnReset,
        ActionKind::ConnStall,
    ];

    /// Is this a fault injected by the checker (as opposed to normal progress)?
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            ActionKind::Crash
                | ActionKind::Restart
                | ActionKind::Partition
                | ActionKind::Heal
                | ActionKind::Pause
                | ActionKind::Resume
                | ActionKind::ClockJump
                | ActionKind::PowerFailure
                | ActionKind::Kill
                | ActionKind::ConnReset
                | ActionKind::ConnStall
        )
    }

    /// Does this kind begin a faulted interval, or is it a fault that is
    /// one event? The ends (restart, resume, heal) are not: they go with
    /// their start (what shrink removes whole, what inspection holds back).
    pub fn is_fault_start(self) -> bool {
        matches!(
            self,
            ActionKind::Crash
                | ActionKind::PowerFailure
                | ActionKind::Partition
                | ActionKind::Pause
                | ActionKind::ClockJump
                | ActionKind::Kill
                | ActionKind::ConnReset
                | ActionKind::ConnStall
        )
    }

    /// The kind's fixed number (see [`ActionKind`]): what strategies that
    /// hash a kind use, so that their draws do not depend on the variants'
    /// places.
    pub fn code(self) -> u64 {
        self as u64
    }

    /// The kind's name as reports print it (`RunNode`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::RunNode => "RunNode",
            ActionKind::DeliverFrame => "DeliverFrame",
            ActionKind::CompleteDisk => "CompleteDisk",
            ActionKind::Crash => "Crash",
            ActionKind::Restart => "Restart",
            ActionKind::Partition => "Partition",
            ActionKind::Heal => "Heal",
            ActionKind::Pause => "Pause",
            ActionKind::Resume => "Resume",
            ActionKind::ClockJump => "ClockJump",
            ActionKind::PowerFailure => "PowerFailure",
            ActionKind::Kill => "Kill",
            ActionKind::ConnReset => "ConnReset",
            ActionKind::ConnStall => "ConnStall",
        }
    }
}

/// An abstract enabled action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EnabledAction {
    /// The node the action happens on (for a frame: the receiver), or the
    /// engine (a partition, a heal). Serialised as its number, 0 for the
    /// engine.
    pub node: Actor,
    /// What it does.
    pub kind: ActionKind,
    /// Virtual time at which the action is due (serialised as its ns).
    pub time: VirtualTime,
    /// The other node involved: a frame's sender, a connection's other end.
    pub peer: Option<NodeId>,
    /// For a datagram offered ahead of older frames on its link: its place
    /// behind the link's oldest frame (1, 2, ...); 0 for every other action.
    /// It tells apart deliveries that are otherwise alike (same receiver,
    /// sender and due time), so a recorded decision names one of them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub behind: u16,
    /// A fault offered where it matters most: a crash just before or just
    /// after one of the node's flushes completes, or just after the node
    /// sent something to a peer. Weighted strategies weigh it
    /// [`AT_RISK_FACTOR`] times its kind's weight.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_risk: bool,
}

/// How much more often a weighted walk picks an [`EnabledAction::at_risk`]
/// action than another of its kind.
pub const AT_RISK_FACTOR: u64 = 4;

fn is_zero(n: &u16) -> bool {
    *n == 0
}

impl EnabledAction {
    /// An action of `kind` on `node` (a [`NodeId`] or an [`Actor`]), due at
    /// `time`.
    pub fn new(node: impl Into<Actor>, kind: ActionKind, time: VirtualTime) -> Self {
        EnabledAction { node: node.into(), kind, time, peer: None, behind: 0, at_risk: false }
    }
    /// With the other node involved.
    pub fn with_peer(mut self, peer: NodeId) -> Self {
        self.peer = Some(peer);
        self
    }
    /// With its place behind its link's oldest frame.
    pub fn behind(mut self, behind: u16) -> Self {
        self.behind = behind;
        self
    }
}

/// The default scheduler's order: earliest time, then lowest node id, then
/// kind, then peer. Ties beyond that keep the engine's order (stable).
pub fn default_order(a: &EnabledAction, b: &EnabledAction) -> Ordering {
    (a.time, a.node, a.kind, a.peer).cmp(&(b.time, b.node, b.kind, b.peer))
}

/// Index of the action the default scheduler runs. Panics on an empty set.
pub fn default_choice(enabled: &[EnabledAction]) -> usize {
    assert!(!enabled.is_empty(), "a strategy needs at least one enabled action");
    let mut best = 0;
    for i in 1..enabled.len() {
        if default_order(&enabled[i], &enabled[best]) == Ordering::Less {
            best = i;
        }
    }
    best
}

/// Whether the choice at this step can change what a guest sees: the node
/// the default scheduler would serve next has another enabled action, and
/// one of the two delivers something to it (a frame or a disk completion).
/// Two deliveries to one node, or a delivery racing the node's own run (its
/// timers), can each go first; a choice between different nodes' actions
/// only reorders what no node can tell apart. Faults are not counted: they
/// are choices of their own, not orders. Delay bounding counts its horizon
/// and places its delays at these points ([`race_candidates`]).
pub fn is_race(enabled: &[EnabledAction]) -> bool {
    race_candidates(enabled).len() >= 2
}

/// At a race ([`is_race`]): the actions that can go first on the default
/// choice's node, in the default order (the default choice first); else
/// fewer than two.
pub fn race_candidates(enabled: &[EnabledAction]) -> Vec<usize> {
    if enabled.len() < 2 {
        return Vec::new();
    }
    // The ranking's first is the default choice (a stable sort).
    let ranking = default_ranking(enabled);
    let node = enabled[ranking[0]].node;
    let same: Vec<usize> =
        ranking.into_iter().filter(|&i| enabled[i].node == node && !enabled[i].kind.is_fault()).collect();
    let delivers = |i: &usize| matches!(enabled[*i].kind, ActionKind::DeliverFrame | ActionKind::CompleteDisk);
    if same.len() >= 2 && same.iter().any(delivers) {
        same
    } else {
        Vec::new()
    }
}

/// Indices sorted by the default order (stable).
pub fn default_ranking(enabled: &[EnabledAction]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..enabled.len()).collect();
    idx.sort_by(|&a, &b| default_order(&enabled[a], &enabled[b]));
    idx
}

/// The choice function the engine calls.
pub trait Strategy {
    /// Name and parameters, as stored in a failure file.
    fn spec(&self) -> StrategySpec;

    /// Prepares execution `execution` (0-based). Returns false when the
    /// strategy has nothing more to explore (exhaustive modes); random
    /// strategies always return true.
    fn begin_execution(&mut self, execution: u64) -> bool;

    /// Picks one of `enabled` (non-empty) at `step` (0-based within the
    /// execution; steps are numbered consecutively). Returns an index.
    fn choose(&mut self, step: u64, enabled: &[EnabledAction]) -> usize;
}

/// One departure from the default scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// 0-based choice point of the execution.
    pub step: u64,
    /// The action taken there instead of the default.
    pub action: EnabledAction,
}

/// Which strategy produced the execution, and its own parameters (for
/// example pct's `{"seed": 7, "depth": 3, "horizon": 2000}`).
///
/// `params` is a map because each strategy has parameters of its own: they
/// describe the run for humans (reports show them) and are never read back,
/// since a replay follows the recorded decisions whatever strategy made
/// them. Everything a replay needs is typed in the failure file's
/// `RunParams` (checker). A BTreeMap so the file is byte-stable.
///
/// Being never read back is also why a failure file written before the
/// `FireTimer` kind left [`ActionKind`] still loads: its random walk's
/// `weights` name `"FireTimer"`, a key that is kept as written and ignored
/// (no strategy parses weights from a file), while the weights a walk
/// writes now name only the kinds there are.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategySpec {
    /// The strategy's name (`random`, `pct`, ...).
    pub name: String,
    /// Its own parameters.
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionKind::*;

    fn at(node: u16, kind: ActionKind, ns: u64) -> EnabledAction {
        EnabledAction::new(Actor::from_number(node).unwrap(), kind, VirtualTime::from_ns(ns))
    }

    #[test]
    fn default_choice_is_earliest_then_lowest_node() {
        let e = [at(2, RunNode, 10), at(1, CompleteDisk, 10), at(0, DeliverFrame, 11), at(1, RunNode, 10)];
        assert_eq!(default_choice(&e), 3);
        assert_eq!(default_ranking(&e), vec![3, 1, 0, 2]);
    }

    /// A decision as failure files have always written it (the engine as
    /// node 0, peers as bare numbers) loads and writes back byte for byte.
    #[test]
    fn decisions_keep_their_bytes() {
        let lines = [
            r#"{"step":3,"action":{"node":0,"kind":"Partition","time":5,"peer":null}}"#,
            r#"{"step":4,"action":{"node":2,"kind":"DeliverFrame","time":7,"peer":3,"behind":1}}"#,
            r#"{"step":9,"action":{"node":1,"kind":"Crash","time":9,"peer":null,"at_risk":true}}"#,
        ];
        for line in lines {
            let d: Decision = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&d).unwrap(), line);
        }
        let d: Decision = serde_json::from_str(lines[1]).unwrap();
        assert_eq!((d.action.node, d.action.peer), (Actor::Node(NodeId::new(2).unwrap()), NodeId::new(3)));
        let bad = r#"{"step":1,"action":{"node":1,"kind":"DeliverFrame","time":7,"peer":0}}"#;
        assert!(serde_json::from_str::<Decision>(bad).is_err(), "0 is no node's number");
    }
}
