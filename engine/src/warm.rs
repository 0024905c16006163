//! Warm start: boot a cluster once, then run each execution of a run from
//! that boot in a forked child ([`WarmStart`]).
//!
//! In warm-start mode ([`ExecutionSpec::boot_seed`]) the boot does not
//! depend on the execution: it is drawn from the run's boot seed, the
//! strategy is not asked, and no fault happens in it. Once every agent is
//! ready the execution stands at [`Execution::is_booted`], and
//! `Execution::end_boot(seed)` starts every stream again from the
//! execution's own seed. A cold run in this mode does that at its next
//! step; [`WarmStart`] instead stops there once, then for each execution
//! forks the whole process (`vmm::fork`), lets the child take its nodes
//! over (`NodeRuntime::rehome`: KVM objects cannot cross a fork), end the
//! boot with the execution's seed and run to the verdict, and reads the
//! child's [`ExecutionResult`] back as JSON. So a warm execution and a cold
//! one in warm-start mode give the same trace, hash for hash; only the
//! boot's wall time is saved.
//!
//! What can be forked: KVM nodes. A user-mode Linux node is a host process
//! of its own that fork(2) does not copy; [`WarmStart::boot`] refuses it
//! before booting anything.

use std::time::{Duration, Instant};

use vmm::runtime::RuntimeKind;

use crate::execution::{Execution, Step};
use crate::outcome::ExecutionResult;
use crate::spec::{EngineError, ExecutionSpec};
use crate::strategy::{EnabledAction, Strategy, StrategySpec};
use serde::{Deserialize, Serialize};

/// A cluster booted once in warm-start mode, from which executions fork.
pub struct WarmStart<'a> {
    /// Stopped where every agent is ready. Taken (in a child only) to run
    /// on.
    booted: Option<Execution<'a>>,
    /// Every node has been through `prepare_fork`.
    prepared: bool,
    /// Wall time from the start of [`WarmStart::boot`] to the booted point.
    boot_wall: Duration,
}

/// What [`WarmStart::boot`] came to.
pub enum Boot<'a> {
    /// Every agent is ready: executions can fork from here.
    Ready(Box<WarmStart<'a>>),
    /// The boot itself ended the execution (a node panicked, a start
    /// command failed, the time limit passed): every execution from this
    /// boot would end the same way, so this is each one's result.
    Ended(Box<ExecutionResult>),
}

/// The boot never asks the strategy (see `Choices::boot_rng`); this one
/// says so if it were.
struct NoStrategy;

impl Strategy for NoStrategy {
    fn spec(&self) -> StrategySpec {
        StrategySpec { name: "boot".into(), params: Default::default() }
    }
    fn begin_execution(&mut self, _execution: u64) -> bool {
        true
    }
    fn choose(&mut self, step: u64, _enabled: &[EnabledAction]) -> usize {
        unreachable!("the strategy was asked at boot step {step}: warm-start boots pick from the boot seed")
    }
}

