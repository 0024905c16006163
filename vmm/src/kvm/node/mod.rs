//! A KVM microVM as an engine node ([`nodeapi::NodeRuntime`]): the same
//! operations, virtio device models and trace events as the user-mode Linux runtime.
//!
//! - here: [`KvmNode`], its construction and the engine's actions on it;
//! - `layout`: the machine a Linux guest sees: the device windows and IRQs,
//!   the kernel command line that announces them.
//!
//! # Time model
//! The node's clock is the [`MicroVm`]'s virtual clock: it advances by a fixed cost per
//! exit and jumps when the guest halts. A grant ([`NodeRuntime::grant`]) runs the guest
//! from `at` until it halts with nothing due (it then asks to run at its timer's
//! deadline, or [`VirtualTime::IDLE`] when only an outside event can wake it), powers off, or has
//! run [`GRANT_SLICE`] of virtual time (it then asks to run again at once, so the
//! engine can interleave other nodes: a guest that computes without halting is
//! preempted at its exits, deterministically). A halted node's clock jumps to the
//! time of the engine's next event for it (a grant, a frame, a disk completion,
//! control input). Because exits cost time, a node's clock may be ahead of the
//! engine's `now` by up to one slice; an event the engine delivers in that window
//! reaches the guest at the node's own clock, a little late, never early, and always
//! at the same point for the same schedule.
//!
//! Every piece of output is stamped with the clock at the exit that produced it.
//!
//! # Limits (what stock KVM, and this VMM, do not make deterministic or provide)
//! - RDTSC/RDTSCP read host time (see [`super`]): a Linux guest must not use the TSC
//!   as its clocksource (`tsc=unstable`; the image builder's kernel reads the PvClock
//!   port instead, `simclock=0x520 clocksource=simcluster` on the command line);
//!   a user program reading the TSC directly sees host time unless the kernel traps
//!   it (the image builder's kernel, patch 0001, answers with virtual time).
//! - A stock Linux kernel (`noapic nolapic`) gets its tick from the userspace 8259A
//!   pair and 8254 PIT ([`super::legacy`]), driven by virtual time; it has no local
//!   APIC, IO-APIC, HPET or ACPI PM timer. Busy-wait loops that wait for the tick
//!   without exiting never see it (no PMU preemption yet): `lpj=` on the command
//!   line skips the delay-loop calibration, the main one at boot. Whether a given
//!   kernel boots to its init this way is tested only where vmx/svm exists
//!   (vmm/tests/kvm_linux_boot.rs); under PVM a stock kernel does not boot at all.
//! - The guest's wall clock is the CMOS RTC ([`super::legacy::Rtc`]): the engine's
//!   `time_of_day` plus virtual time, as under user-mode Linux.
//! - Without a PMU a guest spinning without exits is preempted only by the wall-clock
//!   watchdog (reported as a hang).

mod layout;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use disksim::{Disk, DiskFault, RequestId};
use simtime::{NodeId, VirtualTime};

use super::error::KvmError;
use super::linux::LinuxBootBuilder;
use super::ports::{BlkPort, NetPort};
use super::virtio_mmio::status::DRIVER_OK;
use super::virtio_mmio::{VirtioMmioTransport, WINDOW};
use super::vm::{ForkPoint, MicroVm, MicroVmBuilder, RunLimits, RunOutcome as VmOutcome};
use super::watchdog::Watchdog;
use crate::virtio::blk::{BlkConfig, VirtioBlk};
use crate::virtio::console::{self, VirtioConsole};
use crate::virtio::rng::VirtioRng;
use crate::virtio::{DeviceError, NoHook};
use nodeapi::{
    Delivered, DiskCompletion, DiskRequest, FreeRuns, Grant, GuestOutput, NodeConfig, NodeDisk, NodeError, NodeRuntime,
    OutputStream, RunOutcome, TxFrame, ROOT_DISK_SERIAL,
};

pub use layout::*;

/// The most virtual time one grant runs a guest that does not halt.
pub const GRANT_SLICE: Duration = Duration::from_millis(1);

