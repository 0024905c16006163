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
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::addr::{NodeId, MAX_NODES};
use crate::rng;

/// Prefix of every key named in errors.
pub const KEY_PREFIX: &str = "faults.network";

/// A duration string that is not one (each variant carries the string).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A unit other than ns, us/µs, ms or s.
    #[error("unknown duration unit {unit:?} in {text:?} (use ns, us, ms or s)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole string.
        text: String,
    },
    /// No digits, two decimal points, or digits that do not parse.
    #[error("bad duration {0:?}")]
    Malformed(String),
    /// More than `u64::MAX` nanoseconds.
    #[error("duration {0:?} too large")]
    TooLarge(String),
    /// A fraction of a nanosecond (`"1.5ns"`).
    #[error("duration {0:?} is not a whole number of nanoseconds")]
    FractionalNanoseconds(String),
}

/// Parses `"250ns"`, `"10us"`/`"10µs"`, `"1.5ms"`, `"2s"` or a bare integer
/// (nanoseconds) into a span of whole nanoseconds, at most `u64::MAX` of
/// them. Fractions are exact decimal arithmetic; a result that is not a
/// whole number of nanoseconds is an error.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    parse_duration_ns(s).map(Duration::from_nanos)
}

/// [`parse_duration`] in ns, the unit the config's values are kept in.
fn parse_duration_ns(s: &str) -> Result<u64, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (num, unit) = (s[..split].replace('_', ""), s[split..].trim());
    let scale: u128 = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(DurationError::UnknownUnit { unit: unit.to_string(), text: s.to_string() }),
    };
    let malformed = || DurationError::Malformed(s.to_string());
    let too_large = || DurationError::TooLarge(s.to_string());
    let (int, frac) = num.split_once('.').unwrap_or((&num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(malformed());
    }
    let parse = |d: &str| -> Result<u128, DurationError> {
        if d.is_empty() {
            Ok(0)
        } else {
            d.parse::<u128>().map_err(|_| malformed())
        }
    };
    let mut total = parse(int)?.checked_mul(scale).ok_or_else(too_large)?;
    if !frac.is_empty() {
        let den = 10u128.checked_pow(frac.len() as u32).ok_or_else(malformed)?;
        // 38 fraction digits fit a u128, but not times 10^9.
        let f = parse(frac)?.checked_mul(scale).ok_or_else(malformed)?;
        let (whole, rest) = (f / den, f % den);
        if rest > 0 {
            return Err(DurationError::FractionalNanoseconds(s.to_string()));
        }
        total += whole;
    }
    u64::try_from(total).map_err(|_| too_large())
}

/// A duration in nanoseconds as written in TOML: integer ns or a string with unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dur(u64);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor).map(Dur)
    }
}

struct DurVisitor;

impl<'de> Visitor<'de> for DurVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        f.write_str("a duration: integer nanoseconds or a string such as \"100us\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("negative duration {v}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_duration_ns(v).map_err(E::custom)
    }
}

/// One-way latency of a link, sampled per frame copy.
///
/// The parameters stay whole nanoseconds, as parsed and as the validation
/// messages print them; a [`Latency::sample`] is a `Duration`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Latency {
    /// Always this many ns.
    Fixed(u64),
    /// Uniform in `min..=max` ns.
    Uniform {
        /// The shortest, ns.
        min: u64,
        /// The longest, ns.
        max: u64,
    },
    /// `min + Exp(mean - min)`, truncated at `max`: a floor plus a long tail.
    Exponential {
        /// The floor, ns.
        min: u64,
        /// The mean, ns (between `min` and `max`).
        mean: u64,
        /// The truncation point, ns.
        max: u64,
    },
}

impl Default for Latency {
    /// 100 µs: a LAN round trip of a fifth of a millisecond.
    fn default() -> Self {
        Latency::Fixed(100_000)
    }
}

impl Latency {
    /// One sample. `Fixed` consumes no randomness; the others exactly one
    /// `next_u64` (see [`crate::rng`]). The span is the drawn number of ns,
    /// whole: the draws and their order are those of the `u64` it was.
    pub fn sample(&self, rng: &mut dyn rand_core::RngCore) -> Duration {
        Duration::from_nanos(match *self {
            Latency::Fixed(ns) => ns,
            Latency::Uniform { min, max } => rng::uniform_inclusive(rng, min, max),
            Latency::Exponential { min, mean, max } => rng::shifted_exponential(rng, min, mean, max),
        })
    }

