//! A KVM microVM as an engine node ([`crate::node::NodeRuntime`]): the same
//! operations, virtio device models and trace events as the user-mode Linux runtime.
//!
//! # Devices (virtio-mmio windows, see [`super::virtio_mmio`])
//! | window | device                                   | IRQ | vector |
//! |--------|------------------------------------------|-----|--------|
//! | 0      | virtio-net ([`NetPort`]) to netsim        | 5   | 0x35   |
//! | 1      | virtio-blk ([`BlkPort`]) over disksim     | 6   | 0x36   |
//! | 2      | virtio-console: the engine's control line | 7   | 0x37   |
//! | 3      | virtio-rng: entropy from the seed         | 3   | 0x33   |
//! | 4      | virtio-blk, read-only: the root image     | 10  | 0x3a   |
//!
//! The guest console is the serial port (COM1, `console=ttyS0`); the control line is
//! a virtio console, `/dev/hvc0` in a Linux guest, exactly as under user-mode Linux,
//! so the same initramfs and agent run on both. A Linux guest learns the windows from
//! its command line (`virtio_mmio.device=4K@0xd0000000:5 ...`, see [`kernel_cmdline`]).
//! The transports inject vector `0x30 + IRQ` directly (KVM_INTERRUPT, no in-kernel
//! irqchip), the vectors Linux gives legacy IRQs; the timer tick (IRQ 0) and the
//! serial port (IRQ 4) go through the userspace 8259A ([`super::legacy`]).
//!
//! # Time model
//! The node's clock is the [`MicroVm`]'s virtual clock: it advances by a fixed cost per
//! exit and jumps when the guest halts. A grant ([`NodeRuntime::grant`]) runs the guest
//! from `at` until it halts with nothing due (it then asks to run at its timer's
//! deadline, or "never" when only an outside event can wake it), powers off, or has
//! run [`GRANT_SLICE_NS`] of virtual time (it then asks to run again at once, so the
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
//!   as its clocksource (`tsc=unstable` / `clocksource=jiffies` on the command line);
//!   a user program reading the TSC directly still sees host time.
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

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use disksim::{Disk, DiskFault, RequestId};

use super::error::KvmError;
use super::linux::{LinuxBootBuilder, DEFAULT_CMDLINE};
use super::ports::{BlkPort, NetPort};
use super::virtio_mmio::status::DRIVER_OK;
use super::virtio_mmio::{window_base, Signal, VirtioMmioTransport, WINDOW};
use super::watchdog::Watchdog;
use super::vm::{MicroVm, MicroVmBuilder, RunLimits, RunOutcome as VmOutcome};
use crate::node::{
    Delivered, DiskCompletion, DiskRequest, Grant, GuestOutput, NodeConfig, NodeError, NodeRuntime, OutputStream,
    RunOutcome, TxFrame, ROOT_DISK_SERIAL,
};
use crate::virtio::blk::{BlkConfig, VirtioBlk};
use crate::virtio::console::{self, VirtioConsole};
use super::mmio_adapter::MmioAdapter;
use crate::virtio::rng::VirtioRng;
use crate::virtio::DeviceError;

/// Legacy IRQ of each device (vector `0x30 + IRQ`).
pub const NET_IRQ: u8 = 5;
pub const BLK_IRQ: u8 = 6;
pub const CTL_IRQ: u8 = 7;
/// IRQ 3 is COM2 on a PC; this machine has no COM2 (its ports read as all
/// ones, so Linux's 8250 driver finds no UART there and never claims it).
pub const RNG_IRQ: u8 = 3;
/// The root disk's IRQ: 10 is free on a PC (no ISA card claims it).
pub const ROOT_IRQ: u8 = 10;
/// Vector of legacy IRQ 0 in Linux (ISA_IRQ_VECTOR(0)).
pub const IRQ_VECTOR_BASE: u8 = 0x30;

/// The most virtual time one grant runs a guest that does not halt.
pub const GRANT_SLICE_NS: u64 = 1_000_000;

/// Frames kept for a guest that has no free receive buffer, at most.
const RX_BACKLOG: usize = 1024;

