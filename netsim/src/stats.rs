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
//!
//! The fields of both structs are in alphabetical order, and that is the
//! order of their keys in the run's JSON line and `shard.json`: the line
//! wrote these counters through a `serde_json::Value` map (which sorts its
//! keys) before it held them typed, and its bytes stay what they were.

use serde::{Deserialize, Serialize};

/// Why frames were dropped. Fields in alphabetical order (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts {
    /// In flight on a connection the engine reset (`[faults.connection]`;
    /// absent from the JSON when 0, so lines without connection faults
    /// keep their bytes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub connection_reset: u64,
    /// Lost on the wire (`loss` probability).
    pub loss: u64,
    /// Shorter than an Ethernet header.
    pub malformed: u64,
    /// Unicast to a MAC no node owns, or to the sender itself.
    pub no_route: u64,
    /// The receiver crashed while the frame was in flight.
    pub node_down: u64,
    /// A partition started while the frame was in flight.
    pub partition_in_flight: u64,
    /// The link was partitioned when the frame was sent.
    pub partition_send: u64,
}

impl DropCounts {
    /// Drops of frame copies that had a destination.
    pub fn on_wire(&self) -> u64 {
        self.loss + self.partition_send + self.partition_in_flight + self.node_down + self.connection_reset
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Network-wide counters. Fields in alphabetical order (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetStats {
    /// Frame copies handed to receivers.
    pub delivered: u64,
    /// Copies lost, by cause.
    pub dropped: DropCounts,
    /// Extra copies created by duplication.
    pub duplicated: u64,
    /// (frame, destination) pairs: a broadcast to k nodes counts k.
    pub offered: u64,
    /// Copies held back so that later frames overtake them.
    pub reordered: u64,
    /// Frames handed to `send`.
    pub sent: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON is what the `serde_json::Value` the line used to hold gave
    /// (sorted keys), and reads back.
    #[test]
    fn json_keys_are_sorted_as_the_value_map_wrote_them() {
        let dropped = DropCounts {
            connection_reset: 0,
            loss: 1,
            malformed: 2,
            no_route: 3,
            node_down: 4,
            partition_in_flight: 5,
            partition_send: 6,
        };
        let s = NetStats { delivered: 7, dropped, duplicated: 8, offered: 9, reordered: 10, sent: 11 };
        let typed = serde_json::to_string(&s).unwrap();
        assert_eq!(
            typed,
            "{\"delivered\":7,\"dropped\":{\"loss\":1,\"malformed\":2,\"no_route\":3,\"node_down\":4,\
             \"partition_in_flight\":5,\"partition_send\":6},\"duplicated\":8,\"offered\":9,\"reordered\":10,\
             \"sent\":11}"
        );
        assert_eq!(typed, serde_json::to_value(s).unwrap().to_string());
        assert_eq!(serde_json::from_str::<NetStats>(&typed).unwrap(), s);
    }
}
