//! virtio-net (device id 1): Ethernet frames between the guest and netsim.
//!
//! Queue 0 receives (device to driver), queue 1 transmits. The device
//! offers only `VIRTIO_NET_F_MAC` beyond the ring features: no checksum or
//! segmentation offload, no mergeable receive buffers, no control queue,
//! so every frame is a whole Ethernet frame behind a virtio-net header that
//! carries nothing (`flags = 0`, `gso_type = NONE`). Link status is not
//! offered, so the guest's link is always up.
//!
//! Output: [`VirtioNet::take_tx`] hands the engine the frames the guest
//! sent, in ring order. Input: [`VirtioNet::deliver`] puts one frame into
//! the next receive buffer; the engine calls it only while the guest is
//! stopped, then asks [`Queues::needs_interrupt`] once for the batch.

use simtime::NodeId;
use virtio_queue::{QueueOwnedT, QueueT};

use super::{drain_readable, Chain, DeviceError, Queues, VirtioDevice, VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX};

/// `VIRTIO_NET_F_MAC`: the config space holds the MAC address.
pub const VIRTIO_NET_F_MAC: u64 = 1 << 5;
/// `VIRTIO_NET_F_MRG_RXBUF` (never offered; only changes the header size).
const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << 15;
pub use super::rx_tx::{QUEUE_SIZE, RX_QUEUE, TX_QUEUE};
/// Largest frame the device hands out or accepts (Ethernet header plus a
/// 1500-byte MTU plus a VLAN tag; larger only with offloads we do not offer).
pub const MAX_FRAME: usize = 1518;

/// A virtio-net device.
pub struct VirtioNet {
    mac: [u8; 6],
    acked: u64,
    tx: Vec<Vec<u8>>,
}

impl VirtioNet {
    /// The network device of `node` (its MAC is [`NodeId::mac`]).
    pub fn new(node: NodeId) -> VirtioNet {
        VirtioNet::with_mac(node.mac())
    }

    /// A network device with MAC address `mac`.
    pub fn with_mac(mac: [u8; 6]) -> VirtioNet {
        VirtioNet { mac, acked: 0, tx: Vec::new() }
    }

    /// The device's MAC address (its config space).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Size of the virtio-net header in front of every frame: 12 bytes for
    /// a virtio 1.x driver (it has `num_buffers`), 10 for a legacy one.
    pub fn header_len(&self) -> usize {
        if self.acked & (VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MRG_RXBUF) != 0 {
            12
        } else {
            10
        }
    }

    /// The frames the guest transmitted since the last call, oldest first.
    pub fn take_tx(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.tx)
    }

    /// Writes `frame` (a whole Ethernet frame) into the next receive buffer
    /// and adds it to the used ring. `Ok(false)`: the driver has no receive
    /// buffer available (or the queue is not set up yet); the caller keeps
    /// the frame and retries after the driver kicks the receive queue.
    ///
    /// Call only while the guest is stopped; afterwards ask
    /// [`Queues::needs_interrupt`] for [`RX_QUEUE`].
    pub fn deliver(&mut self, queues: &mut Queues, frame: &[u8]) -> Result<bool, DeviceError> {
        if !queues.is_ready(RX_QUEUE) {
            return Ok(false);
        }
        let hlen = self.header_len();
        let (mem, q) = queues.ready(RX_QUEUE)?;
        let Some(chain) = Chain::pop(q, mem)? else {
            return Ok(false);
        };
        let room = chain.writable_len();
        if hlen + frame.len() > room {
            // Leave the buffer with the device: a smaller frame may fit it.
            q.go_to_previous_position();
            return Err(DeviceError::FrameTooLarge { len: frame.len(), room: room.saturating_sub(hlen) });
        }
        let mut buf = vec![0u8; hlen + frame.len()];
        if hlen == 12 {
            // num_buffers: 1 when mergeable buffers are not negotiated.
            buf[10] = 1;
        }
        buf[hlen..].copy_from_slice(frame);
        chain.write_at(mem, 0, &buf)?;
        q.add_used(mem, chain.head, buf.len() as u32)?;
        Ok(true)
    }

    /// Moves every available transmit chain into `self.tx`.
    fn drain_tx(&mut self, queues: &mut Queues) -> Result<bool, DeviceError> {
        let hlen = self.header_len();
        let tx = &mut self.tx;
        drain_readable(queues, TX_QUEUE, |bytes| {
            // A chain shorter than the header carries no frame; it is
            // returned and otherwise ignored.
            if bytes.len() > hlen {
                tx.push(bytes[hlen..].to_vec());
            }
        })
    }
}

impl VirtioDevice for VirtioNet {
    fn device_id(&self) -> u32 {
        1
    }

    fn features(&self) -> u64 {
        VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX | VIRTIO_NET_F_MAC
    }

    fn ack_features(&mut self, features: u64) {
        self.acked = features & self.features();
    }

    fn config(&self) -> Vec<u8> {
        // struct virtio_net_config: mac[6], then status (not offered).
        self.mac.to_vec()
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &super::rx_tx::QUEUE_SIZES
    }

    fn queue_notify(&mut self, index: usize, queues: &mut Queues) -> Result<bool, DeviceError> {
        // New receive buffers: the engine retries the frames it holds for
        // this node at its next delivery.
        super::rx_tx::notify(index, queues, |q| self.drain_tx(q))
    }

