//! virtio-mmio transport (virtio 1.x, "version 2" register layout) in front of a
//! [`VirtioDevice`] of [`crate::virtio`] (net, blk, console, rng: the models the
//! user-mode Linux runtime serves over vhost-user).
//!
//! The transport owns the generic state (status, feature negotiation, the
//! virtqueues as [`Queues`], interrupt status) and the device's [`KickHook`]
//! ([`super::ports`]); the device owns the device-specific part (config space, what
//! a queue notification does). The guest learns about a transport from the kernel
//! command line ([`cmdline_fragment`]: `virtio_mmio.device=4K@<base>:<irq>`).
//!
//! Interrupts: when the device (or its hook) adds used buffers the transport
//! sets InterruptStatus and raises its vector once (edge); the run loop collects raised
//! vectors from the MMIO bus ([`super::MmioBus::take_interrupts`]) and injects them.
//! Invariant: the transport touches guest memory only through the device and its
//! hook, at a QueueNotify exit or in an engine action between runs, so all device
//! effects happen at deterministic points.

use simtime::VirtualTime;
use virtio_queue::QueueT;
use vm_memory::{GuestAddress, GuestMemoryMmap};

use super::arch::layout;
use super::mmio::MmioDevice;
use crate::virtio::{read_config_padded, DeviceError, KickHook, Queues, VirtioDevice, VIRTIO_RING_F_EVENT_IDX};

/// Size of one transport window.
pub const WINDOW: u64 = 0x1000;
/// "virt" in little endian.
pub const MAGIC: u32 = 0x7472_6976;
/// VIRTIO_F_VERSION_1: modern device (feature bit 32).
pub const F_VERSION_1: u64 = 1 << 32;

/// Device status bits.
pub mod status {
    /// Guest noticed the device.
    pub const ACKNOWLEDGE: u32 = 1;
    /// Guest has a driver.
    pub const DRIVER: u32 = 2;
    /// Driver ready.
    pub const DRIVER_OK: u32 = 4;
    /// Feature negotiation done.
    pub const FEATURES_OK: u32 = 8;
    /// Device error.
    pub const NEEDS_RESET: u32 = 0x40;
    /// Driver gave up.
    pub const FAILED: u32 = 0x80;
}

/// Where a virtqueue lives, as the driver wrote it into the registers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueConfig {
    /// Largest size the device supports.
    pub max_size: u16,
    /// Size chosen by the driver.
    pub size: u16,
    /// QueueReady written as 1.
    pub ready: bool,
    /// Descriptor table.
    pub desc: u64,
    /// Driver (available) ring.
    pub avail: u64,
    /// Device (used) ring.
    pub used: u64,
}

/// The kernel command-line fragment describing a transport at `base` with `irq`.
pub fn cmdline_fragment(base: u64, irq: u32) -> String {
    format!("virtio_mmio.device=4K@{base:#x}:{irq}")
}

/// The `n`th transport window above [`layout::VIRTIO_MMIO_BASE`].
pub fn window_base(n: u64) -> u64 {
    layout::VIRTIO_MMIO_BASE + n * WINDOW
}

/// virtio-mmio registers in front of a [`VirtioDevice`], with its queues and its
/// [`KickHook`].
pub struct VirtioMmioTransport<H: KickHook> {
    device: H::Device,
    queues: Queues,
    hook: H,
    /// A device error (a guest breaking the protocol), kept for the engine.
    error: Option<DeviceError>,
    vector: u8,
    status: u32,
    device_features_sel: u32,
    driver_features_sel: u32,
    driver_features: u64,
    queue_sel: u32,
    configs: Vec<QueueConfig>,
    interrupt_status: u32,
    raised: bool,
    config_generation: u32,
}

impl<H: KickHook> VirtioMmioTransport<H> {
    /// `device` with `hook` over the VM's memory `mem` (device effects outside
    /// notifications, such as frame delivery, need it); interrupts are delivered
    /// as `vector`.
    pub fn new(device: H::Device, hook: H, mem: GuestMemoryMmap, vector: u8) -> Self {
        let mut queues = Queues::new(device.queue_max_sizes());
        queues.mem = mem;
        let configs =
            device.queue_max_sizes().iter().map(|&m| QueueConfig { max_size: m, ..Default::default() }).collect();
        VirtioMmioTransport {
            device,
            queues,
            hook,
            error: None,
            vector,
            status: 0,
            device_features_sel: 0,
            driver_features_sel: 0,
            driver_features: 0,
            queue_sel: 0,
            configs,
            interrupt_status: 0,
            raised: false,
            config_generation: 0,
        }
    }