    /// Checks the ranges; `key` is this value's key.
    pub fn validate(&self, key: &ConfigKey) -> Result<(), ConfigError> {
        match *self {
            Latency::Fixed(_) => Ok(()),
            Latency::Uniform { min, max } if min > max => Err(ConfigProblem::LatencyRange { min, max }.at(key)),
            Latency::Uniform { .. } => Ok(()),
            Latency::Exponential { min, max, .. } if min > max => Err(ConfigProblem::LatencyRange { min, max }.at(key)),
            Latency::Exponential { min, mean, max } if mean < min || mean > max => {
                Err(ConfigProblem::LatencyMean { min, mean, max }.at(key))
            }
            Latency::Exponential { .. } => Ok(()),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum DistKind {
    Fixed,
    Uniform,
    Exponential,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyTable {
    distribution: Option<DistKind>,
    value: Option<Dur>,
    min: Option<Dur>,
    max: Option<Dur>,
    mean: Option<Dur>,
}

impl LatencyTable {
    fn into_latency<E: de::Error>(self) -> Result<Latency, E> {
        let kind = match self.distribution {
            Some(k) => k,
            None if self.value.is_some() => DistKind::Fixed,
            None if self.mean.is_some() => DistKind::Exponential,
            None => DistKind::Uniform,
        };
        let need = |v: Option<Dur>, name: &str| {
            v.map(|d| d.0).ok_or_else(|| E::custom(format!("latency table is missing `{name}`")))
        };
        let forbid = |v: &Option<Dur>, name: &str, kind: &str| match v {
            Some(_) => Err(E::custom(format!("`{name}` does not apply to a {kind} latency"))),
            None => Ok(()),
        };
        match kind {
            DistKind::Fixed => {
                forbid(&self.min, "min", "fixed")?;
                forbid(&self.max, "max", "fixed")?;
                forbid(&self.mean, "mean", "fixed")?;
                Ok(Latency::Fixed(need(self.value, "value")?))
            }
            DistKind::Uniform => {
                forbid(&self.value, "value", "uniform")?;
                forbid(&self.mean, "mean", "uniform")?;
                Ok(Latency::Uniform { min: need(self.min, "min")?, max: need(self.max, "max")? })
            }
            DistKind::Exponential => {
                forbid(&self.value, "value", "exponential")?;
                Ok(Latency::Exponential {
                    min: self.min.map_or(0, |d| d.0),
                    mean: need(self.mean, "mean")?,
                    max: self.max.map_or(u64::MAX, |d| d.0),
                })
            }
        }
    }
}

impl<'de> Deserialize<'de> for Latency {
    /// Accepts `100000`, `"100us"`, `{ min = .., max = .. }`,
    /// `{ value = .. }`, `{ distribution = "exponential", min, mean, max }`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Latency;
            fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                f.write_str("a latency: nanoseconds, a duration string, or a table with min/max/mean/value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Latency, E> {
                DurVisitor.visit_u64(v).map(Latency::Fixed)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Latency, E> {
                DurVisitor.visit_i64(v).map(Latency::Fixed)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Latency, E> {
                DurVisitor.visit_str(v).map(Latency::Fixed)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Latency, A::Error> {
                LatencyTable::deserialize(de::value::MapAccessDeserializer::new(map))?.into_latency()
            }
        }
        d.deserialize_any(V)
    }
}

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

/// A value in `[faults.network]` that cannot be used: which key, and what
/// is wrong with it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct ConfigError {
    /// The key the problem is at.
    pub key: ConfigKey,
    /// What is wrong there.
    pub problem: ConfigProblem,
}

/// A key below `[faults.network]`, segment by segment (`links`, `"1-2"`,
/// `loss`). It displays in dotted TOML form from the top of cluster.toml,
/// `faults.network.links."1-2".loss`: a segment is bare when it is an
/// identifier (see `is_identifier`), else a quoted string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigKey(Vec<String>);

impl ConfigKey {
    /// `[faults.network]` itself.
    pub fn root() -> ConfigKey {
        ConfigKey(Vec::new())
    }

    /// This key, then `segment`.
    pub fn then(&self, segment: impl Into<String>) -> ConfigKey {
        let mut k = self.clone();
        k.0.push(segment.into());
        k
    }

    /// The segments below `[faults.network]`.
    pub fn segments(&self) -> &[String] {
        &self.0
    }
}

impl std::fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(KEY_PREFIX)?;
        for seg in &self.0 {
            write!(f, ".{}", TomlKey(seg))?;
        }
        Ok(())
    }
}

/// One key segment as TOML writes it in messages: bare when it is an
/// identifier (an ASCII letter or '_', then letters, digits and '_'; TOML
/// allows more bare, `1-2`, but a link's name reads as one name when
/// quoted), else a basic string with TOML's escapes. simcluster's
/// cluster.toml messages write their keys with it too.
pub struct TomlKey<'a>(pub &'a str);

impl std::fmt::Display for TomlKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = self.0;
        if k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return f.write_str(k);
        }
        f.write_str("\"")?;
        for c in k.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\t' => f.write_str("\\t")?,
                c if c.is_control() => write!(f, "\\u{:04X}", u32::from(c))?,
                c => write!(f, "{c}")?,
            }
        }
        f.write_str("\"")
    }
}

