//! A disk with virtio-blk semantics: requests complete when the engine says so,
//! and only flush and FUA make writes durable.
//!
//! Durability rules (virtio-blk with `VIRTIO_BLK_F_FLUSH`, i.e. a volatile write
//! cache, as on real disks):
//! - a write is *volatile* from the moment it is issued: it may or may not be on
//!   the platter after a power loss, whether or not it has completed;
//! - a FUA write becomes *durable* when it completes;
//! - a completed flush makes durable every write that had *completed before the
//!   flush was issued*. Writes still in flight when the flush was issued, and
//!   writes that complete while it is in flight, are not covered by it;
//! - reads see every write issued so far (the guest's cache view), whatever its
//!   durability.
//!
//! Representation: `store` holds the durable image of the *longest prefix* of
//! the write log (issue order) whose writes are all durable; `log` holds the rest,
//! in issue order, each with its durability. A durable write behind a volatile one
//! stays in the log, so crash states can be applied in issue order and per-sector
//! "later write wins" is exact. `cache` holds the guest's view of the blocks that
//! log writes touch (`cache_refs` counts the log writes touching each block); all
//! other blocks read through to `store`. Invariant: every cached block equals
//! the store's block with the log writes touching it replayed over it in
//! issue order.
//!
//! Faults ([`crate::faults`]): a write may be failed or misdirected, a flush
//! lost, when it completes ([`Disk::inject`] before [`Disk::complete`]); a
//! failed write leaves the log, a misdirected one moves in it, and the cache
//! blocks either touches are rebuilt, so the invariant above holds.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::block::Block;
use crate::faults::DiskFault;
use crate::store::{for_each_block_piece, sectors_of, BlockStore, StoreError};
use crate::{BLOCK_SIZE, SECTORS_PER_BLOCK, SECTOR_SIZE};

/// Identifies a request; issued in increasing order, never reused (not even
/// across a power loss), so stale completions are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(pub u64);

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// What a request was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RequestKind {
    /// A read.
    Read,
    /// A write.
    Write {
        /// Forced unit access: durable when acknowledged, as if followed by a
        /// flush of this write alone.
        fua: bool,
    },
    /// A flush: every write acknowledged before it becomes durable.
    Flush,
}

/// The result of [`Disk::complete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request completed.
    pub id: RequestId,
    /// What it was.
    pub kind: RequestKind,
    /// The fault injected into it ([`Disk::inject`]), now applied.
    pub fault: Option<DiskFault>,
}

impl Completion {
    /// The request failed (an I/O error for the guest).
    pub fn failed(&self) -> bool {
        self.fault == Some(DiskFault::WriteError)
    }
}

/// Errors from [`Disk`] operations.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The store under the disk failed (a corrupt block, an unreadable image).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Not an outstanding request (never issued, already completed, or lost in a
    /// power failure).
    #[error("request {0} is not outstanding")]
    UnknownRequest(RequestId),
    /// A zero-length read or write.
    #[error("empty {0} request")]
    Empty(&'static str),
}

/// Where a log write stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteState {
    InFlight,
    /// Completed as the `n`-th non-FUA write completion; volatile.
    Completed(u64),
    Durable,
}

/// A write in the log.
#[derive(Clone, Debug)]
pub(crate) struct LogWrite {
    pub id: RequestId,
    pub sector: u64,
    pub data: Vec<u8>,
    pub fua: bool,
    pub state: WriteState,
}

impl LogWrite {
    pub fn sectors(&self) -> u64 {
        (self.data.len() / SECTOR_SIZE) as u64
    }
    pub fn end(&self) -> u64 {
        self.sector + self.sectors()
    }
}

#[derive(Clone, Debug)]
enum Outstanding {
    Read,
    /// `fault`: [`DiskFault::WriteError`] or [`DiskFault::Misdirected`],
    /// applied at completion.
    Write {
        fault: Option<DiskFault>,
    },
    /// A flush covers writes whose completion number is below this; `lost`:
    /// [`Disk::lose_flush`] made it cover nothing.
    Flush {
        covers_below: u64,
        lost: bool,
    },
}

/// Memory a disk costs, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageCost {
    /// Overlay of the durable store (blocks that differ from the base image).
    pub durable_overlay: u64,
    /// Cache-view blocks of blocks touched by not-yet-compacted writes.
    pub cache_overlay: u64,
    /// Data held by the write log.
    pub log: u64,
}

impl StorageCost {
    /// Every byte held, in all three places.
    pub fn total(&self) -> u64 {
        self.durable_overlay + self.cache_overlay + self.log
    }
}

