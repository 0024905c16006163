//! What both runtimes keep beside the virtio-net model ([`VirtioNet`]),
//! whatever the transport (vhost-user under user-mode Linux, virtio-mmio
//! under KVM): the frames the guest transmitted, each stamped with the
//! virtual time of the kick that sent it, and the receive backlog.
//!
//! Invariants: stamps are in kick order, so they never decrease; every frame
//! the guest transmitted is in [`NetPortState::take_tx`] exactly once; the
//! backlog holds frames in arrival order, at most [`RX_BACKLOG`], and fills
//! receive buffers in that order, so a full ring delays frames and never
//! reorders them. *When* the backlog is drained is the transport's business
//! (at the node's next stop under user-mode Linux, at the receive queue's
//! kick under KVM); both runtimes drop a frame rather than queue a 1025th.

use std::collections::VecDeque;

use simtime::VirtualTime;

use super::net::VirtioNet;
use super::{DeviceError, Queues};
use nodeapi::TxFrame;

/// Frames kept for a guest that has no free receive buffer, at most.
pub const RX_BACKLOG: usize = 1024;

/// A network device's state beside its model: transmitted frames not yet
/// taken by the engine, and frames waiting for a receive buffer.
#[derive(Debug, Default)]
pub struct NetPortState {
    tx: Vec<TxFrame>,
    backlog: VecDeque<Vec<u8>>,
}

impl NetPortState {
    /// The guest kicked its transmit queue at virtual time `time` (the model
    /// already processed it): takes the frames it sent, stamped with `time`.
    pub fn stamp_tx(&mut self, dev: &mut VirtioNet, time: VirtualTime) {
        self.tx.extend(dev.take_tx().into_iter().map(|bytes| TxFrame { time, bytes }));
    }

    /// Frames transmitted since the last call, in order.
    pub fn take_tx(&mut self) -> Vec<TxFrame> {
        std::mem::take(&mut self.tx)
    }

    /// Frames waiting for a receive buffer.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Whether another frame would exceed [`RX_BACKLOG`].
    pub fn backlog_full(&self) -> bool {
        self.backlog.len() >= RX_BACKLOG
    }

    /// Queues `frame` behind the frames already waiting (the caller checked
    /// [`NetPortState::backlog_full`]).
    pub fn queue(&mut self, frame: &[u8]) {
        debug_assert!(!self.backlog_full(), "the caller drops a frame the backlog has no room for");
        self.backlog.push_back(frame.to_vec());
    }

    /// Moves waiting frames into receive buffers while the driver has
    /// posted any; returns how many moved (the caller asks
    /// [`Queues::needs_interrupt`] when any did).
    pub fn fill(&mut self, dev: &mut VirtioNet, queues: &mut Queues) -> Result<usize, DeviceError> {
        let mut moved = 0;
        while let Some(frame) = self.backlog.front() {
            if !dev.deliver(queues, frame)? {
                break;
            }
            self.backlog.pop_front();
            moved += 1;
        }
        Ok(moved)
    }

    /// The driver reset the device: frames waiting were addressed to a NIC
    /// that no longer listens.
    pub fn clear_backlog(&mut self) {
        self.backlog.clear();
    }
}
