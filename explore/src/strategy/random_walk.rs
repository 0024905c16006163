//! Weighted random walk (MaceMC): at each step pick an enabled action with
//! probability proportional to the weight of its kind. Weights let faults be
//! rare (a crash every step would never let the system make progress) while
//! ordinary events dominate.

use super::{below, execution_rng};
use engine::strategy::{ActionKind, EnabledAction, Strategy, StrategySpec, AT_RISK_FACTOR};
use simrng::Rng;
use std::collections::BTreeMap;

/// Integer weight per action kind (integers keep the walk exact and portable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindWeights(pub BTreeMap<ActionKind, u32>);

impl KindWeights {
    /// Every kind weight 1: a uniform walk over enabled actions.
    pub fn uniform() -> Self {
        KindWeights(ActionKind::ALL.iter().map(|&k| (k, 1)).collect())
    }
    /// The weight of kind `k`; 0 for a kind not in the map.
    pub fn get(&self, k: ActionKind) -> u32 {
        self.0.get(&k).copied().unwrap_or(0)
    }
    /// Sets the weight of kind `k` to `w` (0: never chosen while an action
    /// of non-zero weight is enabled).
    pub fn set(mut self, k: ActionKind, w: u32) -> Self {
        self.0.insert(k, w);
        self
    }
}

impl Default for KindWeights {
    /// Progress events 100, restarts, heals and resumes 10, crashes,
    /// partitions, pauses, clock jumps, connection faults and kills 1.
    fn default() -> Self {
        let w = |k: ActionKind| match k {
            ActionKind::Crash
            | ActionKind::PowerFailure
            | ActionKind::Partition
            | ActionKind::Pause
            | ActionKind::ClockJump
            | ActionKind::ConnReset
            | ActionKind::ConnStall
            | ActionKind::Kill => 1,
            ActionKind::Restart | ActionKind::Heal | ActionKind::Resume => 10,
            _ => 100,
        };
        KindWeights(ActionKind::ALL.iter().map(|&k| (k, w(k))).collect())
    }
}

/// The weighted random walk strategy (`random`); an at-risk action's weight
/// is multiplied by [`AT_RISK_FACTOR`].
pub struct RandomWalk {
    seed: u64,
    weights: KindWeights,
    rng: Rng,
}

impl RandomWalk {
    /// A walk with these weights whose draws for execution `e` come from
    /// `seed` and `e` alone.
    pub fn new(seed: u64, weights: KindWeights) -> Self {
        RandomWalk { seed, weights, rng: execution_rng(seed, 0) }
    }
}

impl Strategy for RandomWalk {
    fn spec(&self) -> StrategySpec {
        let weights: serde_json::Map<String, serde_json::Value> =
            self.weights.0.iter().map(|(k, w)| (k.name().to_string(), (*w).into())).collect();
        StrategySpec {
            name: "random".into(),
            params: BTreeMap::from([("seed".to_string(), self.seed.into()), ("weights".to_string(), weights.into())]),
        }
    }

    fn begin_execution(&mut self, execution: u64) -> bool {
        self.rng = execution_rng(self.seed, execution);
        true
    }