impl<'a> WarmStart<'a> {
    /// Boots `spec`'s cluster (in warm-start mode: `spec.boot_seed` set)
    /// until every agent is ready.
    pub fn boot(spec: &'a ExecutionSpec) -> Result<Boot<'a>, EngineError> {
        if spec.boot_seed.is_none() {
            return Err(EngineError::Warm("warm start needs a boot seed (ExecutionSpec::boot_seed)".into()));
        }
        if spec.runtime != RuntimeKind::Kvm {
            return Err(EngineError::Warm(
                "warm start needs the KVM runtime: a user-mode Linux node is a host process of its own, which fork(2) \
                 does not copy"
                    .into(),
            ));
        }
        let began = Instant::now();
        let mut ex = Execution::new(spec)?;
        while !ex.is_booted() {
            if ex.step(&mut NoStrategy)? == Step::Done {
                return Ok(Boot::Ended(Box::new(ex.finish())));
            }
        }
        Ok(Boot::Ready(Box::new(WarmStart { booted: Some(ex), prepared: false, boot_wall: began.elapsed() })))
    }

    /// Wall time the boot took (once, for every execution forked from it).
    pub fn boot_wall(&self) -> Duration {
        self.boot_wall
    }

    /// Runs the execution `spec` from the boot, in a forked child, to its
    /// verdict. `spec` is the boot's spec but for what only the execution
    /// reads: its [`ExecutionSpec::seed`] and, for a crash-state sibling or
    /// a probe, `explore.crash_states` and `explore.calm_from`. The
    /// strategy (its `begin_execution` called) is asked at every choice
    /// point after the boot, in the child: what it learns there stays
    /// there, so a strategy that carries state from one execution to the
    /// next must not be used. The boot stays as it was, for the next
    /// execution. The boot spec's `cancel` kills the child.
    pub fn run(&mut self, spec: &ExecutionSpec, strategy: &mut dyn Strategy) -> Result<ExecutionResult, EngineError> {
        Ok(self.fork_run(spec, strategy, false)?.result)
    }

    /// [`Self::run`], and the execution's crash-state siblings branched at
    /// its crash point: at its first power loss whose disk states can be
    /// enumerated, the child forks once per state it does not draw, and
    /// each of those runs on from there with that state forced and its own
    /// copy of the strategy. A sibling is thus the execution with the same
    /// strategy and that crash state forced (`explore.crash_states`),
    /// which a cold run of that spec under a fresh copy of the strategy
    /// gives too; nothing before the crash point runs twice.
    pub fn run_branching(&mut self, spec: &ExecutionSpec, strategy: &mut dyn Strategy) -> Result<Forked, EngineError> {
        self.fork_run(spec, strategy, true)
    }

    fn fork_run(
        &mut self,
        spec: &ExecutionSpec,
        strategy: &mut dyn Strategy,
        branch: bool,
    ) -> Result<Forked, EngineError> {
        let ex = self.booted.as_mut().expect("only a child takes the boot, and it never returns");
        if !self.prepared {
            ex.prepare_fork()?;
            self.prepared = true;
        }
        let cancel = spec.cancel.clone().or_else(|| ex.spec().cancel.clone());
        let booted = &mut self.booted;
        let child = move || {
            let mut ex = booted.take().expect("the child's copy of the boot");
            // The child's own spec, for as long as the child lives (it
            // leaves through _exit).
            ex.use_spec(Box::leak(Box::new(spec.clone())));
            let r = run_from_boot(&mut ex, strategy, branch)
                .map(|siblings| Forked { result: ex.finish_in_place(), siblings })
                .map_err(|e| e.to_string());
            serde_json::to_vec(&r).expect("results always serialise")
        };
        let mut forked: Forked = in_child(child, cancel.as_deref())?;
        // The child counted from the fork; a cold run from the first spawn.
        forked.result.boot_wall = Some(self.boot_wall);
        for s in forked.siblings.iter_mut() {
            s.result.boot_wall = Some(self.boot_wall);
        }
        Ok(forked)
    }
}

/// An execution run from a warm start, and its crash-state siblings
/// ([`WarmStart::run_branching`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Forked {
    /// The execution's own result.
    pub result: ExecutionResult,
    /// Its siblings, by crash state (the drawn one left out).
    pub siblings: Vec<Sibling>,
}

/// A crash-state sibling: the execution with crash number `crash`
/// forced into state `state`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sibling {
    /// The crash number (1-based).
    pub crash: u32,
    /// The crash state forced.
    pub state: u64,
    /// Its result.
    pub result: ExecutionResult,
}

/// Runs `child` in a forked child and decodes what it sent back: a JSON
/// `Result<T, String>`.
fn in_child<T: serde::de::DeserializeOwned>(
    child: impl FnOnce() -> Vec<u8>,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<T, EngineError> {
    // SAFETY: the child touches only this execution's state, which this
    // thread owns; its nodes re-make what other threads held (the KVM
    // watchdogs) in `rehome`.
    let bytes = unsafe { vmm::fork::in_child(child, cancel) }.map_err(|e| match e {
        vmm::fork::ChildError::Cancelled => EngineError::Cancelled,
        e => EngineError::Warm(e.to_string()),
    })?;
    let r: Result<T, String> = serde_json::from_slice(&bytes)
        .map_err(|e| EngineError::Warm(format!("the forked execution's result does not parse: {e}")))?;
    r.map_err(EngineError::Warm)
}

/// In the child: takes the nodes over, ends the boot with the execution's
/// seed, and steps to the verdict; with `branch`, forks the crash-state
/// siblings at the crash point on the way (see [`WarmStart::run_branching`]).
fn run_from_boot(
    ex: &mut Execution<'_>,
    strategy: &mut dyn Strategy,
    branch: bool,
) -> Result<Vec<Sibling>, EngineError> {
    ex.rehome()?;
    ex.end_boot(ex.spec().seed)?;
    ex.branch_at_crash(branch);
    let mut siblings = Vec::new();
    loop {
        match ex.step(strategy)? {
            Step::Running => {}
            Step::Done => return Ok(siblings),
            Step::CrashBranch(b) => {
                for state in (0..b.states).filter(|&k| k != b.chosen) {
                    let result = fork_sibling(ex, strategy, b.crash, state)?;
                    siblings.push(Sibling { crash: b.crash, state, result });
                }
            }
        }
    }
}

/// At a crash branch: the sibling with crash `crash` forced into `state`,
/// run in a grandchild to its verdict. The execution goes on as it was.
fn fork_sibling(
    ex: &mut Execution<'_>,
    strategy: &mut dyn Strategy,
    crash: u32,
    state: u64,
) -> Result<ExecutionResult, EngineError> {
    ex.prepare_fork()?;
    let child = || {
        let r = (|| {
            ex.rehome()?;
            ex.branch_at_crash(false);
            ex.force_crash_state(crash, state);
            while ex.step(strategy)? == Step::Running {}
            Ok::<_, EngineError>(ex.finish_in_place())
        })()
        .map_err(|e| e.to_string());
        serde_json::to_vec(&r).expect("results always serialise")
    };
    in_child(child, None)
}
