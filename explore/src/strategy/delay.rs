//! Delay-bounded scheduling (Emmi, Qadeer, Rakamarić, POPL 2011).
//!
//! A deterministic default scheduler (earliest time, then lowest node id:
//! [`engine::strategy::default_order`]) is perturbed by at most d delays.
//!
//! Delays are spent only where they change what a guest sees: at races
//! ([`engine::strategy::is_race`]), where the node the scheduler would serve
//! next has a second action enabled and one of the two delivers something
//! to it (two frames to one node, a frame and the node's own timers, a disk
//! completion). The races of an execution are numbered 0, 1, ...; a delay
//! at race r skips the action the scheduler would run and takes the next of
//! that node's actions in default order; j delays at the same race skip j
//! (clamped to the last). Choices between different nodes' actions, which
//! no guest can tell apart, are left to the scheduler and cost no delay.
//! (Counting every choice point, a small cluster has hundreds, of which one
//! or two matter, and the delays went to the rest.) The skipped action
//! stays enabled, so it usually runs one step later: a delay is a small,
//! local reordering, and few of them reach many bugs.
//!
//! Exhaustive mode enumerates every placement of up to d delays over races
//! [0, horizon) ([`DelayPlacements`]); sampling mode draws d delay races per
//! execution from a seeded generator. The run measures the horizon as the
//! races of the default schedule (`ExecutionResult::race_points`).

use super::{below, execution_rng};
use engine::strategy::{default_choice, race_candidates, EnabledAction, Strategy, StrategySpec};
use std::collections::BTreeMap;

/// All multisets of at most `bound` delay steps drawn from [0, horizon), as
/// nondecreasing vectors: first the empty one, then all of size 1 in
/// lexicographic order, then size 2, and so on.
#[derive(Clone, Debug)]
pub struct DelayPlacements {
    bound: u32,
    horizon: u64,
    cur: Option<Vec<u64>>,
    done: bool,
}

impl DelayPlacements {
    /// The placements of at most `bound` delays over steps `[0, horizon)`,
    /// from the empty one.
    pub fn new(bound: u32, horizon: u64) -> Self {
        DelayPlacements { bound, horizon, cur: None, done: false }
    }

    /// How many placements the iterator yields: sum over j <= bound of
    /// C(horizon + j - 1, j). Saturates at u128::MAX.
    pub fn count_all(bound: u32, horizon: u64) -> u128 {
        let mut total: u128 = 1;
        let mut term: u128 = 1; // C(h + j - 1, j)
        for j in 1..=bound as u128 {
            if horizon == 0 {
                break;
            }
            term = term.saturating_mul(horizon as u128 + j - 1) / j;
            total = total.saturating_add(term);
        }
        total
    }
}

impl Iterator for DelayPlacements {
    type Item = Vec<u64>;

    fn next(&mut self) -> Option<Vec<u64>> {
        if self.done {
            return None;
        }
        let next = match self.cur.take() {
            None => Vec::new(),
            Some(mut c) => {
                if let Some(i) = c.iter().rposition(|&x| x + 1 < self.horizon) {
                    let v = c[i] + 1;
                    for x in &mut c[i..] {
                        *x = v;
                    }
                    c
                } else if (c.len() as u32) < self.bound && self.horizon > 0 {
                    vec![0; c.len() + 1]
                } else {
                    self.done = true;
                    return None;
                }
            }
        };
        self.cur = Some(next.clone());
        Some(next)
    }
}

#[derive(Clone, Debug)]
enum Mode {
    Exhaustive { iter: DelayPlacements, next_exec: u64 },
    Sample { seed: u64 },
}

/// The delay-bounded strategy: the default scheduler with at most `bound`
/// delays per execution, placed exhaustively or sampled.
pub struct DelayBounded {
    bound: u32,
    horizon: u64,
    mode: Mode,
    /// Sorted delay races of the current execution.
    delays: Vec<u64>,
    /// Races seen so far in the current execution.
    races: u64,
}

impl DelayBounded {
    /// Every placement of at most `bound` delays in steps [0, horizon), one
    /// per execution; `begin_execution` returns false when all are done.
    pub fn exhaustive(bound: u32, horizon: u64) -> Self {
        DelayBounded {
            bound,
            horizon,
            mode: Mode::Exhaustive { iter: DelayPlacements::new(bound, horizon), next_exec: 0 },
            delays: Vec::new(),
            races: 0,
        }
    }

