//! virtio-blk (device id 2) over a [`disksim::Disk`].
//!
//! A request goes through two engine-visible steps:
//! 1. *accept*, when the driver kicks the queue: the chain is popped, the
//!    request applied to the disk with [`disksim::virtio::submit`] (which
//!    issues it: a write enters the write log as in flight, a read takes
//!    its data from the cache view), and the request id is queued for
//!    [`VirtioBlk::take_accepted`]. Nothing is written to guest memory.
//! 2. *complete*, when the engine chooses ([`VirtioBlk::complete`]):
//!    [`disksim::Disk::complete`] applies the durability effect, then the
//!    read data and the status byte go into the driver's buffers and the
//!    chain onto the used ring.
//!
//! Requests that fail before reaching the disk (bad header, unsupported
//! type) and GET_ID complete at once, during acceptance: the disk model has
//! nothing to order for them. With [`VirtioBlk::set_reads_at_once`], reads
//! do too (see there for why that is sound); they are reported by
//! [`VirtioBlk::take_reads_done`].
//!
//! Disk faults ([`disksim::faults`]): with [`VirtioBlk::set_read_faults`]
//! a read's data may be corrupted at its acceptance, drawn from the device's
//! own seeded stream (reads are served inside the guest's kick, where the
//! engine makes no decision); a write or flush carries the fault the engine
//! injected into the disk ([`disksim::Disk::inject`]) to its completion, and
//! a failed write completes with `VIRTIO_BLK_S_IOERR`. Each completion
//! reports its fault ([`BlkDone`], [`VirtioBlk::complete`]).
//!
//! Invariant: every id in `pending` is outstanding in the disk, and every
//! chain popped from the queue is either in `pending` or on the used ring.

use std::collections::BTreeMap;

use disksim::faults::maybe_corrupt;
use disksim::virtio::{submit, BlkOp, RequestHeader, Status, T_FLUSH, T_OUT};
use disksim::{BlockStore, Disk, DiskFault, ReadFaults, RequestId, RequestKind, SECTOR_SIZE};
use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use virtio_queue::QueueT;

use super::{
    drain_chains, Chain, DeviceError, Queues, VirtioDevice, VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX,
};

/// `VIRTIO_BLK_F_SEG_MAX`: `seg_max` in the config is valid.
pub const VIRTIO_BLK_F_SEG_MAX: u64 = 1 << 2;
/// `VIRTIO_BLK_F_RO`: the device is read-only; the driver never writes.
pub const VIRTIO_BLK_F_RO: u64 = 1 << 5;
/// `VIRTIO_BLK_F_BLK_SIZE`: `blk_size` in the config is valid.
pub const VIRTIO_BLK_F_BLK_SIZE: u64 = 1 << 6;
/// `VIRTIO_BLK_F_FLUSH`: the device has a volatile write cache and
/// accepts FLUSH; disksim's durability model depends on it.
pub const VIRTIO_BLK_F_FLUSH: u64 = 1 << 9;
/// The only request queue.
pub const REQUEST_QUEUE: usize = 0;

/// Static properties of a block device.
#[derive(Debug, Clone)]
pub struct BlkConfig {
    /// GET_ID answer (at most 20 bytes are used).
    pub serial: Vec<u8>,
    /// Queue size offered (user-mode Linux uses at most 256).
    pub queue_size: u16,
    /// Logical block size reported to the driver (512 or 4096).
    pub blk_size: u32,
    /// Offer `VIRTIO_BLK_F_RO` and no write cache (a node's root disk:
    /// every node reads the same image). A write or flush that reaches the
    /// device anyway fails with `IOERR` and never touches the disk, and
    /// reads completed at once are not reported by
    /// [`VirtioBlk::take_reads_done`].
    pub read_only: bool,
}

impl Default for BlkConfig {
    fn default() -> Self {
        BlkConfig {
            serial: b"simcluster".to_vec(),
            queue_size: 256,
            blk_size: 512,
            read_only: false,
        }
    }
}

