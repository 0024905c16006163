//! virtio-rng (device id 4): the guest's entropy source, drawn from the
//! execution seed.
//!
//! One request queue (queue 0). The driver posts device-writable buffers;
//! at its kick the device fills each with the next bytes of a deterministic
//! stream and returns it used with the number of bytes written. No feature
//! bits beyond the ring features, no config space.
//!
//! Why it exists: a guest kernel without an entropy source initialises its
//! crng from its jitter-entropy loop, which under virtual time is millions
//! of engine steps (a getrandom(2) at boot blocked for minutes of wall
//! time). With this device Linux's hwrng core (CONFIG_HW_RANDOM_VIRTIO)
//! feeds the pool at boot and getrandom(2) returns at once.
//!
//! Invariants:
//! - the stream is a fixed function of the seed: the bytes of
//!   `simrng::seeded(seed)`, each output word in
//!   little-endian order (what `RngCore::fill_bytes` produces for lengths
//!   that are multiples of 8). Requests take consecutive pieces of it, so
//!   the k-th byte handed out is the same whatever sizes the requests had;
//!   same seed, same bytes in the same order;
//! - bytes leave the stream only inside [`VirtioDevice::queue_notify`],
//!   i.e. when the guest asks (its kick), and only into device-writable
//!   descriptors; so what a guest reads depends on its own requests alone,
//!   never on host time, host randomness or what other nodes do;
//! - a driver reset does not rewind the stream: a re-probed driver gets
//!   fresh bytes, never the ones it already had. A new boot of the node
//!   gets a new device (with the seed the engine derives for that boot).

use rand_core::RngCore;
use virtio_queue::QueueT;

use super::{drain_chains, Chain, DeviceError, Queues, VirtioDevice, VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX};

/// The virtio device id of an entropy source.
pub const DEVICE_ID: u32 = 4;
/// The only queue.
pub const REQUEST_QUEUE: usize = 0;
/// Queue size offered (user-mode Linux always asks for 256).
pub const QUEUE_SIZE: u16 = 256;
/// The most bytes one buffer gets. The spec lets the device use less than
/// the whole buffer ("MAY use less than the entire buffer length"); the
/// cap keeps a driver that posts a huge buffer from making us allocate it.
/// Linux's driver asks for at most 64 bytes at a time.
pub const MAX_BYTES_PER_BUFFER: usize = 64 * 1024;

/// A virtio-rng device. See the module docs for its invariants.
pub struct VirtioRng {
    rng: simrng::Rng,
    /// Bytes of the last output word not handed out yet (`spare[spare_at..]`).
    spare: [u8; 8],
    spare_at: usize,
    acked: u64,
    /// Bytes handed out since construction.
    handed_out: u64,
}

impl VirtioRng {
    /// A device whose stream is drawn from `seed`.
    pub fn new(seed: u64) -> VirtioRng {
        VirtioRng { rng: simrng::seeded(seed), spare: [0; 8], spare_at: 8, acked: 0, handed_out: 0 }
    }

    /// From now on the stream is drawn from `seed`, as if the device had
    /// been made with it (a leftover partial word is dropped). Warm start
    /// gives each execution forked from one boot a stream of its own.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = simrng::seeded(seed);
        self.spare_at = 8;
    }

    /// Bytes handed to the guest so far.
    pub fn handed_out(&self) -> u64 {
        self.handed_out
    }

    /// Fills `out` with the next bytes of the stream.
    fn next_bytes(&mut self, out: &mut [u8]) {
        // Leftover of the previous word first, so the stream does not
        // depend on how requests split it.
        let n = (8 - self.spare_at).min(out.len());
        out[..n].copy_from_slice(&self.spare[self.spare_at..self.spare_at + n]);
        self.spare_at += n;
        let rest = &mut out[n..];
        let whole = rest.len() / 8 * 8;
        self.rng.fill_bytes(&mut rest[..whole]);
        let tail = &mut rest[whole..];
        if !tail.is_empty() {
            self.rng.fill_bytes(&mut self.spare);
            tail.copy_from_slice(&self.spare[..tail.len()]);
            self.spare_at = tail.len();
        }
        self.handed_out += out.len() as u64;
    }

    /// Fills one chain and returns it used. Device-readable descriptors
    /// are skipped (the spec forbids the device to write them; the driver
    /// must not post them): a chain without writable room comes back used
    /// with length 0 and takes nothing from the stream.
    fn fill(&mut self, queues: &mut Queues, chain: Chain) -> Result<(), DeviceError> {
        let n = chain.writable_len().min(MAX_BYTES_PER_BUFFER);
        let mut bytes = vec![0u8; n];
        self.next_bytes(&mut bytes);
        let (mem, q) = queues.ready(REQUEST_QUEUE)?;
        chain.write_at(mem, 0, &bytes)?;
        q.add_used(mem, chain.head, n as u32)?;
        Ok(())
    }
}

