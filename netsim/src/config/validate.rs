//! [`NetConfig::validate`]: every value checked against the cluster, and the
//! per-link parameter table resolved from the overrides.

use std::collections::BTreeMap;

use super::error::{ConfigError, ConfigKey, ConfigProblem};
use super::link::{LinkKey, LinkParams};
use super::{NetConfig, PartitionShape};
use crate::addr::NodeId;

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
        if node_count == 0 || node_count > NodeId::MAX {
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
