//! The microVM: one vCPU, one RAM region, the port-I/O devices, the virtual clock and
//! the deterministic run loop.
//!
//! Determinism contract of [`MicroVm::run`]:
//! - virtual time ([`VirtualClock`]) advances only by a fixed cost per VM exit that
//!   reaches userspace, and jumps to the timer deadline when the guest halts with
//!   interrupts enabled; no host time is read anywhere;
//! - the timer interrupt is injected at the first exit at or after its deadline, on the
//!   next entry with IF=1 (otherwise, with VMX/SVM, an interrupt-window exit is
//!   requested; under PVM, whose window exits follow host timing, it waits for the
//!   guest's next exit with IF=1), so the instruction at which it lands depends only on
//!   the guest's own exits; an interrupted KVM_RUN (EINTR) injects nothing;
//! - every exit is folded into the trace hash (kind, virtual time, port/address, data).
//!
//! Boot order (see [`MicroVmBuilder::build`]): open /dev/kvm, create the VM, create and
//! register guest RAM, load the image and the boot tables, create the vCPU, set the
//! shaped CPUID, then SREGS (long mode), REGS, FPU. No in-kernel irqchip or PIT is
//! ever created: their timers run on host time.

use std::fs::File;
use std::path::Path;

use kvm_bindings::{kvm_interrupt, kvm_userspace_memory_region, CpuId, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use sha2::{Digest, Sha256};
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestRegionMmap,
    MmapRegion,
};

use super::arch::{self, layout, CpuidShaping};
use super::devices::{DeviceEvent, PioBus};
use super::error::{ioctl, KvmError, Result};
use super::host::HostCaps;
use super::mmio::MmioBus;

vmm_sys_util::ioctl_iow_nr!(KVM_INTERRUPT, kvm_bindings::KVMIO, 0x86, kvm_interrupt);

/// Virtual time of one node, in nanoseconds.
///
/// Invariant: `now_ns` never decreases and only changes through [`VirtualClock::tick`]
/// (one exit) or [`VirtualClock::jump_to`] (idle until an event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtualClock {
    now_ns: u64,
    exit_cost_ns: u64,
}

impl VirtualClock {
    /// A clock at 0 charging `exit_cost_ns` per exit.
    pub fn new(exit_cost_ns: u64) -> Self {
        VirtualClock { now_ns: 0, exit_cost_ns }
    }
    /// Current virtual time.
    pub fn now(&self) -> u64 {
        self.now_ns
    }
    /// The fixed cost charged per exit.
    pub fn exit_cost(&self) -> u64 {
        self.exit_cost_ns
    }
    /// Charges one exit; returns the new time.
    pub fn tick(&mut self) -> u64 {
        self.now_ns += self.exit_cost_ns;
        self.now_ns
    }
    /// Moves time forward to `t` (never backwards).
    pub fn jump_to(&mut self, t: u64) {
        self.now_ns = self.now_ns.max(t);
    }
}

/// Counters of exits by kind (part of the node's state and of snapshots).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExitStats {
    /// All exits that reached userspace.
    pub exits: u64,
    /// `in` instructions.
    pub io_in: u64,
    /// `out` instructions.
    pub io_out: u64,
    /// MMIO reads and writes.
    pub mmio: u64,
    /// `hlt`.
    pub hlt: u64,
    /// Interrupt-window exits.
    pub irq_window: u64,
    /// Interrupts injected.
    pub injected: u64,
}

impl ExitStats {
    pub(crate) fn to_words(self) -> [u64; 7] {
        [self.exits, self.io_in, self.io_out, self.mmio, self.hlt, self.irq_window, self.injected]
    }
    pub(crate) fn from_words(w: [u64; 7]) -> Self {
        ExitStats {
            exits: w[0],
            io_in: w[1],
            io_out: w[2],
            mmio: w[3],
            hlt: w[4],
            irq_window: w[5],
            injected: w[6],
        }
    }
}

/// Interrupt vectors raised and not yet injected (a 256-bit set). The highest vector is
/// injected first, as a local APIC would.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingIrqs(pub [u64; 4]);

