//! The pending copies: peeking, taking and dropping deliveries.

use std::collections::BTreeMap;

use simtime::VirtualTime;

use super::{Delivery, DeliveryId, Network};
use crate::addr::NodeId;

impl Network {
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

    pub(super) fn delivered(&mut self, d: &Delivery) {
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

    pub(super) fn remove_where(&mut self, f: impl Fn(&Delivery) -> bool) -> usize {
        Self::remove_where_in(&mut self.queue, &mut self.index, f)
    }

    pub(super) fn remove_where_in(
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
