//! A minimal virtio driver for tests: lays out split rings by hand in a
//! guest memory and plays the driver's side of them.

use std::sync::atomic::Ordering;

use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

/// `VIRTQ_DESC_F_NEXT` and `VIRTQ_DESC_F_WRITE`.
const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;

/// The driver's view of one split virtqueue.
pub struct DriverQueue {
    pub size: u16,
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    next_desc: u16,
    avail_idx: u16,
    used_seen: u16,
}

impl DriverQueue {
    /// Rings for a queue of `size` entries starting at `base` (4 KiB
    /// aligned pieces: descriptors, then available, then used ring).
    pub fn new(mem: &GuestMemoryMmap, base: u64, size: u16) -> DriverQueue {
        let desc = base;
        let avail = desc + 16 * size as u64;
        let used = (avail + 6 + 2 * size as u64 + 4095) & !4095;
        let q = DriverQueue { size, desc, avail, used, next_desc: 0, avail_idx: 0, used_seen: 0 };
        // Zeroed rings: flags 0, idx 0.
        let zeros = vec![0u8; (used + 6 + 8 * size as u64 - base) as usize];
        mem.write_slice(&zeros, GuestAddress(base)).unwrap();
        q
    }

    /// A device-side virtio-queue `Queue` configured for these rings.
    pub fn device_queue(&self, max: u16) -> Queue {
        let mut q = Queue::new(max).unwrap();
        q.set_size(self.size);
        q.try_set_desc_table_address(GuestAddress(self.desc)).unwrap();
        q.try_set_avail_ring_address(GuestAddress(self.avail)).unwrap();
        q.try_set_used_ring_address(GuestAddress(self.used)).unwrap();
        q.set_ready(true);
        q
    }

    /// Makes a chain of `(addr, len, device_writable)` available; returns
    /// its head index.
    pub fn add(&mut self, mem: &GuestMemoryMmap, segs: &[(u64, u32, bool)]) -> u16 {
        let head = self.next_desc;
        for (i, &(addr, len, w)) in segs.iter().enumerate() {
            let idx = (self.next_desc + i as u16) % self.size;
            let next = (idx + 1) % self.size;
            let mut flags = if w { F_WRITE } else { 0 };
            if i + 1 < segs.len() {
                flags |= F_NEXT;
            }
            let at = GuestAddress(self.desc + 16 * idx as u64);
            mem.write_obj(addr.to_le(), at).unwrap();
            mem.write_obj(len.to_le(), GuestAddress(at.0 + 8)).unwrap();
            mem.write_obj(flags.to_le(), GuestAddress(at.0 + 12)).unwrap();
            mem.write_obj(next.to_le(), GuestAddress(at.0 + 14)).unwrap();
        }
        self.next_desc = (self.next_desc + segs.len() as u16) % self.size;
        let slot = self.avail + 4 + 2 * (self.avail_idx % self.size) as u64;
        mem.write_obj(head.to_le(), GuestAddress(slot)).unwrap();
        self.avail_idx = self.avail_idx.wrapping_add(1);
        mem.store(self.avail_idx.to_le(), GuestAddress(self.avail + 2), Ordering::Release).unwrap();
        head
    }

    /// Used elements `(id, len)` the device added since the last call.
    pub fn take_used(&mut self, mem: &GuestMemoryMmap) -> Vec<(u32, u32)> {
        let idx: u16 = mem.load(GuestAddress(self.used + 2), Ordering::Acquire).unwrap();
        let mut out = Vec::new();
        while self.used_seen != idx {
            let at = self.used + 4 + 8 * (self.used_seen % self.size) as u64;
            let id: u32 = mem.read_obj(GuestAddress(at)).unwrap();
            let len: u32 = mem.read_obj(GuestAddress(at + 4)).unwrap();
            out.push((id, len));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }

    /// Sets or clears `VRING_AVAIL_F_NO_INTERRUPT`.
    pub fn set_no_interrupt(&self, mem: &GuestMemoryMmap, on: bool) {
        mem.write_obj((on as u16).to_le(), GuestAddress(self.avail)).unwrap();
    }
}

/// An anonymous guest memory of `size` bytes at guest address 0.
pub fn memory(size: usize) -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size)]).unwrap()
}
