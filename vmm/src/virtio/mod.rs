//! Transport-independent virtio device models.
//!
//! A device here knows the virtio device protocol (feature bits, config
//! space, what a descriptor chain on each of its queues means) and nothing
//! about how the guest reaches it: the vhost-user back end
//! ([`crate::vhost_user`], for the user-mode Linux runtime) and a
//! virtio-mmio transport (for the KVM runtime) both own a [`Queues`] and
//! call into a [`VirtioDevice`].
//!
//! Determinism: device code never looks at host time or host randomness
//! and never iterates hash maps. Every effect a device has on guest memory
//! happens inside a call the engine makes, and the engine makes those
//! calls only while the guest is stopped (see the [`crate::vhost_user`]
//! docs for when that is), so the guest observes them at points fixed by
//! the engine's schedule.
//!
//! - [`net`]: virtio-net (device id 1), frames in and out.
//! - [`blk`]: virtio-blk (device id 2) over a [`disksim::Disk`], with
//!   request acceptance and completion split so that the engine decides
//!   when each request completes.
//! - [`console`]: virtio-console (device id 3), the engine's control line.
//! - [`rng`]: virtio-rng (device id 4), entropy drawn from the execution
//!   seed, handed out only when the guest asks.
//! - [`rx_tx`]: the receive/transmit queue pair net and console share.
//!
//! The transports that carry these models are elsewhere: the vhost-user
//! back end in [`crate::vhost_user`], the virtio-mmio transport in
//! [`crate::kvm::virtio_mmio`]. What a runtime does at a kick beyond the
//! model (stamp frames and requests with virtual time) is a [`KickHook`].

pub mod blk;
pub mod console;
pub mod net;
pub mod net_port;
pub mod rng;
pub mod rx_tx;

use std::sync::atomic::Ordering;

use simtime::VirtualTime;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryError, GuestMemoryMmap};

pub use blk::{BlkConfig, VirtioBlk};
pub use net::VirtioNet;
pub use rng::VirtioRng;

/// `VIRTIO_F_VERSION_1`: the device is a virtio 1.x device (little-endian
/// everything, 12-byte virtio-net header).
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
/// `VIRTIO_RING_F_EVENT_IDX`: the `used_event` / `avail_event` suppression
/// scheme. Offered by every device here: it cuts interrupts (each one costs
/// a round trip through the engine) to those the driver actually waits for.
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
/// `VRING_AVAIL_F_NO_INTERRUPT` in the available ring's flags.
const VRING_AVAIL_F_NO_INTERRUPT: u16 = 1;

