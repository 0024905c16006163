//! The engine's view of the simulated network: netsim's pending deliveries
//! and the partition timeline are engine actions, chosen at their virtual
//! times like node runs.

use std::time::Duration;

use netsim::{Capture, Delivery, DeliveryId, NetConfig, Network, NodeId, Partition, PartitionShape};
use rand_core::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use vmm::runtime::TxFrame;

use crate::frames::summarize;
use crate::time::VirtualTime;
use crate::trace::{DropCause, EventKind, Trace};
use simrng::streams::{NETWORK as LATENCY_STREAM, PARTITIONS as PARTITION_STREAM};

/// A partition at fixed virtual times (from cluster.toml).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledPartition {
    /// When it starts.
    pub at: VirtualTime,
    /// When it heals.
    pub heal: VirtualTime,
    /// Which links it cuts.
    pub partition: Partition,
    /// `isolate = ROLE`: when it starts, the node holding this role takes
    /// the place of the node `partition` singles out ([`focus`]); with no
    /// such node it does not start.
    pub role: Option<String>,
}

/// What the network of an execution looks like.
#[derive(Debug, Clone)]
pub struct NetworkSpec {
    /// netsim's link behaviour and random partitions (`[faults.network]`).
    pub config: NetConfig,
    /// Partitions at fixed times.
    pub scheduled: Vec<ScheduledPartition>,
    /// Capture the traffic as pcap, per node and whole network, in memory:
    /// the result's `pcaps`, for the caller to write where it keeps them
    /// (once, to their final place).
    pub capture: bool,
}

#[derive(Debug, Clone)]
enum Fault {
    /// A partition starts; with a role, turned onto the node holding it
    /// when it does ([`focus`]).
    Start(Partition, Option<String>),
    Heal,
}

/// A frame in flight the strategy may deliver now
/// ([`NetState::deliveries_until`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DueDelivery {
    /// Which copy of the frame.
    pub id: DeliveryId,
    /// Its receiver.
    pub to: NodeId,
    /// Its sender.
    pub from: NodeId,
    /// When it is offered: its own due time, or for a datagram offered
    /// ahead of older frames on its link, the link head's.
    pub due: VirtualTime,
    /// Its place behind its link's oldest frame: 0 for the head, k for
    /// the k-th datagram offered behind it. It tells apart deliveries that
    /// are otherwise alike in decisions.
    pub behind: u16,
}

pub(super) struct NetState {
    pub net: Network,
    rng: Xoshiro256PlusPlus,
    capture: Option<Capture<Vec<u8>>>,
    /// (time, fault), sorted by time; `next_fault` indexes the first not applied.
    faults: Vec<(VirtualTime, Fault)>,
    next_fault: usize,
    /// Partition starts the timeline reached so far.
    starts: u32,
    /// Ids for frames that were lost (they have no delivery id); the top bit
    /// keeps them apart from netsim's.
    lost_ids: u64,
    /// The host client's node, named `host` in partition descriptions.
    host: Option<NodeId>,
    /// Datagrams in flight on a link may be delivered in any order.
    any_datagram_order: bool,
    /// Random partitions not yet placed on the timeline (`[faults]
    /// start_after`): they start once [`NetState::start_random_partitions`]
    /// says when.
    deferred: Option<RandomPartitions>,
}

/// What it takes to draw the random partition timeline from some moment on.
struct RandomPartitions {
    rng: Xoshiro256PlusPlus,
    gap: netsim::Latency,
    length: netsim::Latency,
    shapes: Option<Vec<netsim::PartitionShape>>,
    nodes: u16,
    time_limit: VirtualTime,
    /// `[faults] partition_target`: each partition is turned onto the node
    /// holding this role when it starts.
    target: Option<String>,
}

/// The shortest gap and the shortest length of a random partition.
const MIN_PARTITION_SPAN: Duration = Duration::from_millis(1);

