//! One 4 KiB storage block with its crc32.

/// A block of the overlay: 4096 bytes plus the crc32 of those bytes.
///
/// Invariant: `crc` is the crc32 of `data` as last written through
/// [`Block::new`] or [`Block::set`]. Anything that changes `data` by another
/// path (a bug, or deliberate fault injection via `Block::data_mut_unchecked`)
/// is caught by [`Block::verify`].
#[derive(Clone, PartialEq, Eq)]
pub struct Block {
    data: Box<[u8; crate::BLOCK_SIZE]>,
    crc: u32,
}

impl Block {
    /// A block holding `data`, with its crc computed now.
    pub fn new(data: Box<[u8; crate::BLOCK_SIZE]>) -> Self {
        let crc = crc32fast::hash(&data[..]);
        Block { data, crc }
    }

    /// An all-zero block.
    pub fn zeroed() -> Self {
        Self::new(Box::new([0u8; crate::BLOCK_SIZE]))
    }

    /// The stored crc32.
    pub fn crc(&self) -> u32 {
        self.crc
    }

    /// Checks the crc and returns the data, or `(expected, found)` crcs.
    pub fn verify(&self) -> Result<&[u8; crate::BLOCK_SIZE], (u32, u32)> {
        let found = crc32fast::hash(&self.data[..]);
        if found == self.crc {
            Ok(&self.data)
        } else {
            Err((self.crc, found))
        }
    }

    /// Replaces the block's bytes at `offset` and re-seals the crc.
    pub fn set(&mut self, offset: usize, bytes: &[u8]) {
        self.data[offset..offset + bytes.len()].copy_from_slice(bytes);
        self.reseal();
    }

    /// Recomputes the crc over the current data.
    pub(crate) fn reseal(&mut self) {
        self.crc = crc32fast::hash(&self.data[..]);
    }

    /// Mutable data without updating the crc: callers must [`Block::reseal`]
    /// or mean to corrupt the block (fault injection).
    pub(crate) fn data_mut_unchecked(&mut self) -> &mut [u8; crate::BLOCK_SIZE] {
        &mut self.data
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block {{ crc: {:#010x} }}", self.crc)
    }
}
