//! The engine's actions and the enabled set a strategy chooses from.
//!
//! An [`Action`] is what the engine can do next; its [`EnabledAction`] is
//! the abstract description a strategy sees (node, kind, due time, peer).
//! The enabled set is built in a fixed order (runs by node, the host
//! client's poll (node N+1, after the guests), deliveries in
//! netsim's order, the network fault, disk completions, restarts, crashes
//! by node, then resumes, pauses, clock jumps, start-command restarts and
//! kills by node), so a
//! strategy's index means the same thing every time the same state is
//! reached (the [`crate::strategy`] invariant).

use std::time::Duration;

use netsim::DeliveryId;

use crate::network::DueDelivery;
use crate::strategy::{ActionKind, EnabledAction};
use crate::{Actor, NodeId};
use simtime::VirtualTime;

/// Something the engine can do at the current instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Let the node run until it waits again.
    Run(NodeId),
    /// Poll the host-side client (node N+1): see `host.rs`.
    RunHost,
    /// Hand a frame in flight to its receiver.
    Deliver(DeliveryId),
    /// Apply the next partition start or heal of the timeline.
    NetworkFault { heal: bool },
    /// Power-fail the node.
    Crash(NodeId),
    /// Power-fail every crashable node that is up, at once.
    PowerFailure,
    /// Boot crashed the node again.
    Restart(NodeId),
    /// Complete one outstanding disk request of the node.
    CompleteDisk(NodeId, u64),
    /// Stop the node's start command (SIGSTOP to its process group).
    Pause(NodeId),
    /// Continue the node's paused start command.
    Resume(NodeId),
    /// Bump or strobe the node's wall clock.
    ClockJump(NodeId),
    /// Reset a TCP connection (`[faults.connection]`).
    ConnReset(netsim::tcp::ConnKey),
    /// Stall a TCP connection for a while.
    ConnStall(netsim::tcp::ConnKey),
    /// SIGKILL the node's start command (`[faults.kill]`).
    Kill(NodeId),
    /// Start the node's killed start command again.
    Respawn(NodeId),
}

/// One entry of the enabled set: the concrete action and its description.
#[derive(Debug, Clone, Copy)]
pub(super) struct Enabled {
    pub action: Action,
    pub desc: EnabledAction,
}

impl Enabled {
    pub fn run(node: NodeId, due: VirtualTime) -> Enabled {
        Enabled { action: Action::Run(node), desc: EnabledAction::new(node, ActionKind::RunNode, due) }
    }
    /// The host client's poll looks like a node run to a strategy: node
    /// N+1, [`ActionKind::RunNode`].
    pub fn run_host(node: NodeId, due: VirtualTime) -> Enabled {
        Enabled { action: Action::RunHost, desc: EnabledAction::new(node, ActionKind::RunNode, due) }
    }
    pub fn deliver(d: &DueDelivery) -> Enabled {
        Enabled {
            action: Action::Deliver(d.id),
            desc: EnabledAction::new(d.to, ActionKind::DeliverFrame, d.due).with_peer(d.from).behind(d.behind),
        }
    }
    pub fn network_fault(heal: bool, due: VirtualTime) -> Enabled {
        let kind = if heal { ActionKind::Heal } else { ActionKind::Partition };
        Enabled { action: Action::NetworkFault { heal }, desc: EnabledAction::new(Actor::Engine, kind, due) }
    }
    pub fn crash(node: NodeId, now: VirtualTime) -> Enabled {
        Enabled { action: Action::Crash(node), desc: EnabledAction::new(node, ActionKind::Crash, now) }
    }
    /// `first`: the first node it takes down (the node the strategy sees).
    pub fn power_failure(first: NodeId, now: VirtualTime) -> Enabled {
        Enabled { action: Action::PowerFailure, desc: EnabledAction::new(first, ActionKind::PowerFailure, now) }
    }
    /// Marks the action as falling in a window where it matters most (see
    /// [`EnabledAction::at_risk`]).
    pub fn at_risk(mut self, at_risk: bool) -> Enabled {
        self.desc.at_risk = at_risk;
        self
    }
    pub fn restart(node: NodeId, due: VirtualTime) -> Enabled {
        Enabled { action: Action::Restart(node), desc: EnabledAction::new(node, ActionKind::Restart, due) }
    }
    pub fn pause(node: NodeId, now: VirtualTime) -> Enabled {
        Enabled { action: Action::Pause(node), desc: EnabledAction::new(node, ActionKind::Pause, now) }
    }
    pub fn resume(node: NodeId, due: VirtualTime) -> Enabled {
        Enabled { action: Action::Resume(node), desc: EnabledAction::new(node, ActionKind::Resume, due) }
    }
    pub fn clock_jump(node: NodeId, now: VirtualTime) -> Enabled {
        Enabled { action: Action::ClockJump(node), desc: EnabledAction::new(node, ActionKind::ClockJump, now) }
    }
    pub fn kill(node: NodeId, now: VirtualTime) -> Enabled {
        Enabled { action: Action::Kill(node), desc: EnabledAction::new(node, ActionKind::Kill, now) }
    }
    /// A killed start command's restart looks like a node's restart to a
    /// strategy ([`ActionKind::Restart`]).
    pub fn respawn(node: NodeId, due: VirtualTime) -> Enabled {
        Enabled { action: Action::Respawn(node), desc: EnabledAction::new(node, ActionKind::Restart, due) }
    }
    pub fn complete_disk(node: NodeId, request: u64, due: VirtualTime) -> Enabled {
        Enabled {
            action: Action::CompleteDisk(node, request),
            desc: EnabledAction::new(node, ActionKind::CompleteDisk, due),
        }
    }
}

/// The time an action takes effect: its due time, or now if it is overdue
/// (an event the strategy postponed runs late, never early).
pub(super) fn effective_time(e: &Enabled, now: VirtualTime) -> VirtualTime {
    e.desc.time.max(now)
}

/// The latest due time still enabled: everything due within `window` of
/// the earliest event, but never past the earliest time a live node asked
/// to run at (`min_requested`), and never before `now`.
///
/// Why the clamp: a user-mode Linux node must run at exactly the time it
/// asked for (its time-travel loop BUGs when woken later), and a frame or
/// disk completion may only reach a node at a time between its clock and
/// its requested time. Keeping every action at or before the earliest
/// requested run keeps both true: the window lets the strategy reorder and
/// postpone deliveries, disk completions and faults, and choose among nodes
/// due together, but never runs a timer late.
pub(super) fn horizon(
    earliest: VirtualTime,
    now: VirtualTime,
    window: Duration,
    min_requested: Option<VirtualTime>,
) -> VirtualTime {
    let h = earliest.saturating_add(window);
    min_requested.map_or(h, |r| h.min(r)).max(now)
}
