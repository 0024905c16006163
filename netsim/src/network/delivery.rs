//! What the network says about frames: a copy in flight ([`Delivery`]) and
//! what became of a frame on each link ([`SendOutcome`]).

use std::sync::Arc;

use simtime::VirtualTime;

use crate::addr::NodeId;

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

/// What [`Network::send`](super::Network::send) did with a frame: for each destination link, the
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

    pub(super) fn clear(&mut self) {
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
