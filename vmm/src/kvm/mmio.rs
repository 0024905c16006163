//! The MMIO bus: devices in the MMIO hole above RAM (virtio-mmio transports).
//!
//! Any guest access to an address without a KVM memory slot exits to the VMM and lands
//! here. Unclaimed reads return all ones and unclaimed writes are dropped, counted.

use simtime::VirtualTime;

/// A device mapped in guest physical address space.
pub trait MmioDevice {
    /// Short name for traces and errors.
    fn name(&self) -> &'static str;
    /// Guest load of `data.len()` bytes at `offset` into the device window, at the
    /// exit's virtual time `now`.
    fn read(&mut self, now: VirtualTime, offset: u64, data: &mut [u8]);
    /// Guest store of `data` at `offset`, at the exit's virtual time `now`.
    fn write(&mut self, now: VirtualTime, offset: u64, data: &[u8]);
    /// An interrupt vector the device raised since the last call (edge), if any.
    fn take_interrupt(&mut self) -> Option<u8> {
        None
    }
    /// The device as `Any`, so that the engine can reach a device model it attached
    /// (deliver a frame, complete a disk request; see [`MmioBus::device_mut`]).
    /// Devices nobody needs to reach keep the default.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
    /// [`MmioDevice::as_any_mut`] for inspection.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Device windows, non-overlapping.
#[derive(Default)]
pub struct MmioBus {
    windows: Vec<(u64, u64, Box<dyn MmioDevice>)>,
    /// Accesses that hit no device.
    pub unclaimed: u64,
    /// Set when a store may have raised an interrupt; cleared by take_interrupts.
    raised_hint: bool,
}

impl std::fmt::Debug for MmioBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.windows.iter().map(|(b, l, d)| (d.name(), *b, *l)).collect();
        f.debug_struct("MmioBus").field("windows", &names).field("unclaimed", &self.unclaimed).finish()
    }
}

impl MmioBus {
    /// Maps `dev` at `[base, base + len)`. Returns false (and drops nothing) if the window
    /// overlaps an existing one.
    pub fn attach(&mut self, base: u64, len: u64, dev: Box<dyn MmioDevice>) -> bool {
        let overlaps = self.windows.iter().any(|(b, l, _)| base < b + l && *b < base + len);
        if overlaps {
            return false;
        }
        self.windows.push((base, len, dev));
        true
    }

    /// The device windows: (name, base, length).
    pub fn windows(&self) -> Vec<(&'static str, u64, u64)> {
        self.windows.iter().map(|(b, l, d)| (d.name(), *b, *l)).collect()
    }

    fn find(&mut self, addr: u64) -> Option<(&mut Box<dyn MmioDevice>, u64)> {
        self.windows.iter_mut().find(|(b, l, _)| addr >= *b && addr < b + l).map(|(b, _, d)| (d, addr - *b))
    }

    /// The device mapped at `base`, if it is a `T`: how the engine acts on a device
    /// from outside the guest (between runs). Such an action may raise an interrupt,
    /// so the next [`MmioBus::take_interrupts`] polls every device.
    pub fn device_mut<T: 'static>(&mut self, base: u64) -> Option<&mut T> {
        let (_, _, d) = self.windows.iter_mut().find(|(b, _, _)| *b == base)?;
        self.raised_hint = true;
        d.as_any_mut()?.downcast_mut::<T>()
    }

    /// The device mapped at `base`, if it is a `T`, for inspection.
    pub fn device_ref<T: 'static>(&self, base: u64) -> Option<&T> {
        let (_, _, d) = self.windows.iter().find(|(b, _, _)| *b == base)?;
        d.as_any()?.downcast_ref::<T>()
    }

    /// Vectors raised by devices since the last call, in window order.
    pub fn take_interrupts(&mut self) -> Vec<u8> {
        if !std::mem::take(&mut self.raised_hint) {
            return Vec::new();
        }
        self.windows.iter_mut().filter_map(|(_, _, d)| d.take_interrupt()).collect()
    }

    /// Dispatches a load.
    pub fn read(&mut self, now: VirtualTime, addr: u64, data: &mut [u8]) {
        match self.find(addr) {
            Some((d, off)) => d.read(now, off, data),
            None => {
                self.unclaimed += 1;
                data.fill(0xff);
            }
        }
    }

    /// Dispatches a store.
    pub fn write(&mut self, now: VirtualTime, addr: u64, data: &[u8]) {
        match self.find(addr) {
            Some((d, off)) => {
                d.write(now, off, data);
                self.raised_hint = true;
            }
            None => self.unclaimed += 1,
        }
    }
}
