//! A user-mode Linux node's network device: virtio-net over vhost-user
//! (`net.sock`, the guest's eth0).
//!
//! - *transmit*: the guest kicks its TX queue while it runs; the kick
//!   carries NEED_REPLY, so the guest is stopped while we take the frames,
//!   each stamped with the node's virtual time at the kick.
//! - *receive*: the engine delivers a frame while the node is stopped; it
//!   goes into a receive buffer the guest posted, or, when there is none,
//!   into the backlog ([`NetPortState`], shared with the KVM runtime) that
//!   fills buffers the guest posts later, at the node's next stop.

use std::path::Path;

use simtime::{NodeId, VirtualTime};

use super::port::Port;
use crate::vhost_user::VhostUserError;
use crate::virtio::net::{VirtioNet, RX_QUEUE};
use crate::virtio::net_port::NetPortState;
use crate::virtio::{DeviceError, KickHook, Queues};
use nodeapi::{Delivered, TxFrame};

/// The network device's own state: the runtime-neutral port state. Its
/// backlog fills receive buffers at the node's stop
/// ([`Port::fill_from_backlog`]), not at the guest's receive kick as under
/// KVM, and outlives a disconnection.
#[derive(Default)]
pub(super) struct Net(NetPortState);

impl Net {
    /// The device, as errors name it.
    pub const NAME: &'static str = "network device";
}

impl KickHook for Net {
    type Device = VirtioNet;

    fn kicked(&mut self, dev: &mut VirtioNet, _: &mut Queues, _: u16, time: VirtualTime) -> Result<bool, DeviceError> {
        self.0.stamp_tx(dev, time);
        Ok(false)
    }
}

pub(super) type NetPort = Port<Net>;

impl Port<Net> {
    /// Listens on `path` as node `node`'s eth0 (MAC 02:00:0a:00:00:NN).
    pub fn listen(path: &Path, node: NodeId) -> Result<NetPort, VhostUserError> {
        Port::open(path, Net::NAME, VirtioNet::new(node), Net::default())
    }

    /// Frames the guest transmitted since the last call, in order.
    pub fn take_tx(&mut self) -> Vec<TxFrame> {
        self.kind.0.take_tx()
    }

    /// Whether frames wait for the guest to post receive buffers.
    pub fn has_backlog(&self) -> bool {
        self.kind.0.backlog_len() > 0
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
            if self.kind.0.backlog_full() {
                return Ok(Delivered::Dropped);
            }
            self.kind.0.queue(frame);
        }
        Ok(result)
    }

    /// Moves backlogged frames into receive buffers the guest has posted
    /// since (the node is stopped) and owes the receive interrupt. Returns
    /// how many frames moved.
    pub fn fill_from_backlog(&mut self) -> Result<usize, DeviceError> {
        let (dev, queues) = self.backend.device_and_queues();
        let moved = self.kind.0.fill(dev, queues)?;
        if moved > 0 {
            let (_, queues) = self.backend.device_and_queues();
            if queues.needs_interrupt(RX_QUEUE).unwrap_or(true) {
                self.owe(RX_QUEUE as u16);
            }
        }
        Ok(moved)
    }
}