/// Errors of a KVM node; each names the node (1-based). Errors of the engine's
/// contract that both runtimes share are [`NodeError`]s; this one converts into
/// [`NodeError::Runtime`].
#[derive(Debug, thiserror::Error)]
pub enum KvmNodeError {
    /// Building, running or snapshotting the VM failed.
    #[error("node {}: {source}", .node.number())]
    Kvm {
        /// The node.
        node: NodeId,
        /// What failed.
        source: KvmError,
    },
    /// A virtio device model failed (the guest broke the protocol).
    #[error("node {}: virtio device: {source}", .node.number())]
    Device {
        /// The node.
        node: NodeId,
        /// The device's error.
        source: DeviceError,
    },
}

impl From<KvmNodeError> for NodeError {
    fn from(e: KvmNodeError) -> NodeError {
        NodeError::Runtime(Box::new(e))
    }
}

type CtlTransport = VirtioMmioTransport<NoHook<VirtioConsole>>;
type RngTransport = VirtioMmioTransport<NoHook<VirtioRng>>;
type RootTransport = VirtioMmioTransport<NoHook<VirtioBlk>>;

/// One KVM microVM node under the engine.
pub struct KvmNode {
    id: NodeId,
    vm: MicroVm,
    requested: VirtualTime,
    exited: bool,
    net: bool,
    blk: bool,
    /// Pending writes and flushes by id, with their submission times.
    pending: BTreeMap<RequestId, DiskRequest>,
    /// Reads completed at their QueueNotify exits, for the grant's report.
    reads_done: Vec<DiskCompletion>,
    /// The disk, once taken out of a dead node's device.
    disk: Option<Disk>,
    /// Stops a grant whose guest runs past the wall-clock watchdog without exits.
    watchdog: Watchdog,
    /// The vCPU captured by [`NodeRuntime::prepare_fork`], for the child's
    /// [`NodeRuntime::rehome`].
    fork_point: Option<ForkPoint>,
}

/// A directory: every KVM node booted while it is set logs its exits there
/// ([`MicroVm::log_exits_to`]), one file per boot: `n<node>-<k>.exits`, k counting the
/// process's boots of that node. A determinism-debugging aid; it changes nothing the
/// guest sees.
pub const EXIT_LOG_ENV: &str = "SIMCLUSTER_KVM_EXIT_LOG";

/// The first free `n<node>-<k>.exits` in `dir`.
fn exit_log_path(dir: &std::path::Path, node: NodeId) -> std::path::PathBuf {
    (0..).map(|k| dir.join(format!("{node}-{k}.exits"))).find(|p| !p.exists()).expect("some k is free")
}

impl KvmNode {
    /// It has a data disk: on its virtio-blk device, or (once taken off
    /// the device) held here.
    fn has_data_disk(&self) -> bool {
        self.blk || self.disk.is_some()
    }

    /// Boots `cfg.kernel` with `cfg.mem_mb` of RAM, a network device when `cfg.net`,
    /// and `disk`. A bzImage or ELF vmlinux boots as Linux with `cfg.initrd` as its
    /// initramfs and [`kernel_cmdline`]; any other file is a flat microVM image (a
    /// guest of vmm/guests, entered at [`super::arch::layout::LOAD_ADDR`] in long
    /// mode), which gets no initrd nor command line.
    pub fn spawn(cfg: &NodeConfig, disk: Option<Disk>) -> Result<KvmNode, NodeError> {
        let node = cfg.node_id;
        let kvm = |source| KvmNodeError::Kvm { node, source };
        let image = super::vm::read_image(&cfg.kernel).map_err(kvm)?;
        let vm = if is_linux_kernel(&image) {
            let cmdline = kernel_cmdline(cfg, cfg.net, disk.is_some());
            LinuxBootBuilder::new(&cfg.kernel)
                .memory_mib(u64::from(cfg.mem_mb))
                .initrd(&cfg.initrd)
                .cmdline(&cmdline)
                .build()
        } else {
            MicroVmBuilder::new().memory_mib(u64::from(cfg.mem_mb)).image(&image).build()
        };
        let mut n = KvmNode::new(node, vm.map_err(kvm)?, cfg.net, disk, cfg.entropy_seed)?;
        // Before the first grant, so before the guest's first request.
        if let Some(p) = n.blk_port() {
            p.device_mut().set_read_faults(cfg.read_faults);
        }
        if let Some(image) = &cfg.root_disk {
            n.attach_root_disk(image.clone());
        }
        if let Some(dir) = std::env::var_os(EXIT_LOG_ENV) {
            n.vm.log_exits_to(&exit_log_path(std::path::Path::new(&dir), node)).map_err(kvm)?;
        }
        Ok(n)
    }

