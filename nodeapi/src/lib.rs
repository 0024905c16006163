//! The node runtime as the engine sees it, and nothing else: the
//! vocabulary both runtimes share and the one trait over them. The
//! runtimes (`vmm`) implement it; the engine drives it; neither is named
//! here.
//!
//! - [`NodeConfig`] ([`config`]): how to start a node.
//! - [`NodeRuntime`]: what the engine does with a node; implemented by
//!   `vmm::uml::UmlNode` (user-mode Linux) and
//!   `vmm::kvm::node::KvmNode` (the KVM microVM), each in its own
//!   module. `vmm::runtime::spawn` starts either.
//! - What a node produces, stamped with its virtual time: [`GuestOutput`]
//!   (console and control line, [`OutputStream`]), [`TxFrame`] (frames it
//!   sent), [`DiskRequest`] and [`DiskCompletion`] ([`disk`]: its data
//!   disk's requests).
//! - How an engine action ended: [`Grant`] (a grant: its [`RunOutcome`]
//!   and everything it produced), [`Delivered`] (a frame).
//! - [`NodeError`] ([`error`]): the host failed, not the guest.
//!
//! The engine (the `engine` crate) drives every node through
//! [`NodeRuntime`] only, so both runtimes see the same actions in the same
//! order and produce the same kind of trace. The contract every
//! implementation keeps:
//! - a node executes only inside [`NodeRuntime::grant`]; outside it, it
//!   is stopped, and nothing the host does reaches it;
//! - [`NodeRuntime::requested`] is the earliest virtual time at which the
//!   node has something to do by itself (its next timer); a node that waits
//!   only for outside events asks for a time far in the future;
//! - deliveries, disk completions and control input happen while the node
//!   is stopped, at a time `t` between its clock and its requested time; the
//!   node then asks to run at `t` (the interrupt is due).
//!
//! Every virtual time here is a [`VirtualTime`] (ns since the cluster
//! booted); a runtime keeps its own clock in whatever form suits it and
//! converts at this trait. The time of day a grant passes is a wall-clock
//! date, not a virtual time, and stays ns since the Unix epoch.

#![deny(missing_docs)]

pub mod config;
pub mod disk;
pub mod error;

use std::time::Duration;

use disksim::{Disk, DiskFault, RequestId};
use simtime::VirtualTime;

pub use config::NodeConfig;
pub use disk::{DiskCompletion, DiskRequest, ROOT_DISK_SERIAL};
pub use error::NodeError;

/// Which of a node's output channels some bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OutputStream {
    /// The guest console: kernel messages and whatever programs print.
    Console,
    /// The control line: replies of the in-guest agent.
    Control,
}

/// Bytes a node wrote, stamped with the node's virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestOutput {
    /// The node's virtual time when it wrote them.
    pub time: VirtualTime,
    /// The channel they came from.
    pub stream: OutputStream,
    /// The bytes, as written (not split into lines).
    pub bytes: Vec<u8>,
}

/// A frame the guest transmitted, stamped with its virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxFrame {
    /// The node's virtual time when the guest kicked its transmit queue.
    pub time: VirtualTime,
    /// The whole Ethernet frame (no virtio-net header).
    pub bytes: Vec<u8>,
}

/// What became of a frame handed to [`NodeRuntime::deliver_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// In the guest's receive queue.
    Now,
    /// The guest had no receive buffer; queued until it posts one.
    Queued,
    /// The guest's driver is not up (or its backlog is full): lost.
    Dropped,
}

/// How a grant ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The node waits: it wants to run again at `requested` (times far in
    /// the future, such as [`VirtualTime::IDLE`], mean "only when something
    /// happens").
    Waiting {
        /// The virtual time it wants to run at next.
        requested: VirtualTime,
    },
    /// The node ended (poweroff, panic, or killed): its process's exit
    /// status or signal under user-mode Linux, the power port's status
    /// under KVM.
    Exited {
        /// The exit status: the process's under user-mode Linux, the
        /// power port's under KVM; `None` when a signal ended the process.
        status: Option<i32>,
        /// The signal that ended the process (user-mode Linux only).
        signal: Option<i32>,
    },
    /// The node's machine reset itself (under KVM: a triple fault,
    /// `KVM_EXIT_SHUTDOWN`): the guest hit an exception it could not even
    /// report. `reason` says where, for the failure report. The node is gone,
    /// as after [`RunOutcome::Exited`].
    Reset {
        /// Where and why the machine reset, for humans.
        reason: String,
    },
    /// The node did not yield within the wall-clock watchdog: a guest busy
    /// loop (its clock is frozen while it computes) or a stuck host process.
    Hung {
        /// Wall-clock time the node went without progress before the
        /// watchdog gave up on it.
        wall: Duration,
    },
}

