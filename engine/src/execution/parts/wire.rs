//! The wire: the simulated network between the nodes and the host client
//! on it. It takes the frames a node or the host client transmitted,
//! offers what is due, and delivers a frame to its receiver.
//!
//! Invariants: a node's frames enter netsim in the order the node sent
//! them, and a delivery is taken out of netsim exactly when it is applied
//! (a frame for a node that is down is dropped then, and traced as such).
//! Without a network (`[network]` absent) every method is a no-op and
//! nothing is ever due.

use netsim::tcp::{ConnKey, Direction};
use netsim::DeliveryId;
use vmm::node::Delivered;
use vmm::runtime::TxFrame;

use crate::frames;
use crate::host::{HostEndpoint, HostOutcome};
use crate::network::{DueDelivery, NetState};
use crate::spec::EngineError;
use crate::trace::{DropCause, EventKind, Trace};
use crate::NodeId;

use super::ctx::Ctx;
use super::roles::Roles;
use simtime::VirtualTime;

/// The simulated network and the host-side client on it.
pub(in crate::execution) struct Wire {
    /// netsim and its partitions; `None` for a cluster without a network.
    net: Option<NetState>,
    /// The host-side client, with a host workload.
    host: Option<HostEndpoint>,
}

impl Wire {
    /// `net` with the host client `host` on it (in warm-start mode the
    /// client comes when the boot ends: [`Self::reseed`]).
    pub fn new(net: Option<NetState>, host: Option<HostEndpoint>) -> Wire {
        Wire { net, host }
    }

    /// Whether the cluster has a network.
    pub fn is_on(&self) -> bool {
        self.net.is_some()
    }

    /// Hands frames node `from` transmitted to netsim, tracing what became
    /// of each copy.
    pub fn transmit(&mut self, from: NodeId, frames: Vec<TxFrame>, trace: &mut Trace) {
        if let Some(ns) = self.net.as_mut() {
            ns.transmit(from, frames, trace);
        }
    }

    /// Frames in flight to `node`, which went down, are lost.
    pub fn node_down(&mut self, node: NodeId) {
        if let Some(ns) = self.net.as_mut() {
            ns.node_down(node);
        }
    }

    /// Hands frame `id` to its receiver now: the host client, a node, or
    /// nobody (a node that is down drops it).
    pub fn deliver(&mut self, cx: &mut Ctx, id: DeliveryId) -> Result<(), EngineError> {
        let (now, trace, nodes) = (cx.now, &mut cx.trace, &mut cx.nodes);
        let ns = self.net.as_mut().expect("deliveries come from the network");
        let Some(d) = ns.take(id) else { return Ok(()) };
        if let Some(h) = self.host.as_mut().filter(|h| h.node() == d.to) {
            h.deliver(now, &d, trace);
            return Ok(());
        }
        let (to, from) = (d.to, d.from);
        // A frame for the host client's node before the client exists (in
        // warm-start mode it starts with the workload) finds nobody there.
        if nodes.get(to).is_none_or(|n| !n.is_up()) {
            trace.push(now, from, EventKind::Drop { id: d.id.0, to, cause: DropCause::NodeDown });
            return Ok(());
        }
        let summary = frames::summarize(&d.frame);
        let len = d.frame.len() as u32;
        trace.push(now, to, EventKind::Deliver { id: d.id.0, from, len, summary });
        if nodes[to].vm().deliver_frame(now, &d.frame, cx.spec.watchdog)? == Delivered::Dropped {
            let text = format!("frame {} dropped: no receive buffer", d.id.0);
            trace.push(now, to, EventKind::Note { text });
        }
        Ok(())
    }

    /// Polls the host client and sends what it transmitted; its node and
    /// what the poll found, or `None` without a host client.
    pub fn poll_host(&mut self, cx: &mut Ctx) -> Option<(NodeId, HostOutcome)> {
        let (now, trace) = (cx.now, &mut cx.trace);
        let h = self.host.as_mut()?;
        let node = h.node();
        let (tx, outcome) = h.poll(now, trace);
        if let Some(ns) = self.net.as_mut() {
            ns.transmit_frames(node, now, tx, trace);
        }
        Some((node, outcome))
    }

    /// Starts the host workload now; `false` without a host client.
    pub fn start_host(&mut self, cx: &mut Ctx) -> bool {
        let Some(h) = self.host.as_mut() else { return false };
        h.start(cx.now, &mut cx.trace);
        true
    }

