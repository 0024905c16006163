//! Applying connection resets and stalls (`[faults.connection]`), and
//! when they are enabled. What they are: `crate::conn_faults`.
//!
//! Invariant: their stream is their own (`simrng::streams::CONNECTION`):
//! when they become possible, and a stall's direction and length. One that
//! is off draws nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use netsim::tcp::{ConnKey, Direction, Endpoint};
use simrng::Rng;

use super::ctx::Ctx;
use super::gates::FaultGates;
use super::wire::Wire;
use crate::actions::{Action, Enabled};
use crate::conn_faults::{ConnFaultCounts, ConnFaultSpec};
use crate::faults::{below, between};
use crate::strategy::{ActionKind, EnabledAction};
use crate::trace::EventKind;
use crate::NodeId;
use simtime::VirtualTime;

/// Connection resets and stalls in one execution: their stream, when the
/// next becomes possible, and how many happened.
pub(in crate::execution) struct ConnFaults {
    rng: Rng,
    /// Connection faults are enabled from this virtual time on (`None`
    /// before the workload, or when they are off).
    not_before: Option<VirtualTime>,
    counts: ConnFaultCounts,
}

impl ConnFaults {
    /// No fault yet; the stream drawn from `seed`.
    pub fn new(seed: u64) -> ConnFaults {
        ConnFaults {
            rng: simrng::stream(seed, simrng::streams::CONNECTION),
            not_before: None,
            counts: ConnFaultCounts::default(),
        }
    }

    /// How many happened so far.
    pub fn counts(&self) -> ConnFaultCounts {
        self.counts
    }

    /// The next connection fault becomes possible a drawn time within
    /// `span` from `now`.
    fn draw_next_time(&mut self, now: VirtualTime, span: Duration) {
        self.not_before = Some(now + Duration::from_nanos(below(&mut self.rng, simtime::span_ns(span))));
    }

    /// When a connection fault becomes possible, if `c`'s budget has one
    /// left.
    fn next_possible(&self, c: &ConnFaultSpec) -> Option<VirtualTime> {
        self.not_before.filter(|_| self.counts.resets < c.resets || self.counts.stalls < c.stalls)
    }

    /// Whether a reset and a stall may come at `now` within `c`'s budget;
    /// `None` when neither may.
    fn due(&self, now: VirtualTime, c: &ConnFaultSpec) -> Option<(bool, bool)> {
        let (reset, stall) = (self.counts.resets < c.resets, self.counts.stalls < c.stalls);
        self.next_possible(c).is_some_and(|t| now >= t).then_some((reset, stall))
    }

    /// A stall is chosen at `now`: its direction and its end (drawn).
    fn draw_stall(&mut self, now: VirtualTime, c: &ConnFaultSpec) -> (Direction, VirtualTime) {
        let dir = match below(&mut self.rng, 3) {
            0 => Direction::AtoB,
            1 => Direction::BtoA,
            _ => Direction::Both,
        };
        let (lo, hi) = (simtime::span_ns(c.stall_for.0), simtime::span_ns(c.stall_for.1));
        let length = between(&mut self.rng, lo as i64, hi as i64) as u64;
        (dir, now + Duration::from_nanos(length))
    }
}

/// When connection faults are offered, and the actions: each acts at
/// `cx.now`.
impl ConnFaults {
    /// The workload (or `start_after`) starts the faults: draw when
    /// connection faults become possible (only when they are on).
    pub fn begin(&mut self, cx: &Ctx) {
        let c = &cx.spec.explore.connection;
        if c.on() {
            self.draw_next_time(cx.now, c.span);
        }
    }

    /// The earliest time a connection fault can become possible, when
    /// one is left in the budget (for lookahead's bound).
    pub fn next_time(&self, cx: &Ctx) -> Option<VirtualTime> {
        self.next_possible(&cx.spec.explore.connection)
    }