    /// Attaches the read-only root disk (window 4): reads complete at their
    /// QueueNotify exit and raise their interrupt there, as every device's
    /// here; nothing about them reaches the engine.
    pub fn attach_root_disk(&mut self, image: disksim::BlockStore) {
        let cfg = BlkConfig { serial: ROOT_DISK_SERIAL.to_vec(), read_only: true, ..BlkConfig::default() };
        let mut blk = VirtioBlk::new(Disk::new(image), cfg);
        blk.set_reads_at_once(true);
        let t: RootTransport =
            VirtioMmioTransport::new(blk, NoHook::default(), self.vm.memory().clone(), IRQ_VECTOR_BASE + ROOT_IRQ);
        self.vm.mmio_mut().attach(root_base(), WINDOW, Box::new(t));
    }

    /// Makes a node of a built VM (any guest: Linux, or a microVM guest that drives
    /// the windows of the module docs itself), attaching the control line and the
    /// entropy device (its stream drawn from `entropy_seed`), and the network and
    /// disk devices when asked.
    pub fn new(
        id: NodeId,
        mut vm: MicroVm,
        net: bool,
        disk: Option<Disk>,
        entropy_seed: u64,
    ) -> Result<KvmNode, NodeError> {
        let mem = vm.memory().clone();
        if net {
            let t = NetPort::net(id, mem.clone(), IRQ_VECTOR_BASE + NET_IRQ);
            vm.mmio_mut().attach(net_base(), WINDOW, Box::new(t));
        }
        let blk = disk.is_some();
        if let Some(d) = disk {
            let outstanding = d.outstanding().count();
            if outstanding > 0 {
                return Err(NodeError::DiskBusy { node: id, outstanding });
            }
            let mut b = VirtioBlk::new(d, BlkConfig::default());
            // Reads complete at their kick, as under user-mode Linux (see
            // VirtioBlk::set_reads_at_once): only writes and flushes are engine actions.
            b.set_reads_at_once(true);
            let t = BlkPort::blk(b, mem.clone(), IRQ_VECTOR_BASE + BLK_IRQ);
            vm.mmio_mut().attach(blk_base(), WINDOW, Box::new(t));
        }
        let ctl: CtlTransport =
            VirtioMmioTransport::new(VirtioConsole::new(), NoHook::default(), mem, IRQ_VECTOR_BASE + CTL_IRQ);
        vm.mmio_mut().attach(ctl_base(), WINDOW, Box::new(ctl));
        // Fills the guest's buffers at its QueueNotify exit, so the bytes a guest
        // reads depend only on its own requests; the used-buffer interrupt is raised
        // by the transport at that exit, like every device's here.
        let mem = vm.memory().clone();
        let rng: RngTransport =
            VirtioMmioTransport::new(VirtioRng::new(entropy_seed), NoHook::default(), mem, IRQ_VECTOR_BASE + RNG_IRQ);
        vm.mmio_mut().attach(rng_base(), WINDOW, Box::new(rng));
        Ok(KvmNode {
            id,
            requested: VirtualTime::ZERO,
            exited: false,
            net,
            blk,
            pending: BTreeMap::new(),
            reads_done: Vec::new(),
            disk: None,
            watchdog: Watchdog::new(vm.stop_flag()),
            fork_point: None,
            vm,
        })
    }

    /// The VM (inspection: its exit trace hash, statistics; its console output goes
    /// to the grants' output, not [`MicroVm::console`]).
    pub fn vm(&self) -> &MicroVm {
        &self.vm
    }

    fn kvm_err(&self, source: KvmError) -> NodeError {
        KvmNodeError::Kvm { node: self.id, source }.into()
    }

    fn dev_err(&self, source: DeviceError) -> NodeError {
        KvmNodeError::Device { node: self.id, source }.into()
    }

    fn net_port(&mut self) -> Option<&mut NetPort> {
        if !self.net {
            return None;
        }
        self.vm.mmio_mut().device_mut(net_base())
    }

