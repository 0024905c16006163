//! A user-mode Linux node's disks: virtio-blk over a [`disksim::Disk`],
//! served as a vhost-user back end: the data disk
//! (`virtio_uml.device=blk.sock:2`, the guest's `/dev/vda`) and the
//! read-only root disk (`root.sock`, [`nodeapi::NodeConfig::root_disk`]).
//!
//! Every disk effect the guest can observe is an engine action:
//! - *submission*: the guest kicks the request queue while it runs; the
//!   kick carries NEED_REPLY, so the guest is blocked while we accept the
//!   requests (see [`crate::vhost_user`]). Each accepted request is stamped
//!   with the node's virtual time at the kick.
//! - *writes and flushes* stay pending, with nothing written to guest
//!   memory, until the engine calls [`nodeapi::NodeRuntime::complete_disk`]
//!   while the node is stopped. That call applies the durability effect in
//!   the disk's write log, puts the status into the driver's buffers and
//!   delivers the used-buffer interrupt in-band at the virtual time the
//!   engine names, like a frame delivery.
//! - *reads* complete during the kick (see
//!   [`crate::virtio::VirtioBlk::set_reads_at_once`] for why that is sound);
//!   their interrupt is owed and reaches the guest at the node's next stop
//!   (the end of [`nodeapi::NodeRuntime::grant`]), at a time the engine
//!   picks.
//!
//! Durability (disksim's write log, virtio-blk with a volatile write
//! cache): a completed write is volatile; a completed flush makes durable
//! every write that completed before the flush was issued. After power
//! loss ([`nodeapi::NodeRuntime::kill`], then
//! [`nodeapi::NodeRuntime::take_disk`]) the engine chooses which volatile
//! writes survive ([`disksim::Disk::crash_states`],
//! [`disksim::Disk::apply_crash`]) and starts a fresh node on the result.
//!
//! Disk faults: reads may be corrupted at their kick (the device's seeded
//! stream, [`crate::virtio::VirtioBlk::set_read_faults`]); writes and
//! flushes suffer what the engine injected before completing them
//! ([`nodeapi::NodeRuntime::disk_fault`]). Each completion carries its fault
//! ([`DiskCompletion::fault`]) for the engine's trace.

use std::collections::BTreeMap;
use std::path::Path;

use disksim::{BlockStore, Disk, ReadFaults, RequestId};
use simtime::VirtualTime;

use super::port::Port;
use crate::vhost_user::VhostUserError;
use crate::virtio::blk::{BlkConfig, VirtioBlk, REQUEST_QUEUE};
use crate::virtio::{DeviceError, KickHook, Queues};
use nodeapi::{DiskCompletion, DiskRequest, ROOT_DISK_SERIAL};

/// Why a disk completion could not be applied.
#[derive(Debug, thiserror::Error)]
pub(super) enum CompleteError {
    #[error("not pending")]
    Unknown,
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A disk device's own state: what is pending on it.
///
/// Invariant: `pending` holds exactly the device's pending requests (writes
/// and flushes accepted and not completed), with their submission times;
/// both forget them together when the driver disconnects.
#[derive(Default)]
pub(super) struct Blk {
    pending: BTreeMap<RequestId, DiskRequest>,
    /// Reads completed at their kicks and not yet taken by the engine, in
    /// completion order (writes and flushes are handed to the engine as
    /// [`DiskPort::complete`] completes them).
    reads_done: Vec<DiskCompletion>,
}

impl Blk {
    /// The device, as errors name it.
    pub const NAME: &'static str = "disk device";
}

impl KickHook for Blk {
    type Device = VirtioBlk;

