//! Network partitions.
//!
//! A [`Partition`] says which directed pairs of nodes cannot exchange frames.
//! It is a description (groups of nodes), not a matrix, so it is cheap to
//! build, print in a trace and compare; [`Partition::blocks`] answers for one
//! directed pair.
//!
//! Nodes named in no group form one implicit extra group together, so
//! `Partition::isolate(n)` is simply `symmetric([[n]])`.

use std::collections::BTreeSet;

use crate::addr::NodeId;

/// Which directed links a partition cuts.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Partition {
    /// Nodes in different groups cannot talk, in either direction.
    Symmetric {
        /// The groups; a node in none of them is alone.
        groups: Vec<BTreeSet<NodeId>>,
    },
    /// Frames from a node of `from` to a node of `to` are dropped; frames the
    /// other way still pass (a half-open link, e.g. a firewall rule).
    OneWay {
        /// The senders whose frames are cut.
        from: BTreeSet<NodeId>,
        /// The receivers they cannot reach.
        to: BTreeSet<NodeId>,
    },
    /// These pairs of nodes cannot talk, in either direction; every other
    /// pair can. Shapes that are not a split into groups: Jepsen's
    /// majorities ring (every node sees a majority, no two the same one)
    /// and bridge (two halves joined by one node that sees both).
    /// Each pair is stored lower node first.
    Links {
        /// The pairs that cannot talk.
        cut: BTreeSet<(NodeId, NodeId)>,
    },
}

/// A partition that cannot be applied to this cluster.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// A node id past the cluster's last node.
    #[error("partition names node {node}, but the cluster has {node_count} nodes")]
    UnknownNode {
        /// The id named.
        node: NodeId,
        /// How many nodes the cluster has.
        node_count: u16,
    },
    /// A node in two groups of a symmetric partition.
    #[error("node {0} appears in more than one partition group")]
    Overlap(NodeId),
    /// A node on both sides of a one-way partition.
    #[error("one-way partition: node {0} is on both sides")]
    BothSides(NodeId),
}

impl Partition {
    /// Groups that cannot reach each other.
    pub fn symmetric<G, I>(groups: G) -> Partition
    where
        G: IntoIterator<Item = I>,
        I: IntoIterator<Item = NodeId>,
    {
        Partition::Symmetric { groups: groups.into_iter().map(|g| g.into_iter().collect()).collect() }
    }

    /// Frames from `from` to `to` blocked, `to` to `from` allowed.
    pub fn one_way(from: impl IntoIterator<Item = NodeId>, to: impl IntoIterator<Item = NodeId>) -> Partition {
        Partition::OneWay { from: from.into_iter().collect(), to: to.into_iter().collect() }
    }

    /// The pairs `cut` cannot talk (in either direction).
    pub fn links(cut: impl IntoIterator<Item = (NodeId, NodeId)>) -> Partition {
        Partition::Links { cut: cut.into_iter().filter(|(a, b)| a != b).map(|(a, b)| (a.min(b), a.max(b))).collect() }
    }

    /// `node` cut off from everybody else.
    pub fn isolate(node: NodeId) -> Partition {
        Partition::symmetric([[node]])
    }

    /// Checks that every node exists and the groups are disjoint.
    pub fn validate(&self, node_count: u16) -> Result<(), PartitionError> {
        let mut seen = BTreeSet::new();
        let check = |n: NodeId, seen: &mut BTreeSet<NodeId>| {
            if n.number() > node_count {
                return Err(PartitionError::UnknownNode { node: n, node_count });
            }
            if !seen.insert(n) {
                return Err(PartitionError::Overlap(n));
            }
            Ok(())
        };
        match self {
            Partition::Symmetric { groups } => {
                for n in groups.iter().flatten() {
                    check(*n, &mut seen)?;
                }
            }
            Partition::Links { cut } => {
                for n in cut.iter().flat_map(|(a, b)| [a, b]) {
                    if n.number() > node_count {
                        return Err(PartitionError::UnknownNode { node: *n, node_count });
                    }
                }
            }
            Partition::OneWay { from, to } => {
                for n in from.iter().chain(to) {
                    check(*n, &mut seen).map_err(|e| match e {
                        PartitionError::Overlap(n) => PartitionError::BothSides(n),
                        e => e,
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Whether a frame from `from` to `to` is dropped under this partition.
    pub fn blocks(&self, from: NodeId, to: NodeId) -> bool {
        match self {
            Partition::Symmetric { groups } => {
                let group_of = |n: NodeId| groups.iter().position(|g| g.contains(&n));
                from != to && group_of(from) != group_of(to)
            }
            Partition::OneWay { from: f, to: t } => f.contains(&from) && t.contains(&to),
            Partition::Links { cut } => cut.contains(&(from.min(to), from.max(to))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(i: u16) -> NodeId {
        NodeId::new(i).unwrap()
    }

    #[test]
    fn symmetric_with_implicit_group() {
        let p = Partition::symmetric([vec![n(1), n(2)]]);
        assert!(!p.blocks(n(1), n(2)));
        assert!(p.blocks(n(1), n(3)) && p.blocks(n(3), n(1)));
        assert!(!p.blocks(n(3), n(4)), "unnamed nodes share a group");
        assert!(Partition::isolate(n(2)).blocks(n(2), n(5)));
    }

    #[test]
    fn one_way() {
        let p = Partition::one_way([n(1)], [n(2), n(3)]);
        assert!(p.blocks(n(1), n(2)) && p.blocks(n(1), n(3)));
        assert!(!p.blocks(n(2), n(1)) && !p.blocks(n(2), n(3)));
    }

    #[test]
    fn cut_links_block_both_ways_and_nothing_else() {
        let p = Partition::links([(n(3), n(1)), (n(2), n(4))]);
        assert!(p.blocks(n(1), n(3)) && p.blocks(n(3), n(1)) && p.blocks(n(4), n(2)));
        assert!(!p.blocks(n(1), n(2)) && !p.blocks(n(3), n(4)));
        assert_eq!(p.validate(4), Ok(()));
        assert!(p.validate(3).is_err());
    }

    #[test]
    fn validation() {
        assert_eq!(
            Partition::symmetric([vec![n(1)], vec![n(1), n(2)]]).validate(3),
            Err(PartitionError::Overlap(n(1)))
        );
        assert_eq!(
            Partition::isolate(n(4)).validate(3),
            Err(PartitionError::UnknownNode { node: n(4), node_count: 3 })
        );
        assert_eq!(Partition::one_way([n(1)], [n(1)]).validate(3), Err(PartitionError::BothSides(n(1))));
        assert_eq!(Partition::one_way([n(1)], [n(2)]).validate(3), Ok(()));
    }
}
