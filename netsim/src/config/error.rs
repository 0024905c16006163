//! What is wrong with `[faults.network]`, and at which dotted TOML key.

use super::PartitionShape;
use super::KEY_PREFIX;
use crate::addr::NodeId;

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
    #[error("node count {node_count} is outside 1..={max}", max = NodeId::MAX)]
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
