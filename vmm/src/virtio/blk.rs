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
use simrng::Rng;
use simtime::VirtualTime;
use virtio_queue::QueueT;

use nodeapi::DiskRequest;

use super::{drain_chains, Chain, DeviceError, Queues, VirtioDevice, VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX};

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
        BlkConfig { serial: b"simcluster".to_vec(), queue_size: 256, blk_size: 512, read_only: false }
    }
}

/// What a request that reached the disk asks of it: the engine's view of
/// an accepted request (for choosing completions and for its trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlkRequest {
    /// disksim's id: issued in submission order, never reused.
    pub id: RequestId,
    /// Read, write or flush. Writes are never FUA: virtio-blk has no FUA
    /// flag (Linux emulates REQ_FUA with a flush after the write).
    pub kind: RequestKind,
    /// First sector (512 bytes each); 0 for a flush.
    pub sector: u64,
    /// Number of sectors; 0 for a flush.
    pub sectors: u64,
}

impl BlkRequest {
    /// The request as the engine sees it, submitted at virtual time
    /// `submitted` (the device model does not see time; both runtimes
    /// stamp it at the kick).
    pub fn submitted_at(self, submitted: VirtualTime) -> DiskRequest {
        DiskRequest { id: self.id, kind: self.kind, sector: self.sector, sectors: self.sectors, submitted }
    }
}

/// A request that completed, and the disk fault that hit it, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlkDone {
    /// The request.
    pub request: BlkRequest,
    /// The disk fault that hit it (a read's corruption), if any.
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
    corrupt_read: Option<(f64, Rng)>,
}

impl VirtioBlk {
    /// A device over `disk` with the properties of `cfg`: reads complete
    /// when the engine says and are never corrupted until
    /// [`Self::set_reads_at_once`] and [`Self::set_read_faults`] say
    /// otherwise.
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
        self.corrupt_read = (faults.corrupt_read > 0.0).then(|| (faults.corrupt_read, simrng::seeded(faults.seed)));
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

    /// The disk, for inspection.
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
        let mut s = submit(&mut self.disk, header, data_out, writable - 1, &self.cfg.serial)?;
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
                self.pending.insert(id, Pending { chain, status: s.status, data_in: s.data_in, request, fault });
                self.accepted.push(id);
                Ok(true)
            }
        }
    }
}

/// The [`BlkRequest`] of a request that [`submit`] issued as `id` (so its
/// header parsed and mapped to a read, write or flush).
fn describe(id: RequestId, header: &[u8], out_len: usize, in_len: usize) -> BlkRequest {
    let op = RequestHeader::parse(header).and_then(|h| h.op(if h.request_type == T_OUT { out_len } else { in_len }));
    let (kind, sector, len) = match op {
        Ok(BlkOp::Read { sector, len }) => (RequestKind::Read, sector, len),
        Ok(BlkOp::Write { sector, len }) => (RequestKind::Write { fua: false }, sector, len),
        // Flush; GET_ID and errors never reach the disk, so never get here.
        _ => (RequestKind::Flush, 0, 0),
    };
    BlkRequest { id, kind, sector, sectors: (len / SECTOR_SIZE) as u64 }
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
mod tests;
