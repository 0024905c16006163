//! simcluster's time and identity: [`VirtualTime`], a point of the
//! cluster's virtual clock, in nanoseconds since the cluster booted, and
//! [`NodeId`], which node of the cluster ([`Actor`]: a node or the engine).
//!
//! A crate of its own so that every crate that carries either can name
//! it: the engine, which moves the clock and schedules the nodes, the
//! network (`netsim`), which addresses them, the exploration and report
//! crates, and the node runtimes (`vmm`), which the engine depends on and
//! which stamp what a node did and give it its network address.
//!
//! Invariants: a `VirtualTime` serialises as the bare number of ns it
//! wraps, and its `Debug` prints that number, so trace lines, failure files
//! and JSON lines are byte for byte what a plain `u64` gave. Its arithmetic
//! is that of the `u64` it replaced: `+` panics on overflow where `u64`'s
//! does (debug builds), `saturating_add` saturates. Nothing here reads
//! host time. A `NodeId` serialises as the bare 1-based node number (what
//! the `u16` it replaced wrote) and is always in `1..=NodeId::MAX`.

#![deny(missing_docs)]

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod node;

pub use node::{Actor, NodeId};

/// A point of virtual time: nanoseconds since the cluster booted. Only the
/// engine moves it; no host time ever reaches it. No `Display`: reports
/// and traces each print times their own way (ns, or seconds), so a
/// `{}` of a time is a compile error rather than a silent new format.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VirtualTime(u64);

impl fmt::Debug for VirtualTime {
    /// The bare number of ns, as the `u64` it replaced printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl VirtualTime {
    /// The cluster's boot.
    pub const ZERO: VirtualTime = VirtualTime(0);

    /// The end of time (`u64::MAX` ns): later than anything that can be
    /// due, for "no bound" in a minimum.
    pub const MAX: VirtualTime = VirtualTime(u64::MAX);

    /// What a node that waits only for an outside event (a frame, a disk
    /// completion, control input) asks to run at: far in the future, and
    /// half the range of `u64`, so that adding a span to it cannot
    /// overflow. Its value reaches comparisons (the engine's earliest
    /// event), so it never changes.
    pub const IDLE: VirtualTime = VirtualTime(u64::MAX / 2);

    /// The time `ns` nanoseconds after the boot.
    pub const fn from_ns(ns: u64) -> VirtualTime {
        VirtualTime(ns)
    }

    /// Nanoseconds since the boot.
    pub const fn as_ns(self) -> u64 {
        self.0
    }

    /// Seconds since the boot, for humans.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `self + d`, at most the end of time.
    pub fn saturating_add(self, d: Duration) -> VirtualTime {
        VirtualTime(self.0.saturating_add(span_ns(d)))
    }

    /// The time since `earlier` (zero if `earlier` is later).
    pub fn saturating_duration_since(self, earlier: VirtualTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// `d` in ns, at most `u64::MAX` (585 years): a span as the number of ns
/// a guest command, a trace field or a random draw takes.
pub fn span_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for VirtualTime {
    type Output = VirtualTime;
    /// `self + d`; overflows (a panic in debug builds) where the `u64` sum
    /// of their ns would.
    fn add(self, d: Duration) -> VirtualTime {
        VirtualTime(self.0 + span_ns(d))
    }
}

impl AddAssign<Duration> for VirtualTime {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub for VirtualTime {
    type Output = Duration;
    /// The time between two points; panics if `earlier` is later.
    fn sub(self, earlier: VirtualTime) -> Duration {
        Duration::from_nanos(self.0.checked_sub(earlier.0).expect("virtual time runs forwards"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_arithmetic_and_form() {
        let t = VirtualTime::from_ns(1_500_000_000);
        assert_eq!(t + Duration::from_millis(500), VirtualTime::from_ns(2_000_000_000));
        assert_eq!(VirtualTime::from_ns(2_000_000_000) - t, Duration::from_millis(500));
        assert_eq!(serde_json::to_string(&t).unwrap(), "1500000000");
        assert_eq!(format!("{t:?}"), "1500000000");
        assert_eq!(VirtualTime::from_ns(u64::MAX).saturating_add(Duration::from_secs(1)).as_ns(), u64::MAX);
    }

    #[test]
    fn idle_and_max_are_the_numbers_they_replaced() {
        assert_eq!(VirtualTime::IDLE.as_ns(), u64::MAX / 2);
        assert_eq!(VirtualTime::MAX.as_ns(), u64::MAX);
        assert_eq!(VirtualTime::ZERO, VirtualTime::default());
    }
}