/// A simulated virtio-blk disk. See the module docs for the semantics.
#[derive(Clone, Debug)]
pub struct Disk {
    pub(crate) store: BlockStore,
    pub(crate) log: VecDeque<LogWrite>,
    cache: BTreeMap<u64, Block>,
    cache_refs: BTreeMap<u64, u32>,
    outstanding: BTreeMap<RequestId, Outstanding>,
    next_id: u64,
    /// Number of non-FUA write completions so far (orders completions against
    /// flush issue).
    completions: u64,
}

impl Disk {
    /// A disk whose durable contents start as `store`, with an empty log.
    pub fn new(store: BlockStore) -> Self {
        Disk {
            store,
            log: VecDeque::new(),
            cache: BTreeMap::new(),
            cache_refs: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            next_id: 0,
            completions: 0,
        }
    }

    /// Capacity in 512-byte sectors.
    pub fn capacity_sectors(&self) -> u64 {
        self.store.capacity_sectors()
    }

    /// The durable store: the image of the durable prefix of the log. Note that
    /// durable writes queued behind a volatile one are not in it yet; use
    /// [`Disk::crash_view`] with [`crate::CrashState::none`] for the full
    /// durable image.
    pub fn durable_store(&self) -> &BlockStore {
        &self.store
    }

    /// Mutable durable store, for fault injection
    /// ([`BlockStore::inject_corruption`]).
    pub fn durable_store_mut(&mut self) -> &mut BlockStore {
        &mut self.store
    }

