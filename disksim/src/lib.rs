//! disksim: the simulated disk behind simcluster's virtio-blk devices.
//!
//! Everything here is a plain, deterministic data structure. There is no host
//! time, no host randomness and no hash-ordered iteration: the engine (checker)
//! decides when a request completes and when power is lost, and any randomness
//! comes from an rng the caller passes in. The same calls in the same order give
//! the same bytes.
//!
//! Layers, bottom up:
//! - [`store`]: a [`BlockStore`], a read-only base image (a file, or zeros) under
//!   an overlay of written 4 KiB blocks, each carrying a crc32 that is checked on
//!   every read ([`StoreError::CorruptBlock`]).
//! - [`disk`]: a [`Disk`], virtio-blk semantics over two views: the *durable*
//!   store (what survives power loss for sure) and the guest's *cache* view (every
//!   write issued so far). Between them sits the write log; [`Disk::complete`]
//!   moves requests along when the engine says so.
//! - [`crash`]: which states the platter may be in after power loss
//!   ([`CrashState`]), how many there are, enumeration, seeded sampling, and
//!   [`Disk::apply_crash`].
//! - [`faults`]: disk faults (`[faults.disk]`): corrupt reads, lost flushes,
//!   write errors, misdirected writes, each drawn from a caller's rng and
//!   applied by [`Disk::inject`] (or, for reads, by the device).
//! - [`virtio`]: a pure decoder of virtio-blk request headers and a dispatcher
//!   that maps them onto a [`Disk`], for the vhost-user / virtio-mmio glue.
//!
//! ```
//! use disksim::{BlockStore, CrashModel, Disk, StateCount};
//! let mut d = Disk::new(BlockStore::zeros(1024));
//! for sector in [0, 8, 16] {
//!     let w = d.write(sector, &[0xAA; 512], false).unwrap();
//!     d.complete(w).unwrap(); // completed, but not flushed: volatile
//! }
//! assert_eq!(d.crash_state_count(CrashModel::ATOMIC), StateCount::Exact(8));
//! let states: Vec<_> = d.crash_states(CrashModel::ATOMIC).collect();
//! let json = serde_json::to_string(&states[5]).unwrap(); // for a failure file
//! d.apply_crash(&serde_json::from_str(&json).unwrap()).unwrap();
//! assert_eq!(d.volatile_writes().count(), 0);
//! ```

// The workspace's MSRV is 1.80: no `is_multiple_of` (1.87) or `repeat_n` (1.82).
#![deny(missing_docs)]
#![allow(clippy::manual_is_multiple_of, clippy::manual_repeat_n)]

pub mod block;
pub mod crash;
pub mod disk;
pub mod faults;
pub mod sectors;
pub mod store;
pub mod view;
pub mod virtio;

pub use block::Block;
pub use crash::{CrashError, CrashModel, CrashState, CrashStates, Persist, StateCount};
pub use disk::{Completion, Disk, DiskError, RequestId, RequestKind, StorageCost};
pub use faults::{DiskFault, ReadFaults};
pub use sectors::SectorSet;
pub use store::{BlockStore, StoreError};
pub use view::CrashView;

/// Size of a sector, the unit of addressing in virtio-blk and the unit of
/// atomicity assumed for torn writes.
pub const SECTOR_SIZE: usize = 512;
/// Size of a storage block, the unit of the overlay and of crc32 checking.
pub const BLOCK_SIZE: usize = 4096;
/// Sectors per storage block.
pub const SECTORS_PER_BLOCK: u64 = (BLOCK_SIZE / SECTOR_SIZE) as u64;
