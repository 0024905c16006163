//! One node as the engine sees it: its power state ([`Power`]: the
//! runtime while it is up, its disk while it is not), how to start it
//! again, and what its agent and console said.

use std::path::PathBuf;
use std::time::Duration;

use disksim::Disk;
use vmm::node::{NodeConfig, NodeDisk, NodeRuntime};
use vmm::runtime::{self, RuntimeKind};

use crate::console::LineSplitter;
use crate::faults::NodeClock;
use crate::seeds::{entropy_seed, read_fault_seed};
use crate::spec::EngineError;
use crate::NodeId;
use simtime::VirtualTime;

/// The cluster's nodes in node order, indexed by [`NodeId`] (node `n1`
/// first); as a slice, by 0-based index.
pub(super) struct Nodes(Vec<Node>);

impl Nodes {
    pub fn new(nodes: Vec<Node>) -> Nodes {
        assert!(nodes.len() <= usize::from(NodeId::MAX), "a cluster has at most NodeId::MAX nodes");
        Nodes(nodes)
    }

    /// Every node's id, ascending.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + use<> {
        NodeId::first(self.0.len())
    }

    /// Every node with its id, ascending.
    pub fn with_ids(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.ids().zip(self.0.iter())
    }

    /// Every node with its id, ascending, to change.
    pub fn with_ids_mut(&mut self) -> impl Iterator<Item = (NodeId, &mut Node)> {
        self.ids().zip(self.0.iter_mut())
    }

    /// Node `id`, if the cluster has it (the host client's node has none).
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.0.get(id.index())
    }
}

impl std::ops::Index<NodeId> for Nodes {
    type Output = Node;
    fn index(&self, id: NodeId) -> &Node {
        &self.0[id.index()]
    }
}

impl std::ops::IndexMut<NodeId> for Nodes {
    fn index_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.0[id.index()]
    }
}

impl std::ops::Deref for Nodes {
    type Target = [Node];
    fn deref(&self) -> &[Node] {
        &self.0
    }
}

impl std::ops::DerefMut for Nodes {
    fn deref_mut(&mut self) -> &mut [Node] {
        &mut self.0
    }
}

/// Lines of console output kept for failure messages.
const TAIL_LINES: usize = 20;

/// A node's power state.
///
/// Invariant: the node's disk (with a `[disk]`) is in exactly one place:
/// with the runtime while the node is up, here while it is not.
pub(super) enum Power {
    /// Not booted yet: the disk its first boot gets.
    Off { disk: Option<Disk> },
    /// Booted (the kernel may have exited since: [`Node::is_up`]).
    Up(Up),
    /// Powered off by a crash at `since`, its disk as the crash left it.
    Crashed { since: VirtualTime, disk: Option<Disk> },
}

/// What the engine knows of a booted node besides its runtime. It goes
/// with the boot: a crash ends it, and the next boot starts afresh.
pub(super) struct Up {
    pub vm: Box<dyn NodeRuntime>,
    /// The agent reported ready in this boot.
    pub ready: bool,
    /// While its start command is paused: the time it resumes.
    pub paused_until: Option<VirtualTime>,
    /// While its start command is killed: the time it runs again.
    pub killed_until: Option<VirtualTime>,
    /// Kills whose `@sim done start` has not come yet: that exit is the
    /// kill's, not a failure of the start command.
    pub kills_unanswered: u32,
}

pub(super) struct Node {
    pub name: String,
    power: Power,
    /// The configuration every boot of this node uses (its run directory
    /// changes per boot; see [`Node::boot`]).
    config: NodeConfig,
    runtime: RuntimeKind,
    scratch: PathBuf,
    boots: u32,
    pub console: LineSplitter,
    pub control: LineSplitter,
    pub saw_panic: bool,
    /// The kernel's "Kernel panic - not syncing: ..." line.
    pub panic_line: Option<String>,
    /// Last console lines, for failure messages.
    pub tail: Vec<String>,
    /// Agent commands that wait for the node to be up and ready again.
    pub deferred: Vec<String>,
    /// Checks (invariants, liveness) sent and not answered yet. A crash
    /// kills them with the node; they are sent again once it is ready.
    pub running: Vec<String>,
    /// Its clock hardware (offset, drift): the same for every boot.
    pub clock: NodeClock,
    /// A flush of its disk completed since it last ran: its data just
    /// became durable, and it has not acted on that yet.
    pub flushed_since_run: bool,
    /// Its last run sent frames: it just told a peer something (an
    /// acknowledgement, a reply) that a crash now may contradict.
    pub just_sent: bool,
}

