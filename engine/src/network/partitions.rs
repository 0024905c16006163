//! Random partitions: the timeline of starts and heals, the shapes drawn,
//! and how a partition is described and turned onto a role's node.

use std::time::Duration;

use netsim::{NodeId, Partition, PartitionShape};
use rand_core::RngCore;
use simrng::Rng;

use super::Fault;
use simtime::VirtualTime;

pub(super) struct RandomPartitions {
    pub(super) rng: Rng,
    pub(super) gap: netsim::Latency,
    pub(super) length: netsim::Latency,
    pub(super) shapes: Option<Vec<netsim::PartitionShape>>,
    pub(super) nodes: u16,
    pub(super) time_limit: VirtualTime,
    /// `[faults] partition_target`: each partition is turned onto the node
    /// holding this role when it starts.
    pub(super) target: Option<String>,
}

/// The shortest gap and the shortest length of a random partition.
const MIN_PARTITION_SPAN: Duration = Duration::from_millis(1);

impl RandomPartitions {
    /// Alternating starts and heals from `from` until the time limit: gaps
    /// and lengths of at least [`MIN_PARTITION_SPAN`], so a zero draw cannot
    /// loop forever.
    pub(super) fn timeline(mut self, from: VirtualTime) -> Vec<(VirtualTime, Fault)> {
        let mut faults = Vec::new();
        let mut t = from;
        loop {
            t = t.saturating_add(self.gap.sample(&mut self.rng).max(MIN_PARTITION_SPAN));
            if t >= self.time_limit {
                return faults;
            }
            let len = self.length.sample(&mut self.rng).max(MIN_PARTITION_SPAN);
            let p = random_partition(&mut self.rng, self.nodes, self.shapes.as_deref());
            faults.push((t, Fault::Start(p, self.target.clone())));
            t = t.saturating_add(len);
            faults.push((t, Fault::Heal));
        }
    }
}

/// "{n1} | {n2,n3}" or "{n1} -> {n2,n3} cut".
pub fn describe(p: &Partition) -> String {
    describe_named(p, None)
}

/// [`describe`], with the host client's node (if any) called `host`.
pub(super) fn describe_named(p: &Partition, host: Option<NodeId>) -> String {
    let name = |n: &NodeId| if Some(*n) == host { "host".to_string() } else { n.to_string() };
    let set =
        |s: &std::collections::BTreeSet<NodeId>| format!("{{{}}}", s.iter().map(name).collect::<Vec<_>>().join(","));
    match p {
        Partition::Symmetric { groups } => groups.iter().map(set).collect::<Vec<_>>().join(" | "),
        Partition::OneWay { from, to } => format!("{} -> {} cut (one way)", set(from), set(to)),
        Partition::Links { cut } => {
            let pairs: Vec<String> = cut.iter().map(|(a, b)| format!("{}-{}", name(a), name(b))).collect();
            format!("links {} cut", pairs.join(" "))
        }
    }
}

/// A random partition of `n` nodes: with `shapes`, one of them drawn
/// uniformly ([`shaped_partition`]); without, isolate one node, split in
/// two, or cut one node's outgoing links.
///
/// With a host-side workload `n` counts the host client too (node N+1), so
/// the seed may cut the client off from some or all of the cluster, or
/// split it from the servers it talks to: what a real client sees when its
/// network fails, and the same exposure a guest workload node has.
fn random_partition(rng: &mut Rng, n: u16, shapes: Option<&[PartitionShape]>) -> Partition {
    if let Some(shapes) = shapes.filter(|s| !s.is_empty()) {
        let shape = shapes[(rng.next_u64() % shapes.len() as u64) as usize];
        return shaped_partition(rng, n, shape);
    }
    let node = |i: u16| NodeId::new(i).expect("node ids are 1..=n");
    let pick = 1 + (rng.next_u64() % u64::from(n)) as u16;
    match rng.next_u64() % 10 {
        0..=4 => Partition::isolate(node(pick)),
        5..=7 => {
            let mut a = Vec::new();
            let mut b = Vec::new();
            for i in 1..=n {
                if rng.next_u64().is_multiple_of(2) {
                    a.push(node(i))
                } else {
                    b.push(node(i))
                }
            }
            if a.is_empty() || b.is_empty() {
                Partition::isolate(node(pick))
            } else {
                Partition::symmetric([a, b])
            }
        }
        _ => Partition::one_way([node(pick)], (1..=n).filter(|&i| i != pick).map(node)),
    }
}

