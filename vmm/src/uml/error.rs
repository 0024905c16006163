//! How a user-mode Linux node fails (the host side: its process, its
//! time-travel socket, its vhost-user devices).

use std::io;
use std::path::PathBuf;

use disksim::RequestId;
use simtime::{NodeId, VirtualTime};

use super::timetravel::{Msg, ProtocolError};
use crate::vhost_user::VhostUserError;
use nodeapi::NodeError;

/// A user-mode Linux node failed. Errors of the engine's contract that
/// both runtimes share (no disk, a request that is not pending, ...) are
/// [`NodeError`]s; this one converts into [`NodeError::Runtime`].
#[derive(Debug, thiserror::Error)]
pub enum UmlError {
    /// The user-mode Linux kernel binary does not exist; carries its path.
    #[error("kernel {0} not found")]
    MissingKernel(PathBuf),
    /// The root filesystem image (initrd) does not exist; carries its path.
    #[error("root filesystem {0} not found")]
    MissingInitrd(PathBuf),
    /// The kernel process could not be started.
    #[error("cannot start user-mode Linux {kernel}: {source}")]
    Spawn {
        /// The kernel binary.
        kernel: PathBuf,
        /// The spawn error.
        source: io::Error,
    },
    /// The node's jail could not be prepared or entered.
    #[error("node {}: {error}", .node.number())]
    Confine {
        /// The node.
        node: NodeId,
        /// What failed (in the message, not a `source`: printed once).
        error: jail::JailError,
    },
    /// A host-side I/O operation for the node failed.
    #[error("node {}: {what}: {source}", .node.number())]
    Io {
        /// The node.
        node: NodeId,
        /// What was being done ("console file", "poll", ...).
        what: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// The node broke the time-travel protocol.
    #[error("node {}: time-travel protocol: {source}", .node.number())]
    Protocol {
        /// The node.
        node: NodeId,
        /// How.
        source: ProtocolError,
    },
    /// The node sent a well-formed time-travel message that makes no sense
    /// in the controller's current state.
    #[error("node {}: unexpected time-travel message {msg:?} while {state}", .node.number())]
    Unexpected {
        /// The node.
        node: NodeId,
        /// The message.
        msg: Msg,
        /// What the controller was doing ("connecting", "running", "taking
        /// an interrupt").
        state: &'static str,
    },
    /// The kernel process exited (or closed the time-travel socket) before
    /// it sent START.
    #[error("node {} exited before connecting to the time controller ({status}); its stderr is in {stderr}", .node.number())]
    DiedBeforeStart {
        /// The node.
        node: NodeId,
        /// Its exit status, or what it did instead, as text.
        status: String,
        /// The file its standard error went to.
        stderr: PathBuf,
    },
    /// The kernel process did not connect to the time-travel socket within
    /// the wall-clock limit.
    #[error("node {} did not connect to the time controller within {secs} s; its stderr is in {stderr}", .node.number())]
    NoConnect {
        /// The node.
        node: NodeId,
        /// The limit, whole wall-clock seconds.
        secs: u64,
        /// The file its standard error went to.
        stderr: PathBuf,
    },
    /// A vhost-user device failed: `device` names it ("network device",
    /// "disk device", "entropy device", "control line").
    #[error("node {}: {device}: {source}", .node.number())]
    Device {
        /// The node.
        node: NodeId,
        /// Which device.
        device: &'static str,
        /// What failed.
        source: VhostUserError,
    },
    /// Something would reach the node before its own clock: an engine bug
    /// (a lookahead bound that let it run past a delivery), never the
    /// guest's doing.
    #[error(
        "node {}: an interrupt at virtual time {} ns would arrive in its past (its clock reads {} ns): \
         the engine let it run ahead too far",
        .node.number(), .at.as_ns(), .clock.as_ns()
    )]
    InThePast {
        /// The node.
        node: NodeId,
        /// The interrupt's virtual time.
        at: VirtualTime,
        /// The node's clock.
        clock: VirtualTime,
    },
    /// The guest's clock moved past the RUN by itself with no wake-up
    /// counted: its kernel runs ahead without telling (it lacks patch
    /// 7.2/0002), so grants would go missing from the trace.
    #[error(
        "node {}: its clock moved from {} ns to {} ns inside one grant without counting the wake-ups: \
         its kernel lacks simcluster's time-travel patch 0002 (run with --lookahead off, or use the kernel simcluster builds)",
        .node.number(), .run_at.as_ns(), .clock.as_ns()
    )]
    UncountedFreeRuns {
        /// The node.
        node: NodeId,
        /// The virtual time the grant's RUN was for.
        run_at: VirtualTime,
        /// Where the guest's clock stood when it stopped.
        clock: VirtualTime,
    },
    /// The node did not acknowledge an interrupt within the wall-clock
    /// watchdog.
    #[error("node {} did not take an interrupt within {secs} s", .node.number())]
    InterruptTimeout {
        /// The node.
        node: NodeId,
        /// The watchdog, whole wall-clock seconds.
        secs: u64,
    },
    /// The virtio-blk device failed to complete a disk request.
    #[error("node {}: completing disk request {id}: {source}", .node.number())]
    DiskComplete {
        /// The node.
        node: NodeId,
        /// The request's disksim id.
        id: RequestId,
        /// The device's error.
        source: crate::virtio::DeviceError,
    },
}

impl From<UmlError> for NodeError {
    fn from(e: UmlError) -> NodeError {
        NodeError::Runtime(Box::new(e))
    }
}