    fn blk_port(&mut self) -> Option<&mut BlkPort> {
        if !self.blk {
            return None;
        }
        self.vm.mmio_mut().device_mut(blk_base())
    }

    fn ctl_port(&mut self) -> &mut CtlTransport {
        self.vm.mmio_mut().device_mut(ctl_base()).expect("the control line is always attached")
    }

    fn rng_port(&mut self) -> &mut RngTransport {
        self.vm.mmio_mut().device_mut(rng_base()).expect("the entropy device is always attached")
    }

    /// An outside event reaches the stopped node at `t`: its clock moves there if it
    /// is halted, and it must run (to take the interrupt) at its clock.
    fn wake_at(&mut self, t: VirtualTime) -> VirtualTime {
        let now = self.vm.advance_halted(t);
        self.requested = self.requested.min(now);
        now
    }

    /// What the guest produced at the exit just taken, stamped with the clock.
    fn collect(&mut self, out: &mut Vec<GuestOutput>) -> Result<(), NodeError> {
        let time = self.vm.now();
        // Taken out of the serial device, so a long run does not accumulate its console.
        let bytes = std::mem::take(&mut self.vm.bus.serial.output);
        if !bytes.is_empty() {
            out.push(GuestOutput { time, stream: OutputStream::Console, bytes });
        }
        let ctl = self.ctl_port().device_mut().take_output();
        if !ctl.is_empty() {
            out.push(GuestOutput { time, stream: OutputStream::Control, bytes: ctl });
        }
        if let Some(e) = self.ctl_port().take_error() {
            return Err(self.dev_err(e));
        }
        if let Some(e) = self.rng_port().take_error() {
            return Err(self.dev_err(e));
        }
        if let Some(p) = self.net_port() {
            if let Some(e) = p.take_error() {
                return Err(self.dev_err(e));
            }
        }
        let mut reads = Vec::new();
        let mut accepted = Vec::new();
        let mut err = None;
        if let Some(port) = self.blk_port() {
            let ids = port.take_accepted();
            err = port.take_error();
            let blk = port.device_mut();
            reads.extend(blk.take_reads_done().into_iter().map(|r| (r.request.submitted_at(time), r.fault)));
            accepted.extend(ids.into_iter().filter_map(|a| blk.request(a.id).map(|r| r.submitted_at(a.at))));
        }
        self.reads_done.extend(reads.into_iter().map(|(request, fault)| DiskCompletion {
            request,
            completed: time,
            fault,
        }));
        self.pending.extend(accepted.into_iter().map(|r| (r.id, r)));
        if let Some(e) = err {
            return Err(self.dev_err(e));
        }
        Ok(())
    }
    /// Delivers control input that waited for a receive buffer to the stopped
    /// node at `t` (frames wait in [`NetPort`]'s backlog, drained at the guest's
    /// own RX kick; every other interrupt was raised at its exit).
    fn settle(&mut self, t: VirtualTime) -> Result<(), NodeError> {
        let (dev, queues) = self.ctl_port().device_and_queues();
        if !dev.has_input() {
            return Ok(());
        }
        let moved = dev.flush_input(queues).map_err(|e| self.dev_err(e))?;
        let (_, queues) = self.ctl_port().device_and_queues();
        if moved && queues.needs_interrupt(console::RX_QUEUE).unwrap_or(true) {
            self.ctl_port().raise();
            self.wake_at(t);
        }
        Ok(())
    }

    /// Frames the guest transmitted since the last call, in order.
    fn take_tx(&mut self) -> Vec<TxFrame> {
        let Some(p) = self.net_port() else { return Vec::new() };
        p.take_tx()
    }

