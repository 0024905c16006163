//! The virtio-net and virtio-blk device models ([`crate::virtio`]) as KVM virtio-mmio
//! devices, with what the engine needs on top: the virtual time of each guest action.
//!
//! [`MmioAdapter`] already runs a device behind the transport; a [`TimedPort`] wraps
//! it with a [`KickHook`] that sees each notification after the model processed it,
//! stamped with the virtual time of the exit that caused it (the QueueNotify store),
//! which the device models, being transport-independent, do not see. The network
//! port's hook is [`NetPortState`], the state the user-mode Linux runtime keeps
//! beside the same model; [`super::node::KvmNode`] hands the stamps to the engine
//! after a grant, which turns them into events: a frame sent at `t` enters netsim at
//! `t`; a disk request accepted at `t` completes at `t + latency` at the earliest.
//!
//! Invariant: stamps are in exit order, so they never decrease; every frame the
//! guest transmitted is in [`NetPort::take_tx`] exactly once.

use disksim::{DiskFault, RequestId};
use simtime::NodeId;
use vm_memory::GuestMemoryMmap;

use super::mmio_adapter::MmioAdapter;
use super::virtio_mmio::{QueueConfig, Signal, VirtioDevice};
use crate::node::TxFrame;
use crate::virtio::blk::VirtioBlk;
use crate::virtio::net::{VirtioNet, RX_QUEUE, TX_QUEUE};
use crate::virtio::net_port::NetPortState;
use crate::virtio::{DeviceError, Queues};

/// What a port does with a notification beyond the model's processing.
pub trait KickHook {
    /// The device model behind the port.
    type Device: crate::virtio::VirtioDevice;
    /// The driver notified `queue` at virtual time `now_ns`; the model has
    /// processed it. Returns whether more used buffers were added (the
    /// transport raises the interrupt).
    fn kicked(
        &mut self,
        dev: &mut Self::Device,
        queues: &mut Queues,
        queue: u16,
        now_ns: u64,
    ) -> Result<bool, DeviceError>;
    /// The driver reset the device.
    fn reset(&mut self);
}

/// A device model behind the transport, with its [`KickHook`].
pub struct TimedPort<H: KickHook> {
    adapter: MmioAdapter<H::Device>,
    hook: H,
    /// A device error the hook met at a notification.
    error: Option<DeviceError>,
}

impl<H: KickHook> TimedPort<H> {
    fn with(device: H::Device, hook: H, mem: GuestMemoryMmap) -> TimedPort<H> {
        TimedPort { adapter: MmioAdapter::new(device, mem), hook, error: None }
    }

    /// The first device error (a guest breaking the protocol) since the last call.
    pub fn take_error(&mut self) -> Option<DeviceError> {
        self.error.take().or_else(|| self.adapter.take_error())
    }
}

impl<H: KickHook> VirtioDevice for TimedPort<H> {
    fn device_type(&self) -> u32 {
        self.adapter.device_type()
    }
    fn queue_max_sizes(&self) -> Vec<u16> {
        self.adapter.queue_max_sizes()
    }
    fn features(&self) -> u64 {
        VirtioDevice::features(&self.adapter)
    }
    fn read_config(&self, offset: u64, data: &mut [u8]) {
        self.adapter.read_config(offset, data)
    }
    fn write_config(&mut self, offset: u64, data: &[u8]) {
        VirtioDevice::write_config(&mut self.adapter, offset, data)
    }
    fn activate(&mut self, features: u64, queues: &[QueueConfig]) {
        self.adapter.activate(features, queues)
    }

    fn notify(&mut self, mem: &GuestMemoryMmap, now_ns: u64, queue: u16) -> Signal {
        let mut s = self.adapter.notify(mem, now_ns, queue);
        let (dev, queues) = self.adapter.device_and_queues();
        match self.hook.kicked(dev, queues, queue, now_ns) {
            Ok(irq) => s.used_buffer |= irq,
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        s
    }

    fn reset(&mut self) {
        VirtioDevice::reset(&mut self.adapter);
        self.hook.reset();
    }
}

/// The network port: frames out stamped at their TX notification, frames in
/// through the receive backlog, drained at the driver's RX notification.
impl KickHook for NetPortState {
    type Device = VirtioNet;