    /// Actions whose kind has weight 0 are never chosen, unless every enabled
    /// action has weight 0; then the walk picks uniformly among them.
    fn choose(&mut self, _step: u64, enabled: &[EnabledAction]) -> usize {
        assert!(!enabled.is_empty(), "a strategy needs at least one enabled action");
        let weight = |a: &EnabledAction| self.weights.get(a.kind) as u64 * if a.at_risk { AT_RISK_FACTOR } else { 1 };
        let total: u64 = enabled.iter().map(weight).sum();
        if total == 0 {
            return below(&mut self.rng, enabled.len() as u64) as usize;
        }
        let mut r = below(&mut self.rng, total);
        for (i, a) in enabled.iter().enumerate() {
            let w = weight(a);
            if r < w {
                return i;
            }
            r -= w;
        }
        unreachable!("r < total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::actor;
    use simtime::VirtualTime;
    use ActionKind::*;

    fn enabled() -> Vec<EnabledAction> {
        vec![
            EnabledAction::new(actor(0), RunNode, VirtualTime::from_ns(5)),
            EnabledAction::new(actor(1), RunNode, VirtualTime::from_ns(5)),
            EnabledAction::new(actor(2), Crash, VirtualTime::from_ns(5)),
            EnabledAction::new(actor(1), DeliverFrame, VirtualTime::from_ns(7))
                .with_peer(engine::NodeId::new(2).unwrap()),
        ]
    }

    fn walk(s: &mut RandomWalk, exec: u64, steps: u64) -> Vec<usize> {
        s.begin_execution(exec);
        (0..steps).map(|i| s.choose(i, &enabled())).collect()
    }

    #[test]
    fn same_seed_same_walk_and_executions_replay_independently() {
        let mut a = RandomWalk::new(9, KindWeights::default());
        let mut b = RandomWalk::new(9, KindWeights::default());
        let a3 = {
            for e in 0..3 {
                walk(&mut a, e, 50);
            }
            walk(&mut a, 3, 50)
        };
        assert_eq!(a3, walk(&mut b, 3, 50), "execution 3 replays without 0..2");
        assert_ne!(walk(&mut b, 4, 50), a3);
    }

    #[test]
    fn an_at_risk_fault_weighs_more_than_its_kind() {
        let mut crash = EnabledAction::new(actor(2), Crash, VirtualTime::from_ns(5));
        let plain = [EnabledAction::new(actor(0), RunNode, VirtualTime::from_ns(5)), crash];
        crash.at_risk = true;
        let risky = [EnabledAction::new(actor(0), RunNode, VirtualTime::from_ns(5)), crash];
        let picks = |enabled: &[EnabledAction]| {
            let mut w = RandomWalk::new(3, KindWeights::uniform());
            (0..4000).filter(|&s| w.choose(s, enabled) == 1).count()
        };
        let (p, r) = (picks(&plain), picks(&risky));
        // 1/2 against 4/5 of the picks.
        assert!((1800..2200).contains(&p), "{p}");
        assert!((3000..3400).contains(&r), "{r}");
    }

    #[test]
    fn weights_shape_the_distribution() {
        let mut s = RandomWalk::new(1, KindWeights::default());
        let picks = walk(&mut s, 0, 30_000);
        let mut counts = [0u32; 4];
        for p in picks {
            counts[p] += 1;
        }
        // Weights 100:100:1:100 -> the crash gets ~1/301 of the picks.
        assert!(counts[2] > 30 && counts[2] < 200, "{counts:?}");
        for i in [0, 1, 3] {
            assert!(counts[i] > 9_000 && counts[i] < 11_000, "{counts:?}");
        }
    }

    #[test]
    fn zero_weight_never_chosen_unless_all_zero() {
        let w = KindWeights::uniform().set(Crash, 0);
        let mut s = RandomWalk::new(3, w);
        assert!(!walk(&mut s, 0, 2000).contains(&2));
        let only_crash = [
            EnabledAction::new(actor(0), Crash, VirtualTime::from_ns(0)),
            EnabledAction::new(actor(1), Crash, VirtualTime::from_ns(0)),
        ];
        let picks: Vec<usize> = (0..100).map(|i| s.choose(i, &only_crash)).collect();
        assert!(picks.contains(&0) && picks.contains(&1));
    }

    #[test]
    fn spec_names_parameters() {
        let s = RandomWalk::new(42, KindWeights::default());
        let spec = s.spec();
        assert_eq!(spec.name, "random");
        assert_eq!(spec.params["seed"], 42);
        assert_eq!(spec.params["weights"]["Crash"], 1);
        // Every kind there is, and no other: not the removed `FireTimer`,
        // which files written before still name (see `StrategySpec`).
        let names: Vec<&str> = spec.params["weights"].as_object().unwrap().keys().map(String::as_str).collect();
        let mut all: Vec<&str> = ActionKind::ALL.iter().map(|k| k.name()).collect();
        all.sort_unstable();
        assert_eq!(names, all);
        assert!(!names.contains(&"FireTimer"));
    }

    /// Every kind the engine offers, on a few nodes, one of them at risk.
    fn every_kind() -> Vec<EnabledAction> {
        let mut e: Vec<EnabledAction> = [RunNode, DeliverFrame, CompleteDisk, Crash, Restart, Partition, Heal, Pause]
            .iter()
            .enumerate()
            .map(|(i, &k)| EnabledAction::new(actor(i as u16 % 3), k, VirtualTime::from_ns(5 + i as u64)))
            .collect();
        e.push(EnabledAction::new(actor(1), Resume, VirtualTime::from_ns(9)));
        e.push(EnabledAction::new(actor(2), ClockJump, VirtualTime::from_ns(9)));
        e[3].at_risk = true;
        e
    }

    /// The walk's draws, pinned: they were recorded before the dead kind
    /// `FireTimer` left [`ActionKind`] (and the default weights), and must
    /// not move, since a run's executions are named by (seed, index) alone.
    /// A kind's weight takes part in a draw only when an action of that
    /// kind is enabled, and none ever was of `FireTimer`.
    #[test]
    fn draws_are_those_recorded_before_fire_timer_left() {
        let recorded: [(u64, [usize; 48]); 2] = [
            (
                0,
                [
                    1, 1, 2, 2, 2, 0, 1, 0, 1, 0, 0, 0, 1, 2, 0, 0, 2, 2, 0, 2, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    2, 4, 1, 1, 0, 0, 1, 1, 2, 1, 0, 0, 1, 1, 1,
                ],
            ),
            (
                5,
                [
                    0, 1, 1, 1, 0, 2, 2, 3, 0, 0, 0, 2, 1, 0, 0, 0, 2, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 1, 2, 2, 1, 1, 1,
                    2, 1, 0, 1, 0, 2, 1, 2, 4, 1, 2, 8, 1, 1, 0,
                ],
            ),
        ];
        let mut s = RandomWalk::new(17, KindWeights::default());
        for (exec, want) in recorded {
            s.begin_execution(exec);
            let picks: Vec<usize> = (0..48).map(|i| s.choose(i, &every_kind()[..(2 + i as usize % 9)])).collect();
            assert_eq!(picks, want, "execution {exec}");
        }
    }
}