/// What a request that reached the disk asks of it: the engine's view of
/// an accepted request (for choosing completions and for its trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlkRequest {
    pub id: RequestId,
    /// Read, write or flush. Writes are never FUA: virtio-blk has no FUA
    /// flag (Linux emulates REQ_FUA with a flush after the write).
    pub kind: RequestKind,
    /// First sector (512 bytes each); 0 for a flush.
    pub sector: u64,
    /// Number of sectors; 0 for a flush.
    pub sectors: u64,
}

/// A request that completed, and the disk fault that hit it, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlkDone {
    pub request: BlkRequest,
    pub fault: Option<DiskFault>,
}

/// A request accepted but not completed.
struct Pending {
    chain: Chain,
    status: Status,
    data_in: Vec<u8>,
    request: BlkRequest,
    /// A read's corruption, drawn at acceptance.
    fault: Option<DiskFault>,
}

/// A virtio-blk device.
pub struct VirtioBlk {
    disk: Disk,
    cfg: BlkConfig,
    sizes: [u16; 1],
    acked: u64,
    pending: BTreeMap<RequestId, Pending>,
    accepted: Vec<RequestId>,
    /// Complete reads during acceptance (see [`Self::set_reads_at_once`]).
    reads_at_once: bool,
    /// Reads completed during acceptance, not yet taken.
    reads_done: Vec<BlkDone>,
    /// `[faults.disk] corrupt_read` (> 0) and the device's stream; `None`:
    /// reads are never corrupted and nothing is drawn.
    corrupt_read: Option<(f64, Xoshiro256PlusPlus)>,
}

impl VirtioBlk {
    pub fn new(disk: Disk, cfg: BlkConfig) -> VirtioBlk {
        let sizes = [cfg.queue_size];
        VirtioBlk {
            disk,
            cfg,
            sizes,
            acked: 0,
            pending: BTreeMap::new(),
            accepted: Vec::new(),
            reads_at_once: false,
            reads_done: Vec::new(),
            corrupt_read: None,
        }
    }

    /// Corrupts reads with probability `faults.corrupt_read`, drawing from
    /// a stream seeded with `faults.seed` (one draw per read accepted, more
    /// for the bits of a corrupted one; none at probability 0). The engine
    /// gives each boot of a node its own seed; [`ReadFaults::default`]
    /// turns corruption off (the quiet period).
    pub fn set_read_faults(&mut self, faults: ReadFaults) {
        self.corrupt_read =
            (faults.corrupt_read > 0.0).then(|| (faults.corrupt_read, Xoshiro256PlusPlus::seed_from_u64(faults.seed)));
    }

    /// Whether reads complete during acceptance, inside the kick, instead
    /// of waiting for [`Self::complete`]. Off by default.
    ///
    /// Why this is sound (the user-mode Linux runtime turns it on):
    /// - a read has no durability effect, so completing it never changes
    ///   which crash states exist; only writes and flushes are engine
    ///   choices that matter for crash consistency;
    /// - its data is the disk's cache view at acceptance, a function of the
    ///   requests issued before it, which the guest issued at points fixed
    ///   by the engine's schedule (reading data of a write still in flight
    ///   is one of the answers a real device may give);
    /// - its data and used-ring entry are written inside
    ///   [`VirtioDevice::queue_notify`], which the transport calls while the
    ///   guest is blocked on the kick, so guest memory is quiescent and the
    ///   guest sees the entry at a deterministic point; the interrupt that
    ///   announces it is still delivered by the engine, at a time it picks
    ///   (the transport reports it as owed).
    ///
    /// What is lost: the engine no longer explores read latencies. Reads
    /// completed this way are listed by [`Self::take_reads_done`].
    pub fn set_reads_at_once(&mut self, on: bool) {
        self.reads_at_once = on;
    }

    /// Reads completed during acceptance since the last call, in order.
    pub fn take_reads_done(&mut self) -> Vec<BlkDone> {
        std::mem::take(&mut self.reads_done)
    }

    /// What pending request `id` asks for, if it is pending.
    pub fn request(&self, id: RequestId) -> Option<BlkRequest> {
        self.pending.get(&id).map(|p| p.request)
    }