/// What [`KvmNode::requested`] says of a node that waits for an outside event only.
pub const IDLE: u64 = u64::MAX / 2;

/// Window base of each device.
pub fn net_base() -> u64 {
    window_base(0)
}
pub fn blk_base() -> u64 {
    window_base(1)
}
pub fn ctl_base() -> u64 {
    window_base(2)
}
pub fn rng_base() -> u64 {
    window_base(3)
}
pub fn root_base() -> u64 {
    window_base(4)
}

/// Errors of a KVM node; each names the node (1-based). Errors of the engine's
/// contract that both runtimes share are [`NodeError`]s; this one converts into
/// [`NodeError::Runtime`].
#[derive(Debug, thiserror::Error)]
pub enum KvmNodeError {
    #[error("node {node}: {source}")]
    Kvm { node: u16, source: KvmError },
    #[error("node {node}: virtio device: {source}")]
    Device { node: u16, source: DeviceError },
}

impl From<KvmNodeError> for NodeError {
    fn from(e: KvmNodeError) -> NodeError {
        NodeError::Runtime(Box::new(e))
    }
}

type CtlTransport = VirtioMmioTransport<MmioAdapter<VirtioConsole>>;
type RngTransport = VirtioMmioTransport<MmioAdapter<VirtioRng>>;
type RootTransport = VirtioMmioTransport<MmioAdapter<VirtioBlk>>;

/// The kernel command line of a Linux node: serial console, no TSC clocksource, no
/// delay-loop calibration, virtio-mmio windows, then `KEY=value` pairs for init and the extra words.
pub fn kernel_cmdline(cfg: &NodeConfig, net: bool, blk: bool) -> String {
    // The TSC reads host time: never a clocksource. lpj: no delay-loop calibration
    // (it spins until the tick, which a guest without exits never gets).
    let mut c = format!("{DEFAULT_CMDLINE} tsc=unstable clocksource=jiffies lpj=1000000 rdinit=/init");
    let mut dev = |base: u64, irq: u8| c.push_str(&format!(" virtio_mmio.device=4K@{base:#x}:{irq}"));
    if net {
        dev(net_base(), NET_IRQ);
    }
    if blk {
        dev(blk_base(), BLK_IRQ);
    }
    dev(ctl_base(), CTL_IRQ);
    dev(rng_base(), RNG_IRQ);
    if cfg.root_disk.is_some() {
        dev(root_base(), ROOT_IRQ);
    }
    for (k, v) in &cfg.init_env {
        c.push_str(&format!(" {k}={v}"));
    }
    for w in &cfg.extra_args {
        c.push(' ');
        c.push_str(w);
    }
    c
}

/// Whether `image` is a Linux kernel: a bzImage ("HdrS" at 0x202) or an ELF file.
pub fn is_linux_kernel(image: &[u8]) -> bool {
    image.starts_with(b"\x7fELF") || image.get(0x202..0x206) == Some(b"HdrS")
}

/// One KVM microVM node under the engine.
pub struct KvmNode {
    id: u16,
    vm: MicroVm,
    requested: u64,
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
}

