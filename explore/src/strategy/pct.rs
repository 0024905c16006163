//! PCT, probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010).
//!
//! Each "thread" gets a random priority; the highest-priority enabled thread
//! always runs; at d-1 random change points (steps drawn from [0, k)) the
//! thread about to run drops to a priority below all initial ones. A bug of
//! depth d is found with probability at least 1/(n k^(d-1)) per execution.
//!
//! Threads here are (node, kind) pairs, so "node 2 receives frames" and
//! "node 2 runs" can be ordered either way. Within a thread, the earliest
//! action (default order) goes first; actions the default order cannot
//! tell apart (datagrams in flight on one link, which the engine offers
//! together) are each a thread of their own with a random priority: a hash
//! of (salt, step, position), so their order is a coin flip per step. Initial priorities are a hash of
//! (seed, execution, thread), so they do not depend on the order in which
//! threads first appear.

use super::{below, execution_rng, mix64};
use engine::strategy::{default_order, ActionKind, EnabledAction, Strategy, StrategySpec};
use engine::Actor;
use std::collections::BTreeMap;

type Thread = (Actor, ActionKind);

/// The PCT strategy: random thread priorities, lowered at `depth - 1`
/// random change points per execution.
pub struct Pct {
    seed: u64,
    depth: u32,
    steps: u64,
    /// Per-execution salt for initial priorities.
    salt: u64,
    /// (step, new priority) pairs, sorted by step then priority descending.
    change_points: Vec<(u64, u64)>,
    lowered: BTreeMap<Thread, u64>,
}

impl Pct {
    /// `depth` d >= 1 (bug depth targeted); `steps` k: the expected number of
    /// steps per execution (change points fall in [0, k)).
    pub fn new(seed: u64, depth: u32, steps: u64) -> Self {
        assert!(depth >= 1, "PCT depth must be at least 1");
        let mut p =
            Pct { seed, depth, steps: steps.max(1), salt: 0, change_points: Vec::new(), lowered: BTreeMap::new() };
        p.begin_execution(0);
        p
    }

    /// The change points of the current execution (step, lowered priority).
    pub fn change_points(&self) -> &[(u64, u64)] {
        &self.change_points
    }

    fn priority(&self, t: Thread) -> u64 {
        if let Some(&p) = self.lowered.get(&t) {
            return p;
        }
        // The kind's fixed code, not its place among the variants: a kind
        // added or removed must not move every other thread's priority.
        let code = (u64::from(t.0.number()) << 8) | t.1.code();
        // Initial priorities live in [d, 2^63 + d): above every lowered one.
        self.depth as u64 + (mix64(self.salt ^ mix64(code)) >> 1)
    }

    /// Index of the highest-priority thread's earliest action.
    fn pick(&self, step: u64, enabled: &[EnabledAction]) -> usize {
        let tie = |i: usize| mix64(self.salt ^ mix64(step) ^ i as u64);
        let mut best = 0;
        for i in 1..enabled.len() {
            let (a, b) = (&enabled[i], &enabled[best]);
            let (pa, pb) = (self.priority((a.node, a.kind)), self.priority((b.node, b.kind)));
            let better = pa > pb
                || (pa == pb
                    && match default_order(a, b) {
                        std::cmp::Ordering::Less => true,
                        std::cmp::Ordering::Greater => false,
                        std::cmp::Ordering::Equal => tie(i) > tie(best),
                    });
            if better {
                best = i;
            }
        }
        best
    }
}

impl Strategy for Pct {
    fn spec(&self) -> StrategySpec {
        StrategySpec {
            name: "pct".into(),
            params: BTreeMap::from([
                ("seed".to_string(), self.seed.into()),
                ("depth".to_string(), self.depth.into()),
                ("steps".to_string(), self.steps.into()),
            ]),
        }
    }

    fn begin_execution(&mut self, execution: u64) -> bool {
        let mut rng = execution_rng(self.seed, execution);
        self.salt = rand_core::RngCore::next_u64(&mut rng);
        self.lowered.clear();
        // Change point i (1-based) lowers to priority d - i.
        self.change_points =
            (1..self.depth as u64).map(|i| (below(&mut rng, self.steps), self.depth as u64 - i)).collect();
        self.change_points.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        true
    }

