//! Static addressing: node N owns IPv4 `10.0.0.N` and MAC `02:00:0a:00:00:NN`
//! ([`NodeId::ipv4`], [`NodeId::mac`]).
//!
//! Addresses are a pure function of the node id so that no guest ever needs
//! DHCP or any other negotiation whose timing could leak into the execution.
//! The MAC is locally administered (`02:`) and unicast; its last four bytes
//! repeat the IPv4 address, which makes captures easy to read.
//!
//! Invariant: a `NodeId` is in `1..=NodeId::MAX` (254), so every address
//! lives in `10.0.0.0/24` and `.255` stays the broadcast address.

pub use simtime::NodeId;

/// The Ethernet broadcast address.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// Where an Ethernet frame goes, from its destination MAC alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// One of our nodes.
    Unicast(NodeId),
    /// Broadcast or multicast (group bit set, e.g. ARP requests, IPv6 ND):
    /// delivered to every node except the sender.
    Broadcast,
    /// A unicast MAC that belongs to no node: nobody receives it.
    Unknown([u8; 6]),
}

/// Why a frame could not even be routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than an Ethernet header (14 bytes).
    #[error("frame of {0} bytes is shorter than an Ethernet header")]
    TooShort(usize),
}

/// Length of an Ethernet II header (no 802.1Q tag).
pub const ETH_HEADER_LEN: usize = 14;

/// Destination MAC of an Ethernet frame.
pub fn dst_mac(frame: &[u8]) -> Result<[u8; 6], FrameError> {
    if frame.len() < ETH_HEADER_LEN {
        return Err(FrameError::TooShort(frame.len()));
    }
    let mut m = [0; 6];
    m.copy_from_slice(&frame[0..6]);
    Ok(m)
}

/// Source MAC of an Ethernet frame.
pub fn src_mac(frame: &[u8]) -> Result<[u8; 6], FrameError> {
    if frame.len() < ETH_HEADER_LEN {
        return Err(FrameError::TooShort(frame.len()));
    }
    let mut m = [0; 6];
    m.copy_from_slice(&frame[6..12]);
    Ok(m)
}

/// Classifies a frame by destination MAC. The group bit (LSB of the first
/// byte) covers both broadcast and multicast.
pub fn destination(frame: &[u8]) -> Result<Destination, FrameError> {
    let mac = dst_mac(frame)?;
    if mac[0] & 1 == 1 {
        return Ok(Destination::Broadcast);
    }
    Ok(match NodeId::from_mac(mac) {
        Some(n) => Destination::Unicast(n),
        None => Destination::Unknown(mac),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify() {
        let mut f = [0u8; 60];
        f[..6].copy_from_slice(&BROADCAST_MAC);
        assert_eq!(destination(&f), Ok(Destination::Broadcast));
        f[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]); // IPv6 multicast
        assert_eq!(destination(&f), Ok(Destination::Broadcast));
        f[..6].copy_from_slice(&NodeId::new(3).unwrap().mac());
        assert_eq!(destination(&f), Ok(Destination::Unicast(NodeId::new(3).unwrap())));
        f[..6].copy_from_slice(&[0x02, 0, 0x0a, 0, 0, 0]);
        assert!(matches!(destination(&f), Ok(Destination::Unknown(_))));
        assert_eq!(destination(&f[..13]), Err(FrameError::TooShort(13)));
    }
}
