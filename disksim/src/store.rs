//! Block store: a read-only base image under an overlay of written blocks.
//!
//! Why an overlay: a cluster runs many nodes from one base image, and a model
//! checker forks disks often. Keeping the image read-only and shared (behind an
//! `Arc`) makes a node's storage cost the blocks it has written, and a clone of a
//! store costs a copy of its overlay only.
//!
//! Integrity: every overlay block carries a crc32, checked on every read. The base
//! image's per-block crc32s are computed once when it is opened and checked on every
//! read of a base block, so an image modified under a running simulation is an
//! error too. A mismatch is [`StoreError::CorruptBlock`], never silent data.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::block::Block;
use crate::{BLOCK_SIZE, SECTORS_PER_BLOCK, SECTOR_SIZE};

/// Errors from the block store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A block's bytes no longer match its crc32.
    #[error("block {block} is corrupt: crc32 expected {expected:#010x}, found {found:#010x}")]
    CorruptBlock {
        /// The 4 KiB block's index.
        block: u64,
        /// The crc32 stored with the block.
        expected: u32,
        /// The crc32 of its bytes now.
        found: u32,
    },
    /// The request touches sectors past the end of the disk.
    #[error("sectors {sector}..+{sectors} are outside the disk ({capacity} sectors)")]
    OutOfRange {
        /// The request's first sector.
        sector: u64,
        /// How many sectors it spans.
        sectors: u64,
        /// The disk's size in sectors.
        capacity: u64,
    },
    /// A buffer or image whose length is not a whole number of sectors.
    #[error("length {len} is not a multiple of the {SECTOR_SIZE}-byte sector")]
    Misaligned {
        /// The length in bytes.
        len: u64,
    },
    /// Reading the base image failed.
    #[error("base image: {0}")]
    Io(#[from] std::io::Error),
}

/// Where unwritten blocks come from.
#[derive(Debug)]
enum Base {
    Zeros,
    /// A read-only image and the crc32 of each of its blocks (the last block
    /// zero-padded to 4 KiB), computed at open.
    File {
        file: File,
        len: u64,
        crcs: Vec<u32>,
    },
}

/// A disk of `capacity` 512-byte sectors stored as 4 KiB blocks.
///
/// Invariants: every key of `overlay` is `< blocks()`; every overlay block is
/// sealed (its crc matches) unless it was corrupted on purpose through
/// [`BlockStore::inject_corruption`]; bytes past `capacity` in the last block are
/// zero and never exposed.
#[derive(Debug, Clone)]
pub struct BlockStore {
    base: Arc<Base>,
    capacity: u64,
    overlay: BTreeMap<u64, Block>,
}

impl BlockStore {
    /// An all-zero disk of `sectors` sectors.
    pub fn zeros(sectors: u64) -> Self {
        BlockStore { base: Arc::new(Base::Zeros), capacity: sectors, overlay: BTreeMap::new() }
    }