    fn issue(&mut self, what: Outstanding) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.outstanding.insert(id, what);
        id
    }

    /// Issues a write of `data` (a whole number of sectors) at `sector`. The
    /// cache view changes at once; durability follows the module rules.
    pub fn write(&mut self, sector: u64, data: &[u8], fua: bool) -> Result<RequestId, DiskError> {
        let sectors = sectors_of(data.len())?;
        if sectors == 0 {
            return Err(DiskError::Empty("write"));
        }
        self.store.check_range(sector, sectors)?;
        // Two passes so that a store error (a corrupt block) leaves the cache,
        // its reference counts and the log untouched.
        let (store, cache, refs) = (&self.store, &mut self.cache, &mut self.cache_refs);
        for_each_block_piece(sector, data.len(), |block, _, _, _| {
            match cache.get(&block) {
                Some(b) => {
                    b.verify().map_err(|(expected, found)| StoreError::CorruptBlock { block, expected, found })?;
                }
                None => {
                    let mut buf = Box::new([0u8; BLOCK_SIZE]);
                    store.read_block_into(block, &mut buf)?;
                    cache.insert(block, Block::new(buf));
                }
            }
            Ok::<_, StoreError>(())
        })?;
        for_each_block_piece(sector, data.len(), |block, in_block, in_data, n| {
            cache.get_mut(&block).expect("loaded above").set(in_block, &data[in_data..in_data + n]);
            *refs.entry(block).or_insert(0) += 1;
            Ok::<_, StoreError>(())
        })?;
        let id = self.issue(Outstanding::Write { fault: None });
        self.log.push_back(LogWrite { id, sector, data: data.to_vec(), fua, state: WriteState::InFlight });
        Ok(id)
    }

    /// Issues a flush. It covers the writes completed before now.
    pub fn flush(&mut self) -> RequestId {
        let covers_below = self.completions;
        self.issue(Outstanding::Flush { covers_below, lost: false })
    }

    /// Issues a read of `len` bytes at `sector` and returns the data as the guest
    /// sees it now (its cache view). The request still has to be completed.
    pub fn read(&mut self, sector: u64, len: usize) -> Result<(RequestId, Vec<u8>), DiskError> {
        let mut buf = vec![0u8; len];
        let id = self.read_into(sector, &mut buf)?;
        Ok((id, buf))
    }

    /// Like [`Disk::read`], into a caller's buffer.
    pub fn read_into(&mut self, sector: u64, buf: &mut [u8]) -> Result<RequestId, DiskError> {
        if buf.is_empty() {
            return Err(DiskError::Empty("read"));
        }
        self.peek(sector, buf)?;
        Ok(self.issue(Outstanding::Read))
    }

    /// Reads the cache view without issuing a request (for tests and for the
    /// engine's own inspection).
    pub fn peek(&self, sector: u64, buf: &mut [u8]) -> Result<(), DiskError> {
        let sectors = sectors_of(buf.len())?;
        self.store.check_range(sector, sectors)?;
        let mut tmp = [0u8; BLOCK_SIZE];
        for_each_block_piece(sector, buf.len(), |block, in_block, in_buf, n| {
            match self.cache.get(&block) {
                Some(b) => {
                    let d =
                        b.verify().map_err(|(expected, found)| StoreError::CorruptBlock { block, expected, found })?;
                    buf[in_buf..in_buf + n].copy_from_slice(&d[in_block..in_block + n]);
                }
                None => {
                    self.store.read_block_into(block, &mut tmp)?;
                    buf[in_buf..in_buf + n].copy_from_slice(&tmp[in_block..in_block + n]);
                }
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    /// Outstanding requests, in issue order: the completions the engine may
    /// choose from (in any order).
    pub fn outstanding(&self) -> impl Iterator<Item = (RequestId, RequestKind)> + '_ {
        self.outstanding.iter().map(move |(&id, o)| {
            let kind = match o {
                Outstanding::Read => RequestKind::Read,
                Outstanding::Flush { .. } => RequestKind::Flush,
                Outstanding::Write { .. } => {
                    RequestKind::Write { fua: self.log_write(id).map(|w| w.fua).unwrap_or(false) }
                }
            };
            (id, kind)
        })
    }

    pub(crate) fn log_index(&self, id: RequestId) -> Option<usize> {
        self.log.binary_search_by_key(&id, |w| w.id).ok()
    }

    fn log_write(&self, id: RequestId) -> Option<&LogWrite> {
        self.log_index(id).map(|i| &self.log[i])
    }

    /// Makes outstanding flush `id` a lie: when it completes, the writes it
    /// covers stay volatile (a later honest flush, or none, decides their
    /// fate), as on a disk that acknowledges flushes it has not done.
    /// Returns false when `id` is not an outstanding flush.
    pub fn lose_flush(&mut self, id: RequestId) -> bool {
        match self.outstanding.get_mut(&id) {
            Some(Outstanding::Flush { covers_below, lost }) => {
                *covers_below = 0;
                *lost = true;
                true
            }
            _ => false,
        }
    }

    /// Makes outstanding request `id` suffer `fault` when it completes (see
    /// [`crate::faults`] for each fault's semantics): [`DiskFault::LostFlush`]
    /// on a flush ([`Disk::lose_flush`]), [`DiskFault::WriteError`] or
    /// [`DiskFault::Misdirected`] (to a range within the disk, other than its
    /// own start) on a write. Read corruption is the device's, not the
    /// disk's. Returns false, changing nothing, when the fault does not fit
    /// the request.
    pub fn inject(&mut self, id: RequestId, fault: DiskFault) -> bool {
        if fault == DiskFault::LostFlush {
            return self.lose_flush(id);
        }
        let fits = match (fault, self.log_write(id)) {
            (DiskFault::WriteError, Some(_)) => true,
            (DiskFault::Misdirected { to }, Some(w)) => {
                to != w.sector && to.checked_add(w.sectors()).is_some_and(|end| end <= self.capacity_sectors())
            }
            _ => false,
        };
        match self.outstanding.get_mut(&id) {
            Some(Outstanding::Write { fault: f }) if fits => {
                *f = Some(fault);
                true
            }
            _ => false,
        }
    }

    /// Completes outstanding request `id`, applying its durability effect.
    pub fn complete(&mut self, id: RequestId) -> Result<Completion, DiskError> {
        let what = self.outstanding.get(&id).cloned().ok_or(DiskError::UnknownRequest(id))?;
        let fua = self.log_write(id).is_some_and(|w| w.fua);
        if let Outstanding::Write { fault: Some(f) } = what {
            // First, so that a store error leaves the request outstanding.
            let i = self.log_index(id).expect("an outstanding write is in the log");
            match f {
                DiskFault::WriteError => self.relocate(i, None)?,
                DiskFault::Misdirected { to } => self.relocate(i, Some(to))?,
                _ => {}
            }
        }
        self.outstanding.remove(&id);
        let (kind, fault) = match what {
            Outstanding::Read => (RequestKind::Read, None),
            // It left the log uncompleted: no flush covers it, no crash
            // state holds it.
            Outstanding::Write { fault: Some(DiskFault::WriteError) } => {
                (RequestKind::Write { fua }, Some(DiskFault::WriteError))
            }
            Outstanding::Write { fault } => {
                let i = self.log_index(id).expect("an outstanding write is in the log");
                self.log[i].state = if fua {
                    WriteState::Durable
                } else {
                    self.completions += 1;
                    WriteState::Completed(self.completions - 1)
                };
                (RequestKind::Write { fua }, fault)
            }
            Outstanding::Flush { covers_below, lost } => {
                for w in self.log.iter_mut() {
                    if matches!(w.state, WriteState::Completed(n) if n < covers_below) {
                        w.state = WriteState::Durable;
                    }
                }
                (RequestKind::Flush, lost.then_some(DiskFault::LostFlush))
            }
        };
        self.compact()?;
        Ok(Completion { id, kind, fault })
    }

    /// Takes log write `i` out of the log (`to` = `None`: a failed write) or
    /// moves it to sector `to` (a misdirected write), keeping its place in
    /// issue order, and rebuilds the cache blocks it touched before and
    /// after (the module's invariant). All or nothing: on a store error
    /// (a corrupt block) the log and the cache are as they were.
    fn relocate(&mut self, i: usize, to: Option<u64>) -> Result<(), StoreError> {
        let (sector, sectors) = (self.log[i].sector, self.log[i].sectors());
        let old: BTreeSet<u64> = blocks_of(sector, sectors).collect();
        let new: BTreeSet<u64> = to.map(|s| blocks_of(s, sectors).collect()).unwrap_or_default();
        let removed = match to {
            None => self.log.remove(i),
            Some(s) => {
                self.log[i].sector = s;
                None
            }
        };
        let mut fresh = BTreeMap::new();
        for &b in old.union(&new) {
            let refs = self.cache_refs.get(&b).copied().unwrap_or(0) + u32::from(new.contains(&b))
                - u32::from(old.contains(&b));
            let block = if refs == 0 {
                None
            } else {
                match self.replay_block(b) {
                    Ok(block) => Some(block),
                    Err(e) => {
                        match removed {
                            Some(w) => self.log.insert(i, w),
                            None => self.log[i].sector = sector,
                        }
                        return Err(e);
                    }
                }
            };
            fresh.insert(b, (refs, block));
        }
        for (b, (refs, block)) in fresh {
            match block {
                Some(block) => {
                    self.cache_refs.insert(b, refs);
                    self.cache.insert(b, block);
                }
                None => {
                    self.cache_refs.remove(&b);
                    self.cache.remove(&b);
                }
            }
        }
        Ok(())
    }

    /// Block `block` as the guest should see it: the durable store's, with
    /// every log write touching it replayed over it in issue order.
    fn replay_block(&self, block: u64) -> Result<Block, StoreError> {
        let mut buf = Box::new([0u8; BLOCK_SIZE]);
        self.store.read_block_into(block, &mut buf)?;
        for w in self.log.iter().filter(|w| blocks_of(w.sector, w.sectors()).contains(&block)) {
            for_each_block_piece(w.sector, w.data.len(), |b, in_block, in_data, n| {
                if b == block {
                    buf[in_block..in_block + n].copy_from_slice(&w.data[in_data..in_data + n]);
                }
                Ok::<_, StoreError>(())
            })?;
        }
        Ok(Block::new(buf))
    }

    /// Moves the durable prefix of the log into the durable store, and drops
    /// cache blocks no log write touches any more (they equal the store's).
    fn compact(&mut self) -> Result<(), StoreError> {
        while self.log.front().is_some_and(|w| w.state == WriteState::Durable) {
            let w = self.log.pop_front().expect("front exists");
            self.store.write(w.sector, &w.data)?;
            let mut last = None;
            for_each_block_piece(w.sector, w.data.len(), |block, _, _, _| {
                if last != Some(block) {
                    last = Some(block);
                    let r = self.cache_refs.get_mut(&block).expect("log write counted in cache_refs");
                    *r -= 1;
                    if *r == 0 {
                        self.cache_refs.remove(&block);
                        self.cache.remove(&block);
                    }
                }
                Ok::<_, StoreError>(())
            })?;
        }
        Ok(())
    }

    /// Writes in the log that a power loss could still lose, in issue order:
    /// `(id, sector, sectors, completed)`.
    pub fn volatile_writes(&self) -> impl Iterator<Item = (RequestId, u64, u64, bool)> + '_ {
        self.log
            .iter()
            .filter(|w| w.state != WriteState::Durable)
            .map(|w| (w.id, w.sector, w.sectors(), matches!(w.state, WriteState::Completed(_))))
    }

    /// Memory this disk costs.
    pub fn storage(&self) -> StorageCost {
        let per_cache = (BLOCK_SIZE + std::mem::size_of::<Block>() + 8 + 16 + 24) as u64;
        StorageCost {
            durable_overlay: self.store.overlay_bytes(),
            cache_overlay: self.cache.len() as u64 * per_cache,
            log: self.log.iter().map(|w| (w.data.len() + std::mem::size_of::<LogWrite>()) as u64).sum(),
        }
    }

    /// Power loss: the disk becomes `durable` plus the crash image, and every
    /// outstanding request and the whole log are gone.
    pub(crate) fn reset_after_crash(&mut self, delta: BTreeMap<u64, Box<[u8; BLOCK_SIZE]>>) {
        for (block, data) in delta {
            self.store.put_block(block, Block::new(data));
        }
        self.log.clear();
        self.cache.clear();
        self.cache_refs.clear();
        self.outstanding.clear();
    }
}

/// The storage blocks sectors `sector..sector + sectors` touch (`sectors > 0`).
fn blocks_of(sector: u64, sectors: u64) -> std::ops::RangeInclusive<u64> {
    sector / SECTORS_PER_BLOCK..=(sector + sectors - 1) / SECTORS_PER_BLOCK
}