impl PendingIrqs {
    /// Marks `v` pending.
    pub fn set(&mut self, v: u8) {
        self.0[usize::from(v / 64)] |= 1 << (v % 64);
    }
    /// Clears `v`.
    pub fn clear(&mut self, v: u8) {
        self.0[usize::from(v / 64)] &= !(1 << (v % 64));
    }
    /// The highest pending vector.
    pub fn highest(&self) -> Option<u8> {
        (0..4).rev().find(|&i| self.0[i] != 0).map(|i| (i * 64 + 63 - self.0[i].leading_zeros() as usize) as u8)
    }
    /// No vector pending.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

/// When [`MicroVm::run`] must return even if the guest keeps going.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Stop once the total exit count reaches this.
    pub max_exits: Option<u64>,
    /// Stop once virtual time reaches this (a halted guest waiting for a later timer
    /// is advanced exactly to it).
    pub until_ns: Option<u64>,
}

/// Why [`MicroVm::run`] returned. Calling `run` again continues the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The guest executed `hlt` with nothing that could wake it (no timer armed, or
    /// interrupts disabled). It stays halted: `run` returns `Halted` again until an
    /// interrupt is pending.
    Halted,
    /// The guest wrote this status to the power port.
    PoweredOff(u32),
    /// Triple fault (`KVM_EXIT_SHUTDOWN`).
    Shutdown,
    /// [`RunLimits::max_exits`] reached.
    ExitLimit,
    /// [`RunLimits::until_ns`] reached.
    TimeLimit,
    /// The stop flag ([`MicroVm::stop_flag`]) was set from another thread, which
    /// signalled the vCPU thread out of KVM_RUN (the wall-clock watchdog,
    /// [`super::watchdog`]): a host-timed stop, for reporting a hang only.
    Interrupted,
}

/// Trace kinds folded into the hash.
#[derive(Debug, Clone, Copy)]
#[repr(u8)]
enum Ev {
    IoOut = 1,
    IoIn = 2,
    MmioWrite = 3,
    MmioRead = 4,
    Hlt = 5,
    IrqWindow = 6,
    Inject = 7,
    TimerJump = 8,
}

/// Configuration of a microVM.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// Guest RAM in bytes (multiple of 4 KiB, at least 2 MiB, below the MMIO hole).
    pub mem_size: u64,
    /// Virtual nanoseconds charged per VM exit.
    pub exit_cost_ns: u64,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig { mem_size: 16 << 20, exit_cost_ns: 1_000 }
    }
}

/// Builds a [`MicroVm`]; the order of [`MicroVmBuilder::build`] is the boot order.
#[derive(Debug, Default)]
pub struct MicroVmBuilder {
    config: VmConfig,
    image: Vec<u8>,
}

impl MicroVmBuilder {
    /// Defaults: 16 MiB RAM, 1 µs per exit, empty image.
    pub fn new() -> Self {
        Self::default()
    }
    /// Guest RAM size in MiB.
    pub fn memory_mib(mut self, mib: u64) -> Self {
        self.config.mem_size = mib << 20;
        self
    }
    /// Virtual nanoseconds per exit.
    pub fn exit_cost_ns(mut self, ns: u64) -> Self {
        self.config.exit_cost_ns = ns;
        self
    }
    /// A flat binary loaded at [`layout::LOAD_ADDR`] and entered there in long mode.
    pub fn image(mut self, bytes: &[u8]) -> Self {
        self.image = bytes.to_vec();
        self
    }