    fn kicked(
        &mut self,
        dev: &mut VirtioNet,
        queues: &mut Queues,
        queue: u16,
        now_ns: u64,
    ) -> Result<bool, DeviceError> {
        match usize::from(queue) {
            TX_QUEUE => {
                self.stamp_tx(dev, now_ns);
                Ok(false)
            }
            RX_QUEUE => drain(self, dev, queues),
            _ => Ok(false),
        }
    }

    fn reset(&mut self) {
        self.clear_backlog();
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
pub type NetPort = TimedPort<NetPortState>;

impl NetPort {
    /// The network device of node `node` (MAC `02:00:0a:00:00:NN`) over `mem`.
    pub fn new(node: NodeId, mem: GuestMemoryMmap) -> NetPort {
        TimedPort::with(VirtioNet::new(node), NetPortState::default(), mem)
    }

    /// Frames transmitted since the last call, in ring order.
    pub fn take_tx(&mut self) -> Vec<TxFrame> {
        self.hook.take_tx()
    }

    /// The port's state: its backlog, for the engine's drop rule.
    pub fn state(&self) -> &NetPortState {
        &self.hook
    }

    /// Hands `frame` to the guest (call only between runs; the caller checked
    /// [`NetPortState::backlog_full`]). Returns whether the driver wants an
    /// interrupt: raise it on the transport.
    pub fn deliver(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        self.hook.queue(frame);
        let (dev, queues) = self.adapter.device_and_queues();
        drain(&mut self.hook, dev, queues)
    }
}

/// A disk request the guest submitted: accepted at the notification's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Virtual time of the QueueNotify exit, ns.
    pub at_ns: u64,
    /// The disk's request id.
    pub id: RequestId,
}

/// The disk port's hook: the requests accepted at each notification.
#[derive(Debug, Default)]
pub struct AcceptedLog(Vec<Accepted>);

impl KickHook for AcceptedLog {
    type Device = VirtioBlk;

    fn kicked(&mut self, dev: &mut VirtioBlk, _: &mut Queues, _: u16, now_ns: u64) -> Result<bool, DeviceError> {
        self.0.extend(dev.take_accepted().into_iter().map(|id| Accepted { at_ns: now_ns, id }));
        Ok(false)
    }

    fn reset(&mut self) {
        self.0.clear();
    }
}

/// A virtio-blk device whose accepted requests carry virtual time.
pub type BlkPort = TimedPort<AcceptedLog>;

impl BlkPort {
    /// `blk` behind the KVM transport, over the VM's memory.
    pub fn new(blk: VirtioBlk, mem: GuestMemoryMmap) -> BlkPort {
        TimedPort::with(blk, AcceptedLog::default(), mem)
    }

    /// The device model (the disk: [`VirtioBlk::disk`]).
    pub fn blk(&self) -> &VirtioBlk {
        self.adapter.device()
    }

    /// The device model, for engine actions on the disk (reads done, taking the disk
    /// out of a dead node).
    pub fn blk_mut(&mut self) -> &mut VirtioBlk {
        self.adapter.device_and_queues().0
    }

    /// Requests accepted since the last call, in acceptance order.
    pub fn take_accepted(&mut self) -> Vec<Accepted> {
        std::mem::take(&mut self.hook.0)
    }

    /// Completes request `id` (call only between runs). Returns whether the driver
    /// wants an interrupt (raise it on the transport) and the disk fault that hit
    /// the request.
    pub fn complete(&mut self, id: RequestId) -> Result<(bool, Option<DiskFault>), DeviceError> {
        let (dev, queues) = self.adapter.device_and_queues();
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
        let mut p = NetPort::new(simtime::NodeId::new(1).unwrap(), mem);
        // No queue is ready: the frame waits.
        assert!(!p.deliver(&[0u8; 60]).unwrap());
        assert_eq!(p.state().backlog_len(), 1);
        assert_eq!(p.device_type(), 1);
        assert!(p.take_tx().is_empty());
    }
}
