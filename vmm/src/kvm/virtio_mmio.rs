//! virtio-mmio transport (virtio 1.x, "version 2" register layout), in front of the
//! virtio-net and virtio-blk device models ([`super::ports`]).
//!
//! The transport owns the generic state (status, feature negotiation, queue
//! addresses, interrupt status); a [`VirtioDevice`] owns the device-specific part
//! (config space, what a queue notification does). The guest learns about a transport
//! from the kernel command line ([`cmdline_fragment`]: `virtio_mmio.device=4K@<base>:<irq>`).
//!
//! Interrupts: when a device signals used buffers or a config change, the transport
//! sets InterruptStatus and raises its vector once (edge); the run loop collects raised
//! vectors from the MMIO bus ([`super::MmioBus::take_interrupts`]) and injects them.
//! Invariant: the transport never touches guest memory itself; only the device does,
//! at notification time, so all device effects happen at deterministic exits.

use vm_memory::GuestMemoryMmap;

use super::arch::layout;
use super::mmio::MmioDevice;

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

/// Where a virtqueue lives, as configured by the driver.
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

/// What a device asks of the transport after an event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signal {
    /// Used buffers were added: InterruptStatus bit 0.
    pub used_buffer: bool,
    /// Config space changed: InterruptStatus bit 1.
    pub config_change: bool,
}

/// A virtio device model behind the transport.
pub trait VirtioDevice {
    /// Virtio device id (1 = net, 2 = block, ...).
    fn device_type(&self) -> u32;
    /// Maximum size of each queue; the number of queues is the slice length.
    fn queue_max_sizes(&self) -> Vec<u16>;
    /// Device feature bits (the transport adds [`F_VERSION_1`]).
    fn features(&self) -> u64;
    /// Reads device config space.
    fn read_config(&self, offset: u64, data: &mut [u8]);
    /// Writes device config space.
    fn write_config(&mut self, offset: u64, data: &[u8]);
    /// DRIVER_OK was set: the device may start using `queues` with `features`.
    fn activate(&mut self, features: u64, queues: &[QueueConfig]);
    /// The driver notified `queue` at virtual time `now_ns`.
    fn notify(&mut self, mem: &GuestMemoryMmap, now_ns: u64, queue: u16) -> Signal;
    /// The driver reset the device (status written as 0).
    fn reset(&mut self);
}

/// The kernel command-line fragment describing a transport at `base` with `irq`.
pub fn cmdline_fragment(base: u64, irq: u32) -> String {
    format!("virtio_mmio.device=4K@{base:#x}:{irq}")
}

/// The `n`th transport window above [`layout::VIRTIO_MMIO_BASE`].
pub fn window_base(n: u64) -> u64 {
    layout::VIRTIO_MMIO_BASE + n * WINDOW
}

/// virtio-mmio registers in front of a [`VirtioDevice`].
pub struct VirtioMmioTransport<D: VirtioDevice> {
    device: D,
    vector: u8,
    status: u32,
    device_features_sel: u32,
    driver_features_sel: u32,
    driver_features: u64,
    queue_sel: u32,
    queues: Vec<QueueConfig>,
    interrupt_status: u32,
    raised: bool,
    config_generation: u32,
}

impl<D: VirtioDevice> VirtioMmioTransport<D> {
    /// Wraps `device`; interrupts are delivered as `vector`.
    pub fn new(device: D, vector: u8) -> Self {
        let queues =
            device.queue_max_sizes().into_iter().map(|m| QueueConfig { max_size: m, ..Default::default() }).collect();
        VirtioMmioTransport {
            device,
            vector,
            status: 0,
            device_features_sel: 0,
            driver_features_sel: 0,
            driver_features: 0,
            queue_sel: 0,
            queues,
            interrupt_status: 0,
            raised: false,
            config_generation: 0,
        }
    }

