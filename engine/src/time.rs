//! The engine's node identity, [`NodeId`] (and [`Actor`], a node or the
//! engine itself), defined in the `simtime` crate (so that the network and
//! the node runtimes carry the same one) and re-exported here, and the date guests believe they booted at. Virtual
//! time itself is `simtime::VirtualTime`, named by that one path in every
//! crate.
//!
//! A `NodeId` serialises as the bare number it wraps (an `Actor` as that
//! number, 0 for the engine), so trace lines, failure files and JSON lines
//! are byte for byte what a plain `u16` gave.

pub use simtime::{Actor, NodeId};

/// The wall-clock date guests believe they booted at (GET_TOD):
/// 2026-01-01T00:00:00Z. Fixed, so that `date` in a guest is deterministic.
pub const GUEST_EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;