    /// The host client's node and when it is next due to be polled.
    pub fn host_due(&self) -> Option<(NodeId, VirtualTime)> {
        self.host.as_ref().and_then(|h| h.due().map(|t| (h.node(), t)))
    }

    /// The earliest pending network event (delivery or partition/heal).
    pub fn next_time(&self) -> Option<VirtualTime> {
        self.net.as_ref().and_then(|n| n.next_time())
    }

    /// Deliveries due by `horizon`, in netsim's order
    /// ([`NetState::deliveries_until`]).
    pub fn deliveries_until(&self, horizon: VirtualTime) -> Vec<DueDelivery> {
        self.net.as_ref().map_or_else(Vec::new, |n| n.deliveries_until(horizon))
    }

    /// The next partition or heal of the timeline: (due time, is it a heal).
    pub fn next_fault(&self) -> Option<(VirtualTime, bool)> {
        self.net.as_ref().and_then(|n| n.next_fault())
    }

    /// Whether `node` has frames in flight.
    pub fn has_in_flight_from(&self, node: NodeId) -> bool {
        self.net.as_ref().is_some_and(|ns| ns.has_in_flight_from(node))
    }

    /// Applies the next partition or heal of the timeline now; one that
    /// targets a role is turned onto the lowest-numbered node holding it
    /// now (`roles`). `[faults] skip_partitions`: see `NetState::apply_fault`.
    pub fn apply_fault(&mut self, cx: &mut Ctx, roles: &Roles) {
        let ns = self.net.as_mut().expect("faults come from the network");
        let holder = ns.next_role().and_then(|role| roles.holders(cx, role).first().copied());
        ns.apply_fault(&mut cx.trace, cx.now, holder, &cx.spec.explore.skip_partitions);
    }

    /// netsim itself, for what the engine reads of it (the TCP
    /// connections it follows, the frames in flight).
    pub fn netsim(&self) -> Option<&netsim::Network> {
        self.net.as_ref().map(|n| &n.net)
    }

    /// Resets connection `key` at `now`; what netsim did, `None` when
    /// there is no such connection (or no network).
    pub fn reset_connection(&mut self, key: &ConnKey, now: VirtualTime) -> Option<netsim::ConnReset> {
        self.net.as_mut()?.net.reset_connection(key, now)
    }

    /// Traces the RSTs a connection reset sent as sends of their senders.
    pub fn trace_resets(&self, resets: &[netsim::ScheduledDelivery], now: VirtualTime, trace: &mut Trace) {
        let Some(ns) = self.net.as_ref() else { return };
        for s in resets {
            let Some(d) = ns.net.get(s.id) else { continue };
            let (len, summary) = (d.frame.len() as u32, frames::summarize(&d.frame));
            trace.push(now, s.from, EventKind::Send { id: s.id.0, to: s.to, len, summary });
        }
    }

    /// Stalls connection `key` in direction `dir` until `until`; how many
    /// frames it held, `None` without a network.
    pub fn stall_connection(&mut self, key: &ConnKey, dir: Direction, until: VirtualTime) -> Option<usize> {
        Some(self.net.as_mut()?.net.stall_connection(key, dir, until))
    }

    /// A warm start's boot ends: the host client is made (`host`), and
    /// netsim's streams start again from `seed`; the random partitions
    /// start now when `start_random`.
    pub fn reseed(&mut self, host: Option<HostEndpoint>, seed: u64, now: VirtualTime, start_random: bool) {
        self.host = host;
        if let Some(ns) = self.net.as_mut() {
            ns.reseed(seed, now, start_random);
        }
    }

    /// A critical-transition probe's calm continuation (`NetState::calm`).
    pub fn calm(&mut self, seed: u64) {
        if let Some(ns) = self.net.as_mut() {
            ns.calm(seed);
        }
    }

    /// The quiet period (`NetState::quiet`).
    pub fn quiet(&mut self) {
        if let Some(ns) = self.net.as_mut() {
            ns.quiet();
        }
    }

    /// `[faults] start_after` was reached: random partitions begin at `now`.
    pub fn start_random_partitions(&mut self, now: VirtualTime) {
        if let Some(ns) = self.net.as_mut() {
            ns.start_random_partitions(now);
        }
    }

    /// netsim's counters and the captures, at the end of the execution.
    pub fn finish(&mut self) -> (Option<netsim::NetStats>, Vec<(String, Vec<u8>)>) {
        match self.net.as_mut() {
            Some(n) => (Some(n.finish()), n.take_pcaps()),
            None => (None, Vec::new()),
        }
    }
}
