//! The data disk as the engine sees it: requests the guest submitted and
//! their completions, the same for both runtimes.

use disksim::{DiskFault, RequestId, RequestKind};
use simtime::VirtualTime;

/// The root disk's virtio-blk serial (GET_ID, `/sys/block/vdX/serial` in the
/// guest): the boot init mounts the disk that carries it as the root.
pub const ROOT_DISK_SERIAL: &[u8] = b"simcluster-root";

/// A disk request the guest submitted, as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskRequest {
    /// disksim's id: issued in submission order, never reused, also across
    /// a power loss (stale completions are detected).
    pub id: RequestId,
    /// Read, write (never FUA: virtio-blk has no FUA flag) or flush.
    pub kind: RequestKind,
    /// First sector (512 bytes each); 0 for a flush.
    pub sector: u64,
    /// Number of sectors; 0 for a flush.
    pub sectors: u64,
    /// Virtual time of the kick that submitted it.
    pub submitted: VirtualTime,
}

/// A completed disk request: what the engine puts in its trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskCompletion {
    /// The request as it was submitted.
    pub request: DiskRequest,
    /// Virtual time of the completion: for writes and flushes, the time
    /// the engine completed it (its interrupt's time); for reads, the time
    /// of the kick (their data is in place then; the interrupt follows at
    /// the node's next stop).
    pub completed: VirtualTime,
    /// The disk fault that hit it (`[faults.disk]`), if any.
    pub fault: Option<DiskFault>,
}
