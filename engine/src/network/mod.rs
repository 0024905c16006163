//! The engine's view of the simulated network: netsim's pending deliveries
//! and the partition timeline are engine actions, chosen at their virtual
//! times like node runs.

use netsim::{Capture, Delivery, DeliveryId, NetConfig, Network, NodeId, Partition};
use simrng::Rng;
use vmm::runtime::TxFrame;

use crate::frames::summarize;
use crate::trace::{DropCause, EventKind, Trace};
use simrng::streams::{NETWORK as LATENCY_STREAM, PARTITIONS as PARTITION_STREAM};
use simtime::VirtualTime;

mod partitions;

pub use partitions::describe;
pub(crate) use partitions::focus;
use partitions::{describe_named, RandomPartitions};

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
    /// the place of the node `partition` singles out (`focus`); with no
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
pub(super) enum Fault {
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
    rng: Rng,
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
            trace.push(time, from, EventKind::Send { id: d.id.0, to: d.to, len, summary: summary.clone() });
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
            trace.push(time, from, EventKind::Send { id, to, len, summary: summary.clone() });
            trace.push(time, from, EventKind::Drop { id, to, cause });
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