    /// `bound` delays per execution at steps drawn uniformly from [0, horizon).
    pub fn sampling(seed: u64, bound: u32, horizon: u64) -> Self {
        DelayBounded { bound, horizon: horizon.max(1), mode: Mode::Sample { seed }, delays: Vec::new(), races: 0 }
    }

    /// The delay races of the current execution (sorted, may repeat).
    pub fn delays(&self) -> &[u64] {
        &self.delays
    }
}

impl Strategy for DelayBounded {
    fn spec(&self) -> StrategySpec {
        let mut params =
            BTreeMap::from([("bound".to_string(), self.bound.into()), ("horizon".to_string(), self.horizon.into())]);
        let mode = match &self.mode {
            Mode::Exhaustive { .. } => "exhaustive",
            Mode::Sample { seed } => {
                params.insert("seed".to_string(), (*seed).into());
                "sample"
            }
        };
        params.insert("mode".to_string(), mode.into());
        // What the horizon and the delays count (before, every choice point).
        params.insert("counts".to_string(), "races".into());
        StrategySpec { name: "delay".into(), params }
    }

    fn begin_execution(&mut self, execution: u64) -> bool {
        self.races = 0;
        match &mut self.mode {
            Mode::Exhaustive { iter, next_exec } => {
                if execution != *next_exec {
                    // Random access (a replay, or a parallel run's worker
                    // taking every N-th execution): skip ahead from here,
                    // or restart when going back.
                    let from = if execution > *next_exec {
                        *next_exec
                    } else {
                        *iter = DelayPlacements::new(self.bound, self.horizon);
                        0
                    };
                    for _ in from..execution {
                        if iter.next().is_none() {
                            return false;
                        }
                    }
                }
                *next_exec = execution + 1;
                match iter.next() {
                    Some(d) => {
                        self.delays = d;
                        true
                    }
                    None => false,
                }
            }
            Mode::Sample { seed } => {
                let mut rng = execution_rng(*seed, execution);
                self.delays = (0..self.bound).map(|_| below(&mut rng, self.horizon)).collect();
                self.delays.sort_unstable();
                true
            }
        }
    }