    fn reset(&mut self) {
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testing::{memory, DriverQueue};
    use vm_memory::{Bytes, GuestAddress};

    fn setup() -> (VirtioNet, Queues, DriverQueue, DriverQueue) {
        let mem = memory(1 << 20);
        let rx = DriverQueue::new(&mem, 0x1000, 16);
        let tx = DriverQueue::new(&mem, 0x4000, 16);
        let mut dev = VirtioNet::new(simtime::NodeId::new(3).unwrap());
        dev.ack_features(dev.features());
        let queues = Queues { queues: vec![rx.device_queue(QUEUE_SIZE), tx.device_queue(QUEUE_SIZE)], mem };
        (dev, queues, rx, tx)
    }

    /// A driver that breaks the ring gets a device error (its node fails),
    /// never a device that spins: more entries made available than the
    /// queue holds, and a chain whose last descriptor names a next one
    /// (here itself: a loop).
    #[test]
    fn a_malformed_ring_or_chain_is_an_error_not_a_spin() {
        let (mut dev, mut qs, _rx, tx) = setup();
        qs.mem.store(64u16.to_le(), GuestAddress(tx.avail + 2), std::sync::atomic::Ordering::Release).unwrap();
        let e = dev.queue_notify(TX_QUEUE, &mut qs).unwrap_err();
        assert!(e.to_string().contains("the available ring cannot be read: index 64, next entry 0"), "{e}");

        let (mut dev, mut qs, _rx, mut tx) = setup();
        tx.add(&qs.mem, &[(0x10000, 20, false)]);
        // Descriptor 0: NEXT set, next = 0.
        qs.mem.write_obj(1u16.to_le(), GuestAddress(tx.desc + 12)).unwrap();
        qs.mem.write_obj(0u16.to_le(), GuestAddress(tx.desc + 14)).unwrap();
        let e = dev.queue_notify(TX_QUEUE, &mut qs).unwrap_err();
        assert!(e.to_string().contains("the chain at head 0 ends in a descriptor that names a next one"), "{e}");
    }

    #[test]
    fn config_is_the_node_mac() {
        let d = VirtioNet::new(simtime::NodeId::new(7).unwrap());
        assert_eq!(d.config(), vec![2, 0, 10, 0, 0, 7]);
        assert_eq!(d.device_id(), 1);
    }

    #[test]
    fn tx_strips_header_across_descriptors() {
        let (mut dev, mut qs, _rx, mut tx) = setup();
        let frame: Vec<u8> = (0..60u8).collect();
        // Header in one descriptor, frame split over two.
        qs.mem.write_slice(&[0u8; 12], GuestAddress(0x10000)).unwrap();
        qs.mem.write_slice(&frame[..20], GuestAddress(0x20000)).unwrap();
        qs.mem.write_slice(&frame[20..], GuestAddress(0x30000)).unwrap();
        let head = tx.add(&qs.mem, &[(0x10000, 12, false), (0x20000, 20, false), (0x30000, 40, false)]);
        // Header and frame in one descriptor.
        let mut one = vec![0u8; 12];
        one.extend_from_slice(b"second frame");
        qs.mem.write_slice(&one, GuestAddress(0x40000)).unwrap();
        let head2 = tx.add(&qs.mem, &[(0x40000, one.len() as u32, false)]);
        let irq = dev.queue_notify(TX_QUEUE, &mut qs).unwrap();
        assert!(irq, "used_event is 0, so the first completion interrupts");
        assert_eq!(dev.take_tx(), vec![frame, b"second frame".to_vec()]);
        assert_eq!(tx.take_used(&qs.mem), vec![(head as u32, 0), (head2 as u32, 0)]);
        assert!(dev.take_tx().is_empty());
    }

    #[test]
    fn rx_delivers_header_and_frame() {
        let (mut dev, mut qs, mut rx, _tx) = setup();
        assert!(!dev.deliver(&mut qs, b"no buffer yet").unwrap());
        let head = rx.add(&qs.mem, &[(0x50000, 1526, true)]);
        let frame = vec![0xab; 100];
        assert!(dev.deliver(&mut qs, &frame).unwrap());
        assert!(qs.needs_interrupt(RX_QUEUE).unwrap());
        assert_eq!(rx.take_used(&qs.mem), vec![(head as u32, 112)]);
        let mut got = vec![0u8; 112];
        qs.mem.read_slice(&mut got, GuestAddress(0x50000)).unwrap();
        assert_eq!(&got[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(&got[12..], &frame[..]);
        // The ring is empty again.
        assert!(!dev.deliver(&mut qs, &frame).unwrap());
    }

    #[test]
    fn rx_too_small_buffer_is_kept() {
        let (mut dev, mut qs, mut rx, _tx) = setup();
        rx.add(&qs.mem, &[(0x50000, 64, true)]);
        assert!(matches!(dev.deliver(&mut qs, &[0u8; 100]), Err(DeviceError::FrameTooLarge { .. })));
        assert!(dev.deliver(&mut qs, &[0u8; 40]).unwrap());
    }

    #[test]
    fn no_interrupt_flag_is_respected_without_event_idx() {
        let (mut dev, mut qs, mut rx, _tx) = setup();
        rx.add(&qs.mem, &[(0x50000, 1526, true)]);
        rx.add(&qs.mem, &[(0x51000, 1526, true)]);
        rx.set_no_interrupt(&qs.mem, true);
        dev.deliver(&mut qs, &[1u8; 60]).unwrap();
        assert!(!qs.needs_interrupt(RX_QUEUE).unwrap());
        rx.set_no_interrupt(&qs.mem, false);
        dev.deliver(&mut qs, &[1u8; 60]).unwrap();
        assert!(qs.needs_interrupt(RX_QUEUE).unwrap());
    }
}
