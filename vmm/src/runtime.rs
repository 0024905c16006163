//! The node runtime as the engine sees it: one trait over user-mode Linux
//! ([`crate::uml::UmlNode`]) and the KVM microVM ([`crate::kvm::node::KvmNode`]).
//!
//! The engine (checker/src/engine) drives every node through [`NodeRuntime`]
//! only, so both runtimes see the same actions in the same order and produce
//! the same kind of trace: what a node printed (console and control line,
//! stamped with its virtual time), the frames it sent, the disk requests it
//! submitted. The contract every implementation keeps:
//! - a node executes only inside [`NodeRuntime::grant_at`]; outside it, it
//!   is stopped, and nothing the host does reaches it;
//! - [`NodeRuntime::requested`] is the earliest virtual time at which the
//!   node has something to do by itself (its next timer); a node that waits
//!   only for outside events asks for a time far in the future;
//! - deliveries, disk completions and control input happen while the node
//!   is stopped, at a time `t` between its clock and its requested time; the
//!   node then asks to run at `t` (the interrupt is due).

use std::time::Duration;

use disksim::{Disk, DiskFault, RequestId};

pub use crate::uml::{
    Delivered, DiskCompletion, DiskRequest, GuestOutput, OutputStream, RunOutcome, TxFrame, UmlConfig as NodeConfig,
};
use crate::uml::{UmlError, UmlNode};

/// Which runtime runs the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// A node runtime failed (the host, not the guest).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Uml(#[from] UmlError),
    #[error(transparent)]
    Kvm(#[from] crate::kvm::node::KvmNodeError),
}

/// What the engine does with a node. See the module docs for the contract;
/// [`UmlNode`]'s methods of the same names document each operation.
pub trait NodeRuntime {
    /// Waits (wall clock, bounded by `limit`) until the freshly started node
    /// is ready for its first grant at `start_time`; returns host-side
    /// start-up output that is not part of the guest's trace.
    fn wait_connected(&mut self, start_time: u64, limit: Duration) -> Result<Vec<GuestOutput>, NodeError>;
    /// The virtual time the node wants to run at next.
    fn requested(&self) -> u64;
    /// The node has exited (powered off, panicked, killed).
    fn has_exited(&self) -> bool;
    /// Lets the node run at `at` (never earlier than it asked) until it waits
    /// again, exits, or trips the wall-clock watchdog. `time_of_day`: the
    /// wall-clock time (ns since the Unix epoch) at virtual time 0, the
    /// cluster's boot; a node booted later (restarted after a power loss)
    /// shows that plus virtual time, like every other node.
    fn grant_at(
        &mut self,
        at: u64,
        time_of_day: u64,
        watchdog: Duration,
        out: &mut Vec<GuestOutput>,
    ) -> Result<RunOutcome, NodeError>;
    /// Delivers what is owed to the stopped node at `t` (queued control
    /// input, backlogged frames, pending interrupts).
    fn settle(&mut self, t: u64, watchdog: Duration) -> Result<(), NodeError>;
    /// Sends bytes to the guest's control line at `t`.
    fn send_control(&mut self, t: u64, bytes: &[u8], watchdog: Duration) -> Result<(), NodeError>;
    /// Puts a frame into the guest's receive queue at `t`.
    fn deliver_frame(&mut self, t: u64, frame: &[u8], watchdog: Duration) -> Result<Delivered, NodeError>;
    /// Frames the guest transmitted since the last call, in order.
    fn take_tx(&mut self) -> Vec<TxFrame>;
    /// Whether the node has a data disk.
    fn has_disk(&self) -> bool;
    /// The data disk, for inspection.
    fn disk(&self) -> Option<&Disk>;
    /// Writes and flushes waiting for the engine, in submission order.
    fn pending_disk(&self) -> Vec<DiskRequest>;
    /// Makes pending request `id` suffer `fault` when it completes
    /// (`disksim::Disk::inject`): a flush that makes nothing durable, a
    /// write that fails with an I/O error and does not land, or one that
    /// lands elsewhere. False, changing nothing, when the fault does not fit
    /// a pending request `id`.
    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool;
    /// Reads are no longer corrupted (`[faults.disk] corrupt_read`; the
    /// node was spawned with `NodeConfig::read_faults`): the quiet period.
    fn stop_read_faults(&mut self);
    /// Completes pending disk request `id` at `t`.
    fn complete_disk(&mut self, t: u64, id: RequestId, watchdog: Duration) -> Result<DiskCompletion, NodeError>;
    /// Disk requests completed since the last call, in completion order.
    fn take_disk_completions(&mut self) -> Vec<DiskCompletion>;
    /// The disk of a node that no longer runs, as the power loss left it.
    fn take_disk(&mut self) -> Result<Disk, NodeError>;
    /// Host memory the node uses, KiB.
    fn memory_kib(&self) -> u64;
    /// Powers the node off at once.
    fn kill(&mut self);
}