    /// Requests the guest submitted are stamped with `time`, the node's
    /// current virtual time (the guest is blocked on each kick until it is
    /// answered). Reads, GET_ID and malformed requests completed inside the
    /// kick; the interrupt they earn is the request queue's (its only
    /// queue).
    fn kicked(&mut self, dev: &mut VirtioBlk, _: &mut Queues, _: u16, time: VirtualTime) -> Result<bool, DeviceError> {
        for r in dev.take_reads_done() {
            let request = r.request.submitted_at(time);
            self.reads_done.push(DiskCompletion { request, completed: time, fault: r.fault });
        }
        for id in dev.take_accepted() {
            let r = dev.request(id).expect("an accepted request is pending until completed");
            self.pending.insert(id, r.submitted_at(time));
        }
        Ok(false)
    }

    /// The device reset forgot its chains, and the interrupt owed with
    /// them; the disk keeps the requests outstanding until a crash
    /// resolves them.
    fn reset(&mut self) -> bool {
        self.pending.clear();
        true
    }
}

/// A disk device of the node and what is pending on it.
pub(super) type DiskPort = Port<Blk>;

impl Port<Blk> {
    /// Listens on `path` with `disk` behind it, corrupting reads as
    /// `read_faults` says (from the first request on).
    pub fn listen(path: &Path, disk: Disk, read_faults: ReadFaults) -> Result<DiskPort, VhostUserError> {
        Self::listen_with(path, disk, BlkConfig::default(), read_faults)
    }

    /// Listens on `path` with the node's root filesystem image behind it:
    /// read-only (`VIRTIO_BLK_F_RO`), serial [`ROOT_DISK_SERIAL`] (how the
    /// boot init finds it), reads answered at their kick like the data
    /// disk's (a read-only device reports none: they are no engine
    /// decision and would only fill the trace).
    pub fn listen_root(path: &Path, image: BlockStore) -> Result<DiskPort, VhostUserError> {
        let cfg = BlkConfig { serial: ROOT_DISK_SERIAL.to_vec(), read_only: true, ..BlkConfig::default() };
        Self::listen_with(path, Disk::new(image), cfg, ReadFaults::default())
    }

    fn listen_with(
        path: &Path,
        disk: Disk,
        cfg: BlkConfig,
        read_faults: ReadFaults,
    ) -> Result<DiskPort, VhostUserError> {
        let mut blk = VirtioBlk::new(disk, cfg);
        blk.set_reads_at_once(true);
        blk.set_read_faults(read_faults);
        Port::open(path, Blk::NAME, blk, Blk::default())
    }

    pub fn disk(&self) -> &Disk {
        self.backend.device().disk()
    }

    /// Pending writes and flushes, in submission (= id) order.
    pub fn pending(&self) -> Vec<DiskRequest> {
        self.kind.pending.values().copied().collect()
    }

    /// Completes pending request `id`, learned by the guest at `t`:
    /// durability effect, status into the driver's buffers, chain onto the
    /// used ring, and the interrupt owed if the driver wants one. The
    /// caller delivers it while the node is stopped.
    pub fn complete(&mut self, t: VirtualTime, id: RequestId) -> Result<DiskCompletion, CompleteError> {
        let request = *self.kind.pending.get(&id).ok_or(CompleteError::Unknown)?;
        let (dev, queues) = self.backend.device_and_queues();
        let done = dev.complete(id, queues);
        if dev.request(id).is_none() {
            // Gone from the device (also when the disk failed it): keep the
            // invariant.
            self.kind.pending.remove(&id);
        }
        let fault = done?;
        if queues.needs_interrupt(REQUEST_QUEUE)? {
            self.owe(REQUEST_QUEUE as u16);
        }
        Ok(DiskCompletion { request, completed: t, fault })
    }

    /// Reads completed at their kicks since the last call, in completion
    /// order.
    pub fn take_reads_done(&mut self) -> Vec<DiskCompletion> {
        std::mem::take(&mut self.kind.reads_done)
    }

    /// The disk, out of a device whose guest is gone.
    pub fn into_disk(mut self) -> Disk {
        self.backend.device_mut().take_disk()
    }
}
