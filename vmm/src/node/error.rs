//! Why a node runtime failed (the host, not the guest).

use disksim::RequestId;

/// A node runtime failed (the host, not the guest): the engine's contract
/// broken in a way both runtimes report alike, or the runtime's own
/// failure ([`crate::uml::UmlError`], [`crate::kvm::node::KvmNodeError`]).
///
/// The runtime's own error is boxed so that this vocabulary names no
/// runtime (each runtime converts its error into this one, never the other
/// way round); `std::error::Error::source` and `downcast_ref` reach it.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node {node} has no disk")]
    NoDisk { node: u16 },
    #[error("node {node}: disk request {id} is not pending")]
    UnknownDiskRequest { node: u16, id: RequestId },
    #[error("node {node} has exited: its disk requests died with it")]
    DiskNodeExited { node: u16 },
    #[error("node {node} is still running: kill it before taking its disk")]
    DiskInUse { node: u16 },
    #[error(
        "node {node}: the disk has {outstanding} outstanding request(s) from a node that lost power; \
         resolve them with disksim::Disk::apply_crash before starting a node on it"
    )]
    DiskBusy { node: u16, outstanding: usize },
    /// The runtime's own failure (a process that did not start, a broken
    /// protocol, a KVM ioctl, a guest breaking a device's protocol).
    #[error(transparent)]
    Runtime(Box<dyn std::error::Error + Send + Sync + 'static>),
}
