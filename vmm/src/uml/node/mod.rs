//! One user-mode Linux node under simcluster's control ([`UmlNode`]), as
//! the engine drives it ([`NodeRuntime`]).
//!
//! - here: the node's parts, how it starts, and the engine's actions on
//!   it while it is stopped (frames, control input, disk completions);
//! - `run`: a grant (the node runs until it waits, exits or hangs), the
//!   wait for its next message while its devices are served, and the
//!   interrupts delivered to it while it is stopped.
//!
//! Its parts: the host process (`uml::process`), the clock and the
//! time-travel socket (`uml::clock`), the console file
//! (`uml::console`), the vhost-user devices (`uml::devices`,
//! `uml::port`, `uml::net`, `uml::disk`).

mod run;

use std::path::Path;
use std::time::{Duration, Instant};

use disksim::{Disk, DiskFault, RequestId};
use simtime::{NodeId, VirtualTime};

use super::clock::Clock;
use super::console::Console;
use super::devices::Devices;
use super::disk::CompleteError;
use super::error::UmlError;
use super::net::Net;
use super::process::Process;
use super::timetravel::Op;
use crate::vhost_user::VhostUserError;
use nodeapi::{
    Delivered, DiskCompletion, DiskRequest, Grant, GuestOutput, NodeConfig, NodeDisk, NodeError, NodeRuntime,
    RunOutcome,
};

/// Where it has always been (the command line's signal handler uses it).
pub use super::process::kill_all_nodes;

/// A running (or stopped) user-mode Linux node.
///
/// Invariant: the node executes only inside [`NodeRuntime::grant`]. Outside
/// it, the node is blocked on the time-travel socket, waiting either for
/// the ACK of its START or for RUN.
pub struct UmlNode {
    id: NodeId,
    process: Process,
    clock: Clock,
    console: Console,
    devices: Devices,
    /// The node's process ended or was killed: it never runs again, and
    /// its process group is never signalled again.
    exited: bool,
}

impl UmlNode {
    /// It was spawned with a data disk, not taken out yet.
    fn has_data_disk(&self) -> bool {
        self.devices.disk.is_some()
    }

    /// Starts the node's process. The node runs its early host-side setup,
    /// connects to the socket and then blocks on START until the engine
    /// grants it time.
    pub fn spawn(cfg: &NodeConfig) -> Result<UmlNode, NodeError> {
        Self::spawn_with_disk(cfg, None)
    }

    /// [`UmlNode::spawn`] with a data disk: `disk` becomes the guest's
    /// `/dev/vda` (virtio-blk over vhost-user, `blk.sock` in the run
    /// directory), served as described in `uml::disk`.
    ///
    /// The disk is passed here rather than in [`NodeConfig`] because it is
    /// state, not configuration: it moves into the node, and
    /// [`NodeDisk::take_disk`] moves it back out after a power loss so
    /// the engine can pick a crash state and start a fresh node on it.
    ///
    /// `disk` must have no outstanding requests: those of a node that lost
    /// power are resolved by [`Disk::apply_crash`] first (a new driver could
    /// never complete them, and an in-flight write would block the log).
    pub fn spawn_with_disk(cfg: &NodeConfig, disk: Option<Disk>) -> Result<UmlNode, NodeError> {
        if !cfg.kernel.is_file() {
            return Err(UmlError::MissingKernel(cfg.kernel.clone()).into());
        }
        if !cfg.initrd.is_file() {
            return Err(UmlError::MissingInitrd(cfg.initrd.clone()).into());
        }
        let id = cfg.node_id;
        if cfg.kernel_faults_cpuid {
            // Speed only; a host that cannot fault CPUID loses nothing.
            super::host_cpuid::enable();
        }
        let clock = Clock::listen(id, &cfg.run_dir, cfg.shared_clock)?;
        let devices = Devices::listen(cfg, disk)?;
        let (console, writer) =
            Console::create(&cfg.run_dir).map_err(|source| UmlError::Io { node: id, what: "console file", source })?;
        let process = Process::spawn(cfg, devices.attached(), writer)?;
        Ok(UmlNode { id, process, clock, console, devices, exited: false })
    }