/// Everything one grant produced, each list in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// How the grant ended.
    pub outcome: RunOutcome,
    /// What the node printed (console and control line), stamped.
    pub output: Vec<GuestOutput>,
    /// Disk requests completed during the grant: reads, which complete at
    /// their kick (writes and flushes complete only when the engine says,
    /// [`NodeDisk::complete_disk`]).
    pub disk: Vec<DiskCompletion>,
    /// Frames the node transmitted.
    pub tx: Vec<TxFrame>,
    /// The wake-ups the node took by itself before it stopped (lookahead,
    /// [`NodeRuntime::grant_ahead`]); everything above happened at the
    /// last of them (or at the grant's own time when there were none).
    pub free_runs: FreeRuns,
}

/// The wake-ups a node took inside one grant without stopping, each one a
/// grant the engine would otherwise have made at that time
/// ([`NodeRuntime::grant_ahead`]). Zero for a grant without lookahead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreeRuns {
    /// How many.
    pub count: u64,
    /// The time of the last but one: the grant's own time when `count` is 1.
    pub prev: VirtualTime,
    /// The time of the last one: where the node's clock stood when it
    /// stopped.
    pub last: VirtualTime,
}

/// What the engine does with a node. See the module docs for the contract.
pub trait NodeRuntime {
    /// Waits (wall clock, bounded by `limit`) until the freshly started node
    /// is ready for its first grant at `start_time`; returns host-side
    /// start-up output that is not part of the guest's trace.
    fn wait_connected(&mut self, start_time: VirtualTime, limit: Duration) -> Result<Vec<GuestOutput>, NodeError>;
    /// The virtual time the node wants to run at next.
    fn requested(&self) -> VirtualTime;
    /// The node has exited (powered off, panicked, killed).
    fn has_exited(&self) -> bool;
    /// Lets the node run at `at` (never earlier than it asked) until it waits
    /// again, exits, or trips the wall-clock watchdog, and returns everything
    /// the grant produced ([`Grant`]). `time_of_day`: the wall-clock time (ns
    /// since the Unix epoch) at virtual time 0, the cluster's boot; a node
    /// booted later (restarted after a power loss) shows that plus virtual
    /// time, like every other node.
    ///
    /// A node that ends the grant waiting is then settled at `at`, still
    /// inside this call: what is owed to it while it is stopped (control
    /// input that waited for a buffer, frames that waited for receive
    /// buffers, the interrupts its own kicks earned) is delivered, so the
    /// guest asks to run again at once where something reached it.
    fn grant(&mut self, at: VirtualTime, time_of_day: u64, watchdog: Duration) -> Result<Grant, NodeError>;
    /// [`Self::grant`] with lookahead: the node may also take its own
    /// wake-ups (timers, clock reads) before `free_until` without stopping,
    /// as long as it does nothing the engine must see (console output, a
    /// device message); it stops at its first wake-up after such a thing,
    /// or at its first one at or after `free_until`. The engine passes the
    /// earliest time anything else in the cluster could happen, so every
    /// wake-up taken that way is a grant it would have made anyway, with no
    /// choice to make: [`Grant::free_runs`] says how many, and when, so the
    /// trace can count them as grants. `None`, or a runtime that cannot run
    /// ahead (this default), is a plain grant.
    fn grant_ahead(
        &mut self,
        at: VirtualTime,
        free_until: Option<VirtualTime>,
        time_of_day: u64,
        watchdog: Duration,
    ) -> Result<Grant, NodeError> {
        let _ = free_until;
        self.grant(at, time_of_day, watchdog)
    }
    /// Sends bytes to the guest's control line at `t` (an interrupt: the
    /// guest will ask to run at `t`). Bytes the guest has no buffer for yet
    /// follow at a later stop.
    fn send_control(&mut self, t: VirtualTime, bytes: &[u8], watchdog: Duration) -> Result<(), NodeError>;
    /// Puts a frame into the guest's receive queue at `t` and interrupts
    /// the guest, which will then ask to run at `t`.
    fn deliver_frame(&mut self, t: VirtualTime, frame: &[u8], watchdog: Duration) -> Result<Delivered, NodeError>;
    /// The node's data disk ([`NodeDisk`]); `None` for a node without one
    /// (no `[disk]`, or after [`NodeDisk::take_disk`]).
    fn data_disk(&self) -> Option<&dyn NodeDisk>;
    /// [`Self::data_disk`], to act on.
    fn data_disk_mut(&mut self) -> Option<&mut dyn NodeDisk>;
    /// The node's device streams start again from these seeds: the entropy
    /// device's (as if made with `entropy_seed`) and the data disk's read
    /// faults (as [`NodeConfig::read_faults`] would set them). Warm start
    /// calls it once every agent is ready, so that each execution from one
    /// boot draws its own; nothing else the guest sees changes.
    fn reseed_devices(&mut self, entropy_seed: u64, read_faults: disksim::ReadFaults);
    /// How many regular files have dirty pages in the guest's page cache,
    /// as it published at its latest idle stop: data a power loss takes
    /// besides the disk's volatile writes (the disk never saw it). Read
    /// only while the node is stopped, so it is the same at the same point
    /// of every execution. `None` where the
    /// runtime cannot see into the guest (this default: the KVM runtime);
    /// 0 from a user-mode Linux kernel without the patch that publishes it.
    fn dirty_files(&self) -> Option<u64> {
        None
    }
    /// Host memory the node uses, KiB.
    fn memory_kib(&self) -> u64;
    /// Powers the node off at once (the engine's "stop the world").
    fn kill(&mut self);
    /// Gets the node ready for fork(2) of the whole simulator process, after
    /// which the parent and each child go on from the same point (the base of
    /// warm start: many executions from one boot). Nothing the guest sees
    /// changes. A runtime whose nodes cannot be copied that way (a UML node
    /// is a process of its own) says so.
    fn prepare_fork(&mut self) -> Result<(), NodeError> {
        Err(NodeError::Runtime("this runtime's nodes cannot be forked".into()))
    }
    /// In a child of that fork(2): takes the node over, so that it runs on in
    /// this process exactly as it would have in the parent.
    fn rehome(&mut self) -> Result<(), NodeError> {
        Err(NodeError::Runtime("this runtime's nodes cannot be forked".into()))
    }
}

