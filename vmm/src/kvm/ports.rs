//! The KVM runtime's [`KickHook`]s, and its virtio-net and virtio-blk devices as
//! [`VirtioMmioTransport`]s with what the engine needs on top: the virtual time of
//! each guest action.
//!
//! A hook sees each notification after the model processed it, stamped with the
//! virtual time of the exit that caused it (the QueueNotify store), which the device
//! models, being transport-independent, do not see. The network port's hook wraps
//! [`NetPortState`], the state the user-mode Linux runtime keeps beside the same
//! model; [`super::node::KvmNode`] hands the stamps to the engine after a grant,
//! which turns them into events: a frame sent at `t` enters netsim at `t`; a disk
//! request accepted at `t` completes at `t + latency` at the earliest.
//!
//! Invariant: stamps are in exit order, so they never decrease; every frame the
//! guest transmitted is in [`NetPort::take_tx`] exactly once.

use disksim::{DiskFault, RequestId};
use simtime::{NodeId, VirtualTime};
use vm_memory::GuestMemoryMmap;

use super::virtio_mmio::VirtioMmioTransport;
use crate::virtio::blk::VirtioBlk;
use crate::virtio::net::{VirtioNet, RX_QUEUE, TX_QUEUE};
use crate::virtio::net_port::NetPortState;
use crate::virtio::{DeviceError, KickHook, Queues};
use nodeapi::TxFrame;

/// The network port's hook: frames out stamped at their TX notification, frames in
/// through the receive backlog, drained at the driver's RX notification (under
/// user-mode Linux the backlog drains at the node's stop instead, and survives a
/// disconnection: `uml/net.rs`).
#[derive(Debug, Default)]
pub struct NetHook(NetPortState);

impl NetHook {
    /// The port's state: its backlog, for the engine's drop rule.
    pub fn state(&self) -> &NetPortState {
        &self.0
    }
}

impl KickHook for NetHook {
    type Device = VirtioNet;

    fn kicked(
        &mut self,
        dev: &mut VirtioNet,
        queues: &mut Queues,
        queue: u16,
        time: VirtualTime,
    ) -> Result<bool, DeviceError> {
        match usize::from(queue) {
            TX_QUEUE => {
                self.0.stamp_tx(dev, time);
                Ok(false)
            }
            RX_QUEUE => drain(&mut self.0, dev, queues),
            _ => Ok(false),
        }
    }

    fn reset(&mut self) -> bool {
        self.0.clear_backlog();
        false
    }
}

/// Moves backlog frames into receive buffers; whether the driver wants the
/// receive interrupt for them.
fn drain(net: &mut NetPortState, dev: &mut VirtioNet, queues: &mut Queues) -> Result<bool, DeviceError> {
    if net.fill(dev, queues)? == 0 {
        return Ok(false);
    }
    queues.needs_interrupt(RX_QUEUE)
}

/// A virtio-net device whose frames carry virtual time, with a receive backlog.
///
/// Frames delivered while the driver has no receive buffer wait in the backlog (in
/// arrival order) and go into the ring when the driver kicks the receive queue, at
/// that exit: a full ring delays frames, it never drops or reorders them.
pub type NetPort = VirtioMmioTransport<NetHook>;

impl NetPort {
    /// The network device of node `node` (MAC `02:00:0a:00:00:NN`) over `mem`,
    /// interrupting with `vector`.
    pub fn net(node: NodeId, mem: GuestMemoryMmap, vector: u8) -> NetPort {
        VirtioMmioTransport::new(VirtioNet::new(node), NetHook::default(), mem, vector)
    }

    /// Frames transmitted since the last call, in ring order.
    pub fn take_tx(&mut self) -> Vec<TxFrame> {
        self.hook_mut().0.take_tx()
    }

    /// Hands `frame` to the guest (call only between runs; the caller checked
    /// [`NetPortState::backlog_full`]). Returns whether the driver wants an
    /// interrupt: [`VirtioMmioTransport::raise`] it.
    pub fn deliver(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        let (dev, queues, hook) = self.parts();
        hook.0.queue(frame);
        drain(&mut hook.0, dev, queues)
    }
}

/// A disk request the guest submitted: accepted at the notification's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Virtual time of the QueueNotify exit.
    pub at: VirtualTime,
    /// The disk's request id.
    pub id: RequestId,
}

/// The disk port's hook: the requests accepted at each notification.
#[derive(Debug, Default)]
pub struct AcceptedLog(Vec<Accepted>);

impl KickHook for AcceptedLog {
    type Device = VirtioBlk;

    fn kicked(&mut self, dev: &mut VirtioBlk, _: &mut Queues, _: u16, time: VirtualTime) -> Result<bool, DeviceError> {
        self.0.extend(dev.take_accepted().into_iter().map(|id| Accepted { at: time, id }));
        Ok(false)
    }

    fn reset(&mut self) -> bool {
        self.0.clear();
        false
    }
}

/// A virtio-blk device whose accepted requests carry virtual time.
pub type BlkPort = VirtioMmioTransport<AcceptedLog>;

impl BlkPort {
    /// `blk` behind the KVM transport, over the VM's memory, interrupting with
    /// `vector`.
    pub fn blk(blk: VirtioBlk, mem: GuestMemoryMmap, vector: u8) -> BlkPort {
        VirtioMmioTransport::new(blk, AcceptedLog::default(), mem, vector)
    }

    /// Requests accepted since the last call, in acceptance order.
    pub fn take_accepted(&mut self) -> Vec<Accepted> {
        std::mem::take(&mut self.hook_mut().0)
    }

    /// Completes request `id` (call only between runs). Returns whether the driver
    /// wants an interrupt ([`VirtioMmioTransport::raise`] it) and the disk fault that
    /// hit the request.
    pub fn complete(&mut self, id: RequestId) -> Result<(bool, Option<DiskFault>), DeviceError> {
        let (dev, queues) = self.device_and_queues();
        let fault = dev.complete(id, queues)?;
        Ok((queues.needs_interrupt(crate::virtio::blk::REQUEST_QUEUE)?, fault))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_port_keeps_frames_until_a_buffer_is_posted() {
        let mem = GuestMemoryMmap::from_ranges(&[(vm_memory::GuestAddress(0), 1 << 20)]).unwrap();
        let mut p = NetPort::net(simtime::NodeId::new(1).unwrap(), mem, 0x35);
        // No queue is ready: the frame waits.
        assert!(!p.deliver(&[0u8; 60]).unwrap());
        assert_eq!(p.hook().state().backlog_len(), 1);
        assert!(p.take_tx().is_empty());
    }
}