    /// Takes the disk out, leaving an empty one (0 sectors) behind, and
    /// forgets every pending request: their chains belong to a driver that
    /// is gone (the node lost power). The requests stay outstanding in the
    /// returned disk until [`Disk::apply_crash`] resolves them.
    pub fn take_disk(&mut self) -> Disk {
        self.pending.clear();
        self.accepted.clear();
        self.reads_done.clear();
        std::mem::replace(&mut self.disk, Disk::new(BlockStore::zeros(0)))
    }

    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// The disk, for crash injection and inspection. Completing requests
    /// behind the device's back breaks its invariant; use [`Self::complete`].
    pub fn disk_mut(&mut self) -> &mut Disk {
        &mut self.disk
    }

    /// Requests accepted since the last call, in acceptance order. Each
    /// must eventually be passed to [`Self::complete`] (or dropped by a
    /// reset or power loss).
    pub fn take_accepted(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.accepted)
    }

    /// Requests accepted and not yet completed, in id (= issue) order.
    pub fn pending(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.pending.keys().copied()
    }

    /// Completes request `id`: durability effect on the disk (and the fault
    /// injected into it: a failed write reports an I/O error), data and
    /// status into the driver's buffers, chain onto the used ring. Returns
    /// the fault that hit the request. Call only while the guest is
    /// stopped; afterwards ask [`Queues::needs_interrupt`] for
    /// [`REQUEST_QUEUE`].
    pub fn complete(&mut self, id: RequestId, queues: &mut Queues) -> Result<Option<DiskFault>, DeviceError> {
        if !self.pending.contains_key(&id) {
            return Err(DeviceError::UnknownRequest(id));
        }
        let (mem, q) = queues.ready(REQUEST_QUEUE)?;
        let p = self.pending.remove(&id).expect("checked above");
        let c = self.disk.complete(id)?;
        let status = if c.failed() { Status::IoErr } else { p.status };
        finish(mem, q, &p.chain, status, &p.data_in)?;
        Ok(p.fault.or(c.fault))
    }

    /// Accepts one chain; `Ok(true)` if it is now pending, `Ok(false)` if
    /// it completed at once.
    fn accept(&mut self, queues: &mut Queues, chain: Chain) -> Result<bool, DeviceError> {
        let (mem, q) = queues.ready(REQUEST_QUEUE)?;
        let readable = chain.read_all(mem)?;
        let writable = chain.writable_len();
        if writable == 0 {
            // No room for a status byte: a broken driver. Return the chain.
            q.add_used(mem, chain.head, 0)?;
            return Ok(false);
        }
        let split = readable.len().min(disksim::virtio::HEADER_LEN);
        let (header, data_out) = readable.split_at(split);
        if self.cfg.read_only && RequestHeader::parse(header).is_ok_and(|h| matches!(h.request_type, T_OUT | T_FLUSH)) {
            return finish(mem, q, &chain, Status::IoErr, &[]).map(|()| false);
        }
        let mut s = submit(
            &mut self.disk,
            header,
            data_out,
            writable - 1,
            &self.cfg.serial,
        )?;
        match s.request {
            None => finish(mem, q, &chain, s.status, &s.data_in).map(|()| false),
            Some(id) => {
                let request = describe(id, header, data_out.len(), writable - 1);
                // The guest is blocked on its kick: the draw's place in the
                // device's stream is fixed by the order of its reads.
                let fault = match (&mut self.corrupt_read, request.kind) {
                    (Some((p, rng)), RequestKind::Read) => maybe_corrupt(rng, *p, &mut s.data_in),
                    _ => None,
                };
                if self.reads_at_once && request.kind == RequestKind::Read {
                    self.disk.complete(id)?;
                    finish(mem, q, &chain, s.status, &s.data_in)?;
                    // A read-only (root) disk's reads are nobody's decision
                    // and nobody takes them: keep none.
                    if !self.cfg.read_only {
                        self.reads_done.push(BlkDone { request, fault });
                    }
                    return Ok(false);
                }
                self.pending.insert(
                    id,
                    Pending {
                        chain,
                        status: s.status,
                        data_in: s.data_in,
                        request,
                        fault,
                    },
                );
                self.accepted.push(id);
                Ok(true)
            }
        }
    }
}

