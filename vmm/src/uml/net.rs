//! A user-mode Linux node's network device: virtio-net over vhost-user
//! (`net.sock`, the guest's eth0).
//!
//! - *transmit*: the guest kicks its TX queue while it runs; the kick
//!   carries NEED_REPLY, so the guest is stopped while we take the frames,
//!   each stamped with the node's virtual time at the kick.
//! - *receive*: the engine delivers a frame while the node is stopped; it
//!   goes into a receive buffer the guest posted, or, when there is none,
//!   into a backlog (in arrival order, at most [`RX_BACKLOG`] frames) that
//!   fills buffers the guest posts later, at the node's next stop.

use std::collections::VecDeque;
use std::path::Path;

use super::port::{Port, PortKind};
use crate::node::{Delivered, TxFrame};
use crate::vhost_user::VhostUserError;
use crate::virtio::net::{VirtioNet, RX_QUEUE};
use crate::virtio::DeviceError;

/// Frames kept for a guest that has no free receive buffer, at most.
pub const RX_BACKLOG: usize = 1024;

/// The network device's own state.
pub(super) struct Net {
    /// Frames the guest transmitted and the engine has not taken.
    tx: Vec<TxFrame>,
    /// Frames waiting for a receive buffer, in arrival order.
    backlog: VecDeque<Vec<u8>>,
}

impl PortKind for Net {
    type Device = VirtioNet;
    const NAME: &'static str = "network device";

    fn kicked(&mut self, dev: &mut VirtioNet, queue: u16, time: u64) -> u16 {
        for bytes in dev.take_tx() {
            self.tx.push(TxFrame { time, bytes });
        }
        queue
    }
}

pub(super) type NetPort = Port<Net>;

impl Port<Net> {
    /// Listens on `path` as node `node`'s eth0 (MAC 02:00:0a:00:00:NN).
    pub fn listen(path: &Path, node: u16) -> Result<NetPort, VhostUserError> {
        Port::open(path, VirtioNet::new(node as u8), Net { tx: Vec::new(), backlog: VecDeque::new() })
    }

    /// Frames the guest transmitted since the last call, in order.
    pub fn take_tx(&mut self) -> Vec<TxFrame> {
        std::mem::take(&mut self.kind.tx)
    }

    /// Whether frames wait for the guest to post receive buffers.
    pub fn has_backlog(&self) -> bool {
        !self.kind.backlog.is_empty()
    }

    /// Puts `frame` into a receive buffer (the node is stopped), owing the
    /// receive interrupt, or into the backlog behind the frames already
    /// there. [`Delivered::Dropped`] changes nothing: the driver is not up,
    /// or the backlog is full.
    pub fn deliver(&mut self, frame: &[u8]) -> Result<Delivered, DeviceError> {
        if !self.backend.is_connected() {
            return Ok(Delivered::Dropped);
        }
        let result = if self.has_backlog() {
            // Keep arrival order behind frames already waiting.
            Delivered::Queued
        } else {
            let (dev, queues) = self.backend.device_and_queues();
            if !queues.is_ready(RX_QUEUE) {
                return Ok(Delivered::Dropped);
            }
            if dev.deliver(queues, frame)? {
                if queues.needs_interrupt(RX_QUEUE).unwrap_or(true) {
                    self.owe(RX_QUEUE as u16);
                }
                Delivered::Now
            } else {
                Delivered::Queued
            }
        };
        if result == Delivered::Queued {
            if self.kind.backlog.len() >= RX_BACKLOG {
                return Ok(Delivered::Dropped);
            }
            self.kind.backlog.push_back(frame.to_vec());
        }
        Ok(result)
    }

    /// Moves backlogged frames into receive buffers the guest has posted
    /// since (the node is stopped) and owes the receive interrupt. Returns
    /// how many frames moved.
    pub fn fill_from_backlog(&mut self) -> Result<usize, DeviceError> {
        let mut moved = 0;
        while let Some(frame) = self.kind.backlog.front() {
            let (dev, queues) = self.backend.device_and_queues();
            if !dev.deliver(queues, frame)? {
                break;
            }
            self.kind.backlog.pop_front();
            moved += 1;
        }
        if moved > 0 {
            let (_, queues) = self.backend.device_and_queues();
            if queues.needs_interrupt(RX_QUEUE).unwrap_or(true) {
                self.owe(RX_QUEUE as u16);
            }
        }
        Ok(moved)
    }
}
