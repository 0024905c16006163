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
use crate::partition::{Partition, PartitionError};
use crate::rng::bernoulli;
use crate::stats::NetStats;
use crate::tcp::{ConnKey, ConnTable, Direction};

/// Identifies one pending frame copy. Ids are the sequence numbers of
/// scheduling: unique per `Network` and increasing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct DeliveryId(pub u64);

/// A frame copy in flight (or just delivered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// This copy's id.
    pub id: DeliveryId,
    /// Virtual arrival time.
    pub time: VirtualTime,
    /// Virtual time `send` was called.
    pub sent_at: VirtualTime,
    /// The sending node.
    pub from: NodeId,
    /// The receiving node.
    pub to: NodeId,
    /// The Ethernet frame, shared between the copies of a broadcast or
    /// duplicate (one allocation per `send`).
    pub frame: Arc<[u8]>,
    /// The second copy made by duplication.
    pub duplicate: bool,
    /// Held back by `reorder_delay`.
    pub reordered: bool,
}

/// What `send` scheduled: a summary of a [`Delivery`] without the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledDelivery {
    /// The copy's id.
    pub id: DeliveryId,
    /// Virtual arrival time.
    pub time: VirtualTime,
    /// The sending node.
    pub from: NodeId,
    /// The receiving node.
    pub to: NodeId,
    /// The second copy made by duplication.
    pub duplicate: bool,
    /// Held back by `reorder_delay`.
    pub reordered: bool,
}

impl From<&Delivery> for ScheduledDelivery {
    fn from(d: &Delivery) -> Self {
        ScheduledDelivery {
            id: d.id,
            time: d.time,
            from: d.from,
            to: d.to,
            duplicate: d.duplicate,
            reordered: d.reordered,
        }
    }
}

/// What [`Network::send`] did with a frame: for each destination link, the
/// copies it scheduled or why the frame was lost on that link; or why the
/// frame reached no link at all. Iterating it yields the scheduled copies in
/// the order they were scheduled (ids ascending).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// One entry per destination link, in the order `send` decided them
    /// (for a broadcast, receivers by ascending id).
    pub links: Vec<LinkOutcome>,
    /// Set when the frame had no destination link (then `links` is empty).
    pub unrouted: Option<Unrouted>,
}

/// The fate of a frame on one destination link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkOutcome {
    /// The link's receiving node.
    pub to: NodeId,
    /// What happened to the frame on it.
    pub fate: LinkFate,
}

/// Scheduled copies, or the cause of the loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkFate {
    /// One copy in flight, and a second one when duplication drew it
    /// (scheduled right after the first; `duplicate` is set on it).
    Scheduled {
        /// The copy in flight.
        copy: ScheduledDelivery,
        /// The duplicate, when one was drawn.
        duplicate: Option<ScheduledDelivery>,
    },
    /// Lost on this link (counted in [`crate::DropCounts`]).
    Dropped(LinkDrop),
}

/// Why a frame was lost on a link at send time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkDrop {
    /// The current partition blocks the link (`partition_send`).
    Partition,
    /// The link's loss draw lost it (`loss`).
    Loss,
}

/// Why a frame reached no link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unrouted {
    /// Unicast to a MAC no other node owns, or to the sender itself
    /// (`no_route`).
    NoRoute,
    /// Shorter than an Ethernet header (`malformed`).
    Malformed,
}

impl LinkFate {
    /// The scheduled copies (none when dropped).
    pub fn copies(&self) -> impl Iterator<Item = &ScheduledDelivery> + '_ {
        let (a, b) = match self {
            LinkFate::Scheduled { copy, duplicate } => (Some(copy), duplicate.as_ref()),
            LinkFate::Dropped(_) => (None, None),
        };
        a.into_iter().chain(b)
    }
}

impl SendOutcome {
    /// Every scheduled copy, in the order scheduled.
    pub fn copies(&self) -> impl Iterator<Item = &ScheduledDelivery> + '_ {
        self.links.iter().flat_map(|l| l.fate.copies())
    }

    /// No copy was scheduled (the frame was lost everywhere, or unrouted).
    pub fn is_empty(&self) -> bool {
        self.copies().next().is_none()
    }

    /// The links where the frame was lost, with the cause.
    pub fn drops(&self) -> impl Iterator<Item = (NodeId, LinkDrop)> + '_ {
        self.links.iter().filter_map(|l| match l.fate {
            LinkFate::Dropped(why) => Some((l.to, why)),
            LinkFate::Scheduled { .. } => None,
        })
    }

    fn clear(&mut self) {
        self.links.clear();
        self.unrouted = None;
    }
}

