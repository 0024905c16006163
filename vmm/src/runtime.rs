//! Choosing a runtime: [`RuntimeKind`] and [`spawn`].
//!
//! The runtime-neutral vocabulary ([`crate::node::NodeRuntime`],
//! [`crate::node::NodeConfig`], ...) lives in [`crate::node`]; it is also
//! re-exported here, under the paths other crates have used.

use disksim::Disk;

use crate::kvm::node::KvmNode;
pub use crate::node::{
    Delivered, DiskCompletion, DiskRequest, GuestOutput, NodeConfig, NodeError, NodeRuntime, OutputStream, RunOutcome,
    TxFrame,
};
use crate::uml::UmlNode;

/// Which runtime runs the nodes. Serialized as `"uml"` or `"kvm"` (the run's
/// JSON line, failure files: a replay runs on the runtime recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// User-mode Linux with time-travel (any x86-64 Linux host).
    #[default]
    Uml,
    /// KVM microVM (hosts whose /dev/kvm has hardware virtualization).
    Kvm,
}

impl RuntimeKind {
    /// `"uml"` or `"kvm"`, as in the run's JSON line.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Uml => "uml",
            RuntimeKind::Kvm => "kvm",
        }
    }
}

/// Starts a node of `kind` with `cfg`, on `disk` if it has one.
pub fn spawn(kind: RuntimeKind, cfg: &NodeConfig, disk: Option<Disk>) -> Result<Box<dyn NodeRuntime>, NodeError> {
    Ok(match kind {
        RuntimeKind::Uml => Box::new(UmlNode::spawn_with_disk(cfg, disk)?),
        RuntimeKind::Kvm => Box::new(KvmNode::spawn(cfg, disk)?),
    })
}
