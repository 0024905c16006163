//! Static addressing: node N owns IPv4 `10.0.0.N` and MAC `02:00:0a:00:00:NN`.
//!
//! Addresses are a pure function of the node id so that no guest ever needs
//! DHCP or any other negotiation whose timing could leak into the execution.
//! The MAC is locally administered (`02:`) and unicast; its last four bytes
//! repeat the IPv4 address, which makes captures easy to read.
//!
//! Invariant: a valid `NodeId` is in `1..=MAX_NODES` (254), so every address
//! lives in `10.0.0.0/24` and `.255` stays the broadcast address.

use core::fmt;

/// Largest node id: keeps all nodes inside one /24 with `.255` reserved.
pub const MAX_NODES: u16 = 254;

/// The Ethernet broadcast address.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// A node of the cluster, 1-based like the guests' `NODE_ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct NodeId(u16);

impl NodeId {
    /// `Some` for `1..=MAX_NODES`, `None` otherwise (0 is never a node).
    pub const fn new(n: u16) -> Option<NodeId> {
        if n >= 1 && n <= MAX_NODES {
            Some(NodeId(n))
        } else {
            None
        }
    }

    /// The 1-based number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// 0-based index, for dense per-node tables.
    pub const fn index(self) -> usize {
        self.0 as usize - 1
    }

    /// Inverse of [`NodeId::index`].
    pub fn from_index(i: usize) -> Option<NodeId> {
        u16::try_from(i + 1).ok().and_then(NodeId::new)
    }

    /// `10.0.0.N`.
    pub const fn ipv4(self) -> [u8; 4] {
        [10, 0, 0, self.0 as u8]
    }

    /// `02:00:0a:00:00:NN`.
    pub const fn mac(self) -> [u8; 6] {
        [0x02, 0x00, 0x0a, 0x00, 0x00, self.0 as u8]
    }

    /// The node owning `mac`, if it is one of ours.
    pub fn from_mac(mac: [u8; 6]) -> Option<NodeId> {
        match mac {
            [0x02, 0x00, 0x0a, 0x00, 0x00, n] => NodeId::new(n as u16),
            _ => None,
        }
    }

    /// The node owning `ip`, if it is one of ours.
    pub fn from_ipv4(ip: [u8; 4]) -> Option<NodeId> {
        match ip {
            [10, 0, 0, n] => NodeId::new(n as u16),
            _ => None,
        }
    }

    /// All nodes `1..=node_count` in ascending order.
    pub fn all(node_count: u16) -> impl Iterator<Item = NodeId> {
        (1..=node_count.min(MAX_NODES)).map(NodeId)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

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
    fn addresses() {
        let n = NodeId::new(7).unwrap();
        assert_eq!(n.ipv4(), [10, 0, 0, 7]);
        assert_eq!(n.mac(), [2, 0, 0x0a, 0, 0, 7]);
        assert_eq!(NodeId::from_mac(n.mac()), Some(n));
        assert_eq!(NodeId::from_ipv4(n.ipv4()), Some(n));
        assert_eq!(NodeId::new(0), None);
        assert_eq!(NodeId::new(255), None);
        assert_eq!(NodeId::from_index(0), NodeId::new(1));
        assert_eq!(n.to_string(), "n7");
    }

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
