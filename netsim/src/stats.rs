//! Counters for the end-of-run JSON line.
//!
//! Conservation invariant (checked by tests): every frame copy that netsim
//! accepted for a destination is either still pending, delivered or dropped
//! for exactly one reason:
//!
//! `offered + duplicated == delivered + dropped.on_wire() + pending`
//!
//! `no_route` and `malformed` count whole frames that never had a
//! destination, so they are outside that equation.

/// Why frames were dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DropCounts {
    /// Lost on the wire (`loss` probability).
    pub loss: u64,
    /// The link was partitioned when the frame was sent.
    pub partition_send: u64,
    /// A partition started while the frame was in flight.
    pub partition_in_flight: u64,
    /// The receiver crashed while the frame was in flight.
    pub node_down: u64,
    /// Unicast to a MAC no node owns, or to the sender itself.
    pub no_route: u64,
    /// Shorter than an Ethernet header.
    pub malformed: u64,
}

impl DropCounts {
    /// Drops of frame copies that had a destination.
    pub fn on_wire(&self) -> u64 {
        self.loss + self.partition_send + self.partition_in_flight + self.node_down
    }
}

/// Network-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetStats {
    /// Frames handed to `send`.
    pub sent: u64,
    /// (frame, destination) pairs: a broadcast to k nodes counts k.
    pub offered: u64,
    /// Frame copies handed to receivers.
    pub delivered: u64,
    /// Extra copies created by duplication.
    pub duplicated: u64,
    /// Copies held back so that later frames overtake them.
    pub reordered: u64,
    /// Copies lost, by cause.
    pub dropped: DropCounts,
}