/// The [`BlkRequest`] of a request that [`submit`] issued as `id` (so its
/// header parsed and mapped to a read, write or flush).
fn describe(id: RequestId, header: &[u8], out_len: usize, in_len: usize) -> BlkRequest {
    let op = RequestHeader::parse(header).and_then(|h| {
        h.op(if h.request_type == T_OUT {
            out_len
        } else {
            in_len
        })
    });
    let (kind, sector, len) = match op {
        Ok(BlkOp::Read { sector, len }) => (RequestKind::Read, sector, len),
        Ok(BlkOp::Write { sector, len }) => (RequestKind::Write { fua: false }, sector, len),
        // Flush; GET_ID and errors never reach the disk, so never get here.
        _ => (RequestKind::Flush, 0, 0),
    };
    BlkRequest {
        id,
        kind,
        sector,
        sectors: (len / SECTOR_SIZE) as u64,
    }
}

/// Writes `data_in` and the status byte (the last writable byte) and adds
/// the chain to the used ring.
fn finish(
    mem: &vm_memory::GuestMemoryMmap,
    q: &mut virtio_queue::Queue,
    chain: &Chain,
    status: Status,
    data_in: &[u8],
) -> Result<(), DeviceError> {
    let room = chain.writable_len() - 1;
    let n = data_in.len().min(room);
    chain.write_at(mem, 0, &data_in[..n])?;
    chain.write_at(mem, room, &[status as u8])?;
    q.add_used(mem, chain.head, n as u32 + 1)?;
    Ok(())
}

impl VirtioDevice for VirtioBlk {
    fn device_id(&self) -> u32 {
        2
    }

    fn features(&self) -> u64 {
        let common = VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX | VIRTIO_BLK_F_SEG_MAX | VIRTIO_BLK_F_BLK_SIZE;
        if self.cfg.read_only {
            common | VIRTIO_BLK_F_RO
        } else {
            common | VIRTIO_BLK_F_FLUSH
        }
    }

    fn ack_features(&mut self, features: u64) {
        self.acked = features & self.features();
    }

    fn config(&self) -> Vec<u8> {
        // struct virtio_blk_config, up to and including blk_size.
        let mut c = vec![0u8; 24];
        c[0..8].copy_from_slice(&self.disk.capacity_sectors().to_le_bytes());
        // size_max (8) not offered; seg_max: a request uses seg_max data
        // descriptors plus header and status, and must fit the ring.
        let seg_max = u32::from(self.cfg.queue_size).saturating_sub(2).max(1);
        c[12..16].copy_from_slice(&seg_max.to_le_bytes());
        // geometry (16..20) not offered.
        c[20..24].copy_from_slice(&self.cfg.blk_size.to_le_bytes());
        c
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &self.sizes
    }

    fn queue_notify(&mut self, index: usize, queues: &mut Queues) -> Result<bool, DeviceError> {
        if index != REQUEST_QUEUE {
            return Err(DeviceError::QueueNotReady(index));
        }
        // Chains completed during acceptance (errors, GET_ID) are used now;
        // accepted requests wait for the engine.
        drain_chains(queues, REQUEST_QUEUE, |queues, chain| self.accept(queues, chain).map(|pending| !pending))
    }