    /// Creates the VM and leaves the vCPU at the image's entry in 64-bit mode.
    pub fn build(self) -> Result<MicroVm> {
        let cfg = &self.config;
        let max_image = cfg.mem_size.saturating_sub(layout::LOAD_ADDR);
        if self.image.len() as u64 > max_image {
            return Err(KvmError::Config(format!(
                "image of {} bytes does not fit in {} bytes of RAM above {:#x}",
                self.image.len(),
                cfg.mem_size,
                layout::LOAD_ADDR
            )));
        }
        // 1-3. /dev/kvm, VM, RAM.
        let mem = anonymous_memory(cfg.mem_size)?;
        let vm = MicroVm::create(cfg.clone(), mem)?;
        // 4. Boot tables and image.
        arch::write_boot_tables(&vm.mem)?;
        vm.mem
            .write_slice(&self.image, GuestAddress(layout::LOAD_ADDR))
            .map_err(|e| KvmError::Memory(format!("load image: {e}")))?;
        // 5-9. vCPU: CPUID (before SREGS), SREGS, REGS, FPU.
        vm.vcpu.set_cpuid2(&vm.cpuid).map_err(ioctl("KVM_SET_CPUID2"))?;
        let sregs = vm.vcpu.get_sregs().map_err(ioctl("KVM_GET_SREGS"))?;
        vm.vcpu
            .set_sregs(&arch::long_mode_sregs(&sregs))
            .map_err(ioctl("KVM_SET_SREGS"))?;
        vm.vcpu
            .set_regs(&arch::boot_regs(layout::LOAD_ADDR, cfg.mem_size))
            .map_err(ioctl("KVM_SET_REGS"))?;
        vm.vcpu.set_fpu(&arch::boot_fpu()).map_err(ioctl("KVM_SET_FPU"))?;
        Ok(vm)
    }
}

/// Creates anonymous, zeroed guest RAM at guest physical 0.
pub(crate) fn anonymous_memory(size: u64) -> Result<GuestMemoryMmap> {
    check_mem_size(size)?;
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size as usize)])
        .map_err(|e| KvmError::Memory(format!("allocate {size} bytes: {e}")))
}

/// Maps `file` (a saved memory image) as guest RAM, MAP_PRIVATE: the guest's writes are
/// copy-on-write and never reach the file, so one image serves any number of restores.
pub(crate) fn private_file_memory(file: File, size: u64) -> Result<GuestMemoryMmap> {
    check_mem_size(size)?;
    let region = MmapRegion::build(
        Some(FileOffset::new(file, 0)),
        size as usize,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_NORESERVE,
    )
    .map_err(|e| KvmError::Memory(format!("map image MAP_PRIVATE: {e}")))?;
    let region = GuestRegionMmap::new(region, GuestAddress(0))
        .ok_or_else(|| KvmError::Memory("region does not fit the address space".into()))?;
    GuestMemoryMmap::from_regions(vec![region])
        .map_err(|e| KvmError::Memory(format!("region collection: {e}")))
}

fn check_mem_size(size: u64) -> Result<()> {
    if size < (2 << 20) || size % 4096 != 0 || size > layout::MMIO_START {
        return Err(KvmError::Config(format!(
            "memory size {size:#x} must be a multiple of 4 KiB in [2 MiB, {:#x}]",
            layout::MMIO_START
        )));
    }
    Ok(())
}

/// One node: a single-vCPU KVM virtual machine with userspace devices.
pub struct MicroVm {
    pub(crate) vm: VmFd,
    pub(crate) vcpu: VcpuFd,
    pub(crate) mem: GuestMemoryMmap,
    pub(crate) config: VmConfig,
    pub(crate) cpuid: CpuId,
    pub(crate) cpuid_shaping: CpuidShaping,
    pub(crate) bus: PioBus,
    pub(crate) mmio: MmioBus,
    pub(crate) clock: VirtualClock,
    pub(crate) pending: PendingIrqs,
    /// The vCPU executed `hlt` and has not been woken yet (KVM_RUN would skip the wait:
    /// without an in-kernel irqchip KVM returns HLT to userspace with rip past it).
    pub(crate) halted: bool,
    pub(crate) stats: ExitStats,
    pub(crate) trace: Sha256,
    pub(crate) host: HostCaps,
    /// Set from another thread to make [`MicroVm::run`] return
    /// [`RunOutcome::Interrupted`] (see [`super::watchdog`]).
    pub(crate) stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for MicroVm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MicroVm")
            .field("config", &self.config)
            .field("clock", &self.clock)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// What one KVM_RUN returned, copied out of the kvm_run page.
enum Exit {
    Io,
    Hlt,
    IrqWindow,
    Shutdown,
    Power(u32),
    Internal(u32),
    FailEntry(u64),
    Other(String),
}

impl MicroVm {
    /// Steps 1-3 and 5 of the boot order, shared by boot and restore: /dev/kvm, VM, RAM
    /// slot, vCPU. Leaves registers at KVM's reset state.
    pub(crate) fn create(config: VmConfig, mem: GuestMemoryMmap) -> Result<MicroVm> {
        let kvm = Kvm::new().map_err(KvmError::Open)?;
        let vm = kvm.create_vm().map_err(ioctl("KVM_CREATE_VM"))?;
        let host_addr = mem
            .get_host_address(GuestAddress(0))
            .map_err(|e| KvmError::Memory(format!("host address of RAM: {e}")))?;
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: config.mem_size,
            userspace_addr: host_addr as u64,
        };
        // SAFETY: the region is backed by `mem`, which lives as long as the VM (both are
        // owned by the returned MicroVm, and `vm` is dropped before `mem`).
        unsafe { vm.set_user_memory_region(region) }.map_err(ioctl("KVM_SET_USER_MEMORY_REGION"))?;
        let vcpu = vm.create_vcpu(0).map_err(ioctl("KVM_CREATE_VCPU"))?;
        let supported = kvm
            .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .map_err(ioctl("KVM_GET_SUPPORTED_CPUID"))?;
        let (cpuid, cpuid_shaping) = arch::shape_cpuid(&supported)?;
        Ok(MicroVm {
            vm,
            vcpu,
            mem,
            clock: VirtualClock::new(config.exit_cost_ns),
            config,
            cpuid,
            cpuid_shaping,
            bus: PioBus::default(),
            mmio: MmioBus::default(),
            pending: PendingIrqs::default(),
            halted: false,
            stats: ExitStats::default(),
            trace: Sha256::new(),
            host: HostCaps::detect(),
            stop: Default::default(),
        })
    }

