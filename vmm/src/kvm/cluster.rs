//! A deterministic multi-node driver for KVM microVMs: frames through netsim, disk
//! requests through disksim, one virtual timeline.
//!
//! Each node is a [`MicroVm`] with an optional virtio-net device ([`NetPort`], window
//! 0, vector [`NET_VECTOR`]) and an optional virtio-blk device ([`BlkPort`], window 1,
//! vector [`BLK_VECTOR`]). [`Cluster::run`] repeats one step:
//! - the earliest *external event* (a netsim delivery, or a disk completion due at
//!   `accept time + disk latency`) fires if no runnable node's clock is earlier: an
//!   idle receiver's clock jumps to the event time ([`MicroVm::idle_until`]), the
//!   device writes the guest's ring, and the transport raises the interrupt, which
//!   the run loop injects at the node's next entry;
//! - otherwise the runnable node with the earliest clock (ties: lowest id) runs until
//!   `min(its clock + quantum, next external event)`; then its transmitted frames go
//!   into netsim at their notification time, and its accepted disk requests are
//!   scheduled.
//!
//! Causality (conservative lookahead): a frame sent at `s` arrives no earlier than
//! `s + L`, `L` the smallest latency floor of any link. The quantum is
//! `min(L, disk latency)` minus the largest exit cost (a run may overshoot its bound by
//! one exit),
//! and the earliest pending event time never decreases, so no frame is ever due at a
//! node whose clock has already passed its arrival time, and a receiver takes each
//! frame at its arrival time exactly (idle) or within one exit of it (running).
//!
//! Determinism: the order of steps depends only on virtual clocks, node ids, netsim's
//! `(time, id)` order and the seeded rng the caller supplies. Every event is folded
//! into [`Cluster::trace_hash_hex`] together with each node's own exit trace.

use std::collections::VecDeque;
use std::sync::Arc;

use disksim::RequestId;
use netsim::{DeliveryId, Latency, Network, NodeId};
use rand_core::RngCore;
use sha2::{Digest, Sha256};

use super::error::KvmError;
use super::ports::{BlkPort, NetPort};
use super::virtio_mmio::{window_base, Signal, VirtioMmioTransport, WINDOW};
use super::vm::{MicroVm, RunLimits, RunOutcome};
use crate::virtio::{DeviceError, VirtioBlk};

/// Interrupt vector of the virtio-net transport.
pub const NET_VECTOR: u8 = 0x31;
/// Interrupt vector of the virtio-blk transport.
pub const BLK_VECTOR: u8 = 0x32;
/// Guest physical base of the virtio-net window.
pub fn net_base() -> u64 {
    window_base(0)
}
/// Guest physical base of the virtio-blk window.
pub fn blk_base() -> u64 {
    window_base(1)
}

/// Errors of a cluster run; each names the node (1-based) where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("node {node}: {source}")]
    Kvm {
        node: u16,
        #[source]
        source: KvmError,
    },
    #[error("node {node}: virtio device: {source}")]
    Device {
        node: u16,
        #[source]
        source: DeviceError,
    },
    #[error("node {node} stopped: {outcome:?}")]
    Stopped { node: u16, outcome: RunOutcome },
    #[error(
        "lookahead {lookahead_ns} ns (min link latency, disk latency) must exceed the exit cost {exit_cost_ns} ns"
    )]
    Lookahead { lookahead_ns: u64, exit_cost_ns: u64 },
    #[error("cluster has {nodes} nodes but the network {net_nodes}")]
    NodeCount { nodes: usize, net_nodes: u16 },
    #[error("node {0} already has that device")]
    DeviceTaken(u16),
    #[error("still busy after {0} steps")]
    StepLimit(u64),
}

