//! The engine's side of the nodes' data disks: which request completes
//! next, and which crash state a power loss leaves.
//!
//! Completions are FIFO per disk (the oldest outstanding write or flush is
//! the one enabled), due `latency` after submission. Completion order is
//! not what decides durability: after a power loss every write that was not
//! made durable by a completed flush may or may not have reached the
//! platter, and the crash state (disksim's) says which did. So exploring
//! crash states covers what reordering completions would add for
//! durability; the guest-visible order of completions stays FIFO.

use std::collections::BTreeMap;

use disksim::{BlockStore, CrashModel, CrashState, Disk, StateCount};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// The data disk every node gets.
#[derive(Debug, Clone)]
pub struct DiskSpec {
    /// The empty filesystem every node starts with (shared, read-only).
    pub base: BlockStore,
    /// Submission to completion of a write or flush, virtual ns.
    pub latency_ns: u64,
    pub model: CrashModel,
    /// Crash points with at most this many states are enumerated across
    /// executions; larger ones are sampled from the seed.
    pub enumerate: u64,
    /// `[faults.disk] lost_flush`: the probability that a flush is
    /// acknowledged without making anything durable (a lying disk).
    pub lost_flush: f64,
}

/// What one power loss left on a disk: reported in the JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CrashPoint {
    /// 1-based crash number within the execution.
    pub crash: u32,
    pub node: String,
    /// Virtual time (ns).
    pub time: u64,
    /// Writes a power loss could still lose.
    pub volatile_writes: usize,
    /// Distinct crash states (a lower bound when counting gave up).
    pub states: u128,
    pub states_exact: bool,
    /// Index of the state applied when the states are enumerable (small
    /// enough), else `None` (sampled).
    pub chosen: Option<u64>,
}

impl CrashPoint {
    /// Can the run explore every state of this point, one execution each?
    pub fn enumerable(&self, limit: u64) -> bool {
        self.states_exact && self.states <= u128::from(limit)
    }
}

/// Chooses and applies the crash state of a power loss. `forced` is the
/// state index to use (an enumeration's sibling execution); otherwise the
/// index (or, for large logs, the state) is drawn from `seed`.
pub(super) fn crash_disk(
    disk: &mut Disk,
    spec: &DiskSpec,
    crash: u32,
    node: &str,
    time: u64,
    seed: u64,
    forced: &BTreeMap<u32, u64>,
) -> Result<(CrashPoint, CrashState), disksim::CrashError> {
    let count = disk.crash_state_count(spec.model);
    let (states, exact) = match count {
        StateCount::Exact(n) => (n, true),
        StateCount::AtLeast(n) => (n, false),
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6469_736b ^ (u64::from(crash) << 40));
    let mut point = CrashPoint {
        crash,
        node: node.to_string(),
        time,
        volatile_writes: disk.volatile_writes().count(),
        states,
        states_exact: exact,
        chosen: None,
    };
    let state = if point.enumerable(spec.enumerate) {
        let k = match forced.get(&crash) {
            Some(&k) => k.min(states.saturating_sub(1) as u64),
            None => rand_core::RngCore::next_u64(&mut rng) % (states.max(1) as u64),
        };
        point.chosen = Some(k);
        disk.crash_states(spec.model).nth(k as usize).unwrap_or_default()
    } else {
        disk.sample_crash_state(spec.model, &mut rng)
    };
    disk.apply_crash(&state)?;
    Ok((point, state))
}
