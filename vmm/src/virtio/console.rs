//! virtio-console (device id 3): the engine's control line into a guest.
//!
//! A single port, no multiport: the guest driver makes it `/dev/hvc0`.
//! Queue 0 carries bytes to the guest, queue 1 bytes from it. The engine
//! uses it instead of a UML serial line because its input reaches the
//! guest through the in-band, time-travel-aware interrupt path (see
//! `vmm::vhost_user`): a UML fd-backed line's input interrupt can be lost
//! while the guest idles under external time travel (linux 6.1 consumes
//! the edge-triggered epoll event in its timetravel-only SIGIO pass).

use virtio_queue::QueueT;

use super::{drain_readable, Chain, DeviceError, Queues, VirtioDevice, VIRTIO_F_VERSION_1};

pub use super::rx_tx::{QUEUE_SIZE, RX_QUEUE, TX_QUEUE};

/// A virtio-console device with one port.
#[derive(Debug, Default)]
pub struct VirtioConsole {
    acked: u64,
    /// Bytes the guest wrote, not yet taken by the engine.
    output: Vec<u8>,
    /// Bytes for the guest that did not fit its receive buffers yet.
    input: std::collections::VecDeque<u8>,
}

impl VirtioConsole {
    /// A console with no output and no input queued.
    pub fn new() -> VirtioConsole {
        VirtioConsole::default()
    }

    /// What the guest wrote since the last call.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Queues bytes for the guest; [`Self::flush_input`] moves them in.
    pub fn push_input(&mut self, bytes: &[u8]) {
        self.input.extend(bytes);
    }

    /// Whether input is queued that has not reached the guest yet.
    pub fn has_input(&self) -> bool {
        !self.input.is_empty()
    }

    /// Moves queued input into the guest's receive buffers. Returns whether
    /// any byte moved (then ask [`Queues::needs_interrupt`] for RX). Call
    /// only while the guest is stopped.
    pub fn flush_input(&mut self, queues: &mut Queues) -> Result<bool, DeviceError> {
        if self.input.is_empty() || !queues.is_ready(RX_QUEUE) {
            return Ok(false);
        }
        let (mem, q) = queues.ready(RX_QUEUE)?;
        let mut moved = false;
        while !self.input.is_empty() {
            let Some(chain) = Chain::pop(q, mem)? else { break };
            let n = chain.writable_len().min(self.input.len());
            let bytes: Vec<u8> = self.input.drain(..n).collect();
            chain.write_at(mem, 0, &bytes)?;
            q.add_used(mem, chain.head, n as u32)?;
            moved = true;
        }
        Ok(moved)
    }

    fn drain_tx(&mut self, queues: &mut Queues) -> Result<bool, DeviceError> {
        let output = &mut self.output;
        drain_readable(queues, TX_QUEUE, |bytes| output.extend(bytes))
    }
}

impl VirtioDevice for VirtioConsole {
    fn device_id(&self) -> u32 {
        3
    }

    fn features(&self) -> u64 {
        VIRTIO_F_VERSION_1
    }

    fn ack_features(&mut self, features: u64) {
        self.acked = features & self.features();
    }

    fn config(&self) -> Vec<u8> {
        // struct virtio_console_config: cols, rows, max_nr_ports, emerg_wr;
        // none of their features is offered, so the driver reads nothing.
        vec![0; 12]
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &super::rx_tx::QUEUE_SIZES
    }

    fn queue_notify(&mut self, index: usize, queues: &mut Queues) -> Result<bool, DeviceError> {
        super::rx_tx::notify(index, queues, |q| self.drain_tx(q))
    }

    fn reset(&mut self) {
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testing::{memory, DriverQueue};
    use vm_memory::{Bytes, GuestAddress};

    #[test]
    fn bytes_cross_in_both_directions() {
        let mem = memory(1 << 20);
        let mut rx = DriverQueue::new(&mem, 0x1000, 16);
        let mut tx = DriverQueue::new(&mem, 0x4000, 16);
        let mut dev = VirtioConsole::new();
        dev.ack_features(dev.features());
        let mut queues = Queues { queues: vec![rx.device_queue(QUEUE_SIZE), tx.device_queue(QUEUE_SIZE)], mem };
        // Input waits until the driver posts buffers, then is split over
        // as many as it needs.
        dev.push_input(b"run workload\n");
        assert!(!dev.flush_input(&mut queues).unwrap());
        rx.add(&queues.mem, &[(0x10000, 8, true)]);
        rx.add(&queues.mem, &[(0x11000, 8, true)]);
        assert!(dev.flush_input(&mut queues).unwrap());
        assert!(!dev.has_input());
        assert_eq!(rx.take_used(&queues.mem).iter().map(|u| u.1).collect::<Vec<_>>(), vec![8, 5]);
        let mut got = [0u8; 13];
        queues.mem.read_slice(&mut got[..8], GuestAddress(0x10000)).unwrap();
        queues.mem.read_slice(&mut got[8..], GuestAddress(0x11000)).unwrap();
        assert_eq!(&got, b"run workload\n");
        // Output is collected on a transmit kick.
        queues.mem.write_slice(b"@sim ready\n", GuestAddress(0x20000)).unwrap();
        tx.add(&queues.mem, &[(0x20000, 11, false)]);
        dev.queue_notify(TX_QUEUE, &mut queues).unwrap();
        assert_eq!(dev.take_output(), b"@sim ready\n");
    }
}