    fn reset(&mut self) {
        // The disk keeps the requests as outstanding (they were issued); the
        // engine resolves them (a power loss drops them).
        self.pending.clear();
        self.accepted.clear();
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testing::{memory, DriverQueue};
    use disksim::virtio::{RequestHeader, T_FLUSH, T_GET_ID, T_IN, T_OUT};
    use disksim::BlockStore;
    use vm_memory::{Bytes, GuestAddress};

    fn setup() -> (VirtioBlk, Queues, DriverQueue) {
        let mem = memory(1 << 20);
        let dq = DriverQueue::new(&mem, 0x1000, 64);
        let mut dev = VirtioBlk::new(Disk::new(BlockStore::zeros(2048)), BlkConfig::default());
        dev.ack_features(dev.features());
        let queues = Queues {
            queues: vec![dq.device_queue(256)],
            mem,
        };
        (dev, queues, dq)
    }

    fn header(qs: &Queues, at: u64, t: u32, sector: u64) {
        let h = RequestHeader {
            request_type: t,
            reserved: 0,
            sector,
        };
        qs.mem.write_slice(&h.to_bytes(), GuestAddress(at)).unwrap();
    }

    fn status(qs: &Queues, at: u64) -> u8 {
        qs.mem.read_obj(GuestAddress(at)).unwrap()
    }

    #[test]
    fn config_reports_capacity_seg_max_blk_size() {
        let (dev, _, _) = setup();
        let c = dev.config();
        assert_eq!(u64::from_le_bytes(c[0..8].try_into().unwrap()), 2048);
        assert_eq!(u32::from_le_bytes(c[12..16].try_into().unwrap()), 254);
        assert_eq!(u32::from_le_bytes(c[20..24].try_into().unwrap()), 512);
    }

    #[test]
    fn write_flush_read_complete_when_the_engine_says() {
        let (mut dev, mut qs, mut dq) = setup();
        // WRITE 1024 bytes at sector 4, data split over two descriptors.
        header(&qs, 0x10000, T_OUT, 4);
        qs.mem
            .write_slice(&[0x5a; 512], GuestAddress(0x11000))
            .unwrap();
        qs.mem
            .write_slice(&[0xa5; 512], GuestAddress(0x12000))
            .unwrap();
        qs.mem.write_obj(0xffu8, GuestAddress(0x13000)).unwrap();
        let w = dq.add(
            &qs.mem,
            &[
                (0x10000, 16, false),
                (0x11000, 512, false),
                (0x12000, 512, false),
                (0x13000, 1, true),
            ],
        );
        assert!(
            !dev.queue_notify(0, &mut qs).unwrap(),
            "nothing completed yet"
        );
        let ids = dev.take_accepted();
        assert_eq!(ids.len(), 1);
        assert!(dq.take_used(&qs.mem).is_empty());
        assert_eq!(status(&qs, 0x13000), 0xff, "no status before completion");
        assert_eq!(dev.disk().volatile_writes().count(), 1);

        dev.complete(ids[0], &mut qs).unwrap();
        assert!(qs.needs_interrupt(0).unwrap());
        assert_eq!(dq.take_used(&qs.mem), vec![(w as u32, 1)]);
        assert_eq!(status(&qs, 0x13000), 0);
        assert!(matches!(
            dev.complete(ids[0], &mut qs),
            Err(DeviceError::UnknownRequest(_))
        ));

        // FLUSH makes it durable once completed.
        header(&qs, 0x14000, T_FLUSH, 0);
        let f = dq.add(&qs.mem, &[(0x14000, 16, false), (0x15000, 1, true)]);
        dev.queue_notify(0, &mut qs).unwrap();
        let ids = dev.take_accepted();
        dev.complete(ids[0], &mut qs).unwrap();
        assert_eq!(dq.take_used(&qs.mem), vec![(f as u32, 1)]);
        assert_eq!(dev.disk().volatile_writes().count(), 0);

        // READ it back, into a data buffer plus status in one descriptor.
        header(&qs, 0x16000, T_IN, 4);
        let r = dq.add(&qs.mem, &[(0x16000, 16, false), (0x17000, 1025, true)]);
        dev.queue_notify(0, &mut qs).unwrap();
        let ids = dev.take_accepted();
        assert_eq!(dev.pending().collect::<Vec<_>>(), ids);
        dev.complete(ids[0], &mut qs).unwrap();
        assert_eq!(dq.take_used(&qs.mem), vec![(r as u32, 1025)]);
        let mut got = vec![0u8; 1025];
        qs.mem.read_slice(&mut got, GuestAddress(0x17000)).unwrap();
        assert!(got[..512].iter().all(|&b| b == 0x5a));
        assert!(got[512..1024].iter().all(|&b| b == 0xa5));
        assert_eq!(got[1024], 0);
    }

    #[test]
    fn reads_at_once_complete_inside_the_kick_and_writes_wait() {
        let (mut dev, mut qs, mut dq) = setup();
        dev.set_reads_at_once(true);
        // WRITE at sector 8 (pending), then READ of sectors 8..10 (at once,
        // seeing the in-flight write through the cache view).
        header(&qs, 0x10000, T_OUT, 8);
        qs.mem
            .write_slice(&[0x77; 1024], GuestAddress(0x11000))
            .unwrap();
        let w = dq.add(
            &qs.mem,
            &[
                (0x10000, 16, false),
                (0x11000, 1024, false),
                (0x12000, 1, true),
            ],
        );
        header(&qs, 0x13000, T_IN, 8);
        let r = dq.add(&qs.mem, &[(0x13000, 16, false), (0x14000, 1025, true)]);
        assert!(
            dev.queue_notify(0, &mut qs).unwrap(),
            "the read completed: the driver wants an interrupt"
        );
        let ids = dev.take_accepted();
        assert_eq!(ids.len(), 1, "only the write waits");
        assert_eq!(
            dev.request(ids[0]),
            Some(BlkRequest {
                id: ids[0],
                kind: RequestKind::Write { fua: false },
                sector: 8,
                sectors: 2
            })
        );
        let reads = dev.take_reads_done();
        assert_eq!(reads.len(), 1);
        assert_eq!(
            (reads[0].request.kind, reads[0].request.sector, reads[0].request.sectors, reads[0].fault),
            (RequestKind::Read, 8, 2, None)
        );
        assert_eq!(dq.take_used(&qs.mem), vec![(r as u32, 1025)]);
        let mut got = vec![0u8; 1025];
        qs.mem.read_slice(&mut got, GuestAddress(0x14000)).unwrap();
        assert!(got[..1024].iter().all(|&b| b == 0x77));
        assert_eq!(got[1024], 0);
        assert_eq!(
            dev.disk().outstanding().count(),
            1,
            "the read is done in the disk too"
        );
        // Flushes wait as well.
        header(&qs, 0x15000, T_FLUSH, 0);
        dq.add(&qs.mem, &[(0x15000, 16, false), (0x16000, 1, true)]);
        dev.queue_notify(0, &mut qs).unwrap();
        let f = dev.take_accepted();
        assert_eq!(dev.request(f[0]).unwrap().kind, RequestKind::Flush);
        dev.complete(ids[0], &mut qs).unwrap();
        assert_eq!(dq.take_used(&qs.mem), vec![(w as u32, 1)]);
        let disk = dev.take_disk();
        assert_eq!(disk.outstanding().count(), 1, "the flush stays outstanding");
        assert!(dev.pending().next().is_none());
        assert_eq!(dev.disk().capacity_sectors(), 0);
    }

    /// A read of `sectors` sectors at `sector` through the queue, into
    /// guest memory at 0x21000 (status byte after the data).
    fn read_via_queue(dev: &mut VirtioBlk, qs: &mut Queues, dq: &mut DriverQueue, sector: u64, sectors: u32) -> Vec<u8> {
        header(qs, 0x20000, T_IN, sector);
        let len = sectors * 512;
        dq.add(&qs.mem, &[(0x20000, 16, false), (0x21000, len + 1, true)]);
        dev.queue_notify(0, qs).unwrap();
        dq.take_used(&qs.mem);
        let mut got = vec![0u8; len as usize + 1];
        qs.mem.read_slice(&mut got, GuestAddress(0x21000)).unwrap();
        assert_eq!(got.pop(), Some(0), "status OK");
        got
    }

    #[test]
    fn corrupt_reads_flip_the_returned_bits_not_the_disk() {
        let corrupted = |seed: u64| {
            let (mut dev, mut qs, mut dq) = setup();
            dev.set_reads_at_once(true);
            let w = dev.disk_mut().write(8, &[0x77; 4096], false).unwrap();
            dev.disk_mut().complete(w).unwrap();
            dev.set_read_faults(ReadFaults { corrupt_read: 1.0, seed });
            let got = read_via_queue(&mut dev, &mut qs, &mut dq, 8, 8);
            let done = dev.take_reads_done();
            let Some(DiskFault::CorruptRead { bits }) = done[0].fault else { panic!("{done:?}") };
            let flipped: u32 = got.iter().map(|b| (b ^ 0x77).count_ones()).sum();
            assert_eq!(flipped, bits);
            // Transient: the disk still holds the data.
            let mut stored = vec![0u8; 4096];
            dev.disk().peek(8, &mut stored).unwrap();
            assert!(stored.iter().all(|&b| b == 0x77));
            // Off again: intact, and nothing reported.
            dev.set_read_faults(ReadFaults::default());
            let again = read_via_queue(&mut dev, &mut qs, &mut dq, 8, 8);
            assert!(again.iter().all(|&b| b == 0x77));
            assert_eq!(dev.take_reads_done()[0].fault, None);
            got
        };
        assert_eq!(corrupted(5), corrupted(5), "the same seed corrupts the same bits");
        assert_ne!(corrupted(5), corrupted(6));
    }

    #[test]
    fn a_failed_write_reports_an_io_error_and_a_misdirected_one_succeeds() {
        let (mut dev, mut qs, mut dq) = setup();
        let mut write = |dev: &mut VirtioBlk, qs: &mut Queues, fault: DiskFault| {
            header(qs, 0x10000, T_OUT, 4);
            qs.mem.write_slice(&[0x5a; 1024], GuestAddress(0x11000)).unwrap();
            qs.mem.write_obj(0xffu8, GuestAddress(0x12000)).unwrap();
            dq.add(&qs.mem, &[(0x10000, 16, false), (0x11000, 1024, false), (0x12000, 1, true)]);
            dev.queue_notify(0, qs).unwrap();
            let id = dev.take_accepted()[0];
            assert!(dev.disk_mut().inject(id, fault));
            assert_eq!(dev.complete(id, qs).unwrap(), Some(fault));
            dq.take_used(&qs.mem);
            status(qs, 0x12000)
        };
        assert_eq!(write(&mut dev, &mut qs, DiskFault::WriteError), Status::IoErr as u8);
        let mut b = vec![0u8; 1024];
        dev.disk().peek(4, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0), "a failed write does not land");
        assert_eq!(dev.disk().volatile_writes().count(), 0);
        assert_eq!(write(&mut dev, &mut qs, DiskFault::Misdirected { to: 100 }), Status::Ok as u8);
        dev.disk().peek(4, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0), "nor a misdirected one at its place");
        dev.disk().peek(100, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0x5a), "it is at sector 100");
    }

    #[test]
    fn get_id_and_bad_requests_complete_at_once() {
        let (mut dev, mut qs, mut dq) = setup();
        header(&qs, 0x10000, T_GET_ID, 0);
        let g = dq.add(
            &qs.mem,
            &[
                (0x10000, 16, false),
                (0x11000, 20, true),
                (0x12000, 1, true),
            ],
        );
        header(&qs, 0x13000, 99, 0);
        let u = dq.add(&qs.mem, &[(0x13000, 16, false), (0x14000, 1, true)]);
        assert!(dev.queue_notify(0, &mut qs).unwrap());
        assert!(dev.take_accepted().is_empty());
        assert_eq!(dq.take_used(&qs.mem), vec![(g as u32, 21), (u as u32, 1)]);
        let mut id = [0u8; 20];
        qs.mem.read_slice(&mut id, GuestAddress(0x11000)).unwrap();
        assert_eq!(&id[..10], b"simcluster");
        assert_eq!(status(&qs, 0x12000), 0);
        assert_eq!(status(&qs, 0x14000), Status::Unsupp as u8);
    }
}