    /// Boots a flat 64-bit image with default configuration and `mem_mib` MiB of RAM.
    pub fn boot_image(image: &[u8], mem_mib: u64) -> Result<MicroVm> {
        MicroVmBuilder::new().memory_mib(mem_mib).image(image).build()
    }

    /// Everything the guest wrote to the serial console so far.
    pub fn console(&self) -> &[u8] {
        &self.bus.serial.output
    }
    /// Current virtual time in ns.
    pub fn now_ns(&self) -> u64 {
        self.clock.now()
    }
    /// Exit counters.
    pub fn stats(&self) -> ExitStats {
        self.stats
    }
    /// The configuration the VM was built with.
    pub fn config(&self) -> &VmConfig {
        &self.config
    }
    /// Guest RAM.
    pub fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }
    /// What CPUID shaping removed.
    pub fn cpuid_shaping(&self) -> &CpuidShaping {
        &self.cpuid_shaping
    }
    /// The CPUID the guest sees.
    pub fn cpuid(&self) -> &CpuId {
        &self.cpuid
    }
    /// The host's capabilities relevant to determinism (PMU, vmx/svm).
    pub fn host(&self) -> &HostCaps {
        &self.host
    }
    /// Lines to print with a run's results: what this host cannot do deterministically.
    pub fn notes(&self) -> Vec<String> {
        self.host.notes()
    }
    /// The MMIO bus (virtio-mmio transports are attached here).
    pub fn mmio_mut(&mut self) -> &mut MmioBus {
        &mut self.mmio
    }
    /// The flag that stops [`MicroVm::run`] from another thread (set it, then signal
    /// the vCPU thread; [`super::watchdog::Watchdog`] does both).
    pub fn stop_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.stop.clone()
    }
    /// The MMIO windows: (device name, base, length).
    pub fn mmio_windows(&self) -> Vec<(&'static str, u64, u64)> {
        self.mmio.windows()
    }
    /// The MMIO device at `base`, if it is a `T` (inspection).
    pub fn mmio_ref<T: 'static>(&self, base: u64) -> Option<&T> {
        self.mmio.device_ref(base)
    }
    /// The port I/O devices.
    pub fn devices(&self) -> &PioBus {
        &self.bus
    }

    /// sha256 over every exit so far (kind, virtual time, port/address, data), chained
    /// across snapshots (see [`MicroVm::snapshot`]). Does not disturb the running hash.
    pub fn trace_hash(&self) -> [u8; 32] {
        self.trace.clone().finalize().into()
    }
    /// [`MicroVm::trace_hash`] as lowercase hex.
    pub fn trace_hash_hex(&self) -> String {
        self.trace_hash().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn record(&mut self, ev: Ev, arg: u64, data: &[u8]) {
        self.trace.update([ev as u8]);
        self.trace.update(self.clock.now().to_le_bytes());
        self.trace.update(arg.to_le_bytes());
        self.trace.update([data.len() as u8]);
        self.trace.update(data);
    }

    /// Moves a due timer and interrupts raised by MMIO devices into the pending set.
    fn collect_interrupts(&mut self) {
        if let Some(d) = self.bus.clock.deadline() {
            if d <= self.clock.now() {
                let v = self.bus.clock.fire();
                self.pending.set(v);
            }
        }
        if let Some(d) = self.bus.pit.deadline() {
            if d <= self.clock.now() {
                self.bus.pit.fire(self.clock.now());
                self.bus.pic.raise(0);
            }
        }
        for v in self.mmio.take_interrupts() {
            self.pending.set(v);
        }
    }

    /// An interrupt waits for the vCPU: a vector raised directly, or one the PIC
    /// would deliver.
    fn has_interrupt(&self) -> bool {
        !self.pending.is_empty() || self.bus.pic.has_pending()
    }

    /// Moves a due timer into the pending interrupt, then injects the pending interrupt
    /// if the vCPU can take it, or asks KVM for an interrupt-window exit.
    fn deliver_interrupts(&mut self) -> Result<()> {
        self.collect_interrupts();
        if !self.has_interrupt() {
            self.vcpu.get_kvm_run().request_interrupt_window = 0;
            return Ok(());
        }
        // Readiness comes from the vCPU state itself (IF set, no STI/MOV-SS shadow), not
        // from kvm_run's flags: those are only written at exits, so they would be stale
        // after a restore or a snapshot's immediate-exit run and make the injection path
        // depend on where snapshots were taken.
        let if_set = self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))?.rflags & 0x200 != 0;
        let shadow = if if_set {
            self.vcpu.get_vcpu_events().map_err(ioctl("KVM_GET_VCPU_EVENTS"))?.interrupt.shadow
        } else {
            0
        };
        if if_set && shadow == 0 {
            self.vcpu.get_kvm_run().request_interrupt_window = 0;
            // Directly raised vectors first, then the PIC's (acknowledged only now,
            // when the CPU takes it).
            let vector = match self.pending.highest() {
                Some(v) => {
                    self.pending.clear(v);
                    v
                }
                None => self.bus.pic.ack().expect("the PIC has an interrupt pending"),
            };
            let irq = kvm_interrupt { irq: u32::from(vector) };
            // SAFETY: KVM_INTERRUPT reads one kvm_interrupt; `irq` outlives the call.
            let ret = unsafe { vmm_sys_util::ioctl::ioctl_with_ref(&self.vcpu, KVM_INTERRUPT(), &irq) };
            if ret < 0 {
                return Err(KvmError::Ioctl {
                    op: "KVM_INTERRUPT",
                    source: kvm_ioctls::Error::last(),
                });
            }
            self.stats.injected += 1;
            self.record(Ev::Inject, u64::from(vector), &[]);
        } else {
            // VMX/SVM report the window at the exact instruction that opens it. PVM
            // reports it at whatever exit comes next, including exits for host
            // interrupts that otherwise never reach userspace: the injection point would
            // follow host timing (seen under load as an extra IrqWindowOpen exit). There
            // the interrupt waits for the guest's next own exit with IF=1 instead.
            self.vcpu.get_kvm_run().request_interrupt_window = u8::from(self.host.hardware_virt);
        }
        Ok(())
    }

    /// The vCPU executed `hlt`: wake it with a pending interrupt, or move time to the
    /// timer deadline (bounded by `limits.until_ns`). Returns `Some(outcome)` when the
    /// guest stays halted (it remains so on the next [`MicroVm::run`]).
    fn wait_halted(&mut self, limits: &RunLimits) -> Result<Option<RunOutcome>> {
        self.collect_interrupts();
        if !self.has_interrupt() {
            let rflags = self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))?.rflags;
            let deadline = self.bus.next_deadline().filter(|_| rflags & 0x200 != 0);
            let Some(deadline) = deadline else {
                // Interrupts off, or nothing that could raise one: halted for good
                // (until a device interrupt is raised from outside).
                return Ok(Some(RunOutcome::Halted));
            };
            if let Some(until) = limits.until_ns.filter(|&u| deadline > u) {
                if self.clock.now() < until {
                    self.clock.jump_to(until);
                    self.record(Ev::TimerJump, until, &[]);
                }
                return Ok(Some(RunOutcome::TimeLimit));
            }
            self.clock.jump_to(deadline);
            self.record(Ev::TimerJump, deadline, &[]);
        }
        self.halted = false;
        Ok(None)
    }

    /// Lets an idle node (halted with nothing that could wake it: the guest waits for
    /// a device, and [`MicroVm::run`] returned [`RunOutcome::Halted`]) wait until `t`,
    /// when the engine delivers an event from outside (a frame, a disk completion).
    /// The clock jumps to `t`, recorded like a timer jump. Returns false, and changes
    /// nothing, when the node is not halted or an armed timer would fire first: then
    /// the node must be run (with [`RunLimits::until_ns`]) instead.
    pub fn idle_until(&mut self, t: u64) -> bool {
        let timer_first = self.bus.next_deadline().is_some_and(|d| d < t);
        if !self.halted || timer_first || self.has_interrupt() {
            return false;
        }
        if t > self.clock.now() {
            self.clock.jump_to(t);
            self.record(Ev::TimerJump, t, &[]);
        }
        true
    }

    /// For a halted vCPU: whether an interrupt can wake it at the current time (one is
    /// pending, or the timer is due). Moves a due timer into the pending set.
    pub fn wake_due(&mut self) -> bool {
        self.collect_interrupts();
        self.has_interrupt()
    }

    /// The armed timer's deadline, if any.
    pub fn timer_deadline(&self) -> Option<u64> {
        self.bus.next_deadline()
    }

    /// Moves the clock of a halted vCPU forward to `t` (recorded like a timer jump),
    /// also past an armed timer, which then fires late, at `t`: the engine granted the
    /// node later than it asked, or an outside event reaches it. A running (not
    /// halted) vCPU's clock only moves by its exits. Returns the clock.
    pub fn advance_halted(&mut self, t: u64) -> u64 {
        if self.halted && t > self.clock.now() {
            self.clock.jump_to(t);
            self.record(Ev::TimerJump, t, &[]);
        }
        self.clock.now()
    }

    /// The wall-clock time (ns since the Unix epoch) the guest's CMOS clock shows at
    /// virtual time 0.
    pub fn set_time_of_day(&mut self, epoch_ns: u64) {
        self.bus.rtc.epoch_ns = epoch_ns;
    }

    /// Starts the clock of a VM that has not run yet at `t` (a node booted, or booted
    /// again after a crash, at engine time `t`).
    pub fn start_clock_at(&mut self, t: u64) {
        if self.stats.exits == 0 && t > self.clock.now() {
            self.clock.jump_to(t);
        }
    }

    /// Whether the vCPU is halted, waiting for an interrupt.
    pub fn is_halted(&self) -> bool {
        self.halted
    }

    /// Runs the guest until it halts for good, powers off, or a limit is reached.
    pub fn run(&mut self, limits: RunLimits) -> Result<RunOutcome> {
        let mut reenter = false;
        loop {
            if limits.max_exits.is_some_and(|m| self.stats.exits >= m) {
                return Ok(RunOutcome::ExitLimit);
            }
            if limits.until_ns.is_some_and(|t| self.clock.now() >= t) {
                return Ok(RunOutcome::TimeLimit);
            }
            if self.stop.swap(false, std::sync::atomic::Ordering::SeqCst) {
                return Ok(RunOutcome::Interrupted);
            }
            if self.halted {
                if let Some(outcome) = self.wait_halted(&limits)? {
                    return Ok(outcome);
                }
            }
            // After an interrupted KVM_RUN (a host signal, a host-timed point) nothing
            // may be injected: re-enter as if the exit never happened.
            if !std::mem::take(&mut reenter) {
                self.deliver_interrupts()?;
            }
            let exit = match self.vcpu.run() {
                Ok(VcpuExit::IoOut(port, data)) => {
                    let now = self.clock.tick();
                    self.stats.io_out += 1;
                    let ev = self.bus.write(now, port, data);
                    let (p, d) = (u64::from(port), data.to_vec());
                    self.record(Ev::IoOut, p, &d);
                    match ev {
                        DeviceEvent::PowerOff(code) => Exit::Power(code),
                        DeviceEvent::None => Exit::Io,
                    }
                }
                Ok(VcpuExit::IoIn(port, data)) => {
                    let now = self.clock.tick();
                    self.stats.io_in += 1;
                    self.bus.read(now, port, data);
                    let (p, d) = (u64::from(port), data.to_vec());
                    self.record(Ev::IoIn, p, &d);
                    Exit::Io
                }
                Ok(VcpuExit::MmioWrite(addr, data)) => {
                    let now = self.clock.tick();
                    self.stats.mmio += 1;
                    self.mmio.write(&self.mem, now, addr, data);
                    let d = data.to_vec();
                    self.record(Ev::MmioWrite, addr, &d);
                    Exit::Io
                }
                Ok(VcpuExit::MmioRead(addr, data)) => {
                    let now = self.clock.tick();
                    self.stats.mmio += 1;
                    self.mmio.read(&self.mem, now, addr, data);
                    let d = data.to_vec();
                    self.record(Ev::MmioRead, addr, &d);
                    Exit::Io
                }
                Ok(VcpuExit::Hlt) => Exit::Hlt,
                Ok(VcpuExit::IrqWindowOpen) => Exit::IrqWindow,
                Ok(VcpuExit::Shutdown) => Exit::Shutdown,
                Ok(VcpuExit::InternalError) => {
                    // SAFETY: exit_reason is KVM_EXIT_INTERNAL_ERROR, so `internal` is the
                    // active union member.
                    let sub = unsafe { self.vcpu.get_kvm_run().__bindgen_anon_1.internal.suberror };
                    Exit::Internal(sub)
                }
                Ok(VcpuExit::FailEntry(reason, _)) => Exit::FailEntry(reason),
                Ok(other) => Exit::Other(format!("{other:?}")),
                Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                    if self.stop.swap(false, std::sync::atomic::Ordering::SeqCst) {
                        return Ok(RunOutcome::Interrupted);
                    }
                    reenter = true;
                    continue;
                }
                Err(e) => return Err(KvmError::Ioctl { op: "KVM_RUN", source: e }),
            };
            // I/O exits charged the clock when they were decoded (devices see the time
            // after the exit's cost); HLT and interrupt-window exits charge it below.
            self.stats.exits += 1;
            match exit {
                Exit::Io => {}
                Exit::Power(code) => return Ok(RunOutcome::PoweredOff(code)),
                Exit::IrqWindow => {
                    self.clock.tick();
                    self.stats.irq_window += 1;
                    self.record(Ev::IrqWindow, 0, &[]);
                }
                Exit::Hlt => {
                    self.clock.tick();
                    self.stats.hlt += 1;
                    self.record(Ev::Hlt, 0, &[]);
                    self.halted = true;
                }
                Exit::Shutdown => return Ok(RunOutcome::Shutdown),
                Exit::Internal(suberror) => {
                    let rip = self.vcpu.get_regs().map(|r| r.rip).unwrap_or(u64::MAX);
                    return Err(KvmError::InternalError { suberror, rip });
                }
                Exit::FailEntry(reason) => return Err(KvmError::FailEntry { reason }),
                Exit::Other(s) => return Err(KvmError::UnhandledExit(s)),
            }
        }
    }

    /// Runs until the guest halts or powers off; fails on any other outcome within
    /// `max_exits` (a convenience for tests).
    pub fn run_to_end(&mut self, max_exits: u64) -> Result<RunOutcome> {
        self.run(RunLimits { max_exits: Some(self.stats.exits + max_exits), until_ns: None })
    }

    /// Reads guest memory (for tests and inspection).
    pub fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.mem
            .read_slice(buf, GuestAddress(addr))
            .map_err(|e| KvmError::Memory(format!("read {addr:#x}: {e}")))
    }

    /// The registers the vCPU holds now.
    pub fn regs(&self) -> Result<kvm_bindings::kvm_regs> {
        self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))
    }

    #[allow(dead_code)]
    pub(crate) fn vm_fd(&self) -> &VmFd {
        &self.vm
    }
}

/// Reads a whole file (guest images).
pub fn read_image(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| KvmError::Io { what: "read image", path: path.into(), source })
}