/// Errors of device models. A guest that breaks the virtio protocol gets
/// an error rather than a panic; the engine decides what to do with it.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A queue was used that the device does not have or the driver has not
    /// set up; carries its index (0-based).
    #[error("queue {0} does not exist or is not ready")]
    QueueNotReady(usize),
    /// virtio-queue refused a ring operation (a malformed ring).
    #[error("virtqueue: {0}")]
    Queue(#[from] virtio_queue::Error),
    /// An access to guest memory failed (an address outside it).
    #[error("guest memory: {0}")]
    Memory(#[from] GuestMemoryError),
    /// A descriptor chain does not have the shape the request needs; says
    /// how.
    #[error("descriptor chain: {0}")]
    Chain(String),
    /// A frame to deliver is larger than the guest's receive buffer.
    #[error("frame of {len} bytes does not fit the receive buffer of {room} bytes")]
    FrameTooLarge {
        /// The frame's length, bytes.
        len: usize,
        /// The buffer's room for a frame (its virtio-net header left out),
        /// bytes.
        room: usize,
    },
    /// The engine completed a block request the device does not have
    /// pending.
    #[error("block request {0} is not pending")]
    UnknownRequest(disksim::RequestId),
    /// The disk model refused an operation.
    #[error("disk: {0}")]
    Disk(#[from] disksim::DiskError),
    /// The disk's backing store failed.
    #[error("disk store: {0}")]
    Store(#[from] disksim::StoreError),
}

/// The guest's memory and the device's virtqueues, owned by the transport.
///
/// Invariant: `queues[i].ready()` only when the driver has configured
/// queue `i` completely (size, ring addresses) and enabled it, and the
/// rings lie in `mem`.
pub struct Queues {
    /// The guest's memory, as the transport mapped it (empty until then).
    pub mem: GuestMemoryMmap,
    /// The device's virtqueues, by index.
    pub queues: Vec<Queue>,
}

impl Queues {
    /// Queues of the given maximum sizes, not ready, over no memory.
    pub fn new(max_sizes: &[u16]) -> Queues {
        Queues {
            mem: GuestMemoryMmap::default(),
            queues: max_sizes.iter().map(|&m| Queue::new(m).expect("device queue sizes are powers of two")).collect(),
        }
    }

    /// Queue `index` with the memory, if it is ready.
    pub fn ready(&mut self, index: usize) -> Result<(&GuestMemoryMmap, &mut Queue), DeviceError> {
        match self.queues.get_mut(index) {
            Some(q) if q.ready() => Ok((&self.mem, q)),
            _ => Err(DeviceError::QueueNotReady(index)),
        }
    }

    /// Whether queue `index` is ready.
    pub fn is_ready(&self, index: usize) -> bool {
        self.queues.get(index).is_some_and(|q| q.ready())
    }

    /// Whether the driver wants an interrupt for queue `index` after the
    /// device added used buffers to it. Call once per batch, after the
    /// `add_used` calls (with `EVENT_IDX`, virtio-queue counts the batch).
    ///
    /// With `EVENT_IDX` this is virtio-queue's `used_event` test; without
    /// it, the `VRING_AVAIL_F_NO_INTERRUPT` flag, which virtio-queue ignores.
    pub fn needs_interrupt(&mut self, index: usize) -> Result<bool, DeviceError> {
        let (mem, queue) = self.ready(index)?;
        if queue.event_idx_enabled() {
            return Ok(queue.needs_notification(mem)?);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        let flags: u16 = mem.load(GuestAddress(queue.avail_ring()), Ordering::Acquire)?;
        Ok(u16::from_le(flags) & VRING_AVAIL_F_NO_INTERRUPT == 0)
    }
}

/// What a transport needs from a device. Kept small: device-specific input
/// and output (frames, block requests) go through the device's own methods.
pub trait VirtioDevice {
    /// The virtio device id (1 net, 2 block, 3 console, 4 entropy).
    fn device_id(&self) -> u32;
    /// Feature bits the device offers.
    fn features(&self) -> u64;
    /// The driver's accepted features (a subset of [`Self::features`]).
    fn ack_features(&mut self, features: u64);
    /// The config space; reads beyond its end see zeros.
    fn config(&self) -> Vec<u8>;
    /// The driver wrote the config space. Default: ignored (the devices here
    /// have no writable config fields).
    fn write_config(&mut self, _offset: u32, _data: &[u8]) {}
    /// Maximum size of each queue; the length is the number of queues.
    fn queue_max_sizes(&self) -> &[u16];
    /// The driver notified (kicked) queue `index`. Processes what the driver
    /// made available and returns whether the driver wants an interrupt for
    /// `index` now.
    fn queue_notify(&mut self, index: usize, queues: &mut Queues) -> Result<bool, DeviceError>;
    /// The driver reset the device: forget everything guest-visible that is
    /// in flight. Host-side state (the disk, frames already handed out)
    /// stays.
    fn reset(&mut self);
}

/// What a runtime keeps beside a device model and does at each of the
/// guest's kicks, after the model processed it: the one hook both
/// transports call (the vhost-user port of `uml/port.rs` and the
/// virtio-mmio transport of `kvm/virtio_mmio.rs`). The model does not see
/// time; the hook gets the virtual time of the kick (the node's clock at
/// the vhost-user message, the exit's time at the QueueNotify store).
pub trait KickHook {
    /// The device model behind the port.
    type Device: VirtioDevice;
    /// The driver kicked `queue` at `time`; the model has processed it
    /// (the guest waits for the kick's answer, or is stopped at its exit).
    /// Returns whether the driver wants an interrupt for `queue` for work
    /// the hook did (buffers it filled); the model's own is the
    /// transport's.
    fn kicked(
        &mut self,
        dev: &mut Self::Device,
        queues: &mut Queues,
        queue: u16,
        time: VirtualTime,
    ) -> Result<bool, DeviceError>;
    /// The driver reset the device (status 0 over virtio-mmio; the front
    /// end disconnected over vhost-user). Returns whether the interrupts
    /// owed on the device are forgotten with it. Default: nothing to
    /// forget, and they are not.
    fn reset(&mut self) -> bool {
        false
    }
}

/// The hook of a device whose kicks need nothing beyond the model's
/// processing (the entropy device, the root disk).
pub struct NoHook<D>(std::marker::PhantomData<D>);

impl<D> Default for NoHook<D> {
    fn default() -> NoHook<D> {
        NoHook(std::marker::PhantomData)
    }
}

impl<D: VirtioDevice> KickHook for NoHook<D> {
    type Device = D;
    fn kicked(&mut self, _: &mut D, _: &mut Queues, _: u16, _: VirtualTime) -> Result<bool, DeviceError> {
        Ok(false)
    }
}

/// Takes every chain the driver made available on queue `index` (a
/// device-readable one: transmit, console output), hands its bytes to `f`
/// and returns it used. Notifications stay off while draining and the
/// queue is re-checked after turning them back on, so a chain added in
/// between is not missed. Returns whether the driver wants an interrupt.
pub fn drain_readable(queues: &mut Queues, index: usize, mut f: impl FnMut(Vec<u8>)) -> Result<bool, DeviceError> {
    let (mem, q) = queues.ready(index)?;
    let mut used = 0;
    loop {
        q.disable_notification(mem)?;
        while let Some(chain) = Chain::pop(q, mem)? {
            f(chain.read_all(mem)?);
            q.add_used(mem, chain.head, 0)?;
            used += 1;
        }
        if !q.enable_notification(mem)? {
            break;
        }
    }
    if used == 0 {
        return Ok(false);
    }
    queues.needs_interrupt(index)
}

/// Takes every chain the driver has made available on queue `index` and
/// hands each to `f` (which may write guest memory through `queues` and
/// returns whether it put the chain in the used ring now). Notifications
/// stay off while draining and the queue is re-checked after turning them
/// back on, as in [`drain_readable`], so a chain added in between is not
/// missed. Returns whether the driver wants an interrupt for the chains
/// used now.
pub fn drain_chains(
    queues: &mut Queues,
    index: usize,
    mut f: impl FnMut(&mut Queues, Chain) -> Result<bool, DeviceError>,
) -> Result<bool, DeviceError> {
    let mut used = 0usize;
    loop {
        {
            let (mem, q) = queues.ready(index)?;
            q.disable_notification(mem)?;
        }
        loop {
            let chain = {
                let (mem, q) = queues.ready(index)?;
                Chain::pop(q, mem)?
            };
            let Some(chain) = chain else { break };
            if f(queues, chain)? {
                used += 1;
            }
        }
        let (mem, q) = queues.ready(index)?;
        if !q.enable_notification(mem)? {
            break;
        }
    }
    if used == 0 {
        return Ok(false);
    }
    queues.needs_interrupt(index)
}

/// Copies `offset..offset+len` of a config space, zero-padded.
pub fn read_config_padded(config: &[u8], offset: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    if offset < config.len() {
        let n = (config.len() - offset).min(len);
        out[..n].copy_from_slice(&config[offset..offset + n]);
    }
    out
}

/// One descriptor of a chain, as plain data (so the chain's borrow of
/// guest memory ends before the device writes to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Guest-physical address of the buffer.
    pub addr: GuestAddress,
    /// Length of the buffer, bytes.
    pub len: u32,
    /// Whether the device writes it (`VIRTQ_DESC_F_WRITE`) rather than
    /// reads it.
    pub write_only: bool,
}

/// A popped descriptor chain: its head index and its descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Index of the chain's first descriptor: what goes into the used ring.
    pub head: u16,
    /// The descriptors, in chain order.
    pub segments: Vec<Segment>,
}

impl Chain {
    /// Pops the next available chain of `queue`: `Ok(None)` when the driver
    /// has made nothing more available, `Err` for a malformed ring or chain.
    ///
    /// virtio-queue answers `None` both for "nothing available" and for a
    /// ring it cannot read (more entries made available than the queue
    /// holds, an unreadable ring), without moving: a device that drains
    /// until `None` and re-checks the ring would spin forever on such a
    /// guest. Its chain iterator likewise just stops at a `next` past the
    /// table, a loop or an unreadable descriptor. A driver that follows the
    /// spec does none of these, so each is the guest breaking the protocol:
    /// an error, which ends the node as a node failure.
    pub fn pop(queue: &mut Queue, mem: &GuestMemoryMmap) -> Result<Option<Chain>, DeviceError> {
        let Some(chain) = queue.pop_descriptor_chain(mem) else {
            let avail = queue.avail_idx(mem, Ordering::Acquire)?.0;
            let next = queue.next_avail();
            if avail == next {
                return Ok(None);
            }
            return Err(DeviceError::Chain(format!(
                "the available ring cannot be read: index {avail}, next entry {next}, queue size {}",
                queue.size()
            )));
        };
        let head = chain.head_index();
        let mut cut = false;
        let segments: Vec<Segment> = chain
            .map(|d| {
                cut = d.has_next();
                Segment { addr: d.addr(), len: d.len(), write_only: d.is_write_only() }
            })
            .collect();
        if segments.is_empty() || cut {
            return Err(DeviceError::Chain(format!(
                "the chain at head {head} {} (a loop, an index past the table, or an unreadable descriptor)",
                if segments.is_empty() { "has no descriptor" } else { "ends in a descriptor that names a next one" }
            )));
        }
        Ok(Some(Chain { head, segments }))
    }

    /// Total bytes of the device-readable descriptors.
    pub fn readable_len(&self) -> usize {
        self.segments.iter().filter(|s| !s.write_only).map(|s| s.len as usize).sum()
    }

    /// Total bytes of the device-writable descriptors.
    pub fn writable_len(&self) -> usize {
        self.segments.iter().filter(|s| s.write_only).map(|s| s.len as usize).sum()
    }

    /// The device-readable bytes, in order.
    pub fn read_all(&self, mem: &GuestMemoryMmap) -> Result<Vec<u8>, DeviceError> {
        let mut out = vec![0u8; self.readable_len()];
        let mut at = 0;
        for s in self.segments.iter().filter(|s| !s.write_only) {
            mem.read_slice(&mut out[at..at + s.len as usize], s.addr)?;
            at += s.len as usize;
        }
        Ok(out)
    }

    /// Writes `data` into the device-writable descriptors starting at byte
    /// `offset` of the writable area. Fails if it does not fit.
    pub fn write_at(&self, mem: &GuestMemoryMmap, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        if offset + data.len() > self.writable_len() {
            return Err(DeviceError::Chain(format!(
                "{} bytes at {offset} overflow {} writable bytes",
                data.len(),
                self.writable_len()
            )));
        }
        let (mut skip, mut rest) = (offset, data);
        for s in self.segments.iter().filter(|s| s.write_only) {
            let len = s.len as usize;
            if skip >= len {
                skip -= len;
                continue;
            }
            let n = (len - skip).min(rest.len());
            // A descriptor near the top of the address space: its address
            // plus the offset into it wraps, and is outside guest memory.
            let at = s.addr.checked_add(skip as u64).ok_or(GuestMemoryError::InvalidGuestAddress(s.addr))?;
            mem.write_slice(&rest[..n], at)?;
            rest = &rest[n..];
            skip = 0;
            if rest.is_empty() {
                break;
            }
        }
        Ok(())
    }
}

/// Test support: a guest memory and hand-laid split rings, the driver's
/// side of a virtqueue. Used by the unit tests here and in
/// [`crate::vhost_user`].
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    /// A writable descriptor at the top of the address space, written past
    /// its start: the address wraps, which is an error (found by the
    /// `virtqueue` fuzz target as a blk request's status byte; an overflow
    /// panic before).
    #[test]
    fn write_at_a_wrapping_address_is_an_error() {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0x1000), 0x1000)]).unwrap();
        let top = GuestAddress(u64::MAX - 3);
        let chain = Chain { head: 0, segments: vec![Segment { addr: top, len: 16, write_only: true }] };
        let r = chain.write_at(&mem, 8, &[0]);
        assert!(matches!(r, Err(DeviceError::Memory(GuestMemoryError::InvalidGuestAddress(a))) if a == top), "{r:?}");
        // In memory, the same offset is written.
        let chain =
            Chain { head: 0, segments: vec![Segment { addr: GuestAddress(0x1000), len: 16, write_only: true }] };
        chain.write_at(&mem, 8, &[7]).unwrap();
        assert_eq!(mem.read_obj::<u8>(GuestAddress(0x1008)).unwrap(), 7);
    }
}