/// What happened, in order. Folded into the trace hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A frame copy netsim scheduled (`Sent` with `to: None` when it scheduled none:
    /// lost, partitioned or unroutable).
    Sent { from: NodeId, at_ns: u64, to: Option<NodeId>, arrival_ns: u64, id: Option<DeliveryId>, frame: Arc<[u8]> },
    /// A frame reached `to`'s device at `at_ns` (the receiver's clock); `backlog`:
    /// frames waiting for a receive buffer after it (0: it went into the ring).
    Delivered { id: DeliveryId, to: NodeId, at_ns: u64, sent_at_ns: u64, backlog: usize, frame: Arc<[u8]> },
    /// A frame for a node that is off or has no network device.
    Dropped { id: DeliveryId, to: NodeId },
    /// A disk request completed at `at_ns`.
    DiskCompleted { node: NodeId, id: RequestId, at_ns: u64 },
    /// The guest powered off.
    PoweredOff { node: NodeId, at_ns: u64, code: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Runnable,
    /// Halted with nothing that could wake it but an external event.
    Idle,
    Off(u32),
}

struct Node {
    vm: MicroVm,
    state: State,
    net: bool,
    blk: bool,
    /// Disk requests by due time (FIFO: due times never decrease).
    disk_due: VecDeque<(u64, RequestId)>,
}

/// An external event chosen to fire next; `Ord` is the firing order at equal times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ext {
    Net(u64),
    Disk(u64, usize),
}

impl Ext {
    fn time(self) -> u64 {
        match self {
            Ext::Net(t) | Ext::Disk(t, _) => t,
        }
    }
}

/// Nodes, the network between them, and the schedule. See the module docs.
pub struct Cluster {
    nodes: Vec<Node>,
    net: Network,
    rng: Box<dyn RngCore>,
    disk_latency_ns: u64,
    events: Vec<Event>,
    hash: Sha256,
    steps: u64,
}

impl Cluster {
    /// An empty cluster over `net` (which fixes the node count), drawing netsim's
    /// randomness from `rng` (seeded by the caller); disk requests complete
    /// `disk_latency_ns` after acceptance, in acceptance order.
    pub fn new(net: Network, rng: Box<dyn RngCore>, disk_latency_ns: u64) -> Cluster {
        Cluster { nodes: Vec::new(), net, rng, disk_latency_ns, events: Vec::new(), hash: Sha256::new(), steps: 0 }
    }

    /// Adds a node; ids are 1, 2, ... in call order (the node's MAC ends in its id).
    pub fn add_node(&mut self, vm: MicroVm) -> Result<NodeId, ClusterError> {
        let id = NodeId::from_index(self.nodes.len()).filter(|n| n.get() <= self.net.node_count());
        let id = id.ok_or(ClusterError::NodeCount { nodes: self.nodes.len() + 1, net_nodes: self.net.node_count() })?;
        self.nodes.push(Node { vm, state: State::Runnable, net: false, blk: false, disk_due: VecDeque::new() });
        Ok(id)
    }

    /// Gives `node` a virtio-net device with MAC `02:00:0a:00:00:NN`.
    pub fn attach_net(&mut self, node: NodeId) -> Result<(), ClusterError> {
        let n = &mut self.nodes[node.index()];
        let port = NetPort::new(node.get() as u8, n.vm.memory().clone());
        let t = VirtioMmioTransport::new(port, NET_VECTOR);
        if n.net || !n.vm.mmio_mut().attach(net_base(), WINDOW, Box::new(t)) {
            return Err(ClusterError::DeviceTaken(node.get()));
        }
        n.net = true;
        Ok(())
    }

    /// Gives `node` a virtio-blk device.
    pub fn attach_blk(&mut self, node: NodeId, blk: VirtioBlk) -> Result<(), ClusterError> {
        let n = &mut self.nodes[node.index()];
        let t = VirtioMmioTransport::new(BlkPort::new(blk, n.vm.memory().clone()), BLK_VECTOR);
        if n.blk || !n.vm.mmio_mut().attach(blk_base(), WINDOW, Box::new(t)) {
            return Err(ClusterError::DeviceTaken(node.get()));
        }
        n.blk = true;
        Ok(())
    }

    /// The node's VM.
    pub fn vm(&self, node: NodeId) -> &MicroVm {
        &self.nodes[node.index()].vm
    }

    /// The node's block device, if it has one.
    pub fn blk(&mut self, node: NodeId) -> Option<&VirtioBlk> {
        let n = &mut self.nodes[node.index()];
        if !n.blk {
            return None;
        }
        blk_port(&mut n.vm).map(|t| t.device().blk())
    }