impl VirtioDevice for VirtioRng {
    fn device_id(&self) -> u32 {
        DEVICE_ID
    }

    fn features(&self) -> u64 {
        VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX
    }

    fn ack_features(&mut self, features: u64) {
        self.acked = features & self.features();
    }

    fn config(&self) -> Vec<u8> {
        // virtio-rng has no config space.
        Vec::new()
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &[QUEUE_SIZE]
    }

    fn queue_notify(&mut self, index: usize, queues: &mut Queues) -> Result<bool, DeviceError> {
        if index != REQUEST_QUEUE {
            return Err(DeviceError::QueueNotReady(index));
        }
        // Every buffer is filled and used at once.
        drain_chains(queues, REQUEST_QUEUE, |queues, chain| self.fill(queues, chain).map(|()| true))
    }

    fn reset(&mut self) {
        // The stream position stays (see the module docs).
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testing::{memory, DriverQueue};
    use vm_memory::{Bytes, GuestAddress};

    fn setup(seed: u64) -> (VirtioRng, Queues, DriverQueue) {
        let mem = memory(1 << 20);
        let dq = DriverQueue::new(&mem, 0x1000, 16);
        let mut dev = VirtioRng::new(seed);
        dev.ack_features(dev.features());
        let queues = Queues { queues: vec![dq.device_queue(QUEUE_SIZE)], mem };
        (dev, queues, dq)
    }

    fn read(qs: &Queues, at: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        qs.mem.read_slice(&mut b, GuestAddress(at)).unwrap();
        b
    }

    /// What a guest gets for `sizes`-byte requests, one kick each.
    fn requests(seed: u64, sizes: &[u32]) -> Vec<u8> {
        let (mut dev, mut qs, mut dq) = setup(seed);
        let mut out = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            let at = 0x10000 + 0x1000 * i as u64;
            let head = dq.add(&qs.mem, &[(at, len, true)]);
            dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap();
            assert_eq!(dq.take_used(&qs.mem), vec![(head as u32, len)]);
            out.extend(read(&qs, at, len as usize));
        }
        assert_eq!(dev.handed_out(), out.len() as u64);
        out
    }

    #[test]
    fn same_seed_same_bytes_whatever_the_request_sizes() {
        let a = requests(7, &[16, 16, 32]);
        assert_eq!(a, requests(7, &[16, 16, 32]));
        // The stream does not depend on how requests split it.
        assert_eq!(a, requests(7, &[5, 7, 1, 51]));
        // It is the seeded PRNG's output, word by word, little-endian.
        let mut r = simrng::seeded(7);
        let words: Vec<u8> = (0..8).flat_map(|_| r.next_u64().to_le_bytes()).collect();
        assert_eq!(a, words);
        assert!(a.iter().any(|&b| b != 0));
    }

    #[test]
    fn different_seeds_different_bytes() {
        assert_ne!(requests(1, &[32]), requests(2, &[32]));
        assert_ne!(requests(0, &[32]), requests(u64::MAX, &[32]));
    }

