//! Connection faults: resetting and stalling one TCP connection.

use std::sync::Arc;

use simtime::VirtualTime;

use super::{Delivery, DeliveryId, Network, ScheduledDelivery};
use crate::addr::NodeId;
use crate::tcp::{ConnKey, ConnTable, Direction};

/// What [`Network::reset_connection`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnReset {
    /// The connection's frames in flight it dropped (both ways).
    pub dropped: usize,
    /// The two resets scheduled now: to `a` (from `b`), then to `b`.
    pub resets: [ScheduledDelivery; 2],
}

impl Network {
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
    pub(super) fn conn_of(from: NodeId, to: NodeId, frame: &[u8]) -> Option<(ConnKey, bool)> {
        let (src, dst, _) = crate::tcp::ends(from, to, frame)?;
        Some(ConnKey::of(src, dst))
    }

    /// Until when a frame sent now from `from` to `to` is held by a stall.
    pub(super) fn held_until(
        &mut self,
        now: VirtualTime,
        from: NodeId,
        to: NodeId,
        frame: &[u8],
    ) -> Option<VirtualTime> {
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
}
