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
//! other blocks read through to `store`.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::block::Block;
use crate::store::{for_each_block_piece, sectors_of, BlockStore, StoreError};
use crate::{BLOCK_SIZE, SECTOR_SIZE};

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
    Read,
    Write { fua: bool },
    Flush,
}

/// The result of [`Disk::complete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub id: RequestId,
    pub kind: RequestKind,
}

/// Errors from [`Disk`] operations.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
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
    Write,
    /// A flush covers writes whose completion number is below this.
    Flush {
        covers_below: u64,
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
                    b.verify()
                        .map_err(|(expected, found)| StoreError::CorruptBlock {
                            block,
                            expected,
                            found,
                        })?;
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
            cache
                .get_mut(&block)
                .expect("loaded above")
                .set(in_block, &data[in_data..in_data + n]);
            *refs.entry(block).or_insert(0) += 1;
            Ok::<_, StoreError>(())
        })?;
        let id = self.issue(Outstanding::Write);
        self.log.push_back(LogWrite {
            id,
            sector,
            data: data.to_vec(),
            fua,
            state: WriteState::InFlight,
        });
        Ok(id)
    }

    /// Issues a flush. It covers the writes completed before now.
    pub fn flush(&mut self) -> RequestId {
        let covers_below = self.completions;
        self.issue(Outstanding::Flush { covers_below })
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
                    let d = b
                        .verify()
                        .map_err(|(expected, found)| StoreError::CorruptBlock {
                            block,
                            expected,
                            found,
                        })?;
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
                Outstanding::Write => RequestKind::Write {
                    fua: self.log_write(id).map(|w| w.fua).unwrap_or(false),
                },
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
            Some(Outstanding::Flush { covers_below }) => {
                *covers_below = 0;
                true
            }
            _ => false,
        }
    }

    /// Completes outstanding request `id`, applying its durability effect.
    pub fn complete(&mut self, id: RequestId) -> Result<Completion, DiskError> {
        let what = self
            .outstanding
            .remove(&id)
            .ok_or(DiskError::UnknownRequest(id))?;
        let kind = match what {
            Outstanding::Read => RequestKind::Read,
            Outstanding::Write => {
                let i = self
                    .log_index(id)
                    .expect("an outstanding write is in the log");
                let fua = self.log[i].fua;
                self.log[i].state = if fua {
                    WriteState::Durable
                } else {
                    self.completions += 1;
                    WriteState::Completed(self.completions - 1)
                };
                RequestKind::Write { fua }
            }
            Outstanding::Flush { covers_below } => {
                for w in self.log.iter_mut() {
                    if matches!(w.state, WriteState::Completed(n) if n < covers_below) {
                        w.state = WriteState::Durable;
                    }
                }
                RequestKind::Flush
            }
        };
        self.compact()?;
        Ok(Completion { id, kind })
    }

    /// Moves the durable prefix of the log into the durable store, and drops
    /// cache blocks no log write touches any more (they equal the store's).
    fn compact(&mut self) -> Result<(), StoreError> {
        while self
            .log
            .front()
            .is_some_and(|w| w.state == WriteState::Durable)
        {
            let w = self.log.pop_front().expect("front exists");
            self.store.write(w.sector, &w.data)?;
            let mut last = None;
            for_each_block_piece(w.sector, w.data.len(), |block, _, _, _| {
                if last != Some(block) {
                    last = Some(block);
                    let r = self
                        .cache_refs
                        .get_mut(&block)
                        .expect("log write counted in cache_refs");
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
            .map(|w| {
                (
                    w.id,
                    w.sector,
                    w.sectors(),
                    matches!(w.state, WriteState::Completed(_)),
                )
            })
    }

    /// Memory this disk costs.
    pub fn storage(&self) -> StorageCost {
        let per_cache = (BLOCK_SIZE + std::mem::size_of::<Block>() + 8 + 16 + 24) as u64;
        StorageCost {
            durable_overlay: self.store.overlay_bytes(),
            cache_overlay: self.cache.len() as u64 * per_cache,
            log: self
                .log
                .iter()
                .map(|w| (w.data.len() + std::mem::size_of::<LogWrite>()) as u64)
                .sum(),
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