/// What is wrong with a value of `[faults.network]`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigProblem {
    /// A probability outside [0, 1].
    #[error("probability {value} is outside [0, 1]")]
    Probability {
        /// The value given.
        value: f64,
    },
    /// A latency whose `min` is above its `max`.
    #[error("min {min} ns is greater than max {max} ns")]
    LatencyRange {
        /// The `min` given, ns.
        min: u64,
        /// The `max` given, ns.
        max: u64,
    },
    /// An exponential latency whose `mean` is outside `min..=max`.
    #[error("mean {mean} ns must lie within min {min} ns and max {max} ns")]
    LatencyMean {
        /// The `min` given, ns.
        min: u64,
        /// The `mean` given, ns.
        mean: u64,
        /// The `max` given, ns.
        max: u64,
    },
    /// A bandwidth of 0 bytes/s.
    #[error("bandwidth must be at least 1 byte/s")]
    ZeroBandwidth,
    /// A `links` key that is not `"a-b"` or `"a->b"`.
    #[error("expected a link such as \"1-2\", \"n1-n2\" or \"1->2\"")]
    BadLinkKey,
    /// A `links` key naming a node past the cluster's last.
    #[error("node {node} does not exist (the cluster has {node_count} nodes)")]
    UnknownNode {
        /// The node named.
        node: u64,
        /// How many nodes the cluster has.
        node_count: u16,
    },
    /// A `links` key from a node to itself.
    #[error("a link needs two different nodes")]
    SelfLink,
    /// Two `links` keys for one link (e.g. `"1-2"` and `"n2-n1"`).
    #[error("names the same link as {other}")]
    DuplicateLink {
        /// The other key naming the link.
        other: ConfigKey,
    },
    /// A cluster with no nodes or more than netsim can address.
    #[error("node count {node_count} is outside 1..={max}", max = MAX_NODES)]
    NodeCount {
        /// The count given.
        node_count: u16,
    },
    /// `partition_shapes` given as an empty list.
    #[error("name at least one shape (halves, isolate-one, majorities-ring, bridge, one-way)")]
    NoShapes,
    /// A partition shape the cluster has too few nodes for.
    #[error("{shape:?} needs at least {least} nodes; the cluster has {node_count}")]
    ShapeTooSmall {
        /// The shape.
        shape: PartitionShape,
        /// The fewest nodes it needs.
        least: u16,
        /// How many nodes the cluster has.
        node_count: u16,
    },
}

impl ConfigProblem {
    /// This problem at `key`.
    pub fn at(self, key: &ConfigKey) -> ConfigError {
        ConfigError { key: key.clone(), problem: self }
    }
}

/// A parsed `links` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkKey {
    /// The first node named (the sender, when directed).
    pub a: NodeId,
    /// The second node named (the receiver, when directed).
    pub b: NodeId,
    /// `true` for `"a->b"` (only a to b), `false` for `"a-b"` (both ways).
    pub directed: bool,
}

impl LinkKey {
    /// Parses `"1-2"`, `"n1-n2"`, `"1->2"`, `"n1->n2"` (spaces allowed) for a
    /// cluster of `node_count` nodes. `key` is its key, for errors.
    pub fn parse(s: &str, node_count: u16, key: &ConfigKey) -> Result<LinkKey, ConfigError> {
        let bad = || ConfigProblem::BadLinkKey.at(key);
        let (l, r, directed) = match s.split_once("->") {
            Some((l, r)) => (l, r, true),
            None => {
                let (l, r) = s.split_once('-').ok_or_else(bad)?;
                (l, r, false)
            }
        };
        let node = |t: &str| -> Result<NodeId, ConfigError> {
            let t = t.trim();
            let t = t.strip_prefix('n').unwrap_or(t);
            if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let n: u64 = t.parse().map_err(|_| bad())?;
            if n == 0 || n > node_count as u64 {
                return Err(ConfigProblem::UnknownNode { node: n, node_count }.at(key));
            }
            Ok(NodeId::new(n as u16).expect("checked range"))
        };
        let (a, b) = (node(l)?, node(r)?);
        if a == b {
            return Err(ConfigProblem::SelfLink.at(key));
        }
        Ok(LinkKey { a, b, directed })
    }
}

/// Resolved parameters of one directed link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkParams {
    /// One-way delay per frame copy.
    pub latency: Latency,
    /// Probability a frame copy is lost.
    pub loss: f64,
    /// Probability a delivered frame is delivered twice.
    pub duplicate: f64,
    /// Probability a frame copy is held back so that later ones overtake it.
    pub reorder: f64,
    /// Bytes per second; `None` is infinitely fast.
    pub bandwidth: Option<u64>,
}

