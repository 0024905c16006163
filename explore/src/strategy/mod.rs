//! Strategies: how the engine picks the next action from the enabled set.
//!
//! The vocabulary (the [`engine::strategy::Strategy`] trait, `EnabledAction`,
//! `Decision`, the default scheduler's order) is the engine's
//! ([`engine::strategy`]); the strategies are here. Each is a pure function
//! of its parameters, the execution index, the step and the enabled sets.
//! Random strategies draw a fresh generator per execution from (seed,
//! execution index), so execution 1000 replays without running 0..999.
//!
//! Also here: coverage-guided search from a corpus of executions
//! ([`coverage`]), exhaustive exploration with DPOR ([`dpor`]) and MaceMC's
//! critical-transition search for liveness ([`critical`]).

pub mod coverage;
pub mod critical;
pub mod delay;
pub mod dpor;
pub mod fault_plan;
pub mod guided;
pub mod hybrid;
pub mod pct;
pub mod random_walk;

pub use coverage::{Corpus, CoverageWalk};
pub use critical::{find_critical_transition, CriticalError, CriticalTransition};
pub use delay::{DelayBounded, DelayPlacements};
pub use dpor::{Dpor, Transition};
pub use fault_plan::FaultPlan;
pub use guided::Guided;
pub use hybrid::HybridDfs;
pub use pct::Pct;
pub use random_walk::{KindWeights, RandomWalk};

use engine::strategy::{ActionKind, EnabledAction};
use engine::NodeId;
use simrng::Rng;

/// The dependence relation used by DPOR for engine actions: two actions are
/// dependent when they touch a common node (its `node` or `peer`), and
/// partitions/heals are conservatively dependent with everything (they change
/// the fate of frames sent by any node), as is a power failure (it takes
/// down several nodes at once).
pub fn dependent(a: &EnabledAction, b: &EnabledAction) -> bool {
    let global =
        |x: &EnabledAction| matches!(x.kind, ActionKind::Partition | ActionKind::Heal | ActionKind::PowerFailure);
    if global(a) || global(b) {
        return true;
    }
    let touches = |x: &EnabledAction, n: NodeId| x.node == n || x.peer == Some(n);
    a.node.node().is_some_and(|n| touches(b, n)) || a.peer.is_some_and(|p| touches(b, p))
}

pub(crate) use simrng::{below, splitmix64 as mix64};

/// The engine (0) or node `number`, for the tests' enabled sets.
#[cfg(test)]
pub(crate) fn actor(number: u16) -> engine::Actor {
    engine::Actor::from_number(number).expect("0..=254")
}

/// The generator for one execution of a seeded strategy.
pub(crate) fn execution_rng(seed: u64, execution: u64) -> Rng {
    simrng::streams::strategy_execution(seed, execution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use simtime::VirtualTime;
    use ActionKind::*;

    #[test]
    fn dependence() {
        let n = |number| NodeId::new(number).unwrap();
        let run1 = EnabledAction::new(n(1), RunNode, VirtualTime::from_ns(0));
        let run2 = EnabledAction::new(n(2), RunNode, VirtualTime::from_ns(0));
        let frame_1_to_2 = EnabledAction::new(n(2), DeliverFrame, VirtualTime::from_ns(0)).with_peer(n(1));
        let disk3 = EnabledAction::new(n(3), CompleteDisk, VirtualTime::from_ns(0));
        let part = EnabledAction::new(actor(0), Partition, VirtualTime::from_ns(0));
        assert!(!dependent(&run1, &run2));
        assert!(dependent(&frame_1_to_2, &run2));
        assert!(dependent(&frame_1_to_2, &run1), "the sender is touched too");
        assert!(dependent(&run2, &frame_1_to_2), "symmetric");
        assert!(!dependent(&frame_1_to_2, &disk3));
        assert!(dependent(&part, &disk3) && dependent(&disk3, &part));
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
