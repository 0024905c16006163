//! The virtio-net and virtio-blk device models ([`crate::virtio`]) as KVM virtio-mmio
//! devices, with what the engine needs on top: the virtual time of each guest action.
//!
//! [`MmioAdapter`] already runs a device behind the transport; the ports here wrap it
//! to stamp each guest action with the virtual time of the exit that caused it (the
//! QueueNotify store), which the device models, being transport-independent, do not
//! see. [`super::node::KvmNode`] hands the stamps to the engine after a grant, which
//! turns them into events: a frame sent at `t` enters netsim at `t`; a disk request
//! accepted at `t` completes at `t + latency` at the earliest.
//!
//! Invariant: stamps are in exit order, so they never decrease; every frame the
//! guest transmitted is in [`NetPort::take_tx`] exactly once.

use std::collections::VecDeque;

use disksim::{DiskFault, RequestId};
use vm_memory::GuestMemoryMmap;

use super::mmio_adapter::MmioAdapter;
use super::virtio_mmio::{QueueConfig, Signal, VirtioDevice};
use crate::virtio::blk::VirtioBlk;
use crate::virtio::net::{VirtioNet, RX_QUEUE, TX_QUEUE};
use crate::virtio::DeviceError;

/// A frame the guest transmitted, with the virtual time of its TX notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxFrame {
    /// Virtual time of the QueueNotify exit, ns.
    pub at_ns: u64,
    /// The Ethernet frame, without the virtio-net header.
    pub frame: Vec<u8>,
}

/// A virtio-net device whose frames carry virtual time, with a receive backlog.
///
/// Frames delivered while the driver has no receive buffer wait in the backlog (in
/// arrival order) and go into the ring when the driver kicks the receive queue, at
/// that exit: a full ring delays frames, it never drops or reorders them.
pub struct NetPort {
    adapter: MmioAdapter<VirtioNet>,
    tx: Vec<TxFrame>,
    backlog: VecDeque<Vec<u8>>,
    /// A device error met while draining the backlog at an RX notification.
    error: Option<DeviceError>,
}

impl NetPort {
    /// The network device of node `node` (MAC `02:00:0a:00:00:NN`) over `mem`.
    pub fn new(node: u8, mem: GuestMemoryMmap) -> NetPort {
        NetPort {
            adapter: MmioAdapter::new(VirtioNet::new(node), mem),
            tx: Vec::new(),
            backlog: VecDeque::new(),
            error: None,
        }
    }

    /// The first device error (a guest breaking the protocol) since the last call.
    pub fn take_error(&mut self) -> Option<DeviceError> {
        self.error.take().or_else(|| self.adapter.take_error())
    }

    /// Frames transmitted since the last call, in ring order.
    pub fn take_tx(&mut self) -> Vec<TxFrame> {
        std::mem::take(&mut self.tx)
    }

    /// Frames waiting for a receive buffer.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Hands `frame` to the guest (call only between runs). Returns whether the
    /// driver wants an interrupt: raise it on the transport.
    pub fn deliver(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        self.backlog.push_back(frame.to_vec());
        self.drain_backlog()
    }

    /// Moves backlog frames into receive buffers while there are any.
    fn drain_backlog(&mut self) -> Result<bool, DeviceError> {
        let (dev, queues) = self.adapter.device_and_queues();
        let mut delivered = false;
        while let Some(f) = self.backlog.front() {
            if !dev.deliver(queues, f)? {
                break;
            }
            self.backlog.pop_front();
            delivered = true;
        }
        if !delivered {
            return Ok(false);
        }
        queues.needs_interrupt(RX_QUEUE)
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

/// A virtio-blk device whose accepted requests carry virtual time.
pub struct BlkPort {
    adapter: MmioAdapter<VirtioBlk>,
    accepted: Vec<Accepted>,
}

impl BlkPort {
    /// `blk` behind the KVM transport, over the VM's memory.
    pub fn new(blk: VirtioBlk, mem: GuestMemoryMmap) -> BlkPort {
        BlkPort { adapter: MmioAdapter::new(blk, mem), accepted: Vec::new() }
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

    /// The first device error (a guest breaking the protocol) since the last call.
    pub fn take_error(&mut self) -> Option<DeviceError> {
        self.adapter.take_error()
    }

    /// Requests accepted since the last call, in acceptance order.
    pub fn take_accepted(&mut self) -> Vec<Accepted> {
        std::mem::take(&mut self.accepted)
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

/// Delegates the transport's device trait to the wrapped adapter.
macro_rules! delegate_device {
    () => {
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
    };
}

impl VirtioDevice for NetPort {
    delegate_device!();

    fn notify(&mut self, mem: &GuestMemoryMmap, now_ns: u64, queue: u16) -> Signal {
        let mut s = self.adapter.notify(mem, now_ns, queue);
        match usize::from(queue) {
            TX_QUEUE => {
                let frames = self.adapter.device_and_queues().0.take_tx();
                self.tx.extend(frames.into_iter().map(|frame| TxFrame { at_ns: now_ns, frame }));
            }
            RX_QUEUE => match self.drain_backlog() {
                Ok(irq) => s.used_buffer |= irq,
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            },
            _ => {}
        }
        s
    }

    fn reset(&mut self) {
        VirtioDevice::reset(&mut self.adapter);
        // Frames in the backlog were addressed to a NIC that no longer listens.
        self.backlog.clear();
    }
}

impl VirtioDevice for BlkPort {
    delegate_device!();

    fn notify(&mut self, mem: &GuestMemoryMmap, now_ns: u64, queue: u16) -> Signal {
        let s = self.adapter.notify(mem, now_ns, queue);
        let ids = self.adapter.device_and_queues().0.take_accepted();
        self.accepted.extend(ids.into_iter().map(|id| Accepted { at_ns: now_ns, id }));
        s
    }

    fn reset(&mut self) {
        VirtioDevice::reset(&mut self.adapter);
        self.accepted.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_port_keeps_frames_until_a_buffer_is_posted() {
        let mem = GuestMemoryMmap::from_ranges(&[(vm_memory::GuestAddress(0), 1 << 20)]).unwrap();
        let mut p = NetPort::new(1, mem);
        // No queue is ready: the frame waits.
        assert!(!p.deliver(&[0u8; 60]).unwrap());
        assert_eq!(p.backlog_len(), 1);
        assert_eq!(p.device_type(), 1);
        assert!(p.take_tx().is_empty());
    }
}
