//! Installing and healing a [`Partition`], and dropping the copies it blocks.

use super::Network;
use crate::addr::NodeId;
use crate::partition::{Partition, PartitionError};

impl Network {
    /// Installs `p`, replacing any current partition, and drops the pending
    /// copies it blocks (see the module docs for the rule). Returns how many
    /// were dropped.
    pub fn partition(&mut self, p: Partition) -> Result<usize, PartitionError> {
        p.validate(self.node_count)?;
        let n = self.node_count as usize;
        for from in NodeId::all(self.node_count) {
            for to in NodeId::all(self.node_count) {
                self.blocked[from.index() * n + to.index()] = p.blocks(from, to);
            }
        }
        self.partition = Some(p);
        let blocked = &self.blocked;
        let dropped =
            Self::remove_where_in(&mut self.queue, &mut self.index, |d| blocked[d.from.index() * n + d.to.index()]);
        self.stats.dropped.partition_in_flight += dropped as u64;
        Ok(dropped)
    }

    /// Removes the partition. Copies already dropped stay dropped.
    pub fn heal(&mut self) {
        self.partition = None;
        self.blocked.iter_mut().for_each(|b| *b = false);
    }

    /// The partition in force, if any.
    pub fn current_partition(&self) -> Option<&Partition> {
        self.partition.as_ref()
    }

    /// Whether a frame sent now from `from` to `to` would be dropped by the
    /// current partition.
    pub fn is_blocked(&self, from: NodeId, to: NodeId) -> bool {
        self.blocked[self.link_index(from, to)]
    }
}