    /// One grant's run (see [`NodeRuntime::grant`]); the caller arms the watchdog.
    fn run_grant(
        &mut self,
        at: VirtualTime,
        watchdog: Duration,
        out: &mut Vec<GuestOutput>,
    ) -> Result<RunOutcome, NodeError> {
        let began = Instant::now();
        let start = self.vm.advance_halted(at.max(self.requested));
        let until = start.saturating_add(GRANT_SLICE);
        loop {
            if self.vm.is_halted() && !self.vm.wake_due() {
                // Waits: for its timer, or for the engine.
                let deadline = self.vm.timer_deadline().unwrap_or(VirtualTime::IDLE);
                self.requested = deadline.max(self.vm.now());
                return Ok(RunOutcome::Waiting { requested: self.requested });
            }
            if self.vm.now() >= until {
                self.requested = self.vm.now();
                return Ok(RunOutcome::Waiting { requested: self.requested });
            }
            if began.elapsed() > watchdog {
                // The guest exits, but the grant outlived the watchdog.
                return Ok(RunOutcome::Hung { wall: began.elapsed() });
            }
            // One exit at a time, so output and device effects carry their exit's time.
            let limits = RunLimits { max_exits: Some(self.vm.stats().exits + 1), until: Some(until) };
            let r = self.vm.run(limits).map_err(|e| self.kvm_err(e));
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    self.exited = true;
                    return Err(e);
                }
            };
            self.collect(out)?;
            match r {
                VmOutcome::ExitLimit | VmOutcome::TimeLimit | VmOutcome::Halted => {}
                VmOutcome::Interrupted => return Ok(RunOutcome::Hung { wall: began.elapsed() }),
                VmOutcome::PoweredOff(code) => {
                    self.exited = true;
                    return Ok(RunOutcome::Exited { status: Some(code as i32), signal: None });
                }
                VmOutcome::Shutdown => {
                    // A triple fault: the machine resets; the node is gone. (A kernel
                    // that panics says so on the console first; the engine reports
                    // that panic instead.)
                    self.exited = true;
                    let at = match self.vm.regs() {
                        Ok(r) => format!("rip {:#x}, rsp {:#x}", r.rip, r.rsp),
                        Err(e) => format!("registers unreadable: {e}"),
                    };
                    let reason = format!(
                        "its virtual CPU triple-faulted (KVM_EXIT_SHUTDOWN) at {at}, after {} exits",
                        self.vm.stats().exits
                    );
                    return Ok(RunOutcome::Reset { reason });
                }
            }
        }
    }
}

impl NodeRuntime for KvmNode {
    fn wait_connected(&mut self, start_time: VirtualTime, _limit: Duration) -> Result<Vec<GuestOutput>, NodeError> {
        // Nothing to connect to: the VM is built and stopped at its entry point.
        self.vm.start_clock_at(start_time);
        self.requested = self.vm.now();
        Ok(Vec::new())
    }

    fn requested(&self) -> VirtualTime {
        self.requested
    }

    fn has_exited(&self) -> bool {
        self.exited
    }

    fn grant(&mut self, at: VirtualTime, time_of_day: u64, watchdog: Duration) -> Result<Grant, NodeError> {
        assert!(!self.exited, "grant to an exited node");
        self.vm.set_time_of_day(time_of_day);
        self.watchdog.arm(watchdog);
        let mut output = Vec::new();
        let outcome = self.run_grant(at, watchdog, &mut output);
        self.watchdog.disarm();
        // A kick that raced with the end of the grant must not stop the next one.
        self.vm.stop_flag().store(false, std::sync::atomic::Ordering::SeqCst);
        let outcome = outcome?;
        let disk = std::mem::take(&mut self.reads_done);
        let tx = self.take_tx();
        if let RunOutcome::Waiting { .. } = outcome {
            // Control input that waited for a receive buffer reaches it now.
            self.settle(at)?;
        }
        Ok(Grant { outcome, output, disk, tx, free_runs: FreeRuns::default() })
    }

    fn send_control(&mut self, t: VirtualTime, bytes: &[u8], _watchdog: Duration) -> Result<(), NodeError> {
        self.ctl_port().device_mut().push_input(bytes);
        self.settle(t)
    }

    fn deliver_frame(&mut self, t: VirtualTime, frame: &[u8], _watchdog: Duration) -> Result<Delivered, NodeError> {
        if self.net_port().is_none() {
            return Ok(Delivered::Dropped);
        }
        let port = self.net_port().expect("checked above");
        // As under user-mode Linux: no driver (or a backlog that is not drained) loses
        // the frame instead of keeping it forever.
        let driver_up = port.status() & DRIVER_OK != 0;
        if !driver_up || port.hook().state().backlog_full() {
            return Ok(Delivered::Dropped);
        }
        self.wake_at(t);
        let port = self.net_port().expect("checked above");
        let irq = port.deliver(frame);
        let queued = port.hook().state().backlog_len() > 0;
        if irq.map_err(|e| self.dev_err(e))? {
            self.net_port().expect("checked above").raise();
        }
        Ok(if queued { Delivered::Queued } else { Delivered::Now })
    }

