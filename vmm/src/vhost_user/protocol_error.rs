//! How a front end (a node's kernel: untrusted) can break the vhost-user
//! protocol. Each is fatal to the connection and so to the node, which the
//! engine reports as a node failure, never as simcluster's.

use super::memory::MemTableError;

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