/// `p` turned onto node `on`: the node `p` singles out trades places with
/// `on` (every other node keeps its place). The node singled out is the
/// first of the smallest group of a symmetric partition (isolating one node:
/// that node; halves: the smaller half, so `on` ends up split from the
/// majority), the first sender of a one-way cut, and the node with the
/// most cut links of a set of links (ties: the lowest).
pub(crate) fn focus(p: &Partition, on: NodeId) -> Partition {
    use std::collections::BTreeSet;
    let singled = match p {
        Partition::Symmetric { groups } => groups.iter().filter(|g| !g.is_empty()).min_by_key(|g| g.len()),
        Partition::OneWay { from, .. } => Some(from),
        Partition::Links { .. } => None,
    }
    .and_then(|g| g.first().copied())
    .or_else(|| match p {
        Partition::Links { cut } => {
            let mut count = std::collections::BTreeMap::new();
            for n in cut.iter().flat_map(|(a, b)| [*a, *b]) {
                *count.entry(n).or_insert(0u32) += 1;
            }
            // The first of the most counted (a BTreeMap iterates ascending).
            count
                .iter()
                .fold(None, |best: Option<(NodeId, u32)>, (&n, &c)| match best {
                    Some((_, bc)) if bc >= c => best,
                    _ => Some((n, c)),
                })
                .map(|(n, _)| n)
        }
        _ => None,
    });
    let Some(s) = singled.filter(|&s| s != on) else { return p.clone() };
    let swap = |n: NodeId| {
        if n == s {
            on
        } else if n == on {
            s
        } else {
            n
        }
    };
    let set = |g: &BTreeSet<NodeId>| g.iter().map(|&n| swap(n)).collect::<BTreeSet<_>>();
    match p {
        Partition::Symmetric { groups } => Partition::Symmetric { groups: groups.iter().map(set).collect() },
        Partition::OneWay { from, to } => Partition::OneWay { from: set(from), to: set(to) },
        Partition::Links { cut } => Partition::links(cut.iter().map(|&(a, b)| (swap(a), swap(b)))),
    }
}

/// Nodes 1..=n in an order drawn from `rng` (Fisher-Yates).
fn shuffled(rng: &mut Rng, n: u16) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = (1..=n).map(|i| NodeId::new(i).expect("node ids are 1..=n")).collect();
    for i in (1..v.len()).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    v
}

/// A partition of `n` (at least 2) nodes of the given shape, its nodes
/// drawn from `rng`.
pub(super) fn shaped_partition(rng: &mut Rng, n: u16, shape: PartitionShape) -> Partition {
    let order = shuffled(rng, n);
    let half = order.len() / 2;
    match shape {
        PartitionShape::IsolateOne => Partition::isolate(order[0]),
        PartitionShape::OneWay => Partition::one_way([order[0]], order[1..].iter().copied()),
        PartitionShape::Halves => Partition::symmetric([order[..half].to_vec(), order[half..].to_vec()]),
        PartitionShape::Bridge => {
            // order[0] is the bridge; the others split in two halves that
            // each see it and not each other.
            let rest = &order[1..];
            let (a, b) = rest.split_at(rest.len() / 2);
            Partition::links(a.iter().flat_map(|&x| b.iter().map(move |&y| (x, y))))
        }
        PartitionShape::MajoritiesRing => {
            // On the shuffled ring each node keeps the m-1 nearest others
            // (m = a majority), taking them alternately after and before
            // itself; with fewer than 4 nodes every node would keep every
            // other, so no link is cut.
            let len = order.len();
            let keep = len / 2; // m - 1 others, m = len / 2 + 1
            let mut sees = vec![std::collections::BTreeSet::new(); len];
            for (i, s) in sees.iter_mut().enumerate() {
                for k in 0..keep {
                    let step = k / 2 + 1;
                    let j = if k % 2 == 0 { (i + step) % len } else { (i + len - step) % len };
                    s.insert(j);
                }
            }
            let mut cut = Vec::new();
            for i in 0..len {
                for j in i + 1..len {
                    // A link stays when either end keeps the other (links
                    // are symmetric).
                    if !sees[i].contains(&j) && !sees[j].contains(&i) {
                        cut.push((order[i], order[j]));
                    }
                }
            }
            Partition::links(cut)
        }
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
