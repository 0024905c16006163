//! Builders for well-formed Ethernet frames between nodes: used by the
//! tests, the benchmark and any host-side code that needs to inject a frame.
//! Checksums are real, so Wireshark/tshark decode the result cleanly.

use crate::addr::{NodeId, BROADCAST_MAC};

/// EtherType of an IPv4 packet.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of an ARP packet.
pub const ETHERTYPE_ARP: u16 = 0x0806;

/// TCP flag bits.
pub mod tcp_flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers (opens a connection).
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push buffered data to the receiving application.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
}

/// RFC 1071 one's-complement sum, folded and complemented.
pub fn internet_checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    let mut carry: Option<u8> = None;
    for chunk in chunks {
        for &b in *chunk {
            match carry.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => carry = Some(b),
            }
        }
    }
    if let Some(hi) = carry {
        sum += u32::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet II frame `dst <- src` carrying `payload`.
pub fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A TCP segment in IPv4 in Ethernet, `from:sport -> to:dport`.
#[allow(clippy::too_many_arguments)]
pub fn tcp_ipv4(
    from: NodeId,
    to: NodeId,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let (src, dst) = (from.ipv4(), to.ipv4());
    let tcp_len = 20 + payload.len();
    let mut tcp = Vec::with_capacity(tcp_len);
    tcp.extend_from_slice(&sport.to_be_bytes());
    tcp.extend_from_slice(&dport.to_be_bytes());
    tcp.extend_from_slice(&seq.to_be_bytes());
    tcp.extend_from_slice(&ack.to_be_bytes());
    tcp.push(5 << 4); // data offset: 5 words
    tcp.push(flags);
    tcp.extend_from_slice(&64240u16.to_be_bytes()); // window
    tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent
    tcp.extend_from_slice(payload);
    let pseudo = [&src[..], &dst[..], &[0, 6], &(tcp_len as u16).to_be_bytes()].concat();
    let c = internet_checksum(&[&pseudo, &tcp]);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());

    let total = (20 + tcp_len) as u16;
    let mut ip = Vec::with_capacity(total as usize);
    ip.extend_from_slice(&[0x45, 0]);
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]); // id, DF, ttl, proto, csum
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = internet_checksum(&[&ip]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(&tcp);
    ethernet(to.mac(), from.mac(), ETHERTYPE_IPV4, &ip)
}

/// An ARP request "who has `target`? tell `from`", broadcast.
pub fn arp_request(from: NodeId, target: NodeId) -> Vec<u8> {
    let mut a = Vec::with_capacity(28);
    a.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]); // Ethernet, IPv4, request
    a.extend_from_slice(&from.mac());
    a.extend_from_slice(&from.ipv4());
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&target.ipv4());
    ethernet(BROADCAST_MAC, from.mac(), ETHERTYPE_ARP, &a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_verify() {
        let a = NodeId::new(1).unwrap();
        let b = NodeId::new(2).unwrap();
        let f = tcp_ipv4(a, b, 1234, 80, 1, 0, tcp_flags::SYN, b"odd");
        let ip = &f[14..34];
        assert_eq!(internet_checksum(&[ip]), 0, "IPv4 header checksum");
        let tcp = &f[34..];
        let pseudo = [&ip[12..16], &ip[16..20], &[0, 6], &(tcp.len() as u16).to_be_bytes()].concat();
        assert_eq!(internet_checksum(&[&pseudo, tcp]), 0, "TCP checksum");
        assert_eq!(arp_request(a, b).len(), 42);
    }
}

/// Is `frame` a datagram: an IPv4 or IPv6 packet whose protocol is not TCP
/// (UDP, ICMP, ...)? ARP and other non-IP frames are not; neither is a
/// frame too short to say. (IPv6 extension headers are not followed: a
/// TCP segment behind one counts as a datagram.)
pub fn is_datagram(frame: &[u8]) -> bool {
    const TCP: u8 = 6;
    match frame.get(12..14) {
        Some([0x08, 0x00]) => frame.get(14 + 9).is_some_and(|&p| p != TCP),
        Some([0x86, 0xdd]) => frame.get(14 + 6).is_some_and(|&p| p != TCP),
        _ => false,
    }
}

#[cfg(test)]
mod datagram_tests {
    use super::*;
    use crate::NodeId;

    #[test]
    fn udp_and_icmp_are_datagrams_tcp_and_arp_are_not() {
        let (a, b) = (NodeId::new(1).unwrap(), NodeId::new(2).unwrap());
        assert!(!is_datagram(&arp_request(a, b)));
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[9] = 17; // UDP
        let udp = ethernet([2; 6], [4; 6], 0x0800, &ip);
        assert!(is_datagram(&udp));
        ip[9] = 1; // ICMP
        assert!(is_datagram(&ethernet([2; 6], [4; 6], 0x0800, &ip)));
        ip[9] = 6; // TCP
        assert!(!is_datagram(&ethernet([2; 6], [4; 6], 0x0800, &ip)));
        assert!(!is_datagram(&udp[..20]), "too short to say");
    }
}