impl Node {
    /// A node not booted yet, with the data disk `disk` and clock hardware
    /// `clock`.
    pub fn new(
        name: String,
        config: NodeConfig,
        runtime: RuntimeKind,
        scratch: PathBuf,
        disk: Option<Disk>,
        clock: NodeClock,
    ) -> Node {
        Node {
            name,
            power: Power::Off { disk },
            config,
            runtime,
            scratch,
            boots: 0,
            console: LineSplitter::default(),
            control: LineSplitter::default(),
            saw_panic: false,
            panic_line: None,
            tail: Vec::new(),
            deferred: Vec::new(),
            running: Vec::new(),
            clock,
            flushed_since_run: false,
            just_sent: false,
        }
    }

    /// Starts a fresh kernel (a process under user-mode Linux, a VM under KVM)
    /// for this node. Each boot gets its own
    /// run directory (`n2`, `n2.boot1`, ...): the guest sees only relative
    /// names, so the directory's name never reaches it, and a dead boot's
    /// sockets cannot be confused with the new one's. Each boot's entropy
    /// device gets its own seed ([`crate::entropy_seed`] of `execution_seed`,
    /// this node and the boot number), and so does its disk's read-fault
    /// stream ([`crate::read_fault_seed`]).
    pub fn boot(&mut self, execution_seed: u64) -> Result<(), EngineError> {
        let dir_name = if self.boots == 0 { self.name.clone() } else { format!("{}.boot{}", self.name, self.boots) };
        let run_dir = self.scratch.join(dir_name);
        std::fs::create_dir_all(&run_dir).map_err(|source| EngineError::Scratch { path: run_dir.clone(), source })?;
        self.config.run_dir = run_dir;
        let node = self.config.node_id;
        self.config.entropy_seed = entropy_seed(execution_seed, node, self.boots);
        self.config.read_faults.seed = read_fault_seed(execution_seed, node, self.boots);
        self.boots += 1;
        let disk = match &mut self.power {
            Power::Off { disk } | Power::Crashed { disk, .. } => disk.take(),
            Power::Up(_) => unreachable!("a node boots only while it is not up"),
        };
        let vm = runtime::spawn(self.runtime, &self.config, disk)?;
        self.power = Power::Up(Up { vm, ready: false, paused_until: None, killed_until: None, kills_unanswered: 0 });
        self.console = LineSplitter::default();
        self.control = LineSplitter::default();
        Ok(())
    }

    /// Waits until the freshly booted kernel connects; its clock starts at
    /// `now`. Output from before that is UML's host-side start-up chatter
    /// (checks of the host's ptys, /dev/shm, ...): it describes the host,
    /// not the guest, and stays out of the trace.
    pub fn connect(&mut self, now: VirtualTime, timeout: Duration) -> Result<(), EngineError> {
        let vm = self.vm();
        let _host_chatter = vm.wait_connected(now, timeout)?;
        Ok(())
    }

    /// Power loss: the kernel process is killed on the spot. Its disk (if
    /// any) comes back with its write log, for the engine to choose what
    /// survived. Its paused processes die with it, and its running checks
    /// are deferred until it is ready again.
    pub fn power_off(&mut self, now: VirtualTime) -> Result<Option<&mut Disk>, EngineError> {
        let disk = match std::mem::replace(&mut self.power, Power::Off { disk: None }) {
            Power::Up(Up { mut vm, .. }) => {
                vm.kill();
                match vm.data_disk_mut() {
                    Some(d) => Some(d.take_disk()?),
                    None => None,
                }
            }
            Power::Off { disk } | Power::Crashed { disk, .. } => disk,
        };
        self.power = Power::Crashed { since: now, disk };
        let killed = std::mem::take(&mut self.running);
        self.deferred.splice(0..0, killed);
        let Power::Crashed { disk, .. } = &mut self.power else { unreachable!("set just above") };
        Ok(disk.as_mut())
    }

    /// Its device streams (entropy, disk read faults) start again from
    /// `seed`, as the current boot's would have with that execution seed
    /// (warm start: see `Execution::end_boot`). A node that is down
    /// draws from `seed` at its next boot anyway.
    pub fn reseed_devices(&mut self, seed: u64, node: NodeId) {
        let boot = self.boots.saturating_sub(1);
        self.config.read_faults.seed = read_fault_seed(seed, node, boot);
        let read_faults = self.config.read_faults;
        if let Some(vm) = self.runtime_mut() {
            vm.reseed_devices(entropy_seed(seed, node, boot), read_faults);
        }
    }

    /// Reads of this node's disk are no longer corrupted, in this boot and
    /// every later one (the quiet period).
    pub fn stop_read_faults(&mut self) {
        self.config.read_faults.corrupt_read = 0.0;
        if let Some(d) = self.data_disk_mut() {
            d.stop_read_faults();
        }
    }

