//! Choosing a runtime: [`RuntimeKind`] (defined in [`nodeapi`], so
//! that [`hostfacts`] can name it) and [`spawn`].
//!
//! The runtime-neutral vocabulary ([`nodeapi::NodeRuntime`],
//! [`nodeapi::NodeConfig`], ...) lives in [`nodeapi`]; it is also
//! re-exported here, under the paths other crates have used.

use disksim::Disk;

use crate::kvm::node::KvmNode;
use crate::uml::UmlNode;
pub use nodeapi::{
    Delivered, DiskCompletion, DiskRequest, GuestOutput, NodeConfig, NodeError, NodeRuntime, OutputStream, RunOutcome,
    RuntimeKind, TxFrame,
};

/// Starts a node of `kind` with `cfg`, on `disk` if it has one.
pub fn spawn(kind: RuntimeKind, cfg: &NodeConfig, disk: Option<Disk>) -> Result<Box<dyn NodeRuntime>, NodeError> {
    Ok(match kind {
        RuntimeKind::Uml => Box::new(UmlNode::spawn_with_disk(cfg, disk)?),
        RuntimeKind::Kvm => Box::new(KvmNode::spawn(cfg, disk)?),
    })
}
