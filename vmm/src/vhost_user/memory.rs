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
    /// Maps each region (parsed from SET_MEM_TABLE by
    /// [`super::message::mem_regions`]) from its file descriptor (shared,
    /// read-write), in order.
    pub fn map(regions: Vec<Region>, fds: Vec<OwnedFd>) -> Result<MemTable, MemTableError> {
        let mut mapped = Vec::with_capacity(regions.len());
        for (i, (r, fd)) in regions.iter().zip(fds).enumerate() {
            // mmap needs a page-aligned file offset: map from the page
            // boundary and place the region that much lower in guest
            // space (the extra bytes are the same file, harmless).
            let delta = r.mmap_offset % PAGE;
            if delta > r.guest_addr || r.size == 0 {
                return Err(MemTableError::Unmappable { index: i, region: *r });
            }
            let file = FileOffset::new(File::from(fd), r.mmap_offset - delta);
            let region = MmapRegion::from_file(file, (r.size + delta) as usize)
                .map_err(|source| MemTableError::Mmap { index: i, source })?;
            let g =
                GuestRegionMmap::new(region, GuestAddress(r.guest_addr - delta)).ok_or(MemTableError::Overflow(i))?;
            mapped.push(g);
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

/// Why a SET_MEM_TABLE's regions cannot be mapped.
#[derive(Debug, thiserror::Error)]
pub enum MemTableError {
    /// The payload ends inside the table.
    #[error("short memory table")]
    Short,
    /// No regions, or not one file descriptor per region.
    #[error("{regions} regions with {fds} file descriptors")]
    RegionCount {
        /// Regions the table announces.
        regions: usize,
        /// Descriptors that came with it.
        fds: usize,
    },
    /// A region of size 0, or whose page-aligned mapping would start below
    /// guest address 0.
    #[error("region {index} {region:?} cannot be mapped")]
    Unmappable {
        /// The region's index in the table.
        index: usize,
        /// The region.
        region: Region,
    },
    /// mmap of a region's descriptor failed.
    #[error("mmap region {index}: {source}")]
    Mmap {
        /// The region's index in the table.
        index: usize,
        /// The failure.
        source: vm_memory::mmap::MmapRegionError,
    },
    /// A region that runs past the end of the guest address space.
    #[error("region {0} overflows the guest address space")]
    Overflow(usize),
    /// Regions that overlap, or another layout vm-memory refuses.
    #[error("memory table: {0}")]
    Layout(vm_memory::GuestRegionCollectionError),
}
