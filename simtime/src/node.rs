//! [`NodeId`]: which node of the cluster, and every form the node's
//! identity takes (its 0-based place in the cluster's tables, its 1-based
//! number, its name, its network addresses), derived here and nowhere
//! else.

use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A node of the cluster: the 1-based number the guests see as `NODE_ID`,
/// the trace records and the network addresses by (node N owns IPv4
/// `10.0.0.N` and MAC `02:00:0a:00:00:NN`). The host-side client, when
/// there is one, is node N+1 of a cluster of N guests.
///
/// Invariant: the number is in `1..=NodeId::MAX` (254), so every address
/// lives in `10.0.0.0/24`, `.255` stays the broadcast address, and the
/// number fits the MAC's last byte. 0 is never a node (the trace uses it
/// for the engine itself: see [`Actor`]).
///
/// Serialised as the bare number (what the `u16` it replaced wrote);
/// reading one back checks the range. Displayed as its name, `n3`, the
/// one place that form is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct NodeId(u16);

impl NodeId {
    /// Largest node number: keeps every node inside one /24 with `.255`
    /// reserved for broadcast.
    pub const MAX: u16 = 254;

    /// The node numbered `number`: `Some` for `1..=MAX`, `None` otherwise
    /// (0 is never a node).
    pub const fn new(number: u16) -> Option<NodeId> {
        if number >= 1 && number <= NodeId::MAX {
            Some(NodeId(number))
        } else {
            None
        }
    }

    /// The node at 0-based `index` of the cluster's tables, if there can
    /// be one there.
    pub fn from_index(index: usize) -> Option<NodeId> {
        u16::try_from(index).ok().and_then(|i| i.checked_add(1)).and_then(NodeId::new)
    }

    /// The node at 0-based `index` of a cluster's tables. Panics past
    /// [`NodeId::MAX`] nodes, which no cluster has (its configuration is
    /// refused first).
    pub fn at(index: usize) -> NodeId {
        NodeId::from_index(index).expect("a cluster has at most NodeId::MAX nodes")
    }

    /// The 1-based number (the guests' `NODE_ID`, the trace's `node`).
    pub const fn number(self) -> u16 {
        self.0
    }

    /// The 0-based index, for the cluster's per-node tables.
    pub const fn index(self) -> usize {
        self.0 as usize - 1
    }

    /// The number as the one byte the network addresses carry (always
    /// fits: see the invariant).
    pub const fn byte(self) -> u8 {
        self.0 as u8
    }

    /// The node's IPv4 address, `10.0.0.N`.
    pub const fn ipv4(self) -> [u8; 4] {
        [10, 0, 0, self.byte()]
    }

    /// The node's IPv4 address as a value that prints `10.0.0.N`.
    pub const fn ip(self) -> Ipv4Addr {
        let [a, b, c, d] = self.ipv4();
        Ipv4Addr::new(a, b, c, d)
    }

    /// The node's MAC, `02:00:0a:00:00:NN`: locally administered and
    /// unicast, its last four bytes the IPv4 address.
    pub const fn mac(self) -> [u8; 6] {
        [0x02, 0x00, 0x0a, 0x00, 0x00, self.byte()]
    }

    /// The node owning `mac`, if it is one of ours.
    pub fn from_mac(mac: [u8; 6]) -> Option<NodeId> {
        match mac {
            [0x02, 0x00, 0x0a, 0x00, 0x00, n] => NodeId::new(u16::from(n)),
            _ => None,
        }
    }

    /// The node owning `ip`, if it is one of ours.
    pub fn from_ipv4(ip: [u8; 4]) -> Option<NodeId> {
        match ip {
            [10, 0, 0, n] => NodeId::new(u16::from(n)),
            _ => None,
        }
    }

    /// The node named `name` (its [`Display`](fmt::Display) form, `n3`;
    /// nothing else, not `n03`), if there can be one.
    pub fn from_name(name: &str) -> Option<NodeId> {
        let n = NodeId::new(name.strip_prefix('n')?.parse().ok()?)?;
        (n.to_string() == name).then_some(n)
    }

    /// Nodes `1..=node_count` (at most [`NodeId::MAX`]) in ascending order.
    pub fn all(node_count: u16) -> impl Iterator<Item = NodeId> {
        (1..=node_count.min(NodeId::MAX)).map(NodeId)
    }

    /// The first `len` nodes (at most [`NodeId::MAX`]): one per entry of a
    /// per-node table of that length, in its order.
    pub fn first(len: usize) -> impl Iterator<Item = NodeId> {
        (1..=len.min(usize::from(NodeId::MAX))).map(|n| NodeId(n as u16))
    }
}

impl fmt::Display for NodeId {
    /// The node's name, `n3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl<'de> Deserialize<'de> for NodeId {
    /// The bare number, checked to be a node's.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NodeId, D::Error> {
        let n = u16::deserialize(d)?;
        NodeId::new(n)
            .ok_or_else(|| serde::de::Error::custom(format_args!("node number {n} is outside 1..={}", NodeId::MAX)))
    }
}