/// Starts a node of `kind` with `cfg`, on `disk` if it has one.
pub fn spawn(kind: RuntimeKind, cfg: &NodeConfig, disk: Option<Disk>) -> Result<Box<dyn NodeRuntime>, NodeError> {
    Ok(match kind {
        RuntimeKind::Uml => Box::new(UmlNode::spawn_with_disk(cfg, disk)?),
        RuntimeKind::Kvm => Box::new(crate::kvm::node::KvmNode::spawn(cfg, disk)?),
    })
}


impl NodeRuntime for UmlNode {
    fn wait_connected(&mut self, start_time: u64, limit: Duration) -> Result<Vec<GuestOutput>, NodeError> {
        Ok(UmlNode::wait_connected(self, start_time, limit)?)
    }
    fn requested(&self) -> u64 {
        UmlNode::requested(self)
    }
    fn has_exited(&self) -> bool {
        UmlNode::has_exited(self)
    }
    fn grant_at(
        &mut self,
        at: u64,
        time_of_day: u64,
        watchdog: Duration,
        out: &mut Vec<GuestOutput>,
    ) -> Result<RunOutcome, NodeError> {
        Ok(UmlNode::grant_at(self, at, time_of_day, watchdog, out)?)
    }
    fn settle(&mut self, t: u64, watchdog: Duration) -> Result<(), NodeError> {
        Ok(UmlNode::settle(self, t, watchdog)?)
    }
    fn send_control(&mut self, t: u64, bytes: &[u8], watchdog: Duration) -> Result<(), NodeError> {
        Ok(UmlNode::send_control(self, t, bytes, watchdog)?)
    }
    fn deliver_frame(&mut self, t: u64, frame: &[u8], watchdog: Duration) -> Result<Delivered, NodeError> {
        Ok(UmlNode::deliver_frame(self, t, frame, watchdog)?)
    }
    fn take_tx(&mut self) -> Vec<TxFrame> {
        UmlNode::take_tx(self)
    }
    fn has_disk(&self) -> bool {
        UmlNode::has_disk(self)
    }
    fn disk(&self) -> Option<&Disk> {
        UmlNode::disk(self)
    }
    fn pending_disk(&self) -> Vec<DiskRequest> {
        UmlNode::pending_disk(self)
    }
    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool {
        UmlNode::disk_fault(self, id, fault)
    }
    fn stop_read_faults(&mut self) {
        UmlNode::stop_read_faults(self)
    }
    fn complete_disk(&mut self, t: u64, id: RequestId, watchdog: Duration) -> Result<DiskCompletion, NodeError> {
        Ok(UmlNode::complete_disk(self, t, id, watchdog)?)
    }
    fn take_disk_completions(&mut self) -> Vec<DiskCompletion> {
        UmlNode::take_disk_completions(self)
    }
    fn take_disk(&mut self) -> Result<Disk, NodeError> {
        Ok(UmlNode::take_disk(self)?)
    }
    fn memory_kib(&self) -> u64 {
        UmlNode::memory_kib(self)
    }
    fn kill(&mut self) {
        UmlNode::kill(self)
    }
}
