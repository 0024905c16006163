//! How a user-mode Linux node fails (the host side: its process, its
//! time-travel socket, its vhost-user devices).

use std::io;
use std::path::PathBuf;

use disksim::RequestId;

use super::timetravel::{Msg, ProtocolError};
use crate::node::NodeError;
use crate::vhost_user::VhostUserError;

/// A user-mode Linux node failed. Errors of the engine's contract that
/// both runtimes share (no disk, a request that is not pending, ...) are
/// [`NodeError`]s; this one converts into [`NodeError::Runtime`].
#[derive(Debug, thiserror::Error)]
pub enum UmlError {
    #[error("kernel {0} not found")]
    MissingKernel(PathBuf),
    #[error("root filesystem {0} not found")]
    MissingInitrd(PathBuf),
    #[error("cannot start user-mode Linux {kernel}: {source}")]
    Spawn { kernel: PathBuf, source: io::Error },
    #[error("node {node}: {what}: {source}")]
    Io { node: u16, what: &'static str, source: io::Error },
    #[error("node {node}: time-travel protocol: {source}")]
    Protocol { node: u16, source: ProtocolError },
    #[error("node {node}: unexpected time-travel message {msg:?} while {state}")]
    Unexpected { node: u16, msg: Msg, state: &'static str },
    #[error("node {node} exited before connecting to the time controller ({status}); its stderr is in {stderr}")]
    DiedBeforeStart { node: u16, status: String, stderr: PathBuf },
    #[error("node {node} did not connect to the time controller within {secs} s; its stderr is in {stderr}")]
    NoConnect { node: u16, secs: u64, stderr: PathBuf },
    /// A vhost-user device failed: `device` names it ("network device",
    /// "disk device", "entropy device", "control line").
    #[error("node {node}: {device}: {source}")]
    Device { node: u16, device: &'static str, source: VhostUserError },
    /// Something would reach the node before its own clock: an engine bug
    /// (a lookahead bound that let it run past a delivery), never the
    /// guest's doing.
    #[error(
        "node {node}: an interrupt at virtual time {at} ns would arrive in its past (its clock reads {clock} ns): \
         the engine let it run ahead too far"
    )]
    InThePast { node: u16, at: u64, clock: u64 },
    /// The guest's clock moved past the RUN by itself with no wake-up
    /// counted: its kernel runs ahead without telling (it lacks patch
    /// 7.2/0002), so grants would go missing from the trace.
    #[error(
        "node {node}: its clock moved from {run_at} ns to {clock} ns inside one grant without counting the wake-ups: \
         its kernel lacks simcluster's time-travel patch 0002 (run with --lookahead off, or use the kernel simcluster builds)"
    )]
    UncountedFreeRuns { node: u16, run_at: u64, clock: u64 },
    #[error("node {node} did not take an interrupt within {secs} s")]
    InterruptTimeout { node: u16, secs: u64 },
    #[error("node {node}: completing disk request {id}: {source}")]
    DiskComplete { node: u16, id: RequestId, source: crate::virtio::DeviceError },
}

impl From<UmlError> for NodeError {
    fn from(e: UmlError) -> NodeError {
        NodeError::Runtime(Box::new(e))
    }
}