    fn reseed_devices(&mut self, entropy_seed: u64, read_faults: disksim::ReadFaults) {
        self.rng_port().device_mut().reseed(entropy_seed);
        if let Some(p) = self.blk_port() {
            p.device_mut().set_read_faults(read_faults);
        }
    }

    fn prepare_fork(&mut self) -> Result<(), NodeError> {
        let point = self.vm.prepare_fork().map_err(|e| self.kvm_err(e))?;
        self.fork_point = Some(point);
        Ok(())
    }

    fn rehome(&mut self) -> Result<(), NodeError> {
        let point = self.fork_point.take().ok_or_else(|| {
            NodeError::Runtime(format!("node {}: rehome without prepare_fork", self.id.number()).into())
        })?;
        self.vm.rehome(&point).map_err(|e| self.kvm_err(e))?;
        // The watchdog's thread stayed in the parent: its handle here is a copy that
        // must not be joined (nor its lock trusted: the thread may have held it at
        // the fork). Leak it and start a thread of this process's own.
        let fresh = Watchdog::new(self.vm.stop_flag());
        std::mem::forget(std::mem::replace(&mut self.watchdog, fresh));
        Ok(())
    }

    fn memory_kib(&self) -> u64 {
        // Guest RAM is one anonymous mapping of the configured size; pages the guest
        // never touched are not resident, so this is an upper bound.
        if self.exited {
            0
        } else {
            self.vm.config().mem_size / 1024
        }
    }

    fn kill(&mut self) {
        self.exited = true;
        self.pending.clear();
    }

    fn data_disk(&self) -> Option<&dyn NodeDisk> {
        self.has_data_disk().then_some(self as &dyn NodeDisk)
    }

    fn data_disk_mut(&mut self) -> Option<&mut dyn NodeDisk> {
        self.has_data_disk().then_some(self as &mut dyn NodeDisk)
    }
}

impl NodeDisk for KvmNode {
    fn disk(&self) -> Option<&Disk> {
        if let Some(d) = &self.disk {
            return Some(d);
        }
        if !self.blk {
            return None;
        }
        // The bus hands out devices mutably only; inspection goes through a shared
        // borrow of the transport.
        self.vm.mmio_ref::<BlkPort>(blk_base()).map(|t| t.device().disk())
    }

    fn pending_disk(&self) -> Vec<DiskRequest> {
        if self.exited {
            return Vec::new();
        }
        self.pending.values().copied().collect()
    }

    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool {
        self.blk_port().is_some_and(|p| p.device_mut().disk_mut().inject(id, fault))
    }

    fn stop_read_faults(&mut self) {
        if let Some(p) = self.blk_port() {
            p.device_mut().set_read_faults(disksim::ReadFaults::default());
        }
    }

    fn complete_disk(
        &mut self,
        t: VirtualTime,
        id: RequestId,
        _watchdog: Duration,
    ) -> Result<DiskCompletion, NodeError> {
        let node = self.id;
        let request = *self.pending.get(&id).ok_or(NodeError::UnknownDiskRequest { node, id })?;
        let t = self.wake_at(t);
        let port = self.blk_port().ok_or(NodeError::NoDisk { node })?;
        let done = port.complete(id);
        if port.device().request(id).is_none() {
            self.pending.remove(&id);
        }
        let (irq, fault) = done.map_err(|e| self.dev_err(e))?;
        if irq {
            self.blk_port().expect("checked above").raise();
        }
        Ok(DiskCompletion { request, completed: t, fault })
    }

    fn take_disk(&mut self) -> Result<Disk, NodeError> {
        let node = self.id;
        if !self.exited {
            return Err(NodeError::DiskInUse { node });
        }
        if let Some(d) = self.disk.take() {
            return Ok(d);
        }
        let port = self.blk_port().ok_or(NodeError::NoDisk { node })?;
        let d = port.device_mut().take_disk();
        self.blk = false;
        Ok(d)
    }
}