    /// The power-off status of each node (`None`: still on).
    pub fn exit_codes(&self) -> Vec<Option<u32>> {
        self.nodes.iter().map(|n| if let State::Off(c) = n.state { Some(c) } else { None }).collect()
    }

    /// Everything that happened so far, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The network (statistics, pending frames).
    pub fn network(&self) -> &Network {
        &self.net
    }

    /// sha256 over the event log and every node's exit trace, in node order.
    pub fn trace_hash_hex(&self) -> String {
        let mut h = self.hash.clone();
        for n in &self.nodes {
            h.update(n.vm.trace_hash());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Runs until every node is off or idle with nothing left to deliver, or fails
    /// after `max_steps` steps.
    pub fn run(&mut self, max_steps: u64) -> Result<(), ClusterError> {
        let quantum = self.quantum()?;
        let limit = self.steps + max_steps;
        while self.step(quantum)? {
            self.steps += 1;
            if self.steps >= limit {
                return Err(ClusterError::StepLimit(max_steps));
            }
        }
        Ok(())
    }

    /// `min(link latency floors, disk latency) - max exit cost`.
    fn quantum(&self) -> Result<u64, ClusterError> {
        let floor = |l: Latency| match l {
            Latency::Fixed(ns) | Latency::Uniform { min: ns, .. } | Latency::Exponential { min: ns, .. } => ns,
        };
        let n = self.net.node_count();
        let links = NodeId::all(n).flat_map(|a| NodeId::all(n).filter(move |&b| b != a).map(move |b| (a, b)));
        let net = links.map(|(a, b)| floor(self.net.link(a, b).latency)).min().unwrap_or(u64::MAX);
        let lookahead_ns = net.min(self.disk_latency_ns);
        let exit_cost_ns = self.nodes.iter().map(|n| n.vm.config().exit_cost_ns).max().unwrap_or(0);
        match lookahead_ns.checked_sub(exit_cost_ns) {
            Some(q) if q > 0 => Ok(q),
            _ => Err(ClusterError::Lookahead { lookahead_ns, exit_cost_ns }),
        }
    }

    /// One step (see the module docs); false when nothing is left to do.
    fn step(&mut self, quantum: u64) -> Result<bool, ClusterError> {
        let net = self.net.next_delivery_time().map(Ext::Net);
        let disk = self.nodes.iter().enumerate().filter_map(|(i, n)| n.disk_due.front().map(|&(t, _)| Ext::Disk(t, i)));
        let ext = net.into_iter().chain(disk).min_by_key(|e| (e.time(), *e));
        let runnable = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.state == State::Runnable)
            .map(|(i, n)| (n.vm.now_ns(), i))
            .min();
        // External events first at equal times: the node then runs with the effect.
        let ext_first = |e: Ext| runnable.map_or(u64::MAX, |(t, _)| t) >= e.time();
        match (ext, runnable) {
            (Some(e), _) if ext_first(e) => self.fire(e)?,
            (e, Some((t, i))) => {
                let until = t.saturating_add(quantum).min(e.map_or(u64::MAX, Ext::time));
                self.run_node(i, until)?;
            }
            (_, None) => return Ok(false),
        }
        Ok(true)
    }

    fn log(&mut self, ev: Event) {
        self.hash.update(format!("{ev:?}\n").as_bytes());
        self.events.push(ev);
    }

    /// Runs node `i` until `until` and collects what its devices saw.
    fn run_node(&mut self, i: usize, until: u64) -> Result<(), ClusterError> {
        let id = NodeId::from_index(i).expect("node index in range");
        let n = &mut self.nodes[i];
        let out = n.vm.run(RunLimits { max_exits: None, until_ns: Some(until) });
        let out = out.map_err(|source| ClusterError::Kvm { node: id.get(), source })?;
        match out {
            RunOutcome::TimeLimit | RunOutcome::ExitLimit => {}
            RunOutcome::Halted => n.state = State::Idle,
            RunOutcome::PoweredOff(code) => n.state = State::Off(code),
            RunOutcome::Shutdown | RunOutcome::Interrupted => {
                return Err(ClusterError::Stopped { node: id.get(), outcome: out })
            }
        }
        let dev_err = |source| ClusterError::Device { node: id.get(), source };
        let mut sent = Vec::new();
        if n.net {
            let port = net_port(&mut n.vm).expect("net attached").device_mut();
            sent = port.take_tx();
            if let Some(e) = port.take_error() {
                return Err(dev_err(e));
            }
        }
        if n.blk {
            let port = blk_port(&mut n.vm).expect("blk attached").device_mut();
            let accepted = port.take_accepted();
            if let Some(e) = port.take_error() {
                return Err(dev_err(e));
            }
            for a in accepted {
                let last = n.disk_due.back().map_or(0, |&(t, _)| t);
                n.disk_due.push_back((last.max(a.at_ns + self.disk_latency_ns), a.id));
            }
        }
        let now = n.vm.now_ns();
        for tx in sent {
            let frame: Arc<[u8]> = Arc::from(tx.frame);
            let copies = self.net.send(tx.at_ns, id, &frame, &mut *self.rng);
            if copies.is_empty() {
                self.log(Event::Sent {
                    from: id,
                    at_ns: tx.at_ns,
                    to: None,
                    arrival_ns: 0,
                    id: None,
                    frame: frame.clone(),
                });
            }
            for c in copies {
                let ev = Event::Sent {
                    from: id,
                    at_ns: tx.at_ns,
                    to: Some(c.to),
                    arrival_ns: c.time,
                    id: Some(c.id),
                    frame: frame.clone(),
                };
                self.log(ev);
            }
        }
        if let RunOutcome::PoweredOff(code) = out {
            self.log(Event::PoweredOff { node: id, at_ns: now, code });
        }
        Ok(())
    }

    /// Fires an external event at its node.
    fn fire(&mut self, e: Ext) -> Result<(), ClusterError> {
        match e {
            Ext::Net(_) => {
                let d = self.net.pop_next().expect("a delivery is pending");
                let n = &mut self.nodes[d.to.index()];
                if !n.net || matches!(n.state, State::Off(_)) {
                    self.log(Event::Dropped { id: d.id, to: d.to });
                    return Ok(());
                }
                let at_ns = wake(n, d.time);
                let t = net_port(&mut n.vm).expect("net attached");
                let irq = t.device_mut().deliver(&d.frame);
                raise(t, irq.map_err(|source| ClusterError::Device { node: d.to.get(), source })?);
                let backlog = t.device_mut().backlog_len();
                self.log(Event::Delivered {
                    id: d.id,
                    to: d.to,
                    at_ns,
                    sent_at_ns: d.sent_at,
                    backlog,
                    frame: d.frame,
                });
            }
            Ext::Disk(t, i) => {
                let node = NodeId::from_index(i).expect("node index in range");
                let n = &mut self.nodes[i];
                let (_, id) = n.disk_due.pop_front().expect("a completion is due");
                if matches!(n.state, State::Off(_)) {
                    return Ok(());
                }
                let at_ns = wake(n, t);
                let tr = blk_port(&mut n.vm).expect("blk attached");
                let irq = tr.device_mut().complete(id);
                // No disk faults in this driver: the fault is always None.
                let (irq, _fault) = irq.map_err(|source| ClusterError::Device { node: node.get(), source })?;
                raise(tr, irq);
                self.log(Event::DiskCompleted { node, id, at_ns });
            }
        }
        Ok(())
    }
}

/// Brings an idle node's clock to `t` and makes it runnable; returns its clock.
fn wake(n: &mut Node, t: u64) -> u64 {
    if n.state == State::Idle {
        n.vm.idle_until(t);
        n.state = State::Runnable;
    }
    n.vm.now_ns()
}

fn raise<D: super::virtio_mmio::VirtioDevice>(t: &mut VirtioMmioTransport<D>, irq: bool) {
    if irq {
        t.raise(Signal { used_buffer: true, config_change: false });
    }
}

fn net_port(vm: &mut MicroVm) -> Option<&mut VirtioMmioTransport<NetPort>> {
    vm.mmio_mut().device_mut(net_base())
}

fn blk_port(vm: &mut MicroVm) -> Option<&mut VirtioMmioTransport<BlkPort>> {
    vm.mmio_mut().device_mut(blk_base())
}