fn check_p(key: ConfigKey, value: f64) -> Result<(), ConfigError> {
    // Written so that NaN fails too.
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigProblem::Probability { value }.at(&key))
    }
}

fn check_bw(key: ConfigKey, bw: Option<u64>) -> Result<(), ConfigError> {
    match bw {
        Some(0) => Err(ConfigProblem::ZeroBandwidth.at(&key)),
        _ => Ok(()),
    }
}

impl NetConfig {
    /// Checks every value for a cluster of `node_count` nodes; the first
    /// problem found (in key order) is returned.
    pub fn validate(&self, node_count: u16) -> Result<(), ConfigError> {
        if self.partition_shapes.as_ref().is_some_and(|s| s.is_empty()) {
            return Err(ConfigProblem::NoShapes.at(&ConfigKey::root().then("partition_shapes")));
        }
        for shape in self.partition_shapes.iter().flatten() {
            let least = match shape {
                PartitionShape::MajoritiesRing => 4,
                PartitionShape::Bridge => 3,
                _ => 2,
            };
            if node_count < least {
                let problem = ConfigProblem::ShapeTooSmall { shape: *shape, least, node_count };
                return Err(problem.at(&ConfigKey::root().then("partition_shapes")));
            }
        }
        self.link_params(node_count).map(|_| ())
    }

    /// Validates and resolves the dense `node_count x node_count` table of
    /// directed link parameters, row-major by `(from.index(), to.index())`.
    /// Precedence: network-wide values, then two-way overrides, then one-way
    /// overrides. Two keys naming the same link with the same directedness
    /// (`"1-2"` and `"2-1"`) are an error rather than a silent order rule.
    pub fn link_params(&self, node_count: u16) -> Result<Vec<LinkParams>, ConfigError> {
        let k = |name: &str| ConfigKey::root().then(name);
        if node_count == 0 || node_count > MAX_NODES {
            return Err(ConfigProblem::NodeCount { node_count }.at(&ConfigKey::root()));
        }
        self.latency.validate(&k("latency"))?;
        check_p(k("loss"), self.loss)?;
        check_p(k("duplicate"), self.duplicate)?;
        check_p(k("reorder"), self.reorder)?;
        self.reorder_delay.validate(&k("reorder_delay"))?;
        self.partition_gap.validate(&k("partition_gap"))?;
        self.partition_length.validate(&k("partition_length"))?;
        check_bw(k("bandwidth"), self.bandwidth)?;

        let base = LinkParams {
            latency: self.latency,
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            bandwidth: self.bandwidth,
        };
        let n = node_count as usize;
        let mut table = vec![base; n * n];
        // (directed, from, to) -> key that set it, to reject duplicates.
        let mut seen: BTreeMap<(bool, NodeId, NodeId), ConfigKey> = BTreeMap::new();
        let mut parsed = Vec::with_capacity(self.links.len());
        for (name, ov) in &self.links {
            let key = ConfigKey::root().then("links").then(name.as_str());
            let link = LinkKey::parse(name, node_count, &key)?;
            let (lo, hi) = if link.directed || link.a < link.b { (link.a, link.b) } else { (link.b, link.a) };
            if let Some(other) = seen.insert((link.directed, lo, hi), key.clone()) {
                return Err(ConfigProblem::DuplicateLink { other }.at(&key));
            }
            if let Some(l) = &ov.latency {
                l.validate(&key.then("latency"))?;
            }
            for (field, v) in [("loss", ov.loss), ("duplicate", ov.duplicate), ("reorder", ov.reorder)] {
                if let Some(v) = v {
                    check_p(key.then(field), v)?;
                }
            }
            check_bw(key.then("bandwidth"), ov.bandwidth)?;
            parsed.push((link, ov));
        }
        // Two-way first, so one-way overrides win.
        parsed.sort_by_key(|(l, _)| l.directed);
        for (link, ov) in parsed {
            let mut dirs = vec![(link.a, link.b)];
            if !link.directed {
                dirs.push((link.b, link.a));
            }
            for (from, to) in dirs {
                let p = &mut table[from.index() * n + to.index()];
                if let Some(l) = &ov.latency {
                    p.latency = *l;
                }
                p.loss = ov.loss.unwrap_or(p.loss);
                p.duplicate = ov.duplicate.unwrap_or(p.duplicate);
                p.reorder = ov.reorder.unwrap_or(p.reorder);
                if ov.bandwidth.is_some() {
                    p.bandwidth = ov.bandwidth;
                }
            }
        }
        Ok(table)
    }
}
