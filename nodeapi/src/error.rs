//! Why a node runtime failed (the host, not the guest).

use disksim::RequestId;
use simtime::NodeId;

/// A node runtime failed (the host, not the guest): the engine's contract
/// broken in a way both runtimes report alike, or the runtime's own
/// failure (`vmm::uml::UmlError`, `vmm::kvm::node::KvmNodeError`).
///
/// The runtime's own error is boxed so that this vocabulary names no
/// runtime (each runtime converts its error into this one, never the other
/// way round); `std::error::Error::source` and `downcast_ref` reach it.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A disk operation on a node started without a data disk (or whose
    /// disk was already taken).
    #[error("node {} has no disk", .node.number())]
    NoDisk {
        /// The node.
        node: NodeId,
    },
    /// The engine completed a disk request the node does not have pending.
    #[error("node {}: disk request {id} is not pending", .node.number())]
    UnknownDiskRequest {
        /// The node.
        node: NodeId,
        /// The request's disksim id.
        id: RequestId,
    },
    /// The engine completed a disk request of a node that has exited.
    #[error("node {} has exited: its disk requests died with it", .node.number())]
    DiskNodeExited {
        /// The node.
        node: NodeId,
    },
    /// The engine asked for the disk of a node that has not exited.
    #[error("node {} is still running: kill it before taking its disk", .node.number())]
    DiskInUse {
        /// The node.
        node: NodeId,
    },
    /// A node was started on a disk with requests still outstanding from
    /// the node before it (a power loss not yet applied).
    #[error(
        "node {}: the disk has {outstanding} outstanding request(s) from a node that lost power; \
         resolve them with disksim::Disk::apply_crash before starting a node on it",
        .node.number()
    )]
    DiskBusy {
        /// The node.
        node: NodeId,
        /// Requests outstanding on the disk.
        outstanding: usize,
    },
    /// The runtime's own failure (a process that did not start, a broken
    /// protocol, a KVM ioctl, a guest breaking a device's protocol).
    #[error(transparent)]
    Runtime(Box<dyn std::error::Error + Send + Sync + 'static>),
}