    /// Which node it is.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's virtual time as last granted or reported.
    pub fn time(&self) -> VirtualTime {
        self.clock.time()
    }

    /// Where the kernel's standard error goes.
    pub fn stderr_path(&self) -> &Path {
        self.process.stderr_path()
    }

    fn died_before_start(&self, status: String) -> UmlError {
        UmlError::DiedBeforeStart { node: self.id, status, stderr: self.process.stderr_path().to_path_buf() }
    }
}

impl NodeRuntime for UmlNode {
    /// Waits (wall clock, bounded) for the node to connect and send START.
    /// After this the node is stopped and ready for its first grant at
    /// `start_time`.
    fn wait_connected(&mut self, start_time: VirtualTime, limit: Duration) -> Result<Vec<GuestOutput>, NodeError> {
        let began = Instant::now();
        while !self.clock.try_accept()? {
            if let Some(st) = self.process.try_exit_status() {
                self.exited = true;
                return Err(self.died_before_start(st.to_string()).into());
            }
            if began.elapsed() > limit {
                let stderr = self.process.stderr_path().to_path_buf();
                return Err(UmlError::NoConnect { node: self.id, secs: limit.as_secs(), stderr }.into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let msg = self.read_msg(None)?;
        let mut out = Vec::new();
        self.clock.start_at(start_time);
        self.drain(&mut out);
        match msg {
            Some(m) if m.op == Op::Start => {
                self.clock.hold_start(m.seq);
                Ok(out)
            }
            Some(m) => Err(UmlError::Unexpected { node: self.id, msg: m, state: "connecting" }.into()),
            None => Err(self.died_before_start("closed the time-travel socket".into()).into()),
        }
    }

    fn requested(&self) -> VirtualTime {
        self.clock.requested()
    }

    fn has_exited(&self) -> bool {
        self.exited
    }

    /// Runs the node at `at` (`run_until_stop`), collects what the
    /// grant produced, and settles a node that waits (`settle`).
    /// `time_of_day` answers GET_TOD, plus the node's start time.
    fn grant(&mut self, at: VirtualTime, time_of_day: u64, watchdog: Duration) -> Result<Grant, NodeError> {
        self.grant_ahead(at, None, time_of_day, watchdog)
    }

    /// A grant with lookahead (see the trait). Not while something waits
    /// to reach the guest (control input or frames without a buffer): a
    /// plain grant settles those at once, which a guest running ahead
    /// would postpone.
    fn grant_ahead(
        &mut self,
        at: VirtualTime,
        free_until: Option<VirtualTime>,
        time_of_day: u64,
        watchdog: Duration,
    ) -> Result<Grant, NodeError> {
        let free_until = free_until.filter(|_| !self.devices.owes_input());
        let mut output = Vec::new();
        let outcome = self.run_until_stop(at, free_until, time_of_day, watchdog, &mut output)?;
        let free_runs = self.clock.free_runs()?;
        let disk = self.devices.disk.as_mut().map(|d| d.take_reads_done()).unwrap_or_default();
        let tx = self.devices.net.as_mut().map(|n| n.take_tx()).unwrap_or_default();
        if let RunOutcome::Waiting { .. } = outcome {
            // Interrupts owed for transmitted frames, disk reads and control
            // output, and input that waited for buffers, reach it now: at
            // the time of its last wake-up, where it did what earned them.
            let settle_at = if free_runs.count > 0 { free_runs.last } else { at };
            self.settle(settle_at, watchdog)?;
        }
        Ok(Grant { outcome, output, disk, tx, free_runs })
    }

    /// Sends engine commands to the guest's control line at virtual time
    /// `t` (an interrupt: the guest will ask to run at `t`). Call only while
    /// the node is stopped, with `t` between its clock and its requested
    /// time. Bytes the guest has no buffer for yet follow at a later stop.
    fn send_control(&mut self, t: VirtualTime, bytes: &[u8], watchdog: Duration) -> Result<(), NodeError> {
        self.devices.ctl.backend.device_mut().push_input(bytes);
        Ok(self.settle(t, watchdog)?)
    }

    /// Puts a frame into the guest's receive queue at virtual time `t` and
    /// interrupts the guest, which will then ask to run at `t`. Call only
    /// while the node is stopped, with `t` no earlier than its clock and no
    /// later than its requested time.
    fn deliver_frame(&mut self, t: VirtualTime, frame: &[u8], watchdog: Duration) -> Result<Delivered, NodeError> {
        let node = self.id;
        let Some(net) = self.devices.net.as_mut() else { return Ok(Delivered::Dropped) };
        let delivered = net.deliver(frame).map_err(|e| UmlError::Device {
            node,
            device: Net::NAME,
            source: VhostUserError::Device(e),
        })?;
        if delivered != Delivered::Dropped {
            self.raise_interrupts(t, watchdog)?;
        }
        Ok(delivered)
    }

    fn reseed_devices(&mut self, entropy_seed: u64, read_faults: disksim::ReadFaults) {
        self.devices.rng.backend.device_mut().reseed(entropy_seed);
        if let Some(d) = self.devices.disk.as_mut() {
            d.backend.device_mut().set_read_faults(read_faults);
        }
    }

    fn dirty_files(&self) -> Option<u64> {
        if self.exited {
            return None;
        }
        self.clock.dirty_files()
    }

    /// Proportional set size of the node's processes, in KiB
    /// (`uml::procfs`).
    fn memory_kib(&self) -> u64 {
        if self.exited {
            return 0;
        }
        let leader = i64::from(self.process.group());
        if self.process.jailed() {
            super::procfs::namespace_pss_kib(leader)
        } else {
            super::procfs::group_pss_kib(leader)
        }
    }

    fn kill(&mut self) {
        // Never signal the group after the child was reaped: its pid (and
        // so the group id) may already belong to someone else.
        if !self.exited {
            let _ = self.process.kill_and_reap();
            self.exited = true;
        }
    }

    fn data_disk(&self) -> Option<&dyn NodeDisk> {
        self.has_data_disk().then_some(self as &dyn NodeDisk)
    }

    fn data_disk_mut(&mut self) -> Option<&mut dyn NodeDisk> {
        self.has_data_disk().then_some(self as &mut dyn NodeDisk)
    }
}

impl NodeDisk for UmlNode {
    fn disk(&self) -> Option<&Disk> {
        self.devices.disk.as_ref().map(|d| d.disk())
    }

    fn pending_disk(&self) -> Vec<DiskRequest> {
        match &self.devices.disk {
            Some(d) if !self.exited => d.pending(),
            _ => Vec::new(),
        }
    }

    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool {
        self.devices.disk.as_mut().is_some_and(|d| d.backend.device_mut().disk_mut().inject(id, fault))
    }

    fn stop_read_faults(&mut self) {
        if let Some(d) = self.devices.disk.as_mut() {
            d.backend.device_mut().set_read_faults(disksim::ReadFaults::default());
        }
    }

    /// Completes pending disk request `id` at virtual time `t` and delivers
    /// the used-buffer interrupt in-band at `t`. Call only while the node
    /// is stopped, with `t` no earlier than its clock and no later than its
    /// requested time; the guest will then ask to run at `t`.
    fn complete_disk(
        &mut self,
        t: VirtualTime,
        id: RequestId,
        watchdog: Duration,
    ) -> Result<DiskCompletion, NodeError> {
        let node = self.id;
        if self.exited {
            return Err(NodeError::DiskNodeExited { node });
        }
        let t = t.max(self.clock.time());
        let d = self.devices.disk.as_mut().ok_or(NodeError::NoDisk { node })?;
        let c = d.complete(t, id).map_err(|e| match e {
            CompleteError::Unknown => NodeError::UnknownDiskRequest { node, id },
            CompleteError::Device(source) => UmlError::DiskComplete { node, id, source }.into(),
        })?;
        self.raise_interrupts(t, watchdog)?;
        Ok(c)
    }

    fn take_disk(&mut self) -> Result<Disk, NodeError> {
        let node = self.id;
        if !self.exited {
            return Err(NodeError::DiskInUse { node });
        }
        let d = self.devices.disk.take().ok_or(NodeError::NoDisk { node })?;
        Ok(d.into_disk())
    }
}

impl Drop for UmlNode {
    fn drop(&mut self) {
        self.kill();
    }
}
