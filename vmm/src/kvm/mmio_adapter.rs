//! The transport-independent device models of [`crate::virtio`] behind the
//! KVM runtime's virtio-mmio transport.
//!
//! [`super::virtio_mmio`] has its own device trait (it hands the device
//! plain queue addresses at DRIVER_OK and guest memory at each
//! notification). [`MmioAdapter`] implements that trait for any
//! [`VirtioDevice`], so net, blk, console and rng are written once for both
//! runtimes; the virtio layer knows no transport. The adapter owns the
//! [`Queues`]; engine actions on the KVM side (deliver a frame, complete a
//! request) go through [`MmioAdapter::device_and_queues`] exactly as through
//! the vhost-user back end.

use virtio_queue::QueueT;
use vm_memory::{GuestAddress, GuestMemoryMmap};

use super::virtio_mmio::{self, QueueConfig, Signal};
use crate::virtio::{read_config_padded, DeviceError, Queues, VirtioDevice, VIRTIO_RING_F_EVENT_IDX};

/// A [`VirtioDevice`] as a virtio-mmio device model.
pub struct MmioAdapter<D: VirtioDevice> {
    device: D,
    queues: Queues,
    /// A device error (a guest breaking the protocol), kept for the engine.
    error: Option<DeviceError>,
}

impl<D: VirtioDevice> MmioAdapter<D> {
    /// `mem` is the VM's memory (device effects outside notifications,
    /// such as frame delivery, need it).
    pub fn new(device: D, mem: GuestMemoryMmap) -> MmioAdapter<D> {
        let mut queues = Queues::new(device.queue_max_sizes());
        queues.mem = mem;
        MmioAdapter { device, queues, error: None }
    }

    /// The device model.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device with its queues, for engine actions; afterwards ask
    /// [`Queues::needs_interrupt`] and raise the transport's interrupt.
    pub fn device_and_queues(&mut self) -> (&mut D, &mut Queues) {
        (&mut self.device, &mut self.queues)
    }

    /// The first device error since the last call, if any.
    pub fn take_error(&mut self) -> Option<DeviceError> {
        self.error.take()
    }
}

impl<D: VirtioDevice> virtio_mmio::VirtioDevice for MmioAdapter<D> {
    fn device_type(&self) -> u32 {
        self.device.device_id()
    }

    fn queue_max_sizes(&self) -> Vec<u16> {
        self.device.queue_max_sizes().to_vec()
    }

    fn features(&self) -> u64 {
        self.device.features()
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        data.copy_from_slice(&read_config_padded(&self.device.config(), offset as usize, data.len()));
    }

    fn write_config(&mut self, offset: u64, data: &[u8]) {
        self.device.write_config(offset as u32, data);
    }

    fn activate(&mut self, features: u64, configs: &[QueueConfig]) {
        self.device.ack_features(features);
        for (q, c) in self.queues.queues.iter_mut().zip(configs) {
            q.set_size(c.size);
            q.set_event_idx(features & VIRTIO_RING_F_EVENT_IDX != 0);
            let ok = c.ready
                && q.try_set_desc_table_address(GuestAddress(c.desc)).is_ok()
                && q.try_set_avail_ring_address(GuestAddress(c.avail)).is_ok()
                && q.try_set_used_ring_address(GuestAddress(c.used)).is_ok();
            q.set_ready(ok);
            let valid = ok && q.is_valid(&self.queues.mem);
            q.set_ready(valid);
        }
    }

    fn notify(&mut self, _mem: &GuestMemoryMmap, _now_ns: u64, queue: u16) -> Signal {
        let used_buffer = match self.device.queue_notify(queue.into(), &mut self.queues) {
            Ok(irq) => irq,
            Err(e) => {
                self.error.get_or_insert(e);
                false
            }
        };
        Signal { used_buffer, config_change: false }
    }

    fn reset(&mut self) {
        self.device.reset();
        let mem = std::mem::take(&mut self.queues.mem);
        self.queues = Queues::new(self.device.queue_max_sizes());
        self.queues.mem = mem;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvm::virtio_mmio::VirtioDevice as _;
    use crate::virtio::net::{VirtioNet, TX_QUEUE};
    use crate::virtio::testing::{memory, DriverQueue};
    use vm_memory::Bytes;

    #[test]
    fn net_over_the_mmio_trait() {
        let mem = memory(1 << 20);
        let rx = DriverQueue::new(&mem, 0x1000, 16);
        let mut tx = DriverQueue::new(&mem, 0x4000, 16);
        let mut a = MmioAdapter::new(VirtioNet::new(simtime::NodeId::new(4).unwrap()), mem.clone());
        assert_eq!(a.device_type(), 1);
        let mut mac = [0u8; 6];
        a.read_config(0, &mut mac);
        assert_eq!(mac, [2, 0, 10, 0, 0, 4]);
        let cfg = |d: &DriverQueue| QueueConfig {
            max_size: 256,
            size: d.size,
            ready: true,
            desc: d.desc,
            avail: d.avail,
            used: d.used,
        };
        a.activate(a.features(), &[cfg(&rx), cfg(&tx)]);
        let mut b = vec![0u8; 12];
        b.extend_from_slice(b"hello");
        mem.write_slice(&b, GuestAddress(0x10000)).unwrap();
        tx.add(&mem, &[(0x10000, b.len() as u32, false)]);
        let s = a.notify(&mem, 0, TX_QUEUE as u16);
        assert!(s.used_buffer);
        assert_eq!(a.device_and_queues().0.take_tx(), vec![b"hello".to_vec()]);
        assert!(a.take_error().is_none());
    }

    #[test]
    fn rng_over_the_mmio_trait() {
        use crate::virtio::rng::{VirtioRng, REQUEST_QUEUE};
        let mem = memory(1 << 20);
        let mut q = DriverQueue::new(&mem, 0x1000, 16);
        let mut a = MmioAdapter::new(VirtioRng::new(11), mem.clone());
        assert_eq!(a.device_type(), 4);
        let c = QueueConfig { max_size: 256, size: q.size, ready: true, desc: q.desc, avail: q.avail, used: q.used };
        a.activate(a.features(), &[c]);
        q.add(&mem, &[(0x10000, 24, true)]);
        assert!(a.notify(&mem, 0, REQUEST_QUEUE as u16).used_buffer);
        assert_eq!(q.take_used(&mem), vec![(0, 24)]);
        let mut got = [0u8; 24];
        mem.read_slice(&mut got, GuestAddress(0x10000)).unwrap();
        // The same bytes as behind vhost-user: one model for both runtimes.
        let mut want = [0u8; 24];
        let mut r = <rand_xoshiro::Xoshiro256PlusPlus as rand_core::SeedableRng>::seed_from_u64(11);
        rand_core::RngCore::fill_bytes(&mut r, &mut want);
        assert_eq!(got, want);
        assert!(a.take_error().is_none());
    }
}