    /// A disk whose initial contents are the image at `path`, opened read-only.
    /// The image length must be a multiple of 512; the disk has that many
    /// sectors. Reads the image once to record block crcs.
    pub fn open_image(path: &Path) -> Result<Self, StoreError> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len % SECTOR_SIZE as u64 != 0 {
            return Err(StoreError::Misaligned { len });
        }
        let nblocks = len.div_ceil(BLOCK_SIZE as u64);
        let mut crcs = Vec::with_capacity(nblocks as usize);
        // Read in 1 MiB pieces (a root image is 100 MB or more), each
        // zero-padded to whole blocks like `read_base_block` pads the last.
        const CHUNK_BLOCKS: u64 = 256;
        let mut chunk = vec![0u8; CHUNK_BLOCKS as usize * BLOCK_SIZE];
        for first in (0..nblocks).step_by(CHUNK_BLOCKS as usize) {
            let start = first * BLOCK_SIZE as u64;
            let n = (len - start).min(chunk.len() as u64) as usize;
            file.read_exact_at(&mut chunk[..n], start)?;
            let blocks = n.div_ceil(BLOCK_SIZE);
            chunk[n..blocks * BLOCK_SIZE].fill(0);
            crcs.extend(chunk[..blocks * BLOCK_SIZE].chunks_exact(BLOCK_SIZE).map(crc32fast::hash));
        }
        Ok(BlockStore {
            base: Arc::new(Base::File { file, len, crcs }),
            capacity: len / SECTOR_SIZE as u64,
            overlay: BTreeMap::new(),
        })
    }

    /// Capacity in 512-byte sectors.
    pub fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    /// Number of 4 KiB blocks (the last may be partial).
    pub fn blocks(&self) -> u64 {
        self.capacity.div_ceil(SECTORS_PER_BLOCK)
    }

    /// Blocks held in the overlay.
    pub fn overlay_blocks(&self) -> usize {
        self.overlay.len()
    }

    /// Bytes of memory the overlay costs: block data, crc and an estimate of the
    /// map's per-entry overhead (key + pointer + B-tree slack).
    pub fn overlay_bytes(&self) -> u64 {
        const PER_ENTRY: u64 = (BLOCK_SIZE + std::mem::size_of::<Block>() + 8 + 16) as u64;
        self.overlay.len() as u64 * PER_ENTRY
    }

    /// Checks that `sectors` sectors at `sector` lie inside the disk.
    pub fn check_range(&self, sector: u64, sectors: u64) -> Result<(), StoreError> {
        match sector.checked_add(sectors) {
            Some(end) if end <= self.capacity => Ok(()),
            _ => Err(StoreError::OutOfRange { sector, sectors, capacity: self.capacity }),
        }
    }

    /// Copies block `block` into `out`, checking its crc.
    pub fn read_block_into(&self, block: u64, out: &mut [u8; BLOCK_SIZE]) -> Result<(), StoreError> {
        if block >= self.blocks() {
            return Err(StoreError::OutOfRange {
                sector: block * SECTORS_PER_BLOCK,
                sectors: SECTORS_PER_BLOCK,
                capacity: self.capacity,
            });
        }
        if let Some(b) = self.overlay.get(&block) {
            let data = b.verify().map_err(|(expected, found)| StoreError::CorruptBlock { block, expected, found })?;
            out.copy_from_slice(data);
            return Ok(());
        }
        match &*self.base {
            Base::Zeros => out.fill(0),
            Base::File { file, len, crcs } => {
                read_base_block(file, *len, block, out)?;
                let found = crc32fast::hash(out);
                let expected = crcs[block as usize];
                if found != expected {
                    return Err(StoreError::CorruptBlock { block, expected, found });
                }
            }
        }
        Ok(())
    }

    /// Reads whole sectors starting at `sector` into `buf` (its length a multiple
    /// of 512).
    pub fn read(&self, sector: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        let sectors = sectors_of(buf.len())?;
        self.check_range(sector, sectors)?;
        let mut tmp = [0u8; BLOCK_SIZE];
        for_each_block_piece(sector, buf.len(), |block, in_block, in_buf, n| {
            self.read_block_into(block, &mut tmp)?;
            buf[in_buf..in_buf + n].copy_from_slice(&tmp[in_block..in_block + n]);
            Ok(())
        })
    }

    /// Writes whole sectors starting at `sector`.
    pub fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), StoreError> {
        let sectors = sectors_of(data.len())?;
        self.check_range(sector, sectors)?;
        for_each_block_piece(sector, data.len(), |block, in_block, in_data, n| {
            self.block_mut(block)?.set(in_block, &data[in_data..in_data + n]);
            Ok(())
        })
    }

    /// The overlay block `block`, copied in from the base (crc checked) if it is
    /// not there yet.
    pub(crate) fn block_mut(&mut self, block: u64) -> Result<&mut Block, StoreError> {
        if !self.overlay.contains_key(&block) {
            let mut data = Box::new([0u8; BLOCK_SIZE]);
            self.read_block_into(block, &mut data)?;
            self.overlay.insert(block, Block::new(data));
        }
        Ok(self.overlay.get_mut(&block).expect("inserted above"))
    }

    /// Replaces block `block` of the overlay. The caller guarantees the block is
    /// sealed and inside the disk.
    pub(crate) fn put_block(&mut self, block: u64, b: Block) {
        debug_assert!(block < self.blocks());
        self.overlay.insert(block, b);
    }

    /// Fault injection: XORs `mask` into byte `offset` of block `block` without
    /// updating its crc, so the next read of that block reports corruption. Used
    /// to test the checking, and by the engine to model bit rot.
    pub fn inject_corruption(&mut self, block: u64, offset: usize, mask: u8) -> Result<(), StoreError> {
        let b = self.block_mut(block)?;
        b.data_mut_unchecked()[offset % BLOCK_SIZE] ^= mask;
        Ok(())
    }
}

/// Number of sectors in `len` bytes, or `Misaligned`.
pub(crate) fn sectors_of(len: usize) -> Result<u64, StoreError> {
    if len % SECTOR_SIZE != 0 {
        return Err(StoreError::Misaligned { len: len as u64 });
    }
    Ok((len / SECTOR_SIZE) as u64)
}

/// Splits the byte range `len` bytes at `sector` into per-block pieces and calls
/// `f(block, offset_in_block, offset_in_buffer, length)` for each, in order.
pub(crate) fn for_each_block_piece<E>(
    sector: u64,
    len: usize,
    mut f: impl FnMut(u64, usize, usize, usize) -> Result<(), E>,
) -> Result<(), E> {
    let mut done = 0usize;
    let mut pos = sector * SECTOR_SIZE as u64;
    while done < len {
        let block = pos / BLOCK_SIZE as u64;
        let in_block = (pos % BLOCK_SIZE as u64) as usize;
        let n = (BLOCK_SIZE - in_block).min(len - done);
        f(block, in_block, done, n)?;
        done += n;
        pos += n as u64;
    }
    Ok(())
}

/// Reads block `block` of a base file of `len` bytes, zero-padding past the end.
fn read_base_block(file: &File, len: u64, block: u64, out: &mut [u8; BLOCK_SIZE]) -> std::io::Result<()> {
    let start = block * BLOCK_SIZE as u64;
    let n = (len.saturating_sub(start)).min(BLOCK_SIZE as u64) as usize;
    file.read_exact_at(&mut out[..n], start)?;
    out[n..].fill(0);
    Ok(())
}
