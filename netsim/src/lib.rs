//! netsim: the simulated network behind every node's virtio-net.
//!
//! Plain deterministic data structures: no I/O (pcap writes go to a
//! caller-supplied `std::io::Write`), no threads, no host time, no host
//! randomness. Every random decision is drawn from the `RngCore` the engine
//! passes to [`Network::send`], in a documented order, and all iteration is
//! over ordered containers (`BTreeMap`, `Vec`), so the same calls with the
//! same seed give the same deliveries, byte for byte.
//!
//! Flow: a guest transmits a frame → the engine calls [`Network::send`] at
//! the current virtual time → netsim schedules zero or more [`Delivery`]s →
//! the engine either advances to [`Network::next_delivery_time`] and calls
//! [`Network::pop_next`], or treats every [`Network::pending`] delivery as
//! an enabled action and calls [`Network::take`] on the one it picks.
//!
//! Time: a point of virtual time is a [`VirtualTime`](simtime::VirtualTime) (ns since the
//! cluster booted, from the `simtime` crate), a span a
//! `std::time::Duration`; both are whole nanoseconds, so the draws and
//! the queue's order are those of plain `u64` ns. Only the edges convert:
//! the pcap record header and smoltcp's µs clock in [`host`].
//!
//! Modules: [`addr`] (node ids, IPv4/MAC), [`config`] (`[faults.network]`),
//! [`partition`], [`network`] (the queue), [`stats`], [`pcap`], [`frame`]
//! (frame builders), [`rng`] (portable draws), [`tcp`] (TCP connections
//! on the wire, for connection faults).

#![deny(missing_docs)]

pub mod addr;
pub mod config;
pub mod frame;
pub mod host;
pub mod network;
pub mod partition;
pub mod pcap;
/// The portable draws (simrng's, re-exported where netsim's users look).
pub use simrng::draw as rng;
pub mod stats;
pub mod tcp;

pub use addr::{destination, Destination, FrameError, NodeId};
pub use config::{
    ConfigError, ConfigKey, ConfigProblem, DatagramOrder, Latency, LinkOverride, LinkParams, NetConfig, PartitionShape,
    TomlKey,
};
pub use network::{
    ConnReset, Delivery, DeliveryId, LinkDrop, LinkFate, LinkOutcome, Network, ScheduledDelivery, SendOutcome, Unrouted,
};
pub use partition::{Partition, PartitionError};
pub use pcap::{Capture, PcapWriter};
pub use stats::{DropCounts, NetStats};
