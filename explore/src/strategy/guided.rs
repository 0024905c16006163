//! Guided replay: follow a recorded list of decisions, take the default
//! scheduler's choice everywhere else.
//!
//! An execution records only the choice points where its strategy departed
//! from the default scheduler ([`Decision`]): at every other choice point the
//! default choice was taken, so (seed, decisions) replays the execution
//! exactly. The same form is what shrinking works on: dropping a decision
//! means "let the default scheduler decide here". Decisions are keyed by
//! their choice step, so removing one does not shift the others; a decision
//! whose action is not enabled at its step (the execution went elsewhere)
//! is skipped.

use engine::strategy::{default_choice, Decision, EnabledAction, Strategy, StrategySpec};
use std::collections::BTreeMap;

/// The guided-replay strategy: the recorded decisions at their steps, the
/// default scheduler's choice everywhere else.
pub struct Guided {
    decisions: BTreeMap<u64, EnabledAction>,
    /// Decisions that were not enabled at their step in the last execution.
    pub skipped: u64,
}

impl Guided {
    /// Follows `decisions`; of two at the same step, the later one wins.
    pub fn new(decisions: &[Decision]) -> Guided {
        Guided { decisions: decisions.iter().map(|d| (d.step, d.action)).collect(), skipped: 0 }
    }
}

/// Same action, ignoring when it was due (a replay that went slightly
/// differently may see it due at another time).
fn same(a: &EnabledAction, b: &EnabledAction) -> bool {
    (a.node, a.kind, a.peer, a.behind) == (b.node, b.kind, b.peer, b.behind)
}

impl Strategy for Guided {
    fn spec(&self) -> StrategySpec {
        StrategySpec {
            name: "guided".into(),
            params: BTreeMap::from([("decisions".to_string(), self.decisions.len().into())]),
        }
    }

    fn begin_execution(&mut self, _execution: u64) -> bool {
        self.skipped = 0;
        true
    }

    fn choose(&mut self, step: u64, enabled: &[EnabledAction]) -> usize {
        if let Some(want) = self.decisions.get(&step) {
            let exact = enabled.iter().position(|e| e == want);
            if let Some(i) = exact.or_else(|| enabled.iter().position(|e| same(e, want))) {
                return i;
            }
            self.skipped += 1;
        }
        default_choice(enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use crate::strategy::RandomWalk;
    use engine::strategy::ActionKind::*;
    use simtime::VirtualTime;

    fn set(t: u64) -> Vec<EnabledAction> {
        vec![
            EnabledAction::new(actor(1), RunNode, VirtualTime::from_ns(t)),
            EnabledAction::new(actor(2), RunNode, VirtualTime::from_ns(t + 1)),
            EnabledAction::new(actor(3), Crash, VirtualTime::from_ns(t)),
        ]
    }

    #[test]
    fn follows_decisions_and_defaults_elsewhere() {
        let d = [Decision { step: 1, action: EnabledAction::new(actor(3), Crash, VirtualTime::from_ns(7)) }];
        let mut g = Guided::new(&d);
        g.begin_execution(0);
        assert_eq!(g.choose(0, &set(5)), 0, "no decision: default (earliest)");
        assert_eq!(g.choose(1, &set(5)), 2, "matched by node, kind and peer even at another time");
        assert_eq!(g.skipped, 0);
        let d = [Decision { step: 0, action: EnabledAction::new(actor(9), Crash, VirtualTime::from_ns(0)) }];
        let mut g = Guided::new(&d);
        assert_eq!(g.choose(0, &set(5)), 0, "a decision that is not enabled is skipped");
        assert_eq!(g.skipped, 1);
    }

    #[test]
    fn replays_what_a_random_walk_decided() {
        let mut walk = RandomWalk::new(9, Default::default());
        walk.begin_execution(3);
        let mut decisions = Vec::new();
        let mut picks = Vec::new();
        for step in 0..200 {
            let e = set(step);
            let k = walk.choose(step, &e);
            if k != default_choice(&e) {
                decisions.push(Decision { step, action: e[k] });
            }
            picks.push(k);
        }
        assert!(!decisions.is_empty());
        let mut g = Guided::new(&decisions);
        let again: Vec<usize> = (0..200).map(|s| g.choose(s, &set(s))).collect();
        assert_eq!(again, picks);
    }
}
