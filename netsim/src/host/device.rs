//! The smoltcp [`Device`] behind a [`HostClient`](super::HostClient): whole
//! Ethernet frames in and out, no hardware.
//!
//! The engine, not a NIC, decides when frames arrive, so the device only
//! buffers. The client queues what netsim delivered and stages one frame at
//! a time ([`FrameQueue::stage`]) for smoltcp to take, so it can look at
//! each frame against the sockets' state right before smoltcp does (see
//! [`syn_tuple`]). Every frame smoltcp emits lands in the tx queue for the
//! engine to hand to [`Network::send`](crate::Network::send). Transmit never
//! fails (netsim applies loss, bandwidth and partitions later), so smoltcp
//! sees no back-pressure that depends on anything but the call sequence.

use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Address, Ipv4Packet, TcpPacket};

/// Largest Ethernet frame, header included, FCS excluded: IP MTU 1500, the
/// virtio-net default of the guests.
pub const MAX_FRAME: usize = 1514;

/// At most one frame waiting for smoltcp; transmitted frames waiting for the engine.
#[derive(Debug, Default)]
pub struct FrameQueue {
    rx: Option<Vec<u8>>,
    tx: Vec<Vec<u8>>,
}

impl FrameQueue {
    /// Offers `frame` to the next `receive` (replacing one not taken).
    pub fn stage(&mut self, frame: Vec<u8>) {
        self.rx = Some(frame);
    }

    /// Every frame transmitted since the last call, in transmit order.
    pub fn take_tx(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.tx)
    }
}

/// A received frame, handed to smoltcp by value.
pub struct RxFrame(Vec<u8>);

impl phy::RxToken for RxFrame {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

/// Permission to transmit one frame into the tx queue.
pub struct TxSlot<'a>(&'a mut Vec<Vec<u8>>);

impl phy::TxToken for TxSlot<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let r = f(&mut frame);
        self.0.push(frame);
        r
    }
}

impl Device for FrameQueue {
    type RxToken<'a> = RxFrame;
    type TxToken<'a> = TxSlot<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(RxFrame, TxSlot<'_>)> {
        let frame = self.rx.take()?;
        Some((RxFrame(frame), TxSlot(&mut self.tx)))
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxSlot<'_>> {
        Some(TxSlot(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = MAX_FRAME;
        caps
    }
}

/// `(peer address, peer port, our port)` of a connection-opening TCP SYN
/// (SYN without ACK) in IPv4 in Ethernet; `None` for anything else.
///
/// Why the client looks: smoltcp hands a segment to the *first* socket that
/// accepts it, and a listening socket accepts any SYN for its port. With
/// several listeners on a port (a backlog), a duplicated or retransmitted
/// SYN of a connection that another socket already owns can land on a
/// second listener, which then answers the connection's next ACK with a
/// reset. The client drops such SYNs instead (see `HostClient::poll`).
pub fn syn_tuple(frame: &[u8]) -> Option<(Ipv4Address, u16, u16)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.next_header() != IpProtocol::Tcp {
        return None;
    }
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    (tcp.syn() && !tcp.ack()).then(|| (ip.src_addr(), tcp.src_port(), tcp.dst_port()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::NodeId;
    use crate::frame::{arp_request, tcp_flags, tcp_ipv4};

    #[test]
    fn only_opening_syns_have_a_tuple() {
        let (a, b) = (NodeId::new(1).unwrap(), NodeId::new(2).unwrap());
        let syn = tcp_ipv4(a, b, 40000, 80, 7, 0, tcp_flags::SYN, b"");
        assert_eq!(syn_tuple(&syn), Some((Ipv4Address::new(10, 0, 0, 1), 40000, 80)));
        let syn_ack = tcp_ipv4(a, b, 40000, 80, 7, 1, tcp_flags::SYN | tcp_flags::ACK, b"");
        assert_eq!(syn_tuple(&syn_ack), None);
        assert_eq!(syn_tuple(&arp_request(a, b)), None);
        assert_eq!(syn_tuple(&syn[..30]), None);
    }
}