    /// The device model.
    pub fn device(&self) -> &D {
        &self.device
    }
    /// The device model, for engine actions between runs (reach the transport with
    /// [`super::MmioBus::device_mut`]); follow them with [`Self::raise`].
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
    /// Signals the guest from outside a notification (a frame arrived, a disk
    /// request completed): sets InterruptStatus and raises the vector on a 0 -> non-zero
    /// edge, exactly as a signal returned by [`VirtioDevice::notify`] does.
    pub fn raise(&mut self, s: Signal) {
        self.signal(s);
    }
    /// Device status register.
    pub fn status(&self) -> u32 {
        self.status
    }
    /// Queue configuration as written by the driver.
    pub fn queues(&self) -> &[QueueConfig] {
        &self.queues
    }
    /// Features the driver accepted.
    pub fn driver_features(&self) -> u64 {
        self.driver_features
    }

    fn all_features(&self) -> u64 {
        self.device.features() | F_VERSION_1
    }

    fn signal(&mut self, s: Signal) {
        let before = self.interrupt_status;
        if s.used_buffer {
            self.interrupt_status |= 1;
        }
        if s.config_change {
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
        for q in &mut self.queues {
            *q = QueueConfig { max_size: q.max_size, ..Default::default() };
        }
        self.device.reset();
    }

    fn queue(&mut self) -> Option<&mut QueueConfig> {
        self.queues.get_mut(self.queue_sel as usize)
    }

    fn reg_read(&mut self, offset: u64) -> u32 {
        let q = self.queues.get(self.queue_sel as usize).copied().unwrap_or_default();
        match offset {
            0x000 => MAGIC,
            0x004 => 2,
            0x008 => self.device.device_type(),
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

    fn reg_write(&mut self, mem: &GuestMemoryMmap, now: u64, offset: u64, v: u32) {
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
            0x050 if self.status & status::DRIVER_OK != 0 && (v as usize) < self.queues.len() => {
                let s = self.device.notify(mem, now, v as u16);
                self.signal(s);
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
                    self.device.activate(self.driver_features, &self.queues);
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

impl<D: VirtioDevice + 'static> MmioDevice for VirtioMmioTransport<D> {
    fn name(&self) -> &'static str {
        "virtio-mmio"
    }
    fn read(&mut self, _mem: &GuestMemoryMmap, _now: u64, offset: u64, data: &mut [u8]) {
        if offset >= 0x100 {
            self.device.read_config(offset - 0x100, data);
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
    fn write(&mut self, mem: &GuestMemoryMmap, now: u64, offset: u64, data: &[u8]) {
        if offset >= 0x100 {
            self.device.write_config(offset - 0x100, data);
            return;
        }
        if data.len() != 4 || !offset.is_multiple_of(4) {
            return;
        }
        let v = u32::from_le_bytes(data.try_into().unwrap());
        self.reg_write(mem, now, offset, v);
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

    /// A device that counts notifications and answers each with a used-buffer signal.
    #[derive(Default)]
    struct Counter {
        notified: Vec<(u64, u16)>,
        activated: Option<(u64, usize)>,
        resets: u32,
        config: [u8; 8],
    }

    impl VirtioDevice for Counter {
        fn device_type(&self) -> u32 {
            42
        }
        fn queue_max_sizes(&self) -> Vec<u16> {
            vec![256, 64]
        }
        fn features(&self) -> u64 {
            1 << 5
        }
        fn read_config(&self, offset: u64, data: &mut [u8]) {
            for (i, b) in data.iter_mut().enumerate() {
                *b = self.config.get(offset as usize + i).copied().unwrap_or(0);
            }
        }
        fn write_config(&mut self, offset: u64, data: &[u8]) {
            for (i, b) in data.iter().enumerate() {
                if let Some(c) = self.config.get_mut(offset as usize + i) {
                    *c = *b;
                }
            }
        }
        fn activate(&mut self, features: u64, queues: &[QueueConfig]) {
            self.activated = Some((features, queues.iter().filter(|q| q.ready).count()));
        }
        fn notify(&mut self, _mem: &GuestMemoryMmap, now: u64, queue: u16) -> Signal {
            self.notified.push((now, queue));
            Signal { used_buffer: true, config_change: false }
        }
        fn reset(&mut self) {
            self.resets += 1;
        }
    }

    fn r(t: &mut VirtioMmioTransport<Counter>, m: &GuestMemoryMmap, off: u64) -> u32 {
        let mut b = [0u8; 4];
        t.read(m, 0, off, &mut b);
        u32::from_le_bytes(b)
    }
    fn w(t: &mut VirtioMmioTransport<Counter>, m: &GuestMemoryMmap, off: u64, v: u32) {
        t.write(m, 7, off, &v.to_le_bytes());
    }

    #[test]
    fn driver_init_sequence_notify_and_interrupt() {
        let m = anonymous_memory(2 << 20).unwrap();
        let mut t = VirtioMmioTransport::new(Counter::default(), 0x30);
        assert_eq!(r(&mut t, &m, 0), MAGIC);
        assert_eq!(r(&mut t, &m, 4), 2);
        assert_eq!(r(&mut t, &m, 8), 42);
        w(&mut t, &m, 0x70, 0);
        w(&mut t, &m, 0x70, status::ACKNOWLEDGE | status::DRIVER);
        w(&mut t, &m, 0x14, 1);
        assert_eq!(r(&mut t, &m, 0x10), 1); // VERSION_1 (bit 32)
        w(&mut t, &m, 0x14, 0);
        assert_eq!(r(&mut t, &m, 0x10), 1 << 5);
        // Driver accepts bit 5 and an unoffered bit 6 (dropped), then VERSION_1.
        w(&mut t, &m, 0x24, 0);
        w(&mut t, &m, 0x20, (1 << 5) | (1 << 6));
        w(&mut t, &m, 0x24, 1);
        w(&mut t, &m, 0x20, 1);
        w(&mut t, &m, 0x70, status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK);
        assert_eq!(r(&mut t, &m, 0x70) & status::FEATURES_OK, status::FEATURES_OK);
        assert_eq!(t.driver_features(), F_VERSION_1 | (1 << 5));
        // Queue 0.
        w(&mut t, &m, 0x30, 0);
        assert_eq!(r(&mut t, &m, 0x34), 256);
        w(&mut t, &m, 0x38, 128);
        w(&mut t, &m, 0x80, 0x1000);
        w(&mut t, &m, 0x90, 0x2000);
        w(&mut t, &m, 0xa0, 0x3000);
        w(&mut t, &m, 0xa4, 1);
        w(&mut t, &m, 0x44, 1);
        assert_eq!(
            t.queues()[0],
            QueueConfig { max_size: 256, size: 128, ready: true, desc: 0x1000, avail: 0x2000, used: 0x1_0000_3000 }
        );
        // Notify before DRIVER_OK is ignored.
        w(&mut t, &m, 0x50, 0);
        assert!(t.device().notified.is_empty());
        w(&mut t, &m, 0x70, 0xf & !status::FAILED);
        assert_eq!(t.device().activated, Some((F_VERSION_1 | (1 << 5), 1)));
        w(&mut t, &m, 0x50, 0);
        assert_eq!(t.device().notified, vec![(7, 0)]);
        assert_eq!(r(&mut t, &m, 0x60), 1);
        assert_eq!(t.take_interrupt(), Some(0x30));
        assert_eq!(t.take_interrupt(), None, "edge: raised once");
        w(&mut t, &m, 0x50, 0);
        assert_eq!(t.take_interrupt(), None, "still unacknowledged: no new edge");
        w(&mut t, &m, 0x64, 1);
        assert_eq!(r(&mut t, &m, 0x60), 0);
        // Config space.
        t.write(&m, 0, 0x102, &[9]);
        let mut b = [0u8; 1];
        t.read(&m, 0, 0x102, &mut b);
        assert_eq!(b, [9]);
        // Reset.
        w(&mut t, &m, 0x70, 0);
        assert_eq!(t.status(), 0);
        assert!(!t.queues()[0].ready);
        assert_eq!(t.device().resets, 2, "one reset at the start, one here");
    }

    #[test]
    fn features_ok_requires_version_1() {
        let m = anonymous_memory(2 << 20).unwrap();
        let mut t = VirtioMmioTransport::new(Counter::default(), 0x30);
        w(&mut t, &m, 0x70, status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK);
        assert_eq!(t.status() & status::FEATURES_OK, 0);
    }

    #[test]
    fn cmdline() {
        assert_eq!(cmdline_fragment(window_base(1), 5), "virtio_mmio.device=4K@0xd0001000:5");
    }
}