    /// The device model.
    pub fn device(&self) -> &H::Device {
        &self.device
    }
    /// The device model, for engine actions between runs (reach the transport with
    /// [`super::MmioBus::device_mut`]); for queue work use [`Self::device_and_queues`].
    pub fn device_mut(&mut self) -> &mut H::Device {
        &mut self.device
    }
    /// The device with its queues, for engine actions between runs; afterwards ask
    /// [`Queues::needs_interrupt`] and [`Self::raise`].
    pub fn device_and_queues(&mut self) -> (&mut H::Device, &mut Queues) {
        (&mut self.device, &mut self.queues)
    }
    /// The device's hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }
    /// The device's hook, for engine actions between runs.
    pub fn hook_mut(&mut self) -> &mut H {
        &mut self.hook
    }
    /// The device, its queues and its hook at once.
    pub fn parts(&mut self) -> (&mut H::Device, &mut Queues, &mut H) {
        (&mut self.device, &mut self.queues, &mut self.hook)
    }
    /// The first device error (a guest breaking the protocol) since the last call.
    pub fn take_error(&mut self) -> Option<DeviceError> {
        self.error.take()
    }
    /// Signals used buffers from outside a notification (a frame arrived, a disk
    /// request completed): sets InterruptStatus and raises the vector on a 0 -> non-zero
    /// edge, exactly as a notification that used buffers does.
    pub fn raise(&mut self) {
        self.signal(true, false);
    }
    /// Device status register.
    pub fn status(&self) -> u32 {
        self.status
    }
    /// Queue configuration as written by the driver.
    pub fn queue_configs(&self) -> &[QueueConfig] {
        &self.configs
    }
    /// Features the driver accepted.
    pub fn driver_features(&self) -> u64 {
        self.driver_features
    }

    fn all_features(&self) -> u64 {
        self.device.features() | F_VERSION_1
    }

    fn signal(&mut self, used_buffer: bool, config_change: bool) {
        let before = self.interrupt_status;
        if used_buffer {
            self.interrupt_status |= 1;
        }
        if config_change {
            self.interrupt_status |= 2;
            self.config_generation = self.config_generation.wrapping_add(1);
        }
        if before == 0 && self.interrupt_status != 0 {
            self.raised = true;
        }
    }

    fn reset(&mut self) {
        self.status = 0;
        self.driver_features = 0;
        self.driver_features_sel = 0;
        self.device_features_sel = 0;
        self.queue_sel = 0;
        self.interrupt_status = 0;
        self.raised = false;
        for q in &mut self.configs {
            *q = QueueConfig { max_size: q.max_size, ..Default::default() };
        }
        self.device.reset();
        let mem = std::mem::take(&mut self.queues.mem);
        self.queues = Queues::new(self.device.queue_max_sizes());
        self.queues.mem = mem;
        self.hook.reset();
    }

