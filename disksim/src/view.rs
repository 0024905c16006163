//! A read-only view of a post-crash disk, without changing the disk.

use std::collections::BTreeMap;

use crate::store::{for_each_block_piece, sectors_of, BlockStore, StoreError};
use crate::BLOCK_SIZE;

/// The disk as a crash state would leave it: the durable store plus `delta`, the
/// blocks the write log changes. Lets the engine inspect (or hash) many crash
/// states cheaply before committing to one with [`crate::Disk::apply_crash`].
///
/// The delta is transient and built in memory from crc-checked blocks, so it
/// carries no crcs; they are computed when a crash is applied.
#[derive(Debug)]
pub struct CrashView<'a> {
    store: &'a BlockStore,
    delta: BTreeMap<u64, Box<[u8; BLOCK_SIZE]>>,
}

impl<'a> CrashView<'a> {
    pub(crate) fn new(store: &'a BlockStore, delta: BTreeMap<u64, Box<[u8; BLOCK_SIZE]>>) -> Self {
        CrashView { store, delta }
    }

    /// Reads whole sectors at `sector` into `buf`.
    pub fn read(&self, sector: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        let sectors = sectors_of(buf.len())?;
        self.store.check_range(sector, sectors)?;
        let mut tmp = [0u8; BLOCK_SIZE];
        for_each_block_piece(sector, buf.len(), |block, in_block, in_buf, n| {
            let src = match self.delta.get(&block) {
                Some(d) => &d[..],
                None => {
                    self.store.read_block_into(block, &mut tmp)?;
                    &tmp[..]
                }
            };
            buf[in_buf..in_buf + n].copy_from_slice(&src[in_block..in_block + n]);
            Ok(())
        })
    }

    /// The changed blocks, in block order: `(block, data)`.
    pub fn changed_blocks(&self) -> impl Iterator<Item = (u64, &[u8; BLOCK_SIZE])> + '_ {
        self.delta.iter().map(|(&b, d)| (b, &**d))
    }

    /// crc32 over the changed blocks (block numbers and data): a cheap
    /// fingerprint for telling crash images apart.
    pub fn fingerprint(&self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        for (b, d) in &self.delta {
            h.update(&b.to_le_bytes());
            h.update(&d[..]);
        }
        h.finalize()
    }
}
