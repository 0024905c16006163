//! Choosing a runtime: [`RuntimeKind`] (defined in [`crate::node`], so
//! that [`crate::host`] can name it) and [`spawn`].
//!
//! The runtime-neutral vocabulary ([`crate::node::NodeRuntime`],
//! [`crate::node::NodeConfig`], ...) lives in [`crate::node`]; it is also
//! re-exported here, under the paths other crates have used.

use disksim::Disk;

use crate::kvm::node::KvmNode;
pub use crate::node::{
    Delivered, DiskCompletion, DiskRequest, GuestOutput, NodeConfig, NodeError, NodeRuntime, OutputStream, RunOutcome,
    RuntimeKind, TxFrame,
};
use crate::uml::UmlNode;

/// Starts a node of `kind` with `cfg`, on `disk` if it has one.
pub fn spawn(kind: RuntimeKind, cfg: &NodeConfig, disk: Option<Disk>) -> Result<Box<dyn NodeRuntime>, NodeError> {
    Ok(match kind {
        RuntimeKind::Uml => Box::new(UmlNode::spawn_with_disk(cfg, disk)?),
        RuntimeKind::Kvm => Box::new(KvmNode::spawn(cfg, disk)?),
    })
}
