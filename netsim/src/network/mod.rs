//! The network: a priority queue of frame deliveries plus per-link state.
//!
//! # Model
//! Every ordered pair of nodes is a *directed link* with its own parameters
//! ([`LinkParams`]) and state (serialiser busy-until time, last FIFO arrival).
//! Broadcast frames are copied onto every link out of the sender, like a
//! switch flooding them.
//!
//! `send` decides everything about a frame at once, from the caller's RNG,
//! in this fixed order per destination link (a probability of 0 consumes no
//! randomness, so turning a fault off does not shift other draws):
//! 1. partition check (no randomness): blocked → dropped (`partition_send`);
//! 2. serialisation: with a bandwidth, the frame waits for the link to be
//!    free and occupies it for `len * 1e9 / bandwidth` ns, rounded up (lost
//!    frames too: they were on the wire);
//! 3. loss: one Bernoulli draw;
//! 4. duplication: one Bernoulli draw; a duplicate is a second copy that
//!    goes through step 5 on its own (it takes no extra bandwidth);
//! 5. per copy: a latency sample, then one reorder draw (and a
//!    `reorder_delay` sample if reordered).
//!
//! It returns a [`SendOutcome`] that says, per destination link, which
//! copies it scheduled (their ids) or why the frame was lost there
//! (partition, loss), and for a frame with no destination link why (no
//! route, malformed): the caller records exactly what happened without
//! re-deriving it.
//!
//! # Ordering invariants
//! * A link is FIFO: a copy that is not reordered arrives no earlier than the
//!   previous non-reordered copy on the same link (`arrival = max(tx_end +
//!   latency, last_arrival)`), and equal times are broken by sequence number,
//!   which is send order. So with `reorder = 0` a link never reorders, however
//!   much the latency jitters.
//! * A reordered copy gets `reorder_delay` on top and does not advance
//!   `last_arrival`, so later frames overtake it.
//! * The queue is ordered by `(time, id)`; ids increase monotonically, so
//!   the order is total and independent of anything but the call sequence.
//!
//! # Partitions
//! Rule: *a frame copy is lost if its link is blocked at any instant between
//! its send and its arrival.* It is checked at send time, and
//! [`Network::partition`] drops every pending copy whose link the new
//! partition blocks (`partition_in_flight`). This drops every frame that a
//! drop-at-delivery-time rule would drop (a partition in force at arrival
//! was either in force at send, or started during the flight), plus frames
//! whose flight spanned a partition that healed before they arrived (a
//! pulled cable loses the bits on it). The benefit: every pending delivery
//! is deliverable, so [`Network::pending`] is exactly the set of enabled
//! network actions, with no phantom ones that would vanish when chosen.
//!
//! # Connection faults
//! Off unless [`Network::track_connections`] turns them on; then every
//! unicast TCP segment is read as it is sent and as it is delivered, to
//! follow the connection it belongs to ([`crate::tcp`]). None of it draws
//! from the RNG, so the draw order above is the same with or without it.
//! * [`Network::reset_connection`] drops the connection's copies in flight
//!   (`connection_reset`) and schedules an RST to each end, due at once,
//!   with no draw (latency, loss and the partition check at send do not
//!   apply: the network itself sends them; a partition that starts before
//!   they arrive drops them like any copy).
//! * [`Network::stall_connection`] holds the connection's copies one way
//!   or both until a time: a held copy's arrival is `max(arrival, until)`,
//!   computed after its draws, and does not move the link's
//!   `last_arrival`, so the other connections on the link keep their FIFO
//!   times and overtake it. Held copies keep their send order (equal times
//!   go by id).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand_core::RngCore;
use simtime::VirtualTime;

use crate::addr::{destination, Destination, NodeId};
use crate::config::{ConfigError, Latency, LinkParams, NetConfig};
use crate::partition::Partition;
use crate::rng::bernoulli;
use crate::stats::NetStats;
use crate::tcp::{ConnKey, ConnTable, Direction};

mod connections;
mod delivery;
mod partitions;
mod queue;

