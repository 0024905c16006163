//! The network's faults: `[faults.network]` (netsim's `NetConfig`, which
//! checks itself) and partitions at fixed times (`[[faults.partition]]`).

use engine::ScheduledPartition;
use serde::Deserialize;
use simtime::VirtualTime;

use super::values::{duration, no_such_node};
use super::{parse_node_name, Invalid, KeyPath};

/// `[[faults.partition]]`: either `groups` (symmetric) or `from`/`to`
/// (frames from `from` to `to` are cut, the other direction passes).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSection {
    /// Virtual time the partition starts, counted from boot (`"5s"`).
    pub at: String,
    /// Virtual time it heals, after `at` (the quiet period heals it
    /// earlier).
    pub heal: String,
    /// A symmetric partition: nodes in different groups cannot reach each
    /// other; `"host"` names the host client, which otherwise sides with
    /// the unnamed nodes.
    #[serde(default)]
    pub groups: Vec<Vec<String>>,
    /// A one-way partition: frames from these nodes to `to` are cut.
    #[serde(default)]
    pub from: Vec<String>,
    /// The other side of a one-way partition.
    #[serde(default)]
    pub to: Vec<String>,
    /// Isolate the node holding this role (`[roles]`) when the partition
    /// starts (none holds it: the partition does not start).
    pub isolate: Option<String>,
}

/// `[faults.network]` (checked by netsim) and `[[faults.partition]]`, for a
/// cluster of `n` guests, and the host client when `has_host`.
pub(super) fn partitions(
    network: &engine::NetConfig,
    partitions: &[PartitionSection],
    n: u16,
    has_host: bool,
) -> Result<Vec<ScheduledPartition>, Invalid> {
    network.validate(n).map_err(|e| {
        let at = e.key.segments().iter().fold(KeyPath::table("faults.network"), |at, seg| at.key(seg.as_str()));
        at.invalid(format!(": {}", e.problem))
    })?;
    partitions
        .iter()
        .enumerate()
        .map(|(k, p)| p.check(&KeyPath::array("faults.partition").nth(k), n, has_host))
        .collect()
}

impl PartitionSection {
    /// This partition, the one at `at`.
    fn check(&self, at: &KeyPath, n: u16, has_host: bool) -> Result<ScheduledPartition, Invalid> {
        let p = self;
        let (start, heal) = (duration(&at.key("at"), &p.at)?, duration(&at.key("heal"), &p.heal)?);
        if heal <= start {
            return Err(at.key("heal").invalid(format!(" = {:?} must come after at = {:?}", p.heal, p.at)));
        }
        // With a host workload "host" names the host client (node N+1).
        let nodes_of = |key: KeyPath, names: &[String]| -> Result<Vec<engine::NodeId>, Invalid> {
            names
                .iter()
                .enumerate()
                .map(|(k, name)| {
                    let i = if has_host && name == "host" { Some(usize::from(n)) } else { parse_node_name(name, n) };
                    let also = if has_host { ", and host" } else { "" };
                    i.map(engine::NodeId::at).ok_or_else(|| key.nth(k).invalid(no_such_node(name, n, also)))
                })
                .collect()
        };
        let partition =
            match (p.groups.is_empty(), p.from.is_empty() && p.to.is_empty()) {
                // The role's holder takes n1's place when the partition starts.
                (true, true) if p.isolate.is_some() => engine::Partition::isolate(engine::NodeId::at(0)),
                _ if p.isolate.is_some() => {
                    return Err(at
                        .key("isolate")
                        .invalid(": isolates the node holding a role; give it alone, without groups, from or to"))
                }
                (false, true) => {
                    let groups = p
                        .groups
                        .iter()
                        .enumerate()
                        .map(|(k, g)| nodes_of(at.key("groups").nth(k), g))
                        .collect::<Result<Vec<_>, _>>()?;
                    engine::Partition::symmetric(groups)
                }
                (true, false) if !p.from.is_empty() && !p.to.is_empty() => {
                    engine::Partition::one_way(nodes_of(at.key("from"), &p.from)?, nodes_of(at.key("to"), &p.to)?)
                }
                _ => return Err(at.invalid(
                    ": give either groups = [[...], [...]], both from = [...] and to = [...], or isolate = \"ROLE\"",
                )),
            };
        partition.validate(n + u16::from(has_host)).map_err(|e| at.invalid(format!(": {e}")))?;
        Ok(ScheduledPartition {
            at: VirtualTime::from_ns(start),
            heal: VirtualTime::from_ns(heal),
            partition,
            role: p.isolate.clone(),
        })
    }
}
