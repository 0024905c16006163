//! Bounded DFS with partial-order reduction, restarted from random paths
//! (MODIST's hybrid).
//!
//! A whole cluster execution has thousands of choice points; exhaustive
//! search over all of them is hopeless, and exhaustive search near the start
//! only ever explores boot orders. So each round walks at random for a
//! random number of choice points (the prefix, the same in every execution
//! of the round), then explores every order of the next `depth` choice
//! points that DPOR ([`super::Dpor`]) does not prove equivalent, and lets
//! the default scheduler finish each execution. When a round's tree is
//! exhausted the next round starts from a new random prefix.
//!
//! Executions depend on the ones before them in the round (DPOR's stack), so
//! a failing execution is replayed from its recorded decisions
//! ([`super::Guided`]), never by re-running the search.

use super::{below, dependent, execution_rng, Dpor, KindWeights, RandomWalk};
use engine::strategy::{default_choice, EnabledAction, Strategy, StrategySpec};
use std::collections::BTreeMap;

type DepFn = fn(&EnabledAction, &EnabledAction) -> bool;

/// The hybrid DFS strategy (`dfs`): per round a random prefix, then DPOR
/// over the next `depth` choice points, then the default scheduler.
pub struct HybridDfs {
    seed: u64,
    /// Prefixes are drawn from [0, horizon) choice points.
    horizon: u64,
    /// Choice points explored exhaustively after the prefix.
    depth: u64,
    round: u64,
    prefix: u64,
    dpor: Dpor<EnabledAction, DepFn>,
    walk: RandomWalk,
    /// DPOR said stop (sleep-blocked or diverged): default from here on.
    stopped: bool,
    /// Explore this one round only ([`HybridDfs::one_round`]).
    single_round: bool,
}

impl HybridDfs {
    /// `weights`: the random prefix's walk.
    pub fn new(seed: u64, depth: u64, horizon: u64, weights: KindWeights) -> HybridDfs {
        let mut h = HybridDfs {
            seed,
            horizon: horizon.max(1),
            depth,
            round: 0,
            prefix: 0,
            dpor: Dpor::new(dependent as DepFn),
            walk: RandomWalk::new(seed, weights),
            stopped: false,
            single_round: false,
        };
        h.start_round(0);
        h
    }

    /// Explores round `round` alone: `begin_execution` returns false when
    /// its tree is exhausted instead of starting the next round. A round
    /// depends only on the seed and its number, so a parallel run explores
    /// rounds side by side and numbers their executions afterwards, in
    /// round order: the same executions, in the same order, as one
    /// `HybridDfs` exploring round after round.
    pub fn one_round(seed: u64, depth: u64, horizon: u64, weights: KindWeights, round: u64) -> HybridDfs {
        let mut h = HybridDfs::new(seed, depth, horizon, weights);
        h.single_round = true;
        h.start_round(round);
        h
    }

    /// The current round (0-based) and its prefix length.
    pub fn round(&self) -> (u64, u64) {
        (self.round, self.prefix)
    }

    fn start_round(&mut self, round: u64) {
        self.round = round;
        let mut rng = execution_rng(self.seed ^ simrng::streams::DFS_PREFIX, round);
        self.prefix = below(&mut rng, self.horizon);
        self.dpor = Dpor::new(dependent as DepFn);
    }
}

impl Strategy for HybridDfs {
    fn spec(&self) -> StrategySpec {
        StrategySpec {
            name: "dfs".into(),
            params: BTreeMap::from([
                ("seed".to_string(), self.seed.into()),
                ("depth".to_string(), self.depth.into()),
                ("horizon".to_string(), self.horizon.into()),
            ]),
        }
    }

    fn begin_execution(&mut self, _execution: u64) -> bool {
        if !self.dpor.begin_execution() {
            if self.single_round {
                return false;
            }
            self.start_round(self.round + 1);
            let fresh = self.dpor.begin_execution();
            debug_assert!(fresh, "a new DPOR always has a first execution");
        }
        // The same walk in every execution of a round: the same prefix.
        self.walk.begin_execution(self.round);
        self.stopped = false;
        true
    }

    fn choose(&mut self, step: u64, enabled: &[EnabledAction]) -> usize {
        if step < self.prefix {
            return self.walk.choose(step, enabled);
        }
        if step < self.prefix + self.depth && !self.stopped {
            match self.dpor.choose(enabled) {
                Ok(Some(i)) => return i,
                Ok(None) | Err(_) => self.stopped = true,
            }
        }
        default_choice(enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use engine::strategy::ActionKind::RunNode;
    use simtime::VirtualTime;
    use std::collections::BTreeSet;

    /// Three independent nodes with two steps each, all due together.
    fn run(h: &mut HybridDfs) -> Vec<u16> {
        let mut left = [2u8; 3];
        let mut order = Vec::new();
        for step in 0.. {
            let enabled: Vec<EnabledAction> = (0..3u16)
                .filter(|&n| left[n as usize] > 0)
                .map(|n| EnabledAction::new(actor(n + 1), RunNode, VirtualTime::from_ns(0)))
                .collect();
            if enabled.is_empty() {
                break;
            }
            let a = enabled[h.choose(step, &enabled)];
            left[usize::from(a.node.number() - 1)] -= 1;
            order.push(a.node.number());
        }
        order
    }

    #[test]
    fn independent_nodes_need_one_execution_per_round() {
        // Runs of different nodes commute: DPOR explores one order per round.
        let mut h = HybridDfs::new(3, 4, 3, KindWeights::default());
        let mut rounds = BTreeSet::new();
        for e in 0..6 {
            assert!(h.begin_execution(e));
            run(&mut h);
            rounds.insert(h.round().0);
        }
        assert_eq!(rounds.len(), 6, "every execution starts a new round");
    }

    #[test]
    fn rounds_alone_give_the_executions_of_one_search() {
        // Depth 2 over three nodes: rounds of several executions.
        let mut whole = HybridDfs::new(5, 2, 3, KindWeights::default());
        let mut by_round: Vec<Vec<Vec<u16>>> = Vec::new();
        for e in 0..20 {
            assert!(whole.begin_execution(e));
            let order = run(&mut whole);
            let r = whole.round().0 as usize;
            by_round.resize(r + 1, Vec::new());
            by_round[r].push(order);
        }
        let complete = by_round.len() - 1;
        assert!(complete >= 2, "20 executions span several rounds");
        for (r, expected) in by_round.iter().enumerate().take(complete) {
            let mut alone = HybridDfs::one_round(5, 2, 3, KindWeights::default(), r as u64);
            let mut got = Vec::new();
            while alone.begin_execution(0) {
                got.push(run(&mut alone));
            }
            assert_eq!(&got, expected, "round {r}");
        }
    }

    #[test]
    fn executions_in_a_round_share_the_prefix() {
        let mut h = HybridDfs::new(11, 0, 4, KindWeights::default());
        h.begin_execution(0);
        let a = run(&mut h);
        let (round, prefix) = h.round();
        // Depth 0: each round is one execution; replaying the round's walk
        // gives the same prefix.
        let mut again = HybridDfs::new(11, 0, 4, KindWeights::default());
        again.begin_execution(0);
        assert_eq!(again.round(), (round, prefix));
        assert_eq!(run(&mut again), a);
    }
}
