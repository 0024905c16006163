//! The strategy's side of an execution: the choice points, what the
//! strategy answered, and the step log.

use rand_core::RngCore;
use simrng::streams::BOOT_CHOICE as BOOT_CHOICE_STREAM;
use simrng::Rng;
use simtime::VirtualTime;
use vmm::node::FreeRuns;

use crate::actions::Enabled;
use crate::pending::Pending;
use crate::steps::StepLog;
use crate::strategy::{default_choice, is_race, Decision, EnabledAction, Strategy};

/// The strategy's side of the execution: what it was asked and what it
/// answered.
pub(in crate::execution) struct Choices {
    /// Choice points so far (steps with more than one enabled action).
    points: u64,
    /// Of them, races a guest can tell apart ([`crate::strategy::is_race`]),
    /// among those the strategy was asked about.
    races: u64,
    /// Steps so far, every action counted.
    steps: u64,
    /// A critical-transition probe's calm continuation picks with this
    /// instead of asking the strategy (see `ExploreSpec::calm_from`).
    calm_rng: Option<Rng>,
    /// In warm-start mode, the boot picks with this (seeded from the boot
    /// seed) instead of asking the strategy, so every execution of a run
    /// shares one boot.
    boot_rng: Option<Rng>,
    /// Picks other than the default scheduler's.
    decisions: Vec<Decision>,
    /// Every action taken, quiet runs folded.
    log: StepLog,
    /// The enabled set of the current step (kept to reuse its buffer).
    enabled: Vec<Enabled>,
    /// Its descriptions, as the strategy sees them.
    descs: Vec<EnabledAction>,
    /// The pending events of the current step (kept to reuse its buffers).
    pending: Pending,
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

    /// Steps so far, every action counted.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// `n` more steps were taken.
    pub fn count_steps(&mut self, n: u64) {
        self.steps += n;
    }

    /// The pending events of the current step.
    pub fn pending(&self) -> &Pending {
        &self.pending
    }

    /// Takes the pending-events buffer out, to refill it.
    pub fn take_pending(&mut self) -> Pending {
        std::mem::take(&mut self.pending)
    }

    /// Puts the pending events of the current step back.
    pub fn put_pending(&mut self, pending: Pending) {
        self.pending = pending;
    }

    /// Takes the enabled-set buffer out, to refill it.
    pub fn take_enabled(&mut self) -> Vec<Enabled> {
        std::mem::take(&mut self.enabled)
    }

    /// Puts the enabled-set buffer back (kept to reuse it).
    pub fn put_enabled(&mut self, enabled: Vec<Enabled>) {
        self.enabled = enabled;
    }

    /// The step log: `desc` was taken at `at`; `quiet` when it added
    /// nothing visible to the trace.
    pub fn log(&mut self, at: VirtualTime, desc: EnabledAction, quiet: bool) {
        self.log.push(at, desc, quiet);
    }

    /// The step log's side of a node run that took `free` wake-ups by
    /// itself in a grant at `began` (`desc`): that grant and every wake-up
    /// but the last were quiet steps (the last is logged as the step's own).
    pub fn log_free_runs(&mut self, began: VirtualTime, desc: EnabledAction, free: FreeRuns) {
        self.log.push(began, desc, true);
        self.log.push_quiet(free.count - 1, free.prev, desc.node);
        self.steps += free.count;
    }

    /// A warm start's boot ended: the strategy makes the choices from now on.
    pub fn end_boot(&mut self) {
        self.boot_rng = None;
    }

    /// A critical-transition probe's calm continuation begins: choices are
    /// drawn from `seed` from now on.
    pub fn calm(&mut self, seed: u64) {
        self.calm_rng = Some(simrng::seeded(seed));
    }

    /// What the strategy decided, the choice and race points, and the step
    /// log, at the end.
    pub fn finish(&mut self) -> (Vec<Decision>, u64, u64, StepLog) {
        (std::mem::take(&mut self.decisions), self.points, self.races, std::mem::take(&mut self.log))
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