/// What the engine does with a node's data disk: the disk side of a
/// [`NodeRuntime`], reached through [`NodeRuntime::data_disk`] and
/// [`NodeRuntime::data_disk_mut`], so that only a node with a data disk
/// offers disk methods. A node runtime implements both traits; the
/// engine holds it as a `dyn NodeRuntime` and asks for this side.
pub trait NodeDisk: NodeRuntime {
    /// The disk, for inspection (its durable store, volatile writes,
    /// crash-state counts); `None` only where the runtime cannot show it.
    /// Completing requests behind the node's back breaks its bookkeeping:
    /// use [`Self::complete_disk`].
    fn disk(&self) -> Option<&Disk>;
    /// Disk writes and flushes the guest submitted and that wait for the
    /// engine, in submission (= id) order: the completions the engine may
    /// choose from, in any order. Empty once the node has exited (its
    /// requests died with it; the disk resolves them in a crash state).
    fn pending_disk(&self) -> Vec<DiskRequest>;
    /// Makes pending request `id` suffer `fault` when it completes
    /// (`disksim::Disk::inject`): a flush that makes nothing durable, a
    /// write that fails with an I/O error and does not land, or one that
    /// lands elsewhere. False, changing nothing, when the fault does not fit
    /// a pending request `id`.
    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool;
    /// Reads are no longer corrupted (`[faults.disk] corrupt_read`; the
    /// node was spawned with [`NodeConfig::read_faults`]): the quiet period.
    fn stop_read_faults(&mut self);
    /// Completes pending disk request `id` at virtual time `t`: applies its
    /// durability effect to the disk's write log (a completed write is
    /// volatile; a completed flush makes durable every write completed
    /// before it was issued), hands the status to the guest's driver and
    /// delivers the used-buffer interrupt at `t`. Returns the completion for
    /// the engine's trace (a grant never reports it again).
    fn complete_disk(&mut self, t: VirtualTime, id: RequestId, watchdog: Duration)
        -> Result<DiskCompletion, NodeError>;
    /// Takes the data disk out of a node that is no longer running (after
    /// [`NodeRuntime::kill`], or once it exited): the disk as the power loss left
    /// it, with its write log and the requests that were in flight still
    /// outstanding. The engine then picks a crash state
    /// ([`Disk::crash_states`], [`Disk::sample_crash_state`]), applies it
    /// ([`Disk::apply_crash`]) and may start a fresh node on the result.
    fn take_disk(&mut self) -> Result<Disk, NodeError>;
}

/// Which runtime runs the nodes. Serialized as `"uml"` or `"kvm"` (the run's
/// JSON line, failure files: a replay runs on the runtime recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// User-mode Linux with time-travel (any x86-64 Linux host).
    #[default]
    Uml,
    /// KVM microVM (hosts whose /dev/kvm has hardware virtualization).
    Kvm,
}

impl RuntimeKind {
    /// `"uml"` or `"kvm"`, as in the run's JSON line.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Uml => "uml",
            RuntimeKind::Kvm => "kvm",
        }
    }
}