impl RandomPartitions {
    /// Alternating starts and heals from `from` until the time limit: gaps
    /// and lengths of at least [`MIN_PARTITION_SPAN`], so a zero draw cannot
    /// loop forever.
    fn timeline(mut self, from: VirtualTime) -> Vec<(VirtualTime, Fault)> {
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
fn describe_named(p: &Partition, host: Option<NodeId>) -> String {
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
fn random_partition(rng: &mut Xoshiro256PlusPlus, n: u16, shapes: Option<&[PartitionShape]>) -> Partition {
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
fn shuffled(rng: &mut Xoshiro256PlusPlus, n: u16) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = (1..=n).map(|i| NodeId::new(i).expect("node ids are 1..=n")).collect();
    for i in (1..v.len()).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    v
}

/// A partition of `n` (at least 2) nodes of the given shape, its nodes
/// drawn from `rng`.
pub(super) fn shaped_partition(rng: &mut Xoshiro256PlusPlus, n: u16, shape: PartitionShape) -> Partition {
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

impl NetState {
    /// A network of `nodes` nodes; `host` is the host-side client's node
    /// (the last one) when the workload runs on the host: it takes part in
    /// random partitions like any node, and its capture is `host.pcap`.
    ///
    /// Random partitions start at virtual time 0, or with `defer_random`
    /// when [`Self::start_random_partitions`] is called; with `target`,
    /// each is turned onto the node holding that role when it starts.
    pub fn new(
        spec: &NetworkSpec,
        nodes: u16,
        host: Option<NodeId>,
        seed: u64,
        time_limit: VirtualTime,
        defer_random: bool,
        target: Option<String>,
    ) -> std::io::Result<NetState> {
        let net = Network::new(&spec.config, nodes).map_err(|e| std::io::Error::other(e.to_string()))?;
        // Separate streams: a change in how many frames a guest sends must
        // not shift the partition timeline.
        let rng = simrng::stream(seed, LATENCY_STREAM);
        let mut faults = Vec::new();
        for s in &spec.scheduled {
            faults.push((s.at, Fault::Start(s.partition.clone(), s.role.clone())));
            faults.push((s.heal, Fault::Heal));
        }
        let mut deferred = (spec.config.partitions && nodes > 1).then(|| RandomPartitions {
            rng: simrng::stream(seed, PARTITION_STREAM),
            gap: spec.config.partition_gap,
            length: spec.config.partition_length,
            shapes: spec.config.partition_shapes.clone(),
            nodes,
            time_limit,
            target,
        });
        if !defer_random {
            faults.extend(deferred.take().map(|r| r.timeline(VirtualTime::ZERO)).unwrap_or_default());
        }
        // Stable sort: a heal and a start at the same instant keep their order.
        faults.sort_by_key(|(t, _)| *t);
        let capture = spec.capture.then(|| new_capture(nodes));
        let any_datagram_order = spec.config.datagram_order == netsim::DatagramOrder::Any;
        Ok(NetState {
            net,
            rng,
            capture,
            faults,
            next_fault: 0,
            starts: 0,
            lost_ids: 0,
            host,
            any_datagram_order,
            deferred,
        })
    }

    /// Deferred random partitions begin: their timeline is drawn from `at`
    /// on and merged behind the faults still to come. Once only.
    pub fn start_random_partitions(&mut self, at: VirtualTime) {
        let Some(random) = self.deferred.take() else { return };
        let mut rest = self.faults.split_off(self.next_fault);
        rest.extend(random.timeline(at));
        // Stable: a heal and a start at the same instant keep their order.
        rest.sort_by_key(|(t, _)| *t);
        self.faults.extend(rest);
    }

    /// The earliest pending network event (delivery or fault).
    pub fn next_time(&self) -> Option<VirtualTime> {
        let d = self.net.next_delivery_time();
        let f = self.faults.get(self.next_fault).map(|(t, _)| *t);
        match (d, f) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Deliveries due by `horizon` that may go next, (id, to, from, due
    /// time), in netsim's order:
    /// - per directed link the oldest frame (its head), so TCP segments and
    ///   other non-datagrams stay first-in first-out per link;
    /// - with `datagram_order = "any"`, once a link's head is due, every
    ///   other datagram in flight on that link too, due at the head's time:
    ///   choosing one delivers it ahead of the frames sent before it, as a
    ///   network that reorders datagrams would. Each is its own action, so
    ///   every strategy sees the order of datagrams as a choice.
    ///
    /// Each carries its place behind its link's head
    /// ([`DueDelivery::behind`]).
    pub fn deliveries_until(&self, horizon: VirtualTime) -> Vec<DueDelivery> {
        // Per link: (head's due time, datagrams offered behind it), `None`
        // for a link whose head is not due.
        let mut heads: std::collections::BTreeMap<(NodeId, NodeId), Option<(VirtualTime, u16)>> =
            std::collections::BTreeMap::new();
        let mut out = Vec::new();
        for d in self.net.pending() {
            let link = (d.from, d.to);
            match heads.get_mut(&link) {
                None if d.time <= horizon => {
                    heads.insert(link, Some((d.time, 0)));
                    out.push(DueDelivery { id: d.id, to: d.to, from: d.from, due: d.time, behind: 0 });
                }
                None => {
                    // Not due: nothing behind it on this link is either.
                    heads.insert(link, None);
                }
                Some(Some((head, behind))) if self.any_datagram_order && netsim::frame::is_datagram(&d.frame) => {
                    *behind = behind.saturating_add(1);
                    out.push(DueDelivery { id: d.id, to: d.to, from: d.from, due: *head, behind: *behind });
                }
                Some(_) => {}
            }
            if !self.any_datagram_order && d.time > horizon {
                // FIFO only: netsim's order is by time, nothing later is due.
                break;
            }
        }
        out
    }

    /// The next fault of the timeline: (due time, is it a heal).
    pub fn next_fault(&self) -> Option<(VirtualTime, bool)> {
        self.faults.get(self.next_fault).map(|(t, f)| (*t, matches!(f, Fault::Heal)))
    }

    /// Has `node` frames in flight (sent, not yet delivered)?
    pub fn has_in_flight_from(&self, node: NodeId) -> bool {
        self.net.pending().any(|d| d.from == node)
    }

    /// Warm start: the boot is over and the execution's own streams begin
    /// (see `Execution::end_boot`). Latencies, loss, duplication and
    /// reordering draw from `seed` from now on, and so do the deferred
    /// random partitions, whose timeline starts at `now` when
    /// `start_random` (else when `[faults] start_after` is reached).
    pub fn reseed(&mut self, seed: u64, now: VirtualTime, start_random: bool) {
        self.rng = simrng::stream(seed, LATENCY_STREAM);
        if let Some(r) = self.deferred.as_mut() {
            r.rng = simrng::stream(seed, PARTITION_STREAM);
        }
        if start_random {
            self.start_random_partitions(now);
        }
    }

    /// The fault-free continuation of a critical-transition probe: a fresh
    /// stream for latencies, no more loss, duplication or reordering, and
    /// no partition after the current one heals.
    pub fn calm(&mut self, seed: u64) {
        self.rng = simrng::stream(seed, LATENCY_STREAM);
        self.quiet();
    }

    /// The quiet period: no more loss, duplication or reordering, the
    /// current partition heals now and no later one starts. Latencies keep
    /// their stream, so the draws before and after stay in order.
    pub fn quiet(&mut self) {
        self.net.stop_faults();
        let keep_heal = self.net.current_partition().is_some();
        self.faults.truncate(self.next_fault);
        if keep_heal {
            self.faults.push((VirtualTime::ZERO, Fault::Heal));
        }
    }

    /// The role the next fault of the timeline targets, if it does.
    pub fn next_role(&self) -> Option<&str> {
        match self.faults.get(self.next_fault) {
            Some((_, Fault::Start(_, role))) => role.as_deref(),
            _ => None,
        }
    }

    /// Applies the next fault of the timeline; `holder` is the node holding
    /// the role it targets ([`Self::next_role`]), if any. A partition start
    /// whose number (1-based) is in `skip` is noted, not started
    /// (`ExploreSpec::skip_partitions`).
    pub fn apply_fault(
        &mut self,
        trace: &mut Trace,
        now: VirtualTime,
        holder: Option<NodeId>,
        skip: &std::collections::BTreeSet<u32>,
    ) {
        let (_, fault) = self.faults[self.next_fault].clone();
        self.next_fault += 1;
        match fault {
            Fault::Start(p, _) if skip.contains(&(self.starts + 1)) => {
                self.starts += 1;
                let text = format!(
                    "partition {} {} not started: removed by shrink",
                    self.starts,
                    describe_named(&p, self.host)
                );
                trace.push_engine(now, EventKind::Note { text });
            }
            Fault::Start(p, role) => {
                self.starts += 1;
                let (p, targeted) = match (role, holder) {
                    (None, _) => (p, String::new()),
                    (Some(role), None) => {
                        let text = format!(
                            "partition {} not started: no node holds role {role}",
                            describe_named(&p, self.host)
                        );
                        trace.push_engine(now, EventKind::Note { text });
                        return;
                    }
                    (Some(role), Some(h)) => (focus(&p, h), format!("; role {role}: {h}")),
                };
                let description = format!("{}{targeted}", describe_named(&p, self.host));
                let dropped = self.net.partition(p).unwrap_or(0);
                let text =
                    if dropped > 0 { format!("{description} ({dropped} frames in flight lost)") } else { description };
                trace.push_engine(now, EventKind::Partition { description: text });
            }
            Fault::Heal => {
                if self.net.current_partition().is_some() {
                    self.net.heal();
                    trace.push_engine(now, EventKind::Heal);
                }
            }
        }
    }

    pub fn take(&mut self, id: DeliveryId) -> Option<Delivery> {
        let d = self.net.take(id)?;
        if let Some(c) = &mut self.capture {
            let _ = c.on_deliver(&d);
        }
        Some(d)
    }

    /// Hands a node's transmitted frames to netsim and records what became
    /// of each copy.
    pub fn transmit(&mut self, from: NodeId, frames: Vec<TxFrame>, trace: &mut Trace) {
        for f in frames {
            self.send_frame(from, f.time, &f.bytes, trace);
        }
    }

    /// Like [`NetState::transmit`] for frames that carry no time of their
    /// own (the host client's): all were sent at `now`.
    pub fn transmit_frames(&mut self, from: NodeId, now: VirtualTime, frames: Vec<Vec<u8>>, trace: &mut Trace) {
        for f in frames {
            self.send_frame(from, now, &f, trace);
        }
    }

    fn send_frame(&mut self, from: NodeId, time: VirtualTime, bytes: &[u8], trace: &mut Trace) {
        if let Some(c) = &mut self.capture {
            let _ = c.on_send(time, from, bytes);
        }
        let summary = summarize(bytes);
        let outcome = self.net.send(time, from, bytes, &mut self.rng);
        let len = bytes.len() as u32;
        for d in outcome.copies() {
            trace.push(time, from, EventKind::Send { id: d.id.0, to: d.to.number(), len, summary: summary.clone() });
        }
        // The links that lost the frame get an id of their own (they have
        // no delivery id), after every scheduled copy.
        for (to, why) in outcome.drops() {
            self.lost_ids += 1;
            let id = (1 << 63) | self.lost_ids;
            let cause = match why {
                netsim::LinkDrop::Partition => DropCause::Partition,
                netsim::LinkDrop::Loss => DropCause::Loss,
            };
            trace.push(time, from, EventKind::Send { id, to: to.number(), len, summary: summary.clone() });
            trace.push(time, from, EventKind::Drop { id, to: to.number(), cause });
        }
    }

    /// Frames in flight to a node that is gone are lost.
    pub fn node_down(&mut self, node: NodeId) {
        self.net.discard_to(node);
    }

    /// netsim's counters.
    pub fn finish(&self) -> netsim::NetStats {
        *self.net.stats()
    }

    /// The captures (see [`NetworkSpec::capture`]), by file name: `n1.pcap`
    /// .. `nN.pcap`, `host.pcap` for the host client, `network.pcap`.
    pub fn take_pcaps(&mut self) -> Vec<(String, Vec<u8>)> {
        let Some(c) = self.capture.take() else { return Vec::new() };
        let (nodes, all) = c.into_parts();
        let mut out: Vec<(String, Vec<u8>)> = nodes
            .into_iter()
            .map(|(n, bytes)| (if Some(n) == self.host { "host.pcap".to_string() } else { format!("{n}.pcap") }, bytes))
            .collect();
        out.extend(all.map(|bytes| ("network.pcap".to_string(), bytes)));
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// A capture of every node and the whole network, in memory.
fn new_capture(nodes: u16) -> Capture<Vec<u8>> {
    let mut c = Capture::new();
    for n in NodeId::all(nodes) {
        c.add_node(n, Vec::new()).expect("a Vec takes the header");
    }
    c.set_network(Vec::new()).expect("a Vec takes the header");
    c
}

#[cfg(test)]
mod shape_tests {
    use super::*;
    use rand_core::SeedableRng;
    use std::collections::BTreeSet;

    /// Who `i` can talk to under `p` (itself included), both ways.
    fn sees(p: &Partition, n: u16, i: u16) -> BTreeSet<u16> {
        let id = |k: u16| NodeId::new(k).unwrap();
        (1..=n).filter(|&j| j == i || (!p.blocks(id(i), id(j)) && !p.blocks(id(j), id(i)))).collect()
    }

    fn draw(shape: PartitionShape, n: u16, seed: u64) -> Partition {
        shaped_partition(&mut Xoshiro256PlusPlus::seed_from_u64(seed), n, shape)
    }

    #[test]
    fn majorities_ring_every_node_sees_a_majority_and_no_two_the_same() {
        for n in [4u16, 5, 6, 7, 9] {
            for seed in 0..20 {
                let p = draw(PartitionShape::MajoritiesRing, n, seed);
                let views: Vec<BTreeSet<u16>> = (1..=n).map(|i| sees(&p, n, i)).collect();
                for (i, v) in views.iter().enumerate() {
                    assert!(v.len() > usize::from(n) / 2, "n={n}: node {} sees {v:?}", i + 1);
                    assert!(v.len() < usize::from(n), "n={n}: node {} sees everyone", i + 1);
                }
                let distinct: BTreeSet<&BTreeSet<u16>> = views.iter().collect();
                assert_eq!(distinct.len(), views.len(), "n={n}: two nodes see the same majority");
            }
        }
    }

    #[test]
    fn bridge_joins_two_halves_through_one_node() {
        for n in [3u16, 5, 6] {
            let p = draw(PartitionShape::Bridge, n, 4);
            let views: Vec<BTreeSet<u16>> = (1..=n).map(|i| sees(&p, n, i)).collect();
            let bridges: Vec<usize> = (0..views.len()).filter(|&i| views[i].len() == usize::from(n)).collect();
            assert_eq!(bridges.len(), 1, "n={n}: one node sees everyone: {views:?}");
            assert!(views.iter().all(|v| v.len() > 1), "nobody is alone");
        }
    }

    #[test]
    fn halves_isolate_one_and_one_way() {
        let n = 5;
        let p = draw(PartitionShape::Halves, n, 1);
        let sizes: BTreeSet<usize> = (1..=n).map(|i| sees(&p, n, i).len()).collect();
        assert_eq!(sizes, BTreeSet::from([2, 3]));
        let p = draw(PartitionShape::IsolateOne, n, 1);
        assert_eq!((1..=n).filter(|&i| sees(&p, n, i).len() == 1).count(), 1);
        let Partition::OneWay { from, to } = draw(PartitionShape::OneWay, n, 1) else { panic!("one way") };
        assert_eq!((from.len(), to.len()), (1, 4));
    }

    #[test]
    fn focus_puts_the_role_holder_where_the_partition_singles_out_a_node() {
        let id = |k: u16| NodeId::new(k).unwrap();
        let set = |v: &[u16]| v.iter().map(|&k| id(k)).collect::<BTreeSet<_>>();
        // Isolating n1 becomes isolating n3; a node already singled out stays.
        assert_eq!(focus(&Partition::isolate(id(1)), id(3)), Partition::isolate(id(3)));
        assert_eq!(focus(&Partition::isolate(id(3)), id(3)), Partition::isolate(id(3)));
        // Halves: the holder lands in the smaller half (split from the majority).
        let halves = Partition::symmetric([vec![id(1), id(2)], vec![id(3), id(4), id(5)]]);
        let Partition::Symmetric { groups } = focus(&halves, id(4)) else { panic!() };
        assert_eq!(groups, vec![set(&[2, 4]), set(&[1, 3, 5])]);
        // One way: the holder's frames are the ones cut.
        let Partition::OneWay { from, to } = focus(&Partition::one_way([id(2)], [id(1), id(3)]), id(3)) else {
            panic!()
        };
        assert_eq!((from, to), (set(&[3]), set(&[1, 2])));
        // Links: the node with the most cut links (n3: two) trades with n1.
        let links = Partition::links([(id(1), id(3)), (id(2), id(3))]);
        assert_eq!(focus(&links, id(1)), Partition::links([(id(3), id(1)), (id(2), id(1))]));
        for n in [3u16, 5] {
            for seed in 0..10 {
                for shape in [PartitionShape::IsolateOne, PartitionShape::Halves, PartitionShape::OneWay] {
                    let p = focus(&draw(shape, n, seed), id(2));
                    assert!(sees(&p, n, 2).len() <= usize::from(n) / 2, "{shape:?} n={n}: {p:?}");
                }
            }
        }
    }

    #[test]
    fn shapes_are_drawn_from_the_list_only() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        for _ in 0..50 {
            let p = random_partition(&mut rng, 5, Some(&[PartitionShape::MajoritiesRing]));
            assert!(matches!(p, Partition::Links { .. }), "{p:?}");
        }
    }
}
