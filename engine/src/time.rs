//! The engine's two identity types: [`VirtualTime`], a point of the
//! cluster's virtual clock, and [`NodeIdx`], which node.
//!
//! Both serialise as the bare number they wrap, so trace lines, failure
//! files and JSON lines are byte for byte what plain `u64`/`u16` gave.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The wall-clock date guests believe they booted at (GET_TOD):
/// 2026-01-01T00:00:00Z. Fixed, so that `date` in a guest is deterministic.
pub const GUEST_EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;

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
        VirtualTime(self.0.saturating_add(duration_ns(d)))
    }

    /// The time since `earlier` (zero if `earlier` is later).
    pub fn saturating_duration_since(self, earlier: VirtualTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// `d` in ns, at most `u64::MAX` (585 years).
fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for VirtualTime {
    type Output = VirtualTime;
    fn add(self, d: Duration) -> VirtualTime {
        VirtualTime(self.0 + duration_ns(d))
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

impl From<u64> for VirtualTime {
    /// `ns` nanoseconds after the boot.
    fn from(ns: u64) -> VirtualTime {
        VirtualTime(ns)
    }
}

impl From<VirtualTime> for u64 {
    fn from(t: VirtualTime) -> u64 {
        t.0
    }
}

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
    fn virtual_time_arithmetic_and_form() {
        let t = VirtualTime::from_ns(1_500_000_000);
        assert_eq!(t + Duration::from_millis(500), VirtualTime::from_ns(2_000_000_000));
        assert_eq!(VirtualTime::from_ns(2_000_000_000) - t, Duration::from_millis(500));
        assert_eq!(serde_json::to_string(&t).unwrap(), "1500000000");
        assert_eq!(format!("{t:?}"), "1500000000");
        assert_eq!(VirtualTime::from_ns(u64::MAX).saturating_add(Duration::from_secs(1)).as_ns(), u64::MAX);
    }

    #[test]
    fn node_idx_numbers_from_one() {
        let n = NodeIdx::new(1);
        assert_eq!((n.index(), n.number(), n.to_string()), (1, 2, "n2".to_string()));
        assert_eq!(NodeIdx::from_number(2), Some(n));
        assert_eq!(NodeIdx::from_number(0), None);
    }
}
