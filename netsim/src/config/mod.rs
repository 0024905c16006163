//! `[faults.network]` of `cluster.toml`.
//!
//! Parsing (serde) only checks shapes; [`NetConfig::validate`] checks values
//! against the cluster and names the offending key in dotted TOML form, e.g.
//! `faults.network.links."1-2".loss`, so `simcluster run` can exit 2 with a
//! message a user can act on.
//!
//! ```toml
//! [faults.network]
//! latency = { min = "50us", max = "200us" }   # or 100000, or "100us"
//! loss = 0.01
//! duplicate = 0.001
//! reorder = 0.01
//! reorder_delay = { min = "100us", max = "1ms" }
//! bandwidth = 12_500_000                      # bytes/s per directed link
//! partitions = true
//! [faults.network.links."1-2"]                # both directions; "1->2" one way
//! loss = 0.2
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

mod duration;
mod error;
mod latency;
mod link;
mod validate;

pub use duration::{parse_duration, DurationError};
pub use error::{ConfigError, ConfigKey, ConfigProblem, TomlKey};
pub use latency::Latency;
pub use link::{LinkKey, LinkParams};

/// Prefix of every key named in errors.
pub const KEY_PREFIX: &str = "faults.network";

/// Per-link overrides; absent fields inherit the network-wide value.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkOverride {
    /// Replaces [`NetConfig::latency`] on this link.
    pub latency: Option<Latency>,
    /// Replaces [`NetConfig::loss`] on this link.
    pub loss: Option<f64>,
    /// Replaces [`NetConfig::duplicate`] on this link.
    pub duplicate: Option<f64>,
    /// Replaces [`NetConfig::reorder`] on this link.
    pub reorder: Option<f64>,
    /// Replaces [`NetConfig::bandwidth`] on this link.
    pub bandwidth: Option<u64>,
}

/// The `[faults.network]` table. Every field has a default, so an empty
/// table is a perfect 100 µs network.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetConfig {
    /// One-way delay per frame copy, after serialisation.
    pub latency: Latency,
    /// Probability a frame copy is lost on the wire.
    pub loss: f64,
    /// Probability a delivered frame is delivered twice.
    pub duplicate: f64,
    /// Probability a frame copy is held back by `reorder_delay` so that later
    /// frames on the same link overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered frame.
    pub reorder_delay: Latency,
    /// Bytes per second per directed link; `None` is infinitely fast.
    pub bandwidth: Option<u64>,
    /// Whether the exploration strategy may partition the network. netsim
    /// itself obeys whatever partition it is given.
    pub partitions: bool,
    /// With `partitions`: the time from the start (or the last heal) to the
    /// next partition, drawn per partition.
    pub partition_gap: Latency,
    /// With `partitions`: how long each partition lasts.
    pub partition_length: Latency,
    /// Overrides keyed `"1-2"` / `"n1-n2"` (both directions) or `"1->2"`
    /// (one direction; wins over a two-way key for that direction).
    pub links: BTreeMap<String, LinkOverride>,
    /// Whether datagrams in flight on a link may be delivered in any order
    /// (the strategy chooses; see [`DatagramOrder`]).
    pub datagram_order: DatagramOrder,
    /// With `partitions`: the shapes random partitions are drawn from,
    /// uniformly (Jepsen's partitioner). Absent: isolate one node (5 in
    /// 10), a random split (3 in 10), or one node's outgoing links (2 in 10).
    pub partition_shapes: Option<Vec<PartitionShape>>,
}

impl NetConfig {
    /// Whether anything here is a fault (loss, duplication, reordering or
    /// random partitions, on every link or one); latency and bandwidth are
    /// the network's shape, not faults.
    pub fn has_faults(&self) -> bool {
        let some = |p: Option<f64>| p.is_some_and(|p| p > 0.0);
        self.loss > 0.0
            || self.duplicate > 0.0
            || self.reorder > 0.0
            || self.partitions
            || self.links.values().any(|l| some(l.loss) || some(l.duplicate) || some(l.reorder))
    }
}

/// A shape of random partition (`partition_shapes`), as Jepsen's nemeses
/// name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionShape {
    /// Two halves, at random (sizes differ by at most one).
    Halves,
    /// One random node cut off from all others.
    IsolateOne,
    /// Every node sees a majority (itself and its nearest neighbours on a
    /// shuffled ring), and no two nodes see the same one.
    MajoritiesRing,
    /// Two halves joined by one node that sees both.
    Bridge,
    /// One random node's outgoing links cut; it still hears the others.
    OneWay,
}

/// `datagram_order`: may the exploration strategy deliver the datagrams
/// in flight on one link (IP packets other than TCP: UDP, ICMP, ...) in
/// any order? A real network may reorder them without any fault, and
/// programs that assume it does not are wrong. TCP segments and non-IP
/// frames (ARP) stay first-in first-out per link: reordering them would
/// only exercise the guests' own TCP stacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatagramOrder {
    /// Any order: each datagram in flight is its own delivery action.
    #[default]
    Any,
    /// First-in first-out per link, like every other frame.
    Fifo,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency: Latency::default(),
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Latency::Uniform { min: 100_000, max: 1_000_000 },
            bandwidth: None,
            partitions: false,
            partition_gap: Latency::Uniform { min: 5_000_000_000, max: 20_000_000_000 },
            partition_length: Latency::Uniform { min: 1_000_000_000, max: 10_000_000_000 },
            links: BTreeMap::new(),
            datagram_order: DatagramOrder::Any,
            partition_shapes: None,
        }
    }
}