    /// Up: booted and not exited.
    pub fn is_up(&self) -> bool {
        self.runtime().is_some_and(|v| !v.has_exited())
    }

    /// Up, and its agent reported ready in this boot.
    pub fn is_ready(&self) -> bool {
        self.is_up() && self.agent_ready()
    }

    /// Its agent reported ready in this boot (the kernel may have exited
    /// since).
    pub fn agent_ready(&self) -> bool {
        self.up().is_some_and(|up| up.ready)
    }

    /// Its agent reported ready (ignored unless booted: a message comes
    /// only from a running node).
    pub fn set_ready(&mut self) {
        if let Some(up) = self.up_mut() {
            up.ready = true;
        }
    }

    /// The current boot; `None` before the first boot and after a crash.
    fn up(&self) -> Option<&Up> {
        match &self.power {
            Power::Up(up) => Some(up),
            _ => None,
        }
    }

    /// [`Self::up`], to act on.
    fn up_mut(&mut self) -> Option<&mut Up> {
        match &mut self.power {
            Power::Up(up) => Some(up),
            _ => None,
        }
    }

    /// The runtime of the current boot; `None` before the first boot and
    /// after a crash.
    pub fn runtime(&self) -> Option<&dyn NodeRuntime> {
        Some(&*self.up()?.vm)
    }

    /// [`Self::runtime`], to act on.
    pub fn runtime_mut(&mut self) -> Option<&mut dyn NodeRuntime> {
        Some(&mut *self.up_mut()?.vm)
    }

    /// The disk side of the current boot's runtime; `None` without a data
    /// disk, before the first boot and after a crash.
    pub fn data_disk(&self) -> Option<&dyn NodeDisk> {
        self.runtime()?.data_disk()
    }

    /// [`Self::data_disk`], to act on.
    pub fn data_disk_mut(&mut self) -> Option<&mut dyn NodeDisk> {
        self.runtime_mut()?.data_disk_mut()
    }

    /// The runtime of a node the caller knows is booted.
    pub fn vm(&mut self) -> &mut dyn NodeRuntime {
        self.runtime_mut().expect("the node is up")
    }

    /// Its data disk, wherever it is (with the runtime, or here).
    pub fn disk(&self) -> Option<&Disk> {
        match &self.power {
            Power::Up(_) => self.data_disk()?.disk(),
            Power::Off { disk } | Power::Crashed { disk, .. } => disk.as_ref(),
        }
    }

    /// The time of the crash that powered it off; `None` unless crashed.
    pub fn crashed_at(&self) -> Option<VirtualTime> {
        match self.power {
            Power::Crashed { since, .. } => Some(since),
            _ => None,
        }
    }

    /// While its start command is paused: the time it resumes.
    pub fn paused_until(&self) -> Option<VirtualTime> {
        self.up()?.paused_until
    }

    /// Its start command is paused until `until`, or (`None`) resumed.
    /// Only a booted node pauses: a crash ends a pause with the node.
    pub fn set_paused_until(&mut self, until: Option<VirtualTime>) {
        if let Some(up) = self.up_mut() {
            up.paused_until = until;
        }
    }

    /// While its start command is killed: the time it runs again.
    pub fn killed_until(&self) -> Option<VirtualTime> {
        self.up()?.killed_until
    }

    /// Its start command is killed until `until` (a kill: one more exit
    /// to expect from it), or (`None`) started again. Only a booted node
    /// is killed: a crash ends the kill with the node.
    pub fn set_killed_until(&mut self, until: Option<VirtualTime>) {
        if let Some(up) = self.up_mut() {
            if until.is_some() {
                up.kills_unanswered += 1;
            }
            up.killed_until = until;
        }
    }

    /// The start command's exit was reported: whether it is a kill's
    /// (then expected, and counted off).
    pub fn start_exit_was_kill(&mut self) -> bool {
        match self.up_mut() {
            Some(up) if up.kills_unanswered > 0 => {
                up.kills_unanswered -= 1;
                true
            }
            _ => false,
        }
    }

    pub fn remember_line(&mut self, line: &str) {
        if crate::console::is_kernel_panic(line) {
            self.saw_panic = true;
            self.panic_line.get_or_insert_with(|| line.trim().to_string());
        }
        self.tail.push(line.to_string());
        if self.tail.len() > TAIL_LINES {
            self.tail.remove(0);
        }
    }

    /// `what`, followed by the node's last console lines.
    pub fn with_tail(&self, what: String) -> String {
        if self.tail.is_empty() {
            return what;
        }
        let mut s = what;
        s.push_str(&format!("\nlast console lines of {}:\n", self.name));
        for l in &self.tail {
            s.push_str("  | ");
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}