    fn choose(&mut self, _step: u64, enabled: &[EnabledAction]) -> usize {
        let candidates = race_candidates(enabled);
        if candidates.len() < 2 {
            return default_choice(enabled);
        }
        let race = self.races;
        self.races += 1;
        let skips = self.delays.iter().filter(|&&d| d == race).count();
        candidates[skips.min(candidates.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use engine::strategy::ActionKind::{DeliverFrame, RunNode};
    use simtime::VirtualTime;

    #[test]
    fn placements_enumerate_multisets() {
        let all: Vec<Vec<u64>> = DelayPlacements::new(2, 3).collect();
        let expect: Vec<Vec<u64>> = vec![
            vec![],
            vec![0],
            vec![1],
            vec![2],
            vec![0, 0],
            vec![0, 1],
            vec![0, 2],
            vec![1, 1],
            vec![1, 2],
            vec![2, 2],
        ];
        assert_eq!(all, expect);
        assert_eq!(DelayPlacements::count_all(2, 3), 10);
        for (b, h) in [(0, 5), (1, 0), (3, 4), (2, 10)] {
            assert_eq!(DelayPlacements::new(b, h).count() as u128, DelayPlacements::count_all(b, h), "b={b} h={h}");
        }
    }

    /// Node 0 with `len` frames to receive from each of nodes 1 to 3, all due
    /// at once (a race at every step), and node 1 with `len` steps of its own
    /// to run (never a race: no delivery to node 1); returns the senders of
    /// node 0's frames in delivery order, and whether node 1 ran first.
    fn run(s: &mut DelayBounded, len: usize) -> (Vec<u16>, bool) {
        let mut frames = [len; 3];
        let mut runs = len;
        let (mut order, mut node1_first) = (Vec::new(), None);
        for step in 0.. {
            let mut enabled: Vec<EnabledAction> = Vec::new();
            if runs > 0 {
                enabled.push(EnabledAction::new(actor(1), RunNode, VirtualTime::from_ns(0)));
            }
            for (peer, _) in frames.iter().enumerate().filter(|(_, &n)| n > 0) {
                let mut a = EnabledAction::new(actor(0), DeliverFrame, VirtualTime::from_ns(0));
                a.peer = engine::NodeId::new(peer as u16 + 1);
                enabled.push(a);
            }
            if enabled.is_empty() {
                break;
            }
            let a = enabled[s.choose(step, &enabled)];
            if a.kind == RunNode {
                runs -= 1;
                node1_first.get_or_insert(true);
            } else {
                let peer = a.peer.unwrap();
                frames[peer.index()] -= 1;
                order.push(peer.number());
                node1_first.get_or_insert(false);
            }
        }
        (order, node1_first.unwrap_or(false))
    }

    #[test]
    fn zero_delays_is_the_default_scheduler() {
        let mut s = DelayBounded::exhaustive(0, 10);
        assert!(s.begin_execution(0));
        assert_eq!(run(&mut s, 2).0, vec![1, 1, 2, 2, 3, 3]);
        assert!(!s.begin_execution(1), "only one schedule with no delays");
    }

    #[test]
    fn one_delay_reorders_one_nodes_deliveries() {
        let mut s = DelayBounded::exhaustive(1, 6);
        let mut schedules = Vec::new();
        let mut e = 0;
        while s.begin_execution(e) {
            let (order, node1_first) = run(&mut s, 2);
            assert!(!node1_first, "a delay never goes to a choice no guest sees");
            schedules.push(order);
            e += 1;
        }
        assert_eq!(schedules.len(), 7);
        assert_eq!(schedules[1], vec![2, 1, 1, 2, 3, 3], "a delay at race 0 lets node 2's frame go first");
        assert!(schedules.contains(&vec![1, 1, 2, 3, 2, 3]));
    }

    #[test]
    fn only_races_count() {
        use engine::strategy::is_race;
        let at = |node, kind| EnabledAction::new(actor(node), kind, VirtualTime::from_ns(0));
        // Two nodes' runs, and a frame to a node the scheduler does not serve first: no race.
        assert!(!is_race(&[at(0, RunNode), at(1, RunNode)]));
        assert!(!is_race(&[at(0, RunNode), at(1, DeliverFrame)]));
        // A frame racing the node's own run, or a second frame to it: a race.
        assert!(is_race(&[at(0, RunNode), at(0, DeliverFrame)]));
        assert!(is_race(&[at(0, DeliverFrame), at(0, DeliverFrame), at(1, RunNode)]));
        // A fault is a choice of its own, not an order.
        assert!(!is_race(&[at(0, DeliverFrame), at(0, engine::strategy::ActionKind::Crash)]));
    }

    #[test]
    fn exhaustive_random_access_matches_sequential() {
        let mut seq = DelayBounded::exhaustive(2, 5);
        let mut all = Vec::new();
        let mut e = 0;
        while seq.begin_execution(e) {
            all.push(seq.delays().to_vec());
            e += 1;
        }
        let mut ra = DelayBounded::exhaustive(2, 5);
        assert!(ra.begin_execution(7));
        assert_eq!(ra.delays(), &all[7][..]);
        assert!(!ra.begin_execution(all.len() as u64));
        // A parallel worker's stride (forward skips), then a step back.
        let mut stride = DelayBounded::exhaustive(2, 5);
        for e in (1..all.len()).step_by(3) {
            assert!(stride.begin_execution(e as u64));
            assert_eq!(stride.delays(), &all[e][..], "execution {e}");
        }
        assert!(stride.begin_execution(2));
        assert_eq!(stride.delays(), &all[2][..]);
    }

    #[test]
    fn sampling_is_seeded_and_bounded() {
        let mut a = DelayBounded::sampling(4, 2, 100);
        let mut b = DelayBounded::sampling(4, 2, 100);
        a.begin_execution(9);
        b.begin_execution(9);
        assert_eq!(a.delays(), b.delays());
        assert_eq!(a.delays().len(), 2);
        assert!(a.delays().iter().all(|&d| d < 100));
        let distinct: std::collections::BTreeSet<Vec<u64>> = (0..50)
            .map(|e| {
                a.begin_execution(e);
                a.delays().to_vec()
            })
            .collect();
        assert!(distinct.len() > 40);
        assert_eq!(a.spec().params["mode"], "sample");
    }

    #[test]
    fn delays_beyond_the_enabled_set_clamp() {
        let mut s = DelayBounded::exhaustive(3, 1);
        for e in 0..4 {
            s.begin_execution(e);
        }
        assert_eq!(s.delays(), &[0, 0, 0]);
        let en = [
            EnabledAction::new(actor(0), RunNode, VirtualTime::from_ns(0)),
            EnabledAction::new(actor(0), DeliverFrame, VirtualTime::from_ns(0)),
        ];
        assert_eq!(s.choose(0, &en), 1);
    }
}
