//! The engine's two identity types: [`VirtualTime`], a point of the
//! cluster's virtual clock (defined in the `simtime` crate, so that the
//! node runtimes can carry it too, and re-exported here), and [`NodeIdx`],
//! which node.
//!
//! Both serialise as the bare number they wrap, so trace lines, failure
//! files and JSON lines are byte for byte what plain `u64`/`u16` gave.

use std::fmt;

pub use simtime::VirtualTime;

/// The wall-clock date guests believe they booted at (GET_TOD):
/// 2026-01-01T00:00:00Z. Fixed, so that `date` in a guest is deterministic.
pub const GUEST_EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;

/// Which node: the 0-based index into the cluster's nodes. Displayed as
/// its name, `n1` for index 0; the trace and the network number nodes
/// from 1 ([`NodeIdx::number`]), 0 being the engine itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIdx(u16);

impl NodeIdx {
    /// The node at 0-based `index`. Panics past 65534 nodes.
    pub fn new(index: usize) -> NodeIdx {
        NodeIdx(u16::try_from(index).ok().filter(|&i| i < u16::MAX).expect("node indices fit in u16"))
    }

    /// The node numbered `number` (1-based); `None` for 0, the engine.
    pub fn from_number(number: u16) -> Option<NodeIdx> {
        number.checked_sub(1).map(NodeIdx)
    }

    /// 0-based index, for the cluster's vectors.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// 1-based number, as the trace, the network and `NODE_ID` use it.
    pub fn number(self) -> u16 {
        self.0 + 1
    }

    /// The 1-based number of the node at 0-based `index`: what the trace
    /// records for it. Panics past 65534 nodes.
    pub fn number_of(index: usize) -> u16 {
        NodeIdx::new(index).number()
    }

    /// Its address on the simulated network (the same 1-based number).
    pub fn net_id(self) -> netsim::NodeId {
        netsim::NodeId::new(self.number()).expect("a node number is never 0")
    }
}

impl fmt::Display for NodeIdx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_idx_numbers_from_one() {
        let n = NodeIdx::new(1);
        assert_eq!((n.index(), n.number(), n.to_string()), (1, 2, "n2".to_string()));
        assert_eq!(NodeIdx::from_number(2), Some(n));
        assert_eq!(NodeIdx::from_number(0), None);
    }
}
