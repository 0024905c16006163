//! How a front end (a node's kernel: untrusted) can break the vhost-user
//! protocol. Each is fatal to the connection and so to the node, which the
//! engine reports as a node failure, never as simcluster's.

use super::memory::Region;

/// A message or sequence of messages this back end cannot accept.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// A header announcing more payload than any request carries.
    #[error("payload of {size} bytes")]
    PayloadTooLarge {
        /// The announced size.
        size: usize,
    },
    /// A request's payload is shorter than its type needs.
    #[error("short payload for request {request}")]
    ShortPayload {
        /// The request type.
        request: u32,
    },
    /// A queue index past the device's queues.
    #[error("queue {0} does not exist")]
    NoSuchQueue(u64),
    /// SET_VRING_NUM with a size that is 0, above the queue's maximum, or
    /// not a power of two.
    #[error("queue {queue} size {size}")]
    QueueSize {
        /// The queue.
        queue: usize,
        /// The size asked for.
        size: u32,
    },
    /// SET_VRING_ADDR before any SET_MEM_TABLE.
    #[error("SET_VRING_ADDR before SET_MEM_TABLE")]
    AddressBeforeMemTable,
    /// A ring address outside every region of the memory table.
    #[error("ring address {0:#x} outside the memory table")]
    RingOutsideMemory(u64),
    /// SET_SLAVE_REQ_FD without its socket descriptor.
    #[error("SET_SLAVE_REQ_FD without a descriptor")]
    MissingDescriptor,
    /// GET_CONFIG asking for more bytes than a reply can carry.
    #[error("GET_CONFIG of {0} bytes")]
    ConfigTooLarge(u32),
    /// The back-end channel (for calls) closed.
    #[error("back-end channel closed")]
    ChannelClosed,
    /// The reply to a call is shorter than its u64.
    #[error("short call reply")]
    ShortCallReply,
    /// A message on the back-end channel that is not the reply to a call.
    #[error("unexpected back-end channel message: request {request}, flags {flags:#x}")]
    UnexpectedBackendMessage {
        /// Its request type.
        request: u32,
        /// Its flags.
        flags: u32,
    },
    /// SET_MEM_TABLE's table cannot be used.
    #[error(transparent)]
    MemTable(#[from] MemTableError),
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