impl KvmNode {
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
            p.device_mut().blk_mut().set_read_faults(cfg.read_faults);
        }
        if let Some(image) = &cfg.root_disk {
            n.attach_root_disk(image.clone());
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
            VirtioMmioTransport::new(MmioAdapter::new(blk, self.vm.memory().clone()), IRQ_VECTOR_BASE + ROOT_IRQ);
        self.vm.mmio_mut().attach(root_base(), WINDOW, Box::new(t));
    }

    /// Makes a node of a built VM (any guest: Linux, or a microVM guest that drives
    /// the windows of the module docs itself), attaching the control line and the
    /// entropy device (its stream drawn from `entropy_seed`), and the network and
    /// disk devices when asked.
    pub fn new(
        id: u16,
        mut vm: MicroVm,
        net: bool,
        disk: Option<Disk>,
        entropy_seed: u64,
    ) -> Result<KvmNode, NodeError> {
        let mem = vm.memory().clone();
        if net {
            let t = VirtioMmioTransport::new(NetPort::new(id as u8, mem.clone()), IRQ_VECTOR_BASE + NET_IRQ);
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
            let t = VirtioMmioTransport::new(BlkPort::new(b, mem.clone()), IRQ_VECTOR_BASE + BLK_IRQ);
            vm.mmio_mut().attach(blk_base(), WINDOW, Box::new(t));
        }
        let ctl: CtlTransport = VirtioMmioTransport::new(MmioAdapter::new(VirtioConsole::new(), mem), IRQ_VECTOR_BASE + CTL_IRQ);
        vm.mmio_mut().attach(ctl_base(), WINDOW, Box::new(ctl));
        // Fills the guest's buffers at its QueueNotify exit, so the bytes a guest
        // reads depend only on its own requests; the used-buffer interrupt is raised
        // by the transport at that exit, like every device's here.
        let mem = vm.memory().clone();
        let rng: RngTransport =
            VirtioMmioTransport::new(MmioAdapter::new(VirtioRng::new(entropy_seed), mem), IRQ_VECTOR_BASE + RNG_IRQ);
        vm.mmio_mut().attach(rng_base(), WINDOW, Box::new(rng));
        Ok(KvmNode {
            id,
            requested: 0,
            exited: false,
            net,
            blk,
            pending: BTreeMap::new(),
            reads_done: Vec::new(),
            disk: None,
            watchdog: Watchdog::new(vm.stop_flag()),
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

    fn net_port(&mut self) -> Option<&mut VirtioMmioTransport<NetPort>> {
        if !self.net {
            return None;
        }
        self.vm.mmio_mut().device_mut(net_base())
    }

    fn blk_port(&mut self) -> Option<&mut VirtioMmioTransport<BlkPort>> {
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
    fn wake_at(&mut self, t: u64) -> u64 {
        let now = self.vm.advance_halted(t);
        self.requested = self.requested.min(now);
        now
    }

    /// What the guest produced at the exit just taken, stamped with the clock.
    fn collect(&mut self, out: &mut Vec<GuestOutput>) -> Result<(), NodeError> {
        let time = self.vm.now_ns();
        // Taken out of the serial device, so a long run does not accumulate its console.
        let bytes = std::mem::take(&mut self.vm.bus.serial.output);
        if !bytes.is_empty() {
            out.push(GuestOutput { time, stream: OutputStream::Console, bytes });
        }
        let ctl = self.ctl_port().device_mut().device_and_queues().0.take_output();
        if !ctl.is_empty() {
            out.push(GuestOutput { time, stream: OutputStream::Control, bytes: ctl });
        }
        if let Some(e) = self.ctl_port().device_mut().take_error() {
            return Err(self.dev_err(e));
        }
        if let Some(e) = self.rng_port().device_mut().take_error() {
            return Err(self.dev_err(e));
        }
        if let Some(p) = self.net_port() {
            if let Some(e) = p.device_mut().take_error() {
                return Err(self.dev_err(e));
            }
        }
        let mut reads = Vec::new();
        let mut accepted = Vec::new();
        let mut err = None;
        if let Some(p) = self.blk_port() {
            let port = p.device_mut();
            let ids = port.take_accepted();
            err = port.take_error();
            let blk = port.blk_mut();
            let req = |r: crate::virtio::blk::BlkRequest, submitted| DiskRequest {
                id: r.id,
                kind: r.kind,
                sector: r.sector,
                sectors: r.sectors,
                submitted,
            };
            reads.extend(blk.take_reads_done().into_iter().map(|r| (req(r.request, time), r.fault)));
            accepted.extend(ids.into_iter().filter_map(|a| blk.request(a.id).map(|r| req(r, a.at_ns))));
        }
        self.reads_done.extend(reads.into_iter().map(|(request, fault)| DiskCompletion { request, completed: time, fault }));
        self.pending.extend(accepted.into_iter().map(|r| (r.id, r)));
        if let Some(e) = err {
            return Err(self.dev_err(e));
        }
        Ok(())
    }
    /// Delivers control input that waited for a receive buffer to the stopped
    /// node at `t` (frames wait in [`NetPort`]'s backlog, drained at the guest's
    /// own RX kick; every other interrupt was raised at its exit).
    fn settle(&mut self, t: u64) -> Result<(), NodeError> {
        let (dev, queues) = self.ctl_port().device_mut().device_and_queues();
        if !dev.has_input() {
            return Ok(());
        }
        let moved = dev.flush_input(queues).map_err(|e| self.dev_err(e))?;
        let (_, queues) = self.ctl_port().device_mut().device_and_queues();
        if moved && queues.needs_interrupt(console::RX_QUEUE).unwrap_or(true) {
            self.ctl_port().raise(Signal { used_buffer: true, config_change: false });
            self.wake_at(t);
        }
        Ok(())
    }

    /// Frames the guest transmitted since the last call, in order.
    fn take_tx(&mut self) -> Vec<TxFrame> {
        let Some(p) = self.net_port() else { return Vec::new() };
        p.device_mut().take_tx().into_iter().map(|f| TxFrame { time: f.at_ns, bytes: f.frame }).collect()
    }

    /// One grant's run (see [`NodeRuntime::grant`]); the caller arms the watchdog.
    fn run_grant(&mut self, at: u64, watchdog: Duration, out: &mut Vec<GuestOutput>) -> Result<RunOutcome, NodeError> {
        let began = Instant::now();
        let start = self.vm.advance_halted(at.max(self.requested));
        let until = start.saturating_add(GRANT_SLICE_NS);
        loop {
            if self.vm.is_halted() && !self.vm.wake_due() {
                // Waits: for its timer, or for the engine.
                self.requested = self.vm.timer_deadline().unwrap_or(IDLE).max(self.vm.now_ns());
                return Ok(RunOutcome::Waiting { requested: self.requested });
            }
            if self.vm.now_ns() >= until {
                self.requested = self.vm.now_ns();
                return Ok(RunOutcome::Waiting { requested: self.requested });
            }
            if began.elapsed() > watchdog {
                // The guest exits, but the grant outlived the watchdog.
                return Ok(RunOutcome::Hung { wall: began.elapsed() });
            }
            // One exit at a time, so output and device effects carry their exit's time.
            let limits = RunLimits { max_exits: Some(self.vm.stats().exits + 1), until_ns: Some(until) };
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
                    // A triple fault: the machine resets, as a panicking kernel with
                    // reboot=k does; the node is gone.
                    self.exited = true;
                    return Ok(RunOutcome::Exited { status: None, signal: None });
                }
            }
        }
    }

}

impl NodeRuntime for KvmNode {
    fn wait_connected(&mut self, start_time: u64, _limit: Duration) -> Result<Vec<GuestOutput>, NodeError> {
        // Nothing to connect to: the VM is built and stopped at its entry point.
        self.vm.start_clock_at(start_time);
        self.requested = self.vm.now_ns();
        Ok(Vec::new())
    }

    fn requested(&self) -> u64 {
        self.requested
    }

    fn has_exited(&self) -> bool {
        self.exited
    }

    fn grant(&mut self, at: u64, time_of_day: u64, watchdog: Duration) -> Result<Grant, NodeError> {
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
        Ok(Grant { outcome, output, disk, tx })
    }

    fn send_control(&mut self, t: u64, bytes: &[u8], _watchdog: Duration) -> Result<(), NodeError> {
        self.ctl_port().device_mut().device_and_queues().0.push_input(bytes);
        self.settle(t)
    }

    fn deliver_frame(&mut self, t: u64, frame: &[u8], _watchdog: Duration) -> Result<Delivered, NodeError> {
        if self.net_port().is_none() {
            return Ok(Delivered::Dropped);
        }
        let port = self.net_port().expect("checked above");
        // As under user-mode Linux: no driver (or a backlog that is not drained) loses
        // the frame instead of keeping it forever.
        let driver_up = port.status() & DRIVER_OK != 0;
        if !driver_up || port.device_mut().backlog_len() >= RX_BACKLOG {
            return Ok(Delivered::Dropped);
        }
        self.wake_at(t);
        let port = self.net_port().expect("checked above");
        let irq = port.device_mut().deliver(frame);
        let queued = port.device_mut().backlog_len() > 0;
        if irq.map_err(|e| self.dev_err(e))? {
            self.net_port().expect("checked above").raise(Signal { used_buffer: true, config_change: false });
        }
        Ok(if queued { Delivered::Queued } else { Delivered::Now })
    }

    fn has_disk(&self) -> bool {
        self.blk || self.disk.is_some()
    }

    fn disk(&self) -> Option<&Disk> {
        if let Some(d) = &self.disk {
            return Some(d);
        }
        if !self.blk {
            return None;
        }
        // The bus hands out devices mutably only; inspection goes through a shared
        // borrow of the transport.
        self.vm.mmio_ref::<VirtioMmioTransport<BlkPort>>(blk_base()).map(|t| t.device().blk().disk())
    }

    fn pending_disk(&self) -> Vec<DiskRequest> {
        if self.exited {
            return Vec::new();
        }
        self.pending.values().copied().collect()
    }

    fn disk_fault(&mut self, id: RequestId, fault: DiskFault) -> bool {
        self.blk_port().is_some_and(|p| p.device_mut().blk_mut().disk_mut().inject(id, fault))
    }

    fn stop_read_faults(&mut self) {
        if let Some(p) = self.blk_port() {
            p.device_mut().blk_mut().set_read_faults(disksim::ReadFaults::default());
        }
    }

    fn complete_disk(&mut self, t: u64, id: RequestId, _watchdog: Duration) -> Result<DiskCompletion, NodeError> {
        let node = self.id;
        let request = *self.pending.get(&id).ok_or(NodeError::UnknownDiskRequest { node, id })?;
        let t = self.wake_at(t);
        let port = self.blk_port().ok_or(NodeError::NoDisk { node })?;
        let done = port.device_mut().complete(id);
        if port.device_mut().blk().request(id).is_none() {
            self.pending.remove(&id);
        }
        let (irq, fault) = done.map_err(|e| self.dev_err(e))?;
        if irq {
            self.blk_port().expect("checked above").raise(Signal { used_buffer: true, config_change: false });
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
        let d = port.device_mut().blk_mut().take_disk();
        self.blk = false;
        Ok(d)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn cfg() -> NodeConfig {
        NodeConfig {
            kernel: PathBuf::from("bzImage"),
            initrd: PathBuf::from("rootfs.cpio"),
            mem_mb: 256,
            node_id: 2,
            run_dir: PathBuf::from("/tmp"),
            init_env: vec![("NODE_ID".into(), "2".into()), ("PEERS".into(), "n1,n2".into())],
            extra_args: vec!["quiet".into()],
            net: true,
            entropy_seed: 1,
            read_faults: Default::default(),
            shared_clock: false,
            root_disk: None,
            kernel_faults_cpuid: false,
        }
    }

    #[test]
    fn cmdline_announces_windows_and_init_environment() {
        let c = kernel_cmdline(&cfg(), true, true);
        assert!(c.starts_with(DEFAULT_CMDLINE), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0000000:5"), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0001000:6"), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0002000:7"), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0003000:3"), "{c}");
        assert!(c.contains("clocksource=jiffies"), "{c}");
        assert!(c.ends_with("NODE_ID=2 PEERS=n1,n2 quiet"), "{c}");
        let c = kernel_cmdline(&cfg(), false, false);
        assert!(!c.contains(":5") && !c.contains(":6") && c.contains(":7") && c.contains("0xd0003000:3"), "{c}");
    }

    #[test]
    fn linux_kernels_are_told_from_flat_images() {
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert!(is_linux_kernel(&bz));
        assert!(is_linux_kernel(b"\x7fELF\x02\x01\x01"));
        assert!(!is_linux_kernel(&[0xfa, 0xf4]));
        assert!(!is_linux_kernel(&[]));
    }

    #[test]
    fn windows_do_not_overlap() {
        assert_eq!(blk_base() - net_base(), WINDOW);
        assert_eq!(ctl_base() - blk_base(), WINDOW);
        assert_eq!(rng_base() - ctl_base(), WINDOW);
    }
}
