//! SET_MEM_TABLE: mapping the front end's memory.
//!
//! user-mode Linux sends one region (two with highmem) backed by its
//! physical-memory file, with `guest_addr == user_addr ==` the physical
//! address where the file-backed part starts and `mmap_offset` that same
//! offset into the file (`vhost_user_set_mem_table` in virtio_uml.c).
//! Descriptor addresses are guest-physical; ring addresses in
//! SET_VRING_ADDR are front-end "user" addresses, translated with the table.

use std::fs::File;
use std::os::fd::OwnedFd;

use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use super::message::{u32_at, u64_at};
use super::protocol_error::MemTableError;

/// One region of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Guest-physical address of the region's first byte.
    pub guest_addr: u64,
    /// Length in bytes.
    pub size: u64,
    /// The front end's "user" address of the first byte (what ring
    /// addresses are given in).
    pub user_addr: u64,
    /// Offset of the first byte in the region's file, bytes.
    pub mmap_offset: u64,
}

/// A parsed and mapped memory table.
pub struct MemTable {
    /// The regions as the front end described them, in message order.
    pub regions: Vec<Region>,
    /// The regions mapped at their guest addresses; each mapping starts at
    /// the page boundary at or below its `mmap_offset`, so it may begin a
    /// few bytes below `guest_addr`.
    pub mem: GuestMemoryMmap,
}

const PAGE: u64 = 4096;

impl MemTable {
    /// Parses `struct vhost_user_mem_regions` and maps each region from
    /// its file descriptor (shared, read-write).
    pub fn map(payload: &[u8], fds: Vec<OwnedFd>) -> Result<MemTable, MemTableError> {
        let num = u32_at(payload, 0).ok_or(MemTableError::Short)? as usize;
        if num == 0 || num != fds.len() {
            return Err(MemTableError::RegionCount { regions: num, fds: fds.len() });
        }
        let mut regions = Vec::with_capacity(num);
        let mut mapped = Vec::with_capacity(num);
        for (i, fd) in fds.into_iter().enumerate() {
            let at = 8 + 32 * i;
            let field = |k: usize| u64_at(payload, at + 8 * k).ok_or(MemTableError::Short);
            let r = Region { guest_addr: field(0)?, size: field(1)?, user_addr: field(2)?, mmap_offset: field(3)? };
            // mmap needs a page-aligned file offset: map from the page
            // boundary and place the region that much lower in guest
            // space (the extra bytes are the same file, harmless).
            let delta = r.mmap_offset % PAGE;
            if delta > r.guest_addr || r.size == 0 {
                return Err(MemTableError::Unmappable { index: i, region: r });
            }
            let file = FileOffset::new(File::from(fd), r.mmap_offset - delta);
            let region = MmapRegion::from_file(file, (r.size + delta) as usize)
                .map_err(|source| MemTableError::Mmap { index: i, source })?;
            let g =
                GuestRegionMmap::new(region, GuestAddress(r.guest_addr - delta)).ok_or(MemTableError::Overflow(i))?;
            mapped.push(g);
            regions.push(r);
        }
        let mem = GuestMemoryMmap::from_regions(mapped).map_err(MemTableError::Layout)?;
        Ok(MemTable { regions, mem })
    }

    /// Translates a front-end user address to a guest address.
    pub fn user_to_guest(&self, user: u64) -> Option<GuestAddress> {
        self.regions
            .iter()
            .find(|r| user >= r.user_addr && user - r.user_addr < r.size)
            .map(|r| GuestAddress(user - r.user_addr + r.guest_addr))
    }
}