pub use connections::ConnReset;
pub use delivery::{Delivery, DeliveryId, LinkDrop, LinkFate, LinkOutcome, ScheduledDelivery, SendOutcome, Unrouted};

#[derive(Clone, Copy, Debug, Default)]
struct LinkState {
    /// The serialiser is busy until this time (bandwidth).
    busy_until: VirtualTime,
    /// Arrival time of the last non-reordered copy (FIFO).
    last_arrival: VirtualTime,
}

/// The simulated network. `Clone` is a full snapshot (frames are shared,
/// immutable), so an explorer can branch from any state.
#[derive(Clone, Debug)]
pub struct Network {
    node_count: u16,
    partitions_enabled: bool,
    reorder_delay: Latency,
    /// Dense `n x n`, row = sender index, column = receiver index.
    params: Vec<LinkParams>,
    state: Vec<LinkState>,
    /// Same layout: `true` where the current partition blocks the link.
    blocked: Vec<bool>,
    partition: Option<Partition>,
    /// Pending copies ordered by `(time, id)`.
    queue: BTreeMap<(VirtualTime, u64), Delivery>,
    /// `id -> time`, to find a pending copy by id.
    index: BTreeMap<u64, VirtualTime>,
    next_id: u64,
    stats: NetStats,
    /// The TCP connections between nodes, once [`Network::track_connections`]
    /// turned tracking on (connection faults); `None`: no frame is parsed.
    conns: Option<ConnTable>,
    /// Connections stalled ([`Network::stall_connection`]): which way, and
    /// until when their frames are held.
    holds: BTreeMap<ConnKey, (Direction, VirtualTime)>,
}

impl Network {
    /// A network of `node_count` nodes (1..=254) configured by `config`,
    /// which is validated first.
    pub fn new(config: &NetConfig, node_count: u16) -> Result<Network, ConfigError> {
        let params = config.link_params(node_count)?;
        let links = params.len();
        Ok(Network {
            node_count,
            partitions_enabled: config.partitions,
            reorder_delay: config.reorder_delay,
            params,
            state: vec![LinkState::default(); links],
            blocked: vec![false; links],
            partition: None,
            queue: BTreeMap::new(),
            index: BTreeMap::new(),
            next_id: 0,
            stats: NetStats::default(),
            conns: None,
            holds: BTreeMap::new(),
        })
    }

    /// How many nodes the network joins (ids 1..=node_count).
    pub fn node_count(&self) -> u16 {
        self.node_count
    }

    /// `partitions = true` in the config: the strategy may partition.
    pub fn partitions_enabled(&self) -> bool {
        self.partitions_enabled
    }

    /// Resolved parameters of the directed link `from -> to`.
    pub fn link(&self, from: NodeId, to: NodeId) -> &LinkParams {
        &self.params[self.link_index(from, to)]
    }

    /// From now on no link loses, duplicates or reorders frames (latency
    /// and bandwidth stay). Frames already in flight keep their fate. Used
    /// to ask "can the system still recover if nothing else goes wrong?"
    pub fn stop_faults(&mut self) {
        for p in &mut self.params {
            p.loss = 0.0;
            p.duplicate = 0.0;
            p.reorder = 0.0;
        }
    }

    /// What happened to the frames sent so far.
    pub fn stats(&self) -> &NetStats {
        &self.stats
    }

    fn link_index(&self, from: NodeId, to: NodeId) -> usize {
        assert!(
            from.number() <= self.node_count && to.number() <= self.node_count,
            "node out of range: {from} -> {to} in a {}-node network",
            self.node_count
        );
        from.index() * self.node_count as usize + to.index()
    }

    /// Hands `frame`, sent by `from` at virtual time `now`, to the network,
    /// and says what became of it on each destination link: the copies
    /// scheduled, or why it was lost there (see [`SendOutcome`]).
    ///
    /// # Panics
    /// If `from` is not a node of this network (an engine bug).
    pub fn send(&mut self, now: VirtualTime, from: NodeId, frame: &[u8], rng: &mut dyn RngCore) -> SendOutcome {
        let mut out = SendOutcome::default();
        self.send_into(now, from, frame, rng, &mut out);
        out
    }