impl IntoIterator for SendOutcome {
    type Item = ScheduledDelivery;
    type IntoIter = std::vec::IntoIter<ScheduledDelivery>;

    /// The scheduled copies, in the order scheduled.
    fn into_iter(self) -> Self::IntoIter {
        self.copies().copied().collect::<Vec<_>>().into_iter()
    }
}

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

/// What [`Network::reset_connection`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnReset {
    /// The connection's frames in flight it dropped (both ways).
    pub dropped: usize,
    /// The two resets scheduled now: to `a` (from `b`), then to `b`.
    pub resets: [ScheduledDelivery; 2],
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

    /// Arrival time of the earliest pending copy.
    pub fn next_delivery_time(&self) -> Option<VirtualTime> {
        self.queue.first_key_value().map(|(&(t, _), _)| t)
    }

    /// The earliest pending copy, without removing it.
    pub fn peek_next(&self) -> Option<&Delivery> {
        self.queue.first_key_value().map(|(_, d)| d)
    }

    /// Removes and returns the earliest pending copy (ties: lowest id, i.e.
    /// scheduled first). The caller hands `frame` to `to` at `time`.
    pub fn pop_next(&mut self) -> Option<Delivery> {
        let (_, d) = self.queue.pop_first()?;
        self.index.remove(&d.id.0);
        self.delivered(&d);
        Some(d)
    }

    /// Every pending copy in `(time, id)` order: the enabled network actions.
    pub fn pending(&self) -> impl ExactSizeIterator<Item = &Delivery> + '_ {
        self.queue.values()
    }

    /// How many copies are in flight.
    pub fn pending_len(&self) -> usize {
        self.queue.len()
    }

    /// The pending copy `id`, if it is still in flight.
    pub fn get(&self, id: DeliveryId) -> Option<&Delivery> {
        let t = *self.index.get(&id.0)?;
        self.queue.get(&(t, id.0))
    }

    /// Removes and returns a specific pending copy, for an engine that picks
    /// which enabled delivery happens next. Counted as delivered.
    pub fn take(&mut self, id: DeliveryId) -> Option<Delivery> {
        let t = self.index.remove(&id.0)?;
        let d = self.queue.remove(&(t, id.0)).expect("index and queue agree");
        self.delivered(&d);
        Some(d)
    }

    fn delivered(&mut self, d: &Delivery) {
        self.stats.delivered += 1;
        if let Some(t) = &mut self.conns {
            t.on_deliver(d.from, d.to, &d.frame);
        }
    }

    /// Drops every pending copy addressed to `node` (it crashed; the frames
    /// reach a dead NIC). Returns how many.
    pub fn discard_to(&mut self, node: NodeId) -> usize {
        if let Some(t) = &mut self.conns {
            t.node_down(node);
        }
        self.holds.retain(|k, _| k.a.node != node && k.b.node != node);
        let n = self.remove_where(|d| d.to == node);
        self.stats.dropped.node_down += n as u64;
        n
    }

    /// Installs `p`, replacing any current partition, and drops the pending
    /// copies it blocks (see the module docs for the rule). Returns how many
    /// were dropped.
    pub fn partition(&mut self, p: Partition) -> Result<usize, PartitionError> {
        p.validate(self.node_count)?;
        let n = self.node_count as usize;
        for from in NodeId::all(self.node_count) {
            for to in NodeId::all(self.node_count) {
                self.blocked[from.index() * n + to.index()] = p.blocks(from, to);
            }
        }
        self.partition = Some(p);
        let blocked = &self.blocked;
        let dropped =
            Self::remove_where_in(&mut self.queue, &mut self.index, |d| blocked[d.from.index() * n + d.to.index()]);
        self.stats.dropped.partition_in_flight += dropped as u64;
        Ok(dropped)
    }

    /// Removes the partition. Copies already dropped stay dropped.
    pub fn heal(&mut self) {
        self.partition = None;
        self.blocked.iter_mut().for_each(|b| *b = false);
    }

    /// The partition in force, if any.
    pub fn current_partition(&self) -> Option<&Partition> {
        self.partition.as_ref()
    }

    /// Whether a frame sent now from `from` to `to` would be dropped by the
    /// current partition.
    pub fn is_blocked(&self, from: NodeId, to: NodeId) -> bool {
        self.blocked[self.link_index(from, to)]
    }

    /// Tracks TCP connections from now on (see [`crate::tcp`]): what
    /// connection faults need. Without it no frame is parsed, and nothing
    /// else changes: tracking draws nothing and moves no frame.
    pub fn track_connections(&mut self) {
        self.conns.get_or_insert_with(ConnTable::new);
    }

    /// The connections tracked (`None` unless [`Network::track_connections`]).
    pub fn connections(&self) -> Option<&ConnTable> {
        self.conns.as_ref()
    }

    /// Whether `key` is stalled at `now` (a stall that ends later holds it).
    pub fn is_stalled(&self, key: &ConnKey, now: VirtualTime) -> bool {
        self.holds.get(key).is_some_and(|&(_, until)| until > now)
    }

    /// The connection `frame` from `from` to `to` belongs to, if it is a
    /// TCP segment, and whether it goes from the key's `a` to its `b`.
    fn conn_of(from: NodeId, to: NodeId, frame: &[u8]) -> Option<(ConnKey, bool)> {
        let (src, dst, _) = crate::tcp::ends(from, to, frame)?;
        Some(ConnKey::of(src, dst))
    }

    /// Until when a frame sent now from `from` to `to` is held by a stall.
    fn held_until(&mut self, now: VirtualTime, from: NodeId, to: NodeId, frame: &[u8]) -> Option<VirtualTime> {
        if self.holds.is_empty() {
            return None;
        }
        self.holds.retain(|_, &mut (_, until)| until > now);
        let (key, a_to_b) = Self::conn_of(from, to, frame)?;
        self.holds.get(&key).filter(|(dir, _)| dir.holds(a_to_b)).map(|&(_, until)| until)
    }

    /// Resets connection `key` at `now`: its frames in flight (both ways)
    /// are dropped, and an RST goes to each end, as if from the other,
    /// with the sequence number that end expects next (see
    /// [`crate::tcp::resets`]), due now, whatever the links' latency,
    /// loss or partitions (the network itself sends them). Draws nothing.
    /// The connection is forgotten. `None` (and nothing done) when `key`
    /// is not a tracked connection whose ends both know where they are.
    pub fn reset_connection(&mut self, key: &ConnKey, now: VirtualTime) -> Option<ConnReset> {
        let table = self.conns.as_mut()?;
        let frames = crate::tcp::resets(key, table.get(key)?)?;
        table.remove(key);
        self.holds.remove(key);
        let dropped = Self::remove_where_in(&mut self.queue, &mut self.index, |d| {
            Self::conn_of(d.from, d.to, &d.frame).is_some_and(|(k, _)| k == *key)
        });
        self.stats.dropped.connection_reset += dropped as u64;
        let resets = frames.map(|(from, to, frame)| {
            self.stats.offered += 1;
            let id = self.next_id;
            self.next_id += 1;
            let d = Delivery {
                id: DeliveryId(id),
                time: now,
                sent_at: now,
                from,
                to,
                frame: Arc::from(frame),
                duplicate: false,
                reordered: false,
            };
            let s = ScheduledDelivery::from(&d);
            self.index.insert(id, now);
            self.queue.insert((now, id), d);
            s
        });
        Some(ConnReset { dropped, resets })
    }

    /// Stalls connection `key` `dir` until `until`: its frames in flight
    /// that way, and those sent before `until`, arrive at `until` at the
    /// earliest, in the order they were sent; every other frame flows as
    /// before. Returns how many frames in flight it held.
    pub fn stall_connection(&mut self, key: &ConnKey, dir: Direction, until: VirtualTime) -> usize {
        self.holds.insert(*key, (dir, until));
        let held: Vec<(VirtualTime, u64)> = self
            .queue
            .iter()
            .filter(|(&(t, _), d)| {
                t < until && Self::conn_of(d.from, d.to, &d.frame).is_some_and(|(k, ab)| k == *key && dir.holds(ab))
            })
            .map(|(&k, _)| k)
            .collect();
        for k in &held {
            let d = self.queue.remove(k).expect("just listed");
            self.index.insert(k.1, until);
            self.queue.insert((until, k.1), Delivery { time: until, ..d });
        }
        held.len()
    }

    fn remove_where(&mut self, f: impl Fn(&Delivery) -> bool) -> usize {
        Self::remove_where_in(&mut self.queue, &mut self.index, f)
    }

    fn remove_where_in(
        queue: &mut BTreeMap<(VirtualTime, u64), Delivery>,
        index: &mut BTreeMap<u64, VirtualTime>,
        f: impl Fn(&Delivery) -> bool,
    ) -> usize {
        let before = queue.len();
        queue.retain(|_, d| {
            let keep = !f(d);
            if !keep {
                index.remove(&d.id.0);
            }
            keep
        });
        before - queue.len()
    }
}
