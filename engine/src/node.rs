//! One node as the engine sees it: the runtime handle (absent while the
//! node is powered off), how to start it again, and what its agent and
//! console said.

use std::path::PathBuf;
use std::time::Duration;

use disksim::Disk;
use vmm::node::{NodeConfig, NodeRuntime};
use vmm::runtime::{self, RuntimeKind};

use crate::faults::NodeClock;
use crate::seeds::{entropy_seed, read_fault_seed};
use crate::spec::EngineError;
use crate::trace::LineSplitter;
use crate::VirtualTime;

/// Lines of console output kept for failure messages.
const TAIL_LINES: usize = 20;

pub(super) struct Node {
    pub name: String,
    /// `None` while the node is powered off after a crash.
    pub vm: Option<Box<dyn NodeRuntime>>,
    /// The configuration every boot of this node uses (its run directory
    /// changes per boot; see [`Node::boot`]).
    config: NodeConfig,
    runtime: RuntimeKind,
    scratch: PathBuf,
    boots: u32,
    pub console: LineSplitter,
    pub control: LineSplitter,
    /// The agent reported ready since the node last booted.
    pub ready: bool,
    pub saw_panic: bool,
    /// The kernel's "Kernel panic - not syncing: ..." line.
    pub panic_line: Option<String>,
    /// Last console lines, for failure messages.
    pub tail: Vec<String>,
    /// Virtual time of the crash, while powered off.
    pub crashed_at: Option<VirtualTime>,
    /// Agent commands that wait for the node to be up and ready again.
    pub deferred: Vec<String>,
    /// Checks (invariants, liveness) sent and not answered yet. A crash
    /// kills them with the node; they are sent again once it is ready.
    pub running: Vec<String>,
    /// The node's data disk while it is powered off (the runtime holds it
    /// while the node is up).
    pub disk: Option<Disk>,
    /// Its clock hardware (offset, drift): the same for every boot.
    pub clock: NodeClock,
    /// While its start command is paused: the time it resumes.
    pub paused_until: Option<VirtualTime>,
    /// A flush of its disk completed since it last ran: its data just
    /// became durable, and it has not acted on that yet.
    pub flushed_since_run: bool,
    /// Its last run sent frames: it just told a peer something (an
    /// acknowledgement, a reply) that a crash now may contradict.
    pub just_sent: bool,
}

impl Node {
    pub fn new(name: String, config: NodeConfig, runtime: RuntimeKind, scratch: PathBuf) -> Node {
        Node {
            name,
            vm: None,
            config,
            runtime,
            scratch,
            boots: 0,
            console: LineSplitter::default(),
            control: LineSplitter::default(),
            ready: false,
            saw_panic: false,
            panic_line: None,
            tail: Vec::new(),
            crashed_at: None,
            deferred: Vec::new(),
            running: Vec::new(),
            disk: None,
            clock: NodeClock::default(),
            paused_until: None,
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
        let index = u64::from(self.config.node_id.saturating_sub(1));
        self.config.entropy_seed = entropy_seed(execution_seed, index, self.boots);
        self.config.read_faults.seed = read_fault_seed(execution_seed, index, self.boots);
        self.boots += 1;
        self.vm = Some(runtime::spawn(self.runtime, &self.config, self.disk.take())?);
        self.ready = false;
        self.crashed_at = None;
        self.console = LineSplitter::default();
        self.control = LineSplitter::default();
        Ok(())
    }

    /// Waits until the freshly booted kernel connects; its clock starts at
    /// `now`. Output from before that is UML's host-side start-up chatter
    /// (checks of the host's ptys, /dev/shm, ...): it describes the host,
    /// not the guest, and stays out of the trace.
    pub fn connect(&mut self, now: VirtualTime, timeout: Duration) -> Result<(), EngineError> {
        let vm = self.vm.as_mut().expect("connect after boot");
        let _host_chatter = vm.wait_connected(now, timeout)?;
        Ok(())
    }

    /// Power loss: the kernel process is killed on the spot. Its disk (if
    /// any) comes back with its write log, for the engine to choose what
    /// survived.
    pub fn power_off(&mut self, now: VirtualTime) -> Result<Option<&mut Disk>, EngineError> {
        if let Some(mut vm) = self.vm.take() {
            vm.kill();
            if vm.has_disk() {
                self.disk = Some(vm.take_disk()?);
            }
        }
        self.ready = false;
        self.crashed_at = Some(now);
        // Its paused processes died with it.
        self.paused_until = None;
        let killed = std::mem::take(&mut self.running);
        self.deferred.splice(0..0, killed);
        Ok(self.disk.as_mut())
    }

    /// Its device streams (entropy, disk read faults) start again from
    /// `seed`, as the current boot's would have with that execution seed
    /// (warm start: see `Execution::end_boot`). A node that is down
    /// draws from `seed` at its next boot anyway.
    pub fn reseed_devices(&mut self, seed: u64, index: u64) {
        let boot = self.boots.saturating_sub(1);
        self.config.read_faults.seed = read_fault_seed(seed, index, boot);
        let read_faults = self.config.read_faults;
        if let Some(vm) = self.vm.as_mut() {
            vm.reseed_devices(entropy_seed(seed, index, boot), read_faults);
        }
    }

    /// Reads of this node's disk are no longer corrupted, in this boot and
    /// every later one (the quiet period).
    pub fn stop_read_faults(&mut self) {
        self.config.read_faults.corrupt_read = 0.0;
        if let Some(vm) = self.vm.as_mut() {
            vm.stop_read_faults();
        }
    }

    /// Up: booted and not exited.
    pub fn is_up(&self) -> bool {
        self.vm.as_ref().is_some_and(|v| !v.has_exited())
    }

    pub fn vm(&mut self) -> &mut dyn NodeRuntime {
        self.vm.as_deref_mut().expect("the node is up")
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
