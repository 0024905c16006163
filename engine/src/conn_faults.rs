//! Connection faults (`[faults.connection]`): a TCP connection between
//! two nodes reset (an RST to both ends, its frames in flight lost) or
//! stalled (its frames held one way or both for a while, the other
//! connections flowing), each an action the strategy chooses
//! (`ActionKind::ConnReset`, `ActionKind::ConnStall`), offered per
//! established connection netsim tracks (see `netsim::tcp`).
//!
//! Their stream is their own (`simrng::streams::CONNECTION`): when they
//! become possible, and a stall's direction and length. One that is off
//! draws nothing, and without the table netsim tracks nothing, so other
//! draws and deliveries are what they were.

use std::time::Duration;

/// `[faults.connection]`, checked. `resets` and `stalls` 0: off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnFaultSpec {
    /// Connection resets per execution at most.
    pub resets: u32,
    /// Connection stalls per execution at most.
    pub stalls: u32,
    /// A stall lasts a length drawn uniformly from this range.
    pub stall_for: (Duration, Duration),
    /// Connection faults become possible at a time drawn uniformly from
    /// the first `span` of the workload, and again after each one from
    /// its time.
    pub span: Duration,
    /// Random walk weight of a reset or a stall (ordinary events: 100).
    pub weight: u32,
}

impl ConnFaultSpec {
    /// Whether connection faults are on (netsim then tracks connections).
    pub fn on(&self) -> bool {
        self.resets > 0 || self.stalls > 0
    }
}

/// How many connection faults an execution saw (the run's JSON line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConnFaultCounts {
    /// Connections reset.
    pub resets: u32,
    /// Connections stalled.
    pub stalls: u32,
}