    /// Like [`Network::send`], into `out` (cleared first) so a caller can
    /// reuse its buffers. Returns the number of copies scheduled.
    pub fn send_into(
        &mut self,
        now: VirtualTime,
        from: NodeId,
        frame: &[u8],
        rng: &mut dyn RngCore,
        out: &mut SendOutcome,
    ) -> usize {
        out.clear();
        let _ = self.link_index(from, from); // range check
        self.stats.sent += 1;
        let dest = match destination(frame) {
            Ok(d) => d,
            Err(_) => {
                self.stats.dropped.malformed += 1;
                out.unrouted = Some(Unrouted::Malformed);
                return 0;
            }
        };
        match dest {
            Destination::Unicast(to) if to != from && to.number() <= self.node_count => {
                if let Some(t) = &mut self.conns {
                    t.on_send(from, to, frame);
                }
                let bytes: Arc<[u8]> = Arc::from(frame);
                let fate = self.transmit(now, from, to, &bytes, rng);
                out.links.push(LinkOutcome { to, fate });
            }
            Destination::Broadcast => {
                let bytes: Arc<[u8]> = Arc::from(frame);
                for to in NodeId::all(self.node_count).filter(|&n| n != from) {
                    let fate = self.transmit(now, from, to, &bytes, rng);
                    out.links.push(LinkOutcome { to, fate });
                }
            }
            Destination::Unicast(_) | Destination::Unknown(_) => {
                self.stats.dropped.no_route += 1;
                out.unrouted = Some(Unrouted::NoRoute);
            }
        }
        out.copies().count()
    }

    fn transmit(
        &mut self,
        now: VirtualTime,
        from: NodeId,
        to: NodeId,
        frame: &Arc<[u8]>,
        rng: &mut dyn RngCore,
    ) -> LinkFate {
        self.stats.offered += 1;
        let li = self.link_index(from, to);
        if self.blocked[li] {
            self.stats.dropped.partition_send += 1;
            return LinkFate::Dropped(LinkDrop::Partition);
        }
        let p = self.params[li];
        let mut tx_end = now;
        if let Some(bw) = p.bandwidth {
            let st = &mut self.state[li];
            let start = now.max(st.busy_until);
            let ser = (frame.len() as u128 * 1_000_000_000).div_ceil(bw as u128);
            tx_end = start.saturating_add(Duration::from_nanos(u64::try_from(ser).unwrap_or(u64::MAX)));
            st.busy_until = tx_end;
        }
        if p.loss > 0.0 && bernoulli(rng, p.loss) {
            self.stats.dropped.loss += 1;
            return LinkFate::Dropped(LinkDrop::Loss);
        }
        let copies = if p.duplicate > 0.0 && bernoulli(rng, p.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        let held = self.held_until(now, from, to, frame);
        let mut scheduled = [None; 2];
        for (copy, slot) in scheduled.iter_mut().take(copies).enumerate() {
            let latency = p.latency.sample(rng);
            let st = &mut self.state[li];
            let base = tx_end.saturating_add(latency).max(st.last_arrival);
            let reordered = p.reorder > 0.0 && bernoulli(rng, p.reorder);
            let time = if reordered {
                self.stats.reordered += 1;
                base.saturating_add(self.reorder_delay.sample(rng))
            } else {
                st.last_arrival = base;
                base
            };
            // A stalled connection's frame waits for the stall's end; the
            // link's FIFO time is what it would have been, so the other
            // connections on it flow.
            let time = held.map_or(time, |until| time.max(until));
            let id = self.next_id;
            self.next_id += 1;
            let d = Delivery {
                id: DeliveryId(id),
                time,
                sent_at: now,
                from,
                to,
                frame: Arc::clone(frame),
                duplicate: copy == 1,
                reordered,
            };
            *slot = Some(ScheduledDelivery::from(&d));
            self.index.insert(id, time);
            self.queue.insert((time, id), d);
        }
        LinkFate::Scheduled { copy: scheduled[0].expect("at least one copy"), duplicate: scheduled[1] }
    }
}
