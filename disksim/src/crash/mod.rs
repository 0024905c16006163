//! Crash states: what the platter may hold after a power loss.
//!
//! # The model
//!
//! After power loss the disk holds every durable write, plus some subset of the
//! volatile ones (see [`crate::disk`] for which writes are which). Writes reach
//! the platter *in issue order per sector*: for each sector, the value after the
//! crash is that of the last-issued write to it that persisted, or the durable
//! value if none did. This is the model of CrashMonkey/B3 (replay a subset of the
//! bios since the last flush, in order) and of ALICE's block-level persistence
//! with in-order overwrites of the same block. It means:
//!
//! - a later write of a sector may survive while an earlier one is lost, and the
//!   earlier one may survive while the later one is lost, but once both persist
//!   the later one wins (no "time travel" of one LBA);
//! - a volatile write issued *before* a durable write to the same sectors can no
//!   longer show through those sectors, so it only counts on the sectors no later
//!   durable write covers (its *effective* sectors); a volatile write with none
//!   is dead and takes no part in crash states.
//!
//! Two crash models ([`CrashModel`]):
//! - atomic writes (default): a write persists whole or not at all. A crash
//!   state is a set of persisted volatile writes, *canonical* in that no member
//!   is entirely overwritten by later members (otherwise two sets would give
//!   the same disk). Canonical sets and post-crash disks (as maps from sector to
//!   the write whose data it holds) are in one-to-one correspondence, so the
//!   enumeration yields each distinct disk exactly once.
//! - torn writes: any subset of each write's 512-byte sectors persists (sectors
//!   are the unit of atomicity). Then every sector independently holds the
//!   durable value or that of any volatile write covering it, and a state lists,
//!   per write, the sectors where that write's data is what survives.
//!
//! Simplification: two writes to the same sector that were in flight at the same
//! time are still ordered by issue, although a real device may reorder them.
//!
//! # Descriptions
//!
//! A [`CrashState`] names writes by [`RequestId`], which is deterministic, so a
//! failure file can store it (serde) and replay the same crash.

mod analysis;
mod enumerate;

use std::collections::BTreeMap;

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

use crate::disk::{Disk, RequestId, WriteState};
use crate::sectors::SectorSet;
use crate::store::StoreError;
use crate::view::CrashView;
use crate::{BLOCK_SIZE, SECTOR_SIZE};

use analysis::Analysis;
pub use enumerate::CrashStates;

/// Which crash states are allowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashModel {
    /// Whether a multi-sector write may persist partially (torn at sector
    /// granularity).
    pub torn_writes: bool,
}

impl CrashModel {
    /// Every volatile write persists whole or not at all.
    pub const ATOMIC: CrashModel = CrashModel { torn_writes: false };
    /// A volatile write may persist in part: any subset of its sectors.
    pub const TORN: CrashModel = CrashModel { torn_writes: true };
}

/// One volatile write that persists (all of it, or some sectors of it).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Persist {
    /// The volatile write.
    pub write: RequestId,
    /// Which of its sectors reach the platter (all of them unless torn).
    pub sectors: SectorSet,
}

/// A crash state: which volatile writes (and which of their sectors) reach the
/// platter. Durable writes always do and are not listed.
///
/// Invariant: `persisted` is sorted by write id, without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CrashState {
    /// The volatile writes that persist, by write id.
    pub persisted: Vec<Persist>,
}

impl CrashState {
    /// Only durable writes survive.
    pub fn none() -> Self {
        CrashState::default()
    }
}

/// How many crash states there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StateCount {
    /// Exactly this many.
    Exact(u128),
    /// At least this many (counting gave up, or the exact count overflows u128).
    AtLeast(u128),
}

impl StateCount {
    /// The exact count or the lower bound.
    pub fn lower_bound(&self) -> u128 {
        match *self {
            StateCount::Exact(n) | StateCount::AtLeast(n) => n,
        }
    }
}

/// Errors about crash states.
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    /// The store under the disk failed (a corrupt block, an unreadable image).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state names a write that is not a volatile write of the log.
    #[error("crash state names {0}, which is not a volatile write of the log")]
    NotVolatile(RequestId),
    /// The state's writes are not sorted by id, or repeat one.
    #[error("crash state lists {0} out of order or twice")]
    Unsorted(RequestId),
    /// The state's sector set does not fit the write.
    #[error("crash state's sectors for {0} do not fit the write")]
    BadSectors(RequestId),
}

/// Budget of search nodes for counting atomic-model states exactly.
const COUNT_BUDGET: u64 = 1 << 22;

impl Disk {
    /// The number of distinct crash states of the current log under `model`.
    pub fn crash_state_count(&self, model: CrashModel) -> StateCount {
        let a = Analysis::new(self);
        if model.torn_writes {
            a.count_torn()
        } else {
            a.count_atomic(COUNT_BUDGET)
        }
    }

    /// Every crash state of the current log, each once, lazily, starting with
    /// [`CrashState::none`]. Meant for small logs: see
    /// [`Disk::crash_state_count`] first.
    pub fn crash_states(&self, model: CrashModel) -> CrashStates {
        CrashStates::new(Analysis::new(self), model)
    }