/// Who an event or an action belongs to: a node, or the engine itself
/// (a partition, a heal, a note). Ordered as the numbers it stands for:
/// the engine first, then nodes by number.
///
/// Serialised as that number, what traces and failure files have always
/// carried: the node's number, 0 for the engine. Reading one back checks
/// the range. Displayed as the node's name (`n3`) or `engine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Actor {
    /// The engine itself (number 0).
    Engine,
    /// A node (its number, `1..=NodeId::MAX`).
    Node(NodeId),
}

impl Actor {
    /// The actor numbered `number`: 0 is the engine, `1..=NodeId::MAX` a
    /// node, anything else `None`.
    pub const fn from_number(number: u16) -> Option<Actor> {
        match NodeId::new(number) {
            Some(n) => Some(Actor::Node(n)),
            None if number == 0 => Some(Actor::Engine),
            None => None,
        }
    }

    /// The number it is written as: the node's, 0 for the engine.
    pub const fn number(self) -> u16 {
        match self {
            Actor::Engine => 0,
            Actor::Node(n) => n.number(),
        }
    }

    /// The node, or `None` for the engine.
    pub const fn node(self) -> Option<NodeId> {
        match self {
            Actor::Engine => None,
            Actor::Node(n) => Some(n),
        }
    }

    /// Whether it is the engine.
    pub const fn is_engine(self) -> bool {
        matches!(self, Actor::Engine)
    }
}

impl From<NodeId> for Actor {
    fn from(n: NodeId) -> Actor {
        Actor::Node(n)
    }
}

impl PartialEq<NodeId> for Actor {
    fn eq(&self, n: &NodeId) -> bool {
        *self == Actor::Node(*n)
    }
}

impl fmt::Display for Actor {
    /// The node's name (`n3`), or `engine`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Engine => f.write_str("engine"),
            Actor::Node(n) => n.fmt(f),
        }
    }
}

impl Serialize for Actor {
    /// The bare number (0 for the engine).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u16(self.number())
    }
}

impl<'de> Deserialize<'de> for Actor {
    /// The bare number, checked to be the engine's or a node's.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Actor, D::Error> {
        let n = u16::deserialize(d)?;
        Actor::from_number(n)
            .ok_or_else(|| serde::de::Error::custom(format_args!("node number {n} is outside 0..={}", NodeId::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_of_one_node() {
        let n = NodeId::new(7).unwrap();
        assert_eq!((n.number(), n.index(), n.to_string()), (7, 6, "n7".to_string()));
        assert_eq!(n.ipv4(), [10, 0, 0, 7]);
        assert_eq!(n.ip().to_string(), "10.0.0.7");
        assert_eq!(NodeId::from_name("n7"), Some(n));
        assert_eq!([NodeId::from_name("n07"), NodeId::from_name("n0"), NodeId::from_name("7")], [None, None, None]);
        assert_eq!(n.mac(), [2, 0, 0x0a, 0, 0, 7]);
        assert_eq!(NodeId::from_mac(n.mac()), Some(n));
        assert_eq!(NodeId::from_ipv4(n.ipv4()), Some(n));
        assert_eq!(NodeId::from_index(6), Some(n));
        assert_eq!(NodeId::at(0), NodeId::new(1).unwrap());
        assert_eq!(NodeId::new(0), None);
        assert_eq!(NodeId::new(255), None);
        assert_eq!(NodeId::from_index(254), None);
        assert_eq!(NodeId::all(3).map(NodeId::number).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(NodeId::first(2).map(NodeId::index).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn serialises_as_the_bare_number_and_checks_it_back() {
        let n = NodeId::new(3).unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "3");
        assert_eq!(serde_json::from_str::<NodeId>("3").unwrap(), n);
        assert!(serde_json::from_str::<NodeId>("0").unwrap_err().to_string().contains("outside 1..=254"));
        assert!(serde_json::from_str::<NodeId>("255").is_err());
    }

    #[test]
    fn actor_is_the_number_traces_carry() {
        let n3 = NodeId::new(3).unwrap();
        for (a, json, shown) in [(Actor::Engine, "0", "engine"), (Actor::Node(n3), "3", "n3")] {
            assert_eq!(serde_json::to_string(&a).unwrap(), json);
            assert_eq!(serde_json::from_str::<Actor>(json).unwrap(), a);
            assert_eq!(Actor::from_number(a.number()), Some(a));
            assert_eq!(a.to_string(), shown);
        }
        assert_eq!(serde_json::to_string(&[Some(n3), None]).unwrap(), "[3,null]");
        assert!(serde_json::from_str::<Actor>("255").unwrap_err().to_string().contains("outside 0..=254"));
        assert_eq!(Actor::from_number(255), None);
        assert!(
            Actor::Engine < Actor::Node(NodeId::new(1).unwrap())
                && Actor::Node(n3) < Actor::Node(NodeId::new(4).unwrap())
        );
        assert!(Actor::Node(n3) == n3 && Actor::Engine.node().is_none() && Actor::Engine.is_engine());
    }
}
