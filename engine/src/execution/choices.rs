//! The strategy's side of an execution: the choice points, what the
//! strategy answered, and the step log.

use rand_core::RngCore;
use simrng::streams::BOOT_CHOICE as BOOT_CHOICE_STREAM;
use simrng::Rng;

use crate::actions::Enabled;
use crate::pending::Pending;
use crate::steps::StepLog;
use crate::strategy::{default_choice, is_race, Decision, EnabledAction, Strategy};

/// The strategy's side of the execution: what it was asked and what it
/// answered.
pub(super) struct Choices {
    /// Choice points so far (steps with more than one enabled action).
    pub points: u64,
    /// Of them, races a guest can tell apart ([`crate::strategy::is_race`]),
    /// among those the strategy was asked about.
    pub races: u64,
    /// Steps so far, every action counted.
    pub steps: u64,
    /// A critical-transition probe's calm continuation picks with this
    /// instead of asking the strategy (see `ExploreSpec::calm_from`).
    pub calm_rng: Option<Rng>,
    /// In warm-start mode, the boot picks with this (seeded from the boot
    /// seed) instead of asking the strategy, so every execution of a run
    /// shares one boot.
    pub boot_rng: Option<Rng>,
    /// Picks other than the default scheduler's.
    pub decisions: Vec<Decision>,
    /// Every action taken, quiet runs folded.
    pub log: StepLog,
    /// The enabled set of the current step (kept to reuse its buffer).
    pub enabled: Vec<Enabled>,
    /// Its descriptions, as the strategy sees them.
    pub descs: Vec<EnabledAction>,
    /// The pending events of the current step (kept to reuse its buffers).
    pub pending: Pending,
}

impl Choices {
    /// Nothing asked yet; in warm-start mode (`boot_seed`) the boot picks
    /// from its own stream.
    pub fn new(boot_seed: Option<u64>) -> Choices {
        Choices {
            points: 0,
            races: 0,
            steps: 0,
            calm_rng: None,
            boot_rng: boot_seed.map(|s| simrng::stream(s, BOOT_CHOICE_STREAM)),
            decisions: Vec::new(),
            log: StepLog::new(),
            enabled: Vec::new(),
            descs: Vec::new(),
            pending: Pending::default(),
        }
    }

    /// The index of the action to take among `enabled` (non-empty).
    pub fn pick(&mut self, enabled: &[Enabled], strategy: &mut dyn Strategy) -> usize {
        if enabled.len() == 1 {
            return 0;
        }
        let step = self.points;
        self.points += 1;
        if let Some(rng) = self.calm_rng.as_mut().or(self.boot_rng.as_mut()) {
            return (rng.next_u64() % enabled.len() as u64) as usize;
        }
        self.descs.clear();
        self.descs.extend(enabled.iter().map(|e| e.desc));
        self.races += u64::from(is_race(&self.descs));
        let k = strategy.choose(step, &self.descs).min(enabled.len() - 1);
        if k != default_choice(&self.descs) {
            self.decisions.push(Decision { step, action: self.descs[k] });
        }
        k
    }
}
