//! Descriptor tables and available rings as a misbehaving guest driver may
//! write them (loops, chains past the table, lengths past guest memory,
//! writes where reads belong), then a kick, straight into the device
//! models (`vmm::virtio`) as either transport calls them.
//!
//! Input: one byte choosing the device and queue (modulo 6: net transmit,
//! blk requests, net receive with a frame to deliver, console output,
//! console input with bytes to deliver, rng requests), then the queue's
//! 16-entry descriptor table (256 bytes), its available ring (38 bytes)
//! and 256 bytes of buffers at `GUEST_BASE + 0x20000`. The layout is the
//! one of vmm's `fuzz_virtqueue_descriptors` test, whose corpus seeds this
//! target's.
#![no_main]

use disksim::{BlockStore, Disk};
use libfuzzer_sys::fuzz_target;
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm::virtio::console::VirtioConsole;
use vmm::virtio::rx_tx::{RX_QUEUE, TX_QUEUE};
use vmm::virtio::{BlkConfig, Queues, VirtioBlk, VirtioDevice, VirtioNet, VirtioRng};

const GUEST_BASE: u64 = 0x10_0000;
const MEM_SIZE: usize = 4 << 20;
const SIZE: u16 = 16;
const DATA: u64 = GUEST_BASE + 0x20000;
/// Where queue 0's and queue 1's rings start (descriptors, then the
/// available ring, then the used ring at the next 4 KiB).
const RING_BASES: [u64; 2] = [GUEST_BASE + 0x1000, GUEST_BASE + 0x8000];

/// The device's queues over fresh guest memory, every queue ready with
/// EVENT_IDX negotiated, as after a complete driver setup.
fn set_up(device: &mut impl VirtioDevice) -> Queues {
    device.ack_features(device.features());
    let mut queues = Queues::new(device.queue_max_sizes());
    queues.mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(GUEST_BASE), MEM_SIZE)]).unwrap();
    for (q, base) in queues.queues.iter_mut().zip(RING_BASES) {
        let avail = base + 16 * u64::from(SIZE);
        let used = (avail + 6 + 2 * u64::from(SIZE) + 4095) & !4095;
        q.set_size(SIZE);
        q.try_set_desc_table_address(GuestAddress(base)).unwrap();
        q.try_set_avail_ring_address(GuestAddress(avail)).unwrap();
        q.try_set_used_ring_address(GuestAddress(used)).unwrap();
        q.set_event_idx(true);
        q.set_ready(true);
    }
    queues
}

/// Writes the input's descriptor table, available ring and buffers for
/// queue `index` (what is missing stays zero).
fn write_rings(queues: &Queues, index: usize, rest: &[u8]) {
    let table = 16 * usize::from(SIZE);
    let avail = 6 + 2 * usize::from(SIZE);
    let part = |from: usize, len: usize| rest.get(from..).map(|r| &r[..r.len().min(len)]).unwrap_or(&[]);
    let base = RING_BASES[index];
    let mem = &queues.mem;
    mem.write_slice(part(0, table), GuestAddress(base)).unwrap();
    mem.write_slice(part(table, avail), GuestAddress(base + table as u64)).unwrap();
    mem.write_slice(part(table + avail, 256), GuestAddress(DATA)).unwrap();
}

fuzz_target!(|input: &[u8]| {
    let Some((&which, rest)) = input.split_first() else { return };
    match which % 6 {
        0 => {
            let mut dev = VirtioNet::new(engine::NodeId::new(3).unwrap());
            let mut queues = set_up(&mut dev);
            write_rings(&queues, TX_QUEUE, rest);
            let _ = dev.queue_notify(TX_QUEUE, &mut queues);
            let _ = dev.take_tx();
        }
        1 => {
            let mut dev = VirtioBlk::new(Disk::new(BlockStore::zeros(64)), BlkConfig::default());
            let mut queues = set_up(&mut dev);
            write_rings(&queues, 0, rest);
            let _ = dev.queue_notify(0, &mut queues);
            for id in dev.take_accepted() {
                let _ = dev.complete(id, &mut queues);
            }
        }
        2 => {
            let mut dev = VirtioNet::new(engine::NodeId::new(3).unwrap());
            let mut queues = set_up(&mut dev);
            write_rings(&queues, RX_QUEUE, rest);
            let _ = dev.queue_notify(RX_QUEUE, &mut queues);
            let _ = dev.deliver(&mut queues, &[0x42; 60]);
        }
        3 => {
            let mut dev = VirtioConsole::new();
            let mut queues = set_up(&mut dev);
            write_rings(&queues, TX_QUEUE, rest);
            let _ = dev.queue_notify(TX_QUEUE, &mut queues);
            let _ = dev.take_output();
        }
        4 => {
            let mut dev = VirtioConsole::new();
            let mut queues = set_up(&mut dev);
            write_rings(&queues, RX_QUEUE, rest);
            dev.push_input(b"@sim go\n");
            let _ = dev.queue_notify(RX_QUEUE, &mut queues);
            let _ = dev.flush_input(&mut queues);
        }
        _ => {
            let mut dev = VirtioRng::new(11);
            let mut queues = set_up(&mut dev);
            write_rings(&queues, 0, rest);
            let _ = dev.queue_notify(0, &mut queues);
        }
    }
});
