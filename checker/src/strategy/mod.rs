//! Strategies: how the engine picks the next action from the enabled set.
//!
//! The engine describes each enabled action abstractly ([`EnabledAction`]) and
//! asks a [`Strategy`] for an index. Strategies are pure functions of their
//! parameters, the execution index, the step and the enabled sets: no host
//! time or randomness, so an execution replays from (strategy spec, execution
//! index) alone. Random strategies draw a fresh generator per execution from
//! (seed, execution index), so execution 1000 replays without running 0..999.
//!
//! Invariant the engine must keep: for the same state, the enabled list is
//! presented in the same order (index choices are only meaningful then).
//!
//! Also here: exhaustive exploration with DPOR ([`dpor`]) and MaceMC's
//! critical-transition search for liveness ([`critical`]).

pub mod critical;
pub mod delay;
pub mod dpor;
pub mod guided;
pub mod hybrid;
pub mod pct;
pub mod random_walk;

pub use critical::{find_critical_transition, CriticalError, CriticalTransition};
pub use delay::{DelayBounded, DelayPlacements};
pub use dpor::{Dpor, Transition};
pub use guided::{Decision, Guided};
pub use hybrid::HybridDfs;
pub use pct::Pct;
pub use random_walk::{KindWeights, RandomWalk};

use crate::failure_file::StrategySpec;
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// What an enabled action does. The order of variants is the tie-break
/// order of the default scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ActionKind {
    /// Let a node's vCPU run until its next exit/event.
    RunNode,
    /// Deliver a frame to `node` (from `peer`).
    DeliverFrame,
    /// Complete an outstanding disk request on `node`.
    CompleteDisk,
    /// Fire a node's virtual timer.
    FireTimer,
    /// Power-fail `node`.
    Crash,
    /// Boot a crashed `node` again.
    Restart,
    /// Cut the link `node`-`peer` (or isolate `node` when `peer` is None).
    Partition,
    /// Restore the link `node`-`peer` (or all of `node`'s links).
    Heal,
    /// Stop `node`'s start command (SIGSTOP to its process group).
    Pause,
    /// Continue a paused `node`'s start command (SIGCONT).
    Resume,
    /// Jump `node`'s wall clock (once, or back and forth for a while: a
    /// strobe).
    ClockJump,
}

impl ActionKind {
    pub const ALL: [ActionKind; 11] = [
        ActionKind::RunNode,
        ActionKind::DeliverFrame,
        ActionKind::CompleteDisk,
        ActionKind::FireTimer,
        ActionKind::Crash,
        ActionKind::Restart,
        ActionKind::Partition,
        ActionKind::Heal,
        ActionKind::Pause,
        ActionKind::Resume,
        ActionKind::ClockJump,
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
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            ActionKind::RunNode => "RunNode",
            ActionKind::DeliverFrame => "DeliverFrame",
            ActionKind::CompleteDisk => "CompleteDisk",
            ActionKind::FireTimer => "FireTimer",
            ActionKind::Crash => "Crash",
            ActionKind::Restart => "Restart",
            ActionKind::Partition => "Partition",
            ActionKind::Heal => "Heal",
            ActionKind::Pause => "Pause",
            ActionKind::Resume => "Resume",
            ActionKind::ClockJump => "ClockJump",
        }
    }
}

/// An abstract enabled action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EnabledAction {
    /// The node the action happens on (for a frame: the receiver).
    pub node: u16,
    pub kind: ActionKind,
    /// Virtual time (ns) at which the action is due.
    pub time: u64,
    /// The other node involved: a frame's sender, a partition's other side.
    pub peer: Option<u16>,
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
    pub fn new(node: u16, kind: ActionKind, time: u64) -> Self {
        EnabledAction { node, kind, time, peer: None, behind: 0, at_risk: false }
    }
    pub fn with_peer(mut self, peer: u16) -> Self {
        self.peer = Some(peer);
        self
    }
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

/// Indices sorted by the default order (stable).
pub fn default_ranking(enabled: &[EnabledAction]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..enabled.len()).collect();
    idx.sort_by(|&a, &b| default_order(&enabled[a], &enabled[b]));
    idx
}

/// The dependence relation used by DPOR for engine actions: two actions are
/// dependent when they touch a common node (its `node` or `peer`), and
/// partitions/heals are conservatively dependent with everything (they change
/// the fate of frames sent by any node).
pub fn dependent(a: &EnabledAction, b: &EnabledAction) -> bool {
    let global = |x: &EnabledAction| matches!(x.kind, ActionKind::Partition | ActionKind::Heal);
    if global(a) || global(b) {
        return true;
    }
    let touches = |x: &EnabledAction, n: u16| x.node == n || x.peer == Some(n);
    touches(b, a.node) || a.peer.is_some_and(|p| touches(b, p))
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

/// SplitMix64 finaliser: a bijective mixer, used to derive independent seeds.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator for one execution of a seeded strategy.
pub(crate) fn execution_rng(seed: u64, execution: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix64(seed) ^ mix64(execution.wrapping_add(0x5157)))
}

/// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < n/2^64).
pub(crate) fn below(rng: &mut impl rand_core::RngCore, n: u64) -> u64 {
    debug_assert!(n > 0);
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionKind::*;

    #[test]
    fn default_choice_is_earliest_then_lowest_node() {
        let e = [
            EnabledAction::new(2, RunNode, 10),
            EnabledAction::new(1, FireTimer, 10),
            EnabledAction::new(0, DeliverFrame, 11),
            EnabledAction::new(1, RunNode, 10),
        ];
        assert_eq!(default_choice(&e), 3);
        assert_eq!(default_ranking(&e), vec![3, 1, 0, 2]);
    }

    #[test]
    fn dependence() {
        let run0 = EnabledAction::new(0, RunNode, 0);
        let run1 = EnabledAction::new(1, RunNode, 0);
        let frame_0_to_1 = EnabledAction::new(1, DeliverFrame, 0).with_peer(0);
        let disk2 = EnabledAction::new(2, CompleteDisk, 0);
        let part = EnabledAction::new(3, Partition, 0).with_peer(4);
        assert!(!dependent(&run0, &run1));
        assert!(dependent(&frame_0_to_1, &run1));
        assert!(dependent(&frame_0_to_1, &run0), "the sender is touched too");
        assert!(dependent(&run1, &frame_0_to_1), "symmetric");
        assert!(!dependent(&frame_0_to_1, &disk2));
        assert!(dependent(&part, &disk2) && dependent(&disk2, &part));
    }

    #[test]
    fn execution_rngs_are_distinct_and_stable() {
        use rand_core::RngCore;
        let a = execution_rng(7, 0).next_u64();
        assert_eq!(a, execution_rng(7, 0).next_u64());
        assert_ne!(a, execution_rng(7, 1).next_u64());
        assert_ne!(a, execution_rng(8, 0).next_u64());
    }
}