    /// One crash state drawn with `rng`. Deterministic per rng state.
    ///
    /// Torn model: uniform over all states (each sector independently picks
    /// one of its candidate versions). Atomic model: walking writes from the
    /// last issued to the first, each write not already overwritten by chosen
    /// later ones persists with probability 1/2; every state has non-zero
    /// probability, but the distribution is not uniform.
    pub fn sample_crash_state<R: RngCore + ?Sized>(&self, model: CrashModel, rng: &mut R) -> CrashState {
        let a = Analysis::new(self);
        if model.torn_writes {
            let choice: Vec<u32> = a.sector_candidates().map(|k| uniform(rng, k as u64 + 1) as u32).collect();
            a.torn_state(&choice)
        } else {
            let mut covered = analysis::Bits::new(a.atoms.len());
            let mut chosen = vec![false; a.writes.len()];
            let mut bits = 0u64;
            let mut left = 0u32;
            for i in (0..a.writes.len()).rev() {
                if !a.writes[i].cover.has_outside(&covered) {
                    continue;
                }
                if left == 0 {
                    bits = rng.next_u64();
                    left = 64;
                }
                left -= 1;
                let take = bits & 1 == 1;
                bits >>= 1;
                if take {
                    chosen[i] = true;
                    covered.or_assign(&a.writes[i].cover);
                }
            }
            a.atomic_state(&chosen)
        }
    }

    /// The disk as it would be after a crash in `state`, without changing this
    /// disk. Cheap: it holds only the blocks the log touches.
    pub fn crash_view(&self, state: &CrashState) -> Result<CrashView<'_>, CrashError> {
        Ok(CrashView::new(&self.store, self.crash_delta(state)?))
    }

    /// Power loss in `state`: the disk becomes the crash image, the log and every
    /// outstanding request are gone (their ids stay unknown forever).
    pub fn apply_crash(&mut self, state: &CrashState) -> Result<(), CrashError> {
        let delta = self.crash_delta(state)?;
        self.reset_after_crash(delta);
        Ok(())
    }

    /// Blocks of the crash image that differ from the durable store: the log
    /// replayed in issue order, durable writes whole and persisted volatile
    /// writes on their chosen sectors.
    fn crash_delta(&self, state: &CrashState) -> Result<BTreeMap<u64, Box<[u8; BLOCK_SIZE]>>, CrashError> {
        let mut prev: Option<RequestId> = None;
        for p in &state.persisted {
            if prev.is_some_and(|q| q >= p.write) {
                return Err(CrashError::Unsorted(p.write));
            }
            prev = Some(p.write);
        }
        let mut delta: BTreeMap<u64, Box<[u8; BLOCK_SIZE]>> = BTreeMap::new();
        let mut chosen = state.persisted.iter().peekable();
        for w in &self.log {
            let sel = match chosen.peek() {
                Some(p) if p.write == w.id => {
                    if w.state == WriteState::Durable {
                        return Err(CrashError::NotVolatile(w.id));
                    }
                    if !p.sectors.is_valid_for(w.sectors() as u32) {
                        return Err(CrashError::BadSectors(w.id));
                    }
                    chosen.next().map(|p| &p.sectors)
                }
                Some(p) if p.write < w.id => return Err(CrashError::NotVolatile(p.write)),
                _ => None,
            };
            let sel = match (w.state, sel) {
                (WriteState::Durable, _) => &SectorSet::All,
                (_, Some(s)) => s,
                (_, None) => continue,
            };
            let mut err = None;
            sel.for_each_range(w.sectors() as u32, |s, e| {
                if err.is_some() {
                    return;
                }
                let bytes = &w.data[s as usize * SECTOR_SIZE..e as usize * SECTOR_SIZE];
                let r = crate::store::for_each_block_piece(
                    w.sector + s as u64,
                    bytes.len(),
                    |block, in_block, in_data, n| {
                        let b = match delta.entry(block) {
                            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                            std::collections::btree_map::Entry::Vacant(v) => {
                                let mut buf = Box::new([0u8; BLOCK_SIZE]);
                                self.store.read_block_into(block, &mut buf)?;
                                v.insert(buf)
                            }
                        };
                        b[in_block..in_block + n].copy_from_slice(&bytes[in_data..in_data + n]);
                        Ok::<_, StoreError>(())
                    },
                );
                if let Err(e) = r {
                    err = Some(e);
                }
            });
            if let Some(e) = err {
                return Err(e.into());
            }
        }
        if let Some(p) = chosen.next() {
            return Err(CrashError::NotVolatile(p.write));
        }
        Ok(delta)
    }
}

/// A uniform integer in `0..n` (n > 0) from `rng`, by rejection (no modulo bias).
pub(crate) fn uniform<R: RngCore + ?Sized>(rng: &mut R, n: u64) -> u64 {
    debug_assert!(n > 0);
    if n.is_power_of_two() {
        return rng.next_u64() & (n - 1);
    }
    let zone = u64::MAX - (u64::MAX % n);
    loop {
        let x = rng.next_u64();
        if x < zone {
            return x % n;
        }
    }
}