    #[test]
    fn a_chain_is_filled_completely_across_descriptors() {
        let (mut dev, mut qs, mut dq) = setup(3);
        // Sentinels: every byte must be overwritten by the stream.
        qs.mem.write_slice(&[0xee; 64], GuestAddress(0x20000)).unwrap();
        qs.mem.write_slice(&[0xee; 64], GuestAddress(0x30000)).unwrap();
        let head = dq.add(&qs.mem, &[(0x20000, 13, true), (0x30000, 27, true)]);
        assert!(dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap(), "used_event 0: the first completion interrupts");
        assert_eq!(dq.take_used(&qs.mem), vec![(head as u32, 40)]);
        let mut got = read(&qs, 0x20000, 13);
        got.extend(read(&qs, 0x30000, 27));
        assert_eq!(got, requests(3, &[40]));
        // Nothing past the descriptors was written.
        assert_eq!(read(&qs, 0x20000 + 13, 1), vec![0xee]);
        assert_eq!(read(&qs, 0x30000 + 27, 1), vec![0xee]);
    }

    #[test]
    fn several_buffers_in_one_kick_take_consecutive_bytes() {
        let (mut dev, mut qs, mut dq) = setup(9);
        let a = dq.add(&qs.mem, &[(0x20000, 10, true)]);
        let b = dq.add(&qs.mem, &[(0x21000, 22, true)]);
        dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap();
        assert_eq!(dq.take_used(&qs.mem), vec![(a as u32, 10), (b as u32, 22)]);
        let mut got = read(&qs, 0x20000, 10);
        got.extend(read(&qs, 0x21000, 22));
        assert_eq!(got, requests(9, &[32]));
    }

    #[test]
    fn read_only_descriptors_are_never_written() {
        let (mut dev, mut qs, mut dq) = setup(4);
        qs.mem.write_slice(&[0x5a; 32], GuestAddress(0x20000)).unwrap();
        qs.mem.write_slice(&[0x5a; 32], GuestAddress(0x21000)).unwrap();
        // Only device-readable: returned with nothing written, nothing
        // taken from the stream.
        let ro = dq.add(&qs.mem, &[(0x20000, 32, false)]);
        // Mixed: the readable part is skipped, the writable part filled.
        let mixed = dq.add(&qs.mem, &[(0x21000, 16, false), (0x22000, 16, true)]);
        dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap();
        assert_eq!(dq.take_used(&qs.mem), vec![(ro as u32, 0), (mixed as u32, 16)]);
        assert_eq!(read(&qs, 0x20000, 32), vec![0x5a; 32]);
        assert_eq!(read(&qs, 0x21000, 16), vec![0x5a; 16]);
        assert_eq!(read(&qs, 0x22000, 16), requests(4, &[16]));
        assert_eq!(dev.handed_out(), 16);
    }

    #[test]
    fn a_reset_does_not_rewind_the_stream() {
        let (mut dev, mut qs, mut dq) = setup(5);
        dq.add(&qs.mem, &[(0x20000, 8, true)]);
        dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap();
        dev.reset();
        dq.add(&qs.mem, &[(0x21000, 8, true)]);
        dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap();
        let mut got = read(&qs, 0x20000, 8);
        got.extend(read(&qs, 0x21000, 8));
        assert_eq!(got, requests(5, &[16]));
    }

    #[test]
    fn huge_buffers_get_at_most_the_cap() {
        let (mut dev, mut qs, mut dq) = setup(6);
        let len = (MAX_BYTES_PER_BUFFER + 4096) as u32;
        let head = dq.add(&qs.mem, &[(0x40000, len, true)]);
        dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap();
        assert_eq!(dq.take_used(&qs.mem), vec![(head as u32, MAX_BYTES_PER_BUFFER as u32)]);
    }

    #[test]
    fn no_buffer_no_interrupt_and_other_queues_are_errors() {
        let (mut dev, mut qs, _dq) = setup(8);
        assert!(!dev.queue_notify(REQUEST_QUEUE, &mut qs).unwrap());
        assert!(matches!(dev.queue_notify(1, &mut qs), Err(DeviceError::QueueNotReady(1))));
        assert_eq!(dev.device_id(), 4);
        assert!(dev.config().is_empty());
    }
}
