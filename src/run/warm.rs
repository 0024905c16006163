//! `--warm-start` in a job: the boot its executions fork from, made on the
//! job's first execution and kept for the rest of the run
//! ([`engine::WarmStart`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use engine::strategy::Strategy;
use engine::{Boot, ExecutionResult, ExecutionSpec, Forked, WarmStart};

use super::execution::{exiting, scratch_dir, Executed};

/// A crash-state sibling from the crash point: (crash number, state, what it
/// gave).
pub(crate) type ForkedSibling = (u32, u64, Executed);

/// A job's boot.
pub(crate) enum WarmBoot {
    /// Every agent ready: executions fork from here.
    Ready {
        start: Box<WarmStart<'static>>,
        /// Removed once the boot's nodes are down (fields drop in order).
        _scratch: Scratch,
    },
    /// The boot itself ended the execution: every execution from it ends
    /// so.
    Ended(Box<ExecutionResult>),
}

/// A boot's scratch directory, removed on drop.
pub(crate) struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl WarmBoot {
    /// Boots `base`'s cluster (its boot seed set) in a scratch directory
    /// of its own, the run's `cancel` flag attached.
    pub fn boot(base: &ExecutionSpec, cancel: Arc<AtomicBool>) -> Result<WarmBoot> {
        static BOOTS: AtomicU64 = AtomicU64::new(0);
        let scratch = scratch_dir()?.join(format!("boot{}", BOOTS.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
        let mut spec = base.clone();
        spec.scratch = scratch.clone();
        spec.cancel = Some(cancel);
        if let Some(n) = spec.network.as_mut() {
            n.capture = true;
        }
        // The boot spec lives as long as the job's boot, that is, the run.
        let spec: &'static ExecutionSpec = Box::leak(Box::new(spec));
        let boot = WarmStart::boot(spec).context("the warm-start boot could not run")?;
        Ok(match boot {
            Boot::Ready(start) => WarmBoot::Ready { start, _scratch: Scratch(scratch) },
            Boot::Ended(r) => WarmBoot::Ended(r),
        })
    }

    /// Runs execution `spec` (the boot's spec with its own seed) from the
    /// boot, and its crash-state siblings from its crash point
    /// (`engine::WarmStart::run_branching`): the execution, then each
    /// sibling with (crash number, state).
    pub fn execute(
        &mut self,
        spec: &ExecutionSpec,
        strategy: &mut dyn Strategy,
        label: &str,
    ) -> Result<(Executed, Vec<ForkedSibling>)> {
        let r = match self {
            WarmBoot::Ready { start, .. } => start.run_branching(spec, strategy),
            WarmBoot::Ended(r) => Ok(Forked { result: r.as_ref().clone(), siblings: Vec::new() }),
        };
        if exiting() {
            anyhow::bail!("simcluster is exiting");
        }
        let forked = r.with_context(|| format!("{label} (seed {}) could not run from the boot", spec.seed))?;
        let siblings = forked.siblings.into_iter().map(|s| (s.crash, s.state, executed(s.result))).collect();
        Ok((executed(forked.result), siblings))
    }
}

/// A result with its captures taken out.
fn executed(mut result: ExecutionResult) -> Executed {
    let pcaps = std::mem::take(&mut result.pcaps);
    Executed { result, pcaps }
}