    /// DRIVER_OK: the device takes the accepted features and the queues the driver
    /// configured (a queue whose rings do not lie in memory stays not ready).
    fn activate(&mut self) {
        let features = self.driver_features;
        self.device.ack_features(features);
        for (q, c) in self.queues.queues.iter_mut().zip(&self.configs) {
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

    /// QueueNotify at `now`: the device processes the queue, then the hook sees
    /// the kick; either may ask for the interrupt.
    fn notify(&mut self, now: VirtualTime, queue: u16) {
        let mut used_buffer = match self.device.queue_notify(queue.into(), &mut self.queues) {
            Ok(irq) => irq,
            Err(e) => {
                self.error.get_or_insert(e);
                false
            }
        };
        match self.hook.kicked(&mut self.device, &mut self.queues, queue, now) {
            Ok(irq) => used_buffer |= irq,
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self.signal(used_buffer, false);
    }

    fn queue(&mut self) -> Option<&mut QueueConfig> {
        self.configs.get_mut(self.queue_sel as usize)
    }

    fn reg_read(&mut self, offset: u64) -> u32 {
        let q = self.configs.get(self.queue_sel as usize).copied().unwrap_or_default();
        match offset {
            0x000 => MAGIC,
            0x004 => 2,
            0x008 => self.device.device_id(),
            0x00c => 0x434d_4953, // "SIMC"
            0x010 => match self.device_features_sel {
                0 => self.all_features() as u32,
                1 => (self.all_features() >> 32) as u32,
                _ => 0,
            },
            0x034 => u32::from(q.max_size),
            0x044 => u32::from(q.ready),
            0x060 => self.interrupt_status,
            0x070 => self.status,
            0x0fc => self.config_generation,
            _ => 0,
        }
    }

    fn reg_write(&mut self, now: VirtualTime, offset: u64, v: u32) {
        let set_lo = |x: &mut u64, v: u32| *x = (*x & !0xffff_ffff) | u64::from(v);
        let set_hi = |x: &mut u64, v: u32| *x = (*x & 0xffff_ffff) | (u64::from(v) << 32);
        match offset {
            0x014 => self.device_features_sel = v,
            // Only before FEATURES_OK, and only features the device offers.
            0x020 if self.status & status::FEATURES_OK == 0 => {
                let shift = match self.driver_features_sel {
                    0 => 0,
                    1 => 32,
                    _ => return,
                };
                let mask = 0xffff_ffffu64 << shift;
                self.driver_features =
                    (self.driver_features & !mask) | ((u64::from(v) << shift) & mask & self.all_features());
            }
            0x024 => self.driver_features_sel = v,
            0x030 => self.queue_sel = v,
            0x038 => {
                if let Some(q) = self.queue() {
                    q.size = (v as u16).min(q.max_size);
                }
            }
            0x044 => {
                if let Some(q) = self.queue() {
                    q.ready = v == 1;
                }
            }
            0x050 if self.status & status::DRIVER_OK != 0 && (v as usize) < self.configs.len() => {
                self.notify(now, v as u16);
            }
            0x064 => self.interrupt_status &= !v,
            0x070 => {
                if v == 0 {
                    self.reset();
                    return;
                }
                let was_ok = self.status & status::DRIVER_OK != 0;
                // FEATURES_OK only sticks if the driver accepted VERSION_1.
                let mut v = v;
                if v & status::FEATURES_OK != 0 && self.driver_features & F_VERSION_1 == 0 {
                    v &= !status::FEATURES_OK;
                }
                self.status = v;
                if !was_ok && v & status::DRIVER_OK != 0 {
                    self.activate();
                }
            }
            0x080 => self.queue().map_or((), |q| set_lo(&mut q.desc, v)),
            0x084 => self.queue().map_or((), |q| set_hi(&mut q.desc, v)),
            0x090 => self.queue().map_or((), |q| set_lo(&mut q.avail, v)),
            0x094 => self.queue().map_or((), |q| set_hi(&mut q.avail, v)),
            0x0a0 => self.queue().map_or((), |q| set_lo(&mut q.used, v)),
            0x0a4 => self.queue().map_or((), |q| set_hi(&mut q.used, v)),
            _ => {}
        }
    }
}

impl<H: KickHook + 'static> MmioDevice for VirtioMmioTransport<H> {
    fn name(&self) -> &'static str {
        "virtio-mmio"
    }
    fn read(&mut self, _now: VirtualTime, offset: u64, data: &mut [u8]) {
        if offset >= 0x100 {
            data.copy_from_slice(&read_config_padded(&self.device.config(), (offset - 0x100) as usize, data.len()));
            return;
        }
        // Registers are 32-bit; other widths read as zero per the spec's "must" rules.
        if data.len() != 4 || !offset.is_multiple_of(4) {
            data.fill(0);
            return;
        }
        let v = self.reg_read(offset);
        data.copy_from_slice(&v.to_le_bytes());
    }
    fn write(&mut self, now: VirtualTime, offset: u64, data: &[u8]) {
        if offset >= 0x100 {
            self.device.write_config((offset - 0x100) as u32, data);
            return;
        }
        if data.len() != 4 || !offset.is_multiple_of(4) {
            return;
        }
        let v = u32::from_le_bytes(data.try_into().unwrap());
        self.reg_write(now, offset, v);
    }
    fn take_interrupt(&mut self) -> Option<u8> {
        std::mem::take(&mut self.raised).then_some(self.vector)
    }
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvm::vm::anonymous_memory;

    /// A device that answers each notification with a used-buffer interrupt, and
    /// keeps what the transport told it.
    #[derive(Default)]
    struct Counter {
        acked: Option<u64>,
        resets: u32,
        config: Vec<u8>,
    }

    impl VirtioDevice for Counter {
        fn device_id(&self) -> u32 {
            42
        }
        fn features(&self) -> u64 {
            1 << 5
        }
        fn ack_features(&mut self, features: u64) {
            self.acked = Some(features);
        }
        fn config(&self) -> Vec<u8> {
            self.config.clone()
        }
        fn write_config(&mut self, offset: u32, data: &[u8]) {
            for (i, b) in data.iter().enumerate() {
                if let Some(c) = self.config.get_mut(offset as usize + i) {
                    *c = *b;
                }
            }
        }
        fn queue_max_sizes(&self) -> &[u16] {
            &[256, 64]
        }
        fn queue_notify(&mut self, _: usize, _: &mut Queues) -> Result<bool, DeviceError> {
            Ok(true)
        }
        fn reset(&mut self) {
            self.resets += 1;
        }
    }

    /// The hook: each kick with its time.
    #[derive(Default)]
    struct Kicks(Vec<(VirtualTime, u16)>);

    impl KickHook for Kicks {
        type Device = Counter;
        fn kicked(
            &mut self,
            _: &mut Counter,
            _: &mut Queues,
            queue: u16,
            time: VirtualTime,
        ) -> Result<bool, DeviceError> {
            self.0.push((time, queue));
            Ok(false)
        }
    }

    type T = VirtioMmioTransport<Kicks>;

    fn transport() -> T {
        let m = anonymous_memory(2 << 20).unwrap();
        VirtioMmioTransport::new(Counter { config: vec![0; 8], ..Counter::default() }, Kicks::default(), m, 0x30)
    }
    fn r(t: &mut T, off: u64) -> u32 {
        let mut b = [0u8; 4];
        t.read(VirtualTime::ZERO, off, &mut b);
        u32::from_le_bytes(b)
    }
    fn w(t: &mut T, off: u64, v: u32) {
        t.write(VirtualTime::from_ns(7), off, &v.to_le_bytes());
    }

    #[test]
    fn driver_init_sequence_notify_and_interrupt() {
        let mut t = transport();
        assert_eq!(r(&mut t, 0), MAGIC);
        assert_eq!(r(&mut t, 4), 2);
        assert_eq!(r(&mut t, 8), 42);
        w(&mut t, 0x70, 0);
        w(&mut t, 0x70, status::ACKNOWLEDGE | status::DRIVER);
        w(&mut t, 0x14, 1);
        assert_eq!(r(&mut t, 0x10), 1); // VERSION_1 (bit 32)
        w(&mut t, 0x14, 0);
        assert_eq!(r(&mut t, 0x10), 1 << 5);
        // Driver accepts bit 5 and an unoffered bit 6 (dropped), then VERSION_1.
        w(&mut t, 0x24, 0);
        w(&mut t, 0x20, (1 << 5) | (1 << 6));
        w(&mut t, 0x24, 1);
        w(&mut t, 0x20, 1);
        w(&mut t, 0x70, status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK);
        assert_eq!(r(&mut t, 0x70) & status::FEATURES_OK, status::FEATURES_OK);
        assert_eq!(t.driver_features(), F_VERSION_1 | (1 << 5));
        // Queue 0.
        w(&mut t, 0x30, 0);
        assert_eq!(r(&mut t, 0x34), 256);
        w(&mut t, 0x38, 128);
        w(&mut t, 0x80, 0x1000);
        w(&mut t, 0x90, 0x2000);
        w(&mut t, 0xa0, 0x3000);
        w(&mut t, 0xa4, 1);
        w(&mut t, 0x44, 1);
        assert_eq!(
            t.queue_configs()[0],
            QueueConfig { max_size: 256, size: 128, ready: true, desc: 0x1000, avail: 0x2000, used: 0x1_0000_3000 }
        );
        // Notify before DRIVER_OK is ignored.
        w(&mut t, 0x50, 0);
        assert!(t.hook().0.is_empty());
        w(&mut t, 0x70, 0xf & !status::FAILED);
        assert_eq!(t.device().acked, Some(F_VERSION_1 | (1 << 5)));
        // The used ring lies outside the 2 MiB of memory: the queue stays not ready.
        assert!(!t.device_and_queues().1.is_ready(0));
        w(&mut t, 0x50, 0);
        assert_eq!(t.hook().0, vec![(VirtualTime::from_ns(7), 0)]);
        assert_eq!(r(&mut t, 0x60), 1);
        assert_eq!(t.take_interrupt(), Some(0x30));
        assert_eq!(t.take_interrupt(), None, "edge: raised once");
        w(&mut t, 0x50, 0);
        assert_eq!(t.take_interrupt(), None, "still unacknowledged: no new edge");
        w(&mut t, 0x64, 1);
        assert_eq!(r(&mut t, 0x60), 0);
        // Config space.
        t.write(VirtualTime::ZERO, 0x102, &[9]);
        let mut b = [0u8; 1];
        t.read(VirtualTime::ZERO, 0x102, &mut b);
        assert_eq!(b, [9]);
        // Reset.
        w(&mut t, 0x70, 0);
        assert_eq!(t.status(), 0);
        assert!(!t.queue_configs()[0].ready);
        assert_eq!(t.device().resets, 2, "one reset at the start, one here");
    }

    #[test]
    fn features_ok_requires_version_1() {
        let mut t = transport();
        w(&mut t, 0x70, status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK);
        assert_eq!(t.status() & status::FEATURES_OK, 0);
    }

    #[test]
    fn cmdline() {
        assert_eq!(cmdline_fragment(window_base(1), 5), "virtio_mmio.device=4K@0xd0001000:5");
    }

    /// virtio-net and virtio-rng behind the transport: one model for both runtimes.
    mod models {
        use vm_memory::Bytes;

        use super::super::*;
        use crate::virtio::net::{VirtioNet, TX_QUEUE};
        use crate::virtio::rng::{VirtioRng, REQUEST_QUEUE};
        use crate::virtio::testing::{memory, DriverQueue};
        use crate::virtio::NoHook;

        /// Drives the transport's registers up to DRIVER_OK with `queues`.
        fn bring_up<H: KickHook + 'static>(t: &mut VirtioMmioTransport<H>, queues: &[&DriverQueue]) {
            let now = VirtualTime::ZERO;
            let w = |t: &mut VirtioMmioTransport<H>, off: u64, v: u32| t.write(now, off, &v.to_le_bytes());
            w(t, 0x70, status::ACKNOWLEDGE | status::DRIVER);
            let features = t.device().features() | F_VERSION_1;
            for (sel, half) in [(0u32, features as u32), (1, (features >> 32) as u32)] {
                w(t, 0x24, sel);
                w(t, 0x20, half);
            }
            w(t, 0x70, status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK);
            for (i, q) in queues.iter().enumerate() {
                w(t, 0x30, i as u32);
                w(t, 0x38, u32::from(q.size));
                for (lo, addr) in [(0x80, q.desc), (0x90, q.avail), (0xa0, q.used)] {
                    w(t, lo, addr as u32);
                    w(t, lo + 4, (addr >> 32) as u32);
                }
                w(t, 0x44, 1);
            }
            w(t, 0x70, 0xf & !status::FAILED);
        }

        #[test]
        fn net_over_mmio() {
            let mem = memory(1 << 20);
            let rx = DriverQueue::new(&mem, 0x1000, 16);
            let mut tx = DriverQueue::new(&mem, 0x4000, 16);
            let mut t = VirtioMmioTransport::new(
                VirtioNet::new(simtime::NodeId::new(4).unwrap()),
                NoHook::default(),
                mem.clone(),
                0x35,
            );
            let mut id = [0u8; 4];
            t.read(VirtualTime::ZERO, 8, &mut id);
            assert_eq!(u32::from_le_bytes(id), 1);
            let mut mac = [0u8; 6];
            t.read(VirtualTime::ZERO, 0x100, &mut mac);
            assert_eq!(mac, [2, 0, 10, 0, 0, 4]);
            bring_up(&mut t, &[&rx, &tx]);
            let mut b = vec![0u8; 12];
            b.extend_from_slice(b"hello");
            mem.write_slice(&b, vm_memory::GuestAddress(0x10000)).unwrap();
            tx.add(&mem, &[(0x10000, b.len() as u32, false)]);
            t.write(VirtualTime::ZERO, 0x50, &(TX_QUEUE as u32).to_le_bytes());
            assert_eq!(t.take_interrupt(), Some(0x35));
            assert_eq!(t.device_mut().take_tx(), vec![b"hello".to_vec()]);
            assert!(t.take_error().is_none());
        }

        #[test]
        fn rng_over_mmio() {
            let mem = memory(1 << 20);
            let mut q = DriverQueue::new(&mem, 0x1000, 16);
            let mut t = VirtioMmioTransport::new(VirtioRng::new(11), NoHook::default(), mem.clone(), 0x37);
            bring_up(&mut t, &[&q]);
            q.add(&mem, &[(0x10000, 24, true)]);
            t.write(VirtualTime::ZERO, 0x50, &(REQUEST_QUEUE as u32).to_le_bytes());
            assert_eq!(t.take_interrupt(), Some(0x37));
            assert_eq!(q.take_used(&mem), vec![(0, 24)]);
            let mut got = [0u8; 24];
            mem.read_slice(&mut got, vm_memory::GuestAddress(0x10000)).unwrap();
            // The same bytes as behind vhost-user.
            let mut want = [0u8; 24];
            let mut r = simrng::seeded(11);
            rand_core::RngCore::fill_bytes(&mut r, &mut want);
            assert_eq!(got, want);
            assert!(t.take_error().is_none());
        }
    }
}