    /// A reset, then a stall, of each established connection in key order
    /// (after every older kind, so executions without them keep their
    /// choice indices): from the drawn time on, within each budget, not
    /// calm, both ends up and ready; a connection already stalled is not
    /// stalled again. The strategy sees node = the lesser end's node,
    /// peer = the other's, and `behind` = the connection's place among
    /// those offered between the same two nodes (so a decision names one).
    /// A connection with frames in flight is at risk.
    pub fn enabled(&self, cx: &Ctx, gates: &FaultGates, into: &mut Vec<Enabled>) {
        let Some((reset, stall)) = self.due(cx.now, &cx.spec.explore.connection) else { return };
        if gates.calm {
            return;
        }
        let Some(net) = gates.wire.netsim() else { return };
        let Some(table) = net.connections().filter(|t| t.established().next().is_some()) else { return };
        let mut between_pair: BTreeMap<(NodeId, NodeId), u16> = BTreeMap::new();
        // The connections with frames in flight, each frame read once.
        let in_flight: BTreeSet<ConnKey> = net
            .pending()
            .filter_map(|d| netsim::tcp::ends(d.from, d.to, &d.frame).map(|(s, t, _)| ConnKey::of(s, t).0))
            .collect();
        for (key, _) in table.established() {
            if !endpoint_ready(cx, &key.a) || !endpoint_ready(cx, &key.b) {
                continue;
            }
            let (node, peer) = (key.a.node, key.b.node);
            let place = between_pair.entry((node, peer)).or_insert(0);
            let behind = *place;
            *place += 1;
            let desc = |kind| {
                let mut d = EnabledAction::new(node, kind, cx.now).with_peer(peer).behind(behind);
                d.at_risk = in_flight.contains(key);
                d
            };
            if reset {
                into.push(Enabled { action: Action::ConnReset(*key), desc: desc(ActionKind::ConnReset) });
            }
            if stall && !net.is_stalled(key, cx.now) {
                into.push(Enabled { action: Action::ConnStall(*key), desc: desc(ActionKind::ConnStall) });
            }
        }
    }

    /// Resets connection `key`: its frames in flight are lost and each end
    /// is sent an RST it accepts (both applications see ECONNRESET).
    pub fn reset(&mut self, cx: &mut Ctx, wire: &mut Wire, key: ConnKey) {
        let now = cx.now;
        let (a, b) = (endpoint_name(cx, &key.a), endpoint_name(cx, &key.b));
        let Some(r) = wire.reset_connection(&key, now) else { return };
        self.counts.resets += 1;
        cx.trace.push_engine(now, EventKind::ConnReset { a, b, dropped: r.dropped as u64 });
        wire.trace_resets(&r.resets, now, &mut cx.trace);
        self.draw_next_time(now, cx.spec.explore.connection.span);
    }

    /// Stalls connection `key` one way or both (drawn) for a drawn length.
    pub fn stall(&mut self, cx: &mut Ctx, wire: &mut Wire, key: ConnKey) {
        let now = cx.now;
        let (dir, until) = self.draw_stall(now, &cx.spec.explore.connection);
        let (a, b) = (endpoint_name(cx, &key.a), endpoint_name(cx, &key.b));
        let (from, to, both) = match dir {
            Direction::AtoB => (a, b, false),
            Direction::BtoA => (b, a, false),
            Direction::Both => (a, b, true),
        };
        let Some(held) = wire.stall_connection(&key, dir, until) else { return };
        let held = held as u64;
        self.counts.stalls += 1;
        cx.trace.push_engine(now, EventKind::ConnStall { from, to, both, until, held });
        self.draw_next_time(now, cx.spec.explore.connection.span);
    }
}

/// Whether the node at `e` (a guest, or the host client) is up and
/// ready: a connection fault hits only connections between running
/// programs.
fn endpoint_ready(cx: &Ctx, e: &Endpoint) -> bool {
    cx.nodes.get(e.node).is_none_or(|n| n.is_up() && n.is_ready())
}

/// `node:port`, with the node's name (`host` for the host client).
fn endpoint_name(cx: &Ctx, e: &Endpoint) -> String {
    let name = cx.nodes.get(e.node).map_or("host", |n| n.name.as_str());
    format!("{name}:{}", e.port)
}
