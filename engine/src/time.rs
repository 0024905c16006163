//! The engine's two identity types, both defined in the `simtime` crate
//! (so that the network and the node runtimes carry the same ones) and
//! re-exported here: [`VirtualTime`], a point of the cluster's virtual
//! clock, and [`NodeId`], which node.
//!
//! Both serialise as the bare number they wrap, so trace lines, failure
//! files and JSON lines are byte for byte what plain `u64`/`u16` gave.

pub use simtime::{NodeId, VirtualTime};

/// The wall-clock date guests believe they booted at (GET_TOD):
/// 2026-01-01T00:00:00Z. Fixed, so that `date` in a guest is deterministic.
pub const GUEST_EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;