    fn choose(&mut self, step: u64, enabled: &[EnabledAction]) -> usize {
        assert!(!enabled.is_empty(), "a strategy needs at least one enabled action");
        let start = self.change_points.partition_point(|c| c.0 < step);
        let end = self.change_points.partition_point(|c| c.0 <= step);
        for c in start..end {
            let a = enabled[self.pick(step, enabled)];
            self.lowered.insert((a.node, a.kind), self.change_points[c].1);
        }
        self.pick(step, enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use simtime::VirtualTime;
    use ActionKind::RunNode;

    /// Two nodes with `len` steps each; returns the node order of an execution.
    fn run(p: &mut Pct, exec: u64, len: usize) -> Vec<u16> {
        p.begin_execution(exec);
        let mut left = [len, len];
        let mut order = Vec::new();
        let mut step = 0;
        loop {
            let enabled: Vec<EnabledAction> = (0..2u16)
                .filter(|&n| left[n as usize] > 0)
                .map(|n| EnabledAction::new(actor(n), RunNode, VirtualTime::from_ns(step)))
                .collect();
            if enabled.is_empty() {
                return order;
            }
            let a = enabled[p.choose(step, &enabled)];
            left[usize::from(a.node.number())] -= 1;
            order.push(a.node.number());
            step += 1;
        }
    }

    #[test]
    fn depth_one_never_preempts() {
        let mut p = Pct::new(5, 1, 20);
        let mut firsts = Vec::new();
        for e in 0..20 {
            let o = run(&mut p, e, 10);
            assert!(o[..10].iter().all(|&n| n == o[0]), "one node runs to completion first: {o:?}");
            firsts.push(o[0]);
        }
        assert!(firsts.contains(&0) && firsts.contains(&1), "either node may go first");
    }

    #[test]
    fn depth_two_finds_a_depth_two_bug_with_the_promised_probability() {
        // Bug: node 0 runs exactly 5 steps, then node 1 runs. Needs node 0 on
        // top (1/2) and the change point at step 5 (1/k): p >= 1/(2*20).
        let mut p = Pct::new(11, 2, 20);
        let execs = 2000;
        let hits = (0..execs).filter(|&e| run(&mut p, e, 10)[..6] == [0, 0, 0, 0, 0, 1]).count();
        assert!(hits >= 35, "expected about {} hits, got {hits}", execs / 40);
    }

    #[test]
    fn executions_replay() {
        let mut a = Pct::new(3, 3, 20);
        let mut b = Pct::new(3, 3, 20);
        for e in 0..5 {
            run(&mut a, e, 10);
        }
        assert_eq!(run(&mut a, 5, 10), run(&mut b, 5, 10));
        assert_eq!(a.change_points().len(), 2);
        assert_eq!(a.spec().params["depth"], 3);
    }

    #[test]
    fn threads_are_node_and_kind() {
        // Frames to node 0 and node 0's run are separate threads: across
        // executions both orders occur.
        let mut p = Pct::new(1, 1, 10);
        let e = [
            EnabledAction::new(actor(0), RunNode, VirtualTime::from_ns(0)),
            EnabledAction::new(actor(0), ActionKind::DeliverFrame, VirtualTime::from_ns(0))
                .with_peer(engine::NodeId::new(1).unwrap()),
        ];
        let picks: Vec<usize> = (0..32)
            .map(|x| {
                p.begin_execution(x);
                p.choose(0, &e)
            })
            .collect();
        assert!(picks.contains(&0) && picks.contains(&1));
    }

    /// PCT's draws, pinned: they were recorded before the dead kind
    /// `FireTimer` left [`ActionKind`]. A thread's initial priority hashes
    /// its kind's [`ActionKind::code`], so the kinds after it keep their
    /// codes (see [`ActionKind`]).
    #[test]
    fn draws_are_those_recorded_before_fire_timer_left() {
        use ActionKind::*;
        let kinds = [RunNode, DeliverFrame, CompleteDisk, Crash, Restart, Partition, Heal, Pause, Resume, ClockJump];
        let enabled: Vec<EnabledAction> = kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| EnabledAction::new(actor(i as u16 % 3), k, VirtualTime::from_ns(5)))
            .collect();
        let recorded: [(u64, [usize; 40]); 3] = [
            (
                0,
                [
                    4, 3, 2, 1, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 6,
                    5, 4, 3, 6, 5, 4, 3,
                ],
            ),
            (
                1,
                [
                    3, 5, 4, 3, 6, 5, 4, 6, 9, 8, 7, 6, 9, 8, 7, 6, 9, 8, 7, 6, 9, 8, 7, 6, 9, 8, 7, 6, 9, 8, 7, 6, 9,
                    8, 7, 6, 9, 8, 7, 6,
                ],
            ),
            (
                6,
                [
                    6, 5, 4, 3, 4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1, 4,
                    3, 2, 1, 4, 3, 1, 0,
                ],
            ),
        ];
        let mut p = Pct::new(23, 3, 40);
        for (exec, want) in recorded {
            p.begin_execution(exec);
            let picks: Vec<usize> = (0..40).map(|i| p.choose(i, &enabled[(i as usize % 4)..])).collect();
            assert_eq!(picks, want, "execution {exec}");
        }
    }
}
