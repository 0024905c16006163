//! One link: its `links` key (`"1-2"`, `"1->2"`) and its resolved parameters.

use super::error::{ConfigError, ConfigKey, ConfigProblem};
use super::latency::Latency;
use crate::addr::NodeId;

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
