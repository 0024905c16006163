//! The microVM: one vCPU, one RAM region, the port-I/O devices, the virtual clock and
//! the deterministic run loop.
//!
//! - here: [`MicroVm`] and its state ([`VirtualClock`], [`ExitStats`],
//!   [`PendingIrqs`]), what a run returns ([`RunLimits`], [`RunOutcome`]);
//! - [`builder`]: [`VmConfig`], [`MicroVmBuilder`] (the boot order), guest RAM;
//! - [`run`]: the run loop ([`MicroVm::run`]), interrupt injection, halting and
//!   moving virtual time.
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

mod builder;
mod fork;
mod run;

use std::time::Duration;

use kvm_bindings::{kvm_userspace_memory_region, CpuId, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Kvm, VcpuFd, VmFd};
use sha2::{Digest, Sha256};
use simtime::VirtualTime;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use super::arch::{self, CpuidShaping};
use super::devices::PioBus;
use super::error::{ioctl, KvmError, Result};
use super::host::HostCaps;
use super::mmio::MmioBus;

pub(crate) use builder::{anonymous_memory, private_file_memory};
pub use builder::{read_image, MicroVmBuilder, VmConfig};
pub use fork::ForkPoint;

/// Virtual time of one node.
///
/// Invariant: `now` never decreases and only changes through [`VirtualClock::tick`]
/// (one exit) or [`VirtualClock::jump_to`] (idle until an event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtualClock {
    now: VirtualTime,
    exit_cost: Duration,
}

impl VirtualClock {
    /// A clock at 0 charging `exit_cost` per exit.
    pub fn new(exit_cost: Duration) -> Self {
        VirtualClock { now: VirtualTime::ZERO, exit_cost }
    }
    /// Current virtual time.
    pub fn now(&self) -> VirtualTime {
        self.now
    }
    /// The fixed cost charged per exit.
    pub fn exit_cost(&self) -> Duration {
        self.exit_cost
    }
    /// Charges one exit; returns the new time.
    pub fn tick(&mut self) -> VirtualTime {
        self.now += self.exit_cost;
        self.now
    }
    /// Moves time forward to `t` (never backwards).
    pub fn jump_to(&mut self, t: VirtualTime) {
        self.now = self.now.max(t);
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
        ExitStats { exits: w[0], io_in: w[1], io_out: w[2], mmio: w[3], hlt: w[4], irq_window: w[5], injected: w[6] }
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
    pub until: Option<VirtualTime>,
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
    /// [`RunLimits::until`] reached.
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
    /// Every traced event as a line of text, with the vCPU's rip ([`MicroVm::log_exits_to`]):
    /// for finding where two runs of one guest part. `None` (the default) costs nothing.
    pub(crate) exit_log: Option<std::io::BufWriter<std::fs::File>>,
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

/// /dev/kvm, a VM whose RAM slot is `mem`, and its vCPU (registers at KVM's reset
/// state): the KVM objects of a [`MicroVm`], which only the process that created them
/// may use.
pub(crate) fn kvm_objects(config: &VmConfig, mem: &GuestMemoryMmap) -> Result<(Kvm, VmFd, VcpuFd)> {
    let kvm = Kvm::new().map_err(KvmError::Open)?;
    let vm = kvm.create_vm().map_err(ioctl("KVM_CREATE_VM"))?;
    let host_addr =
        mem.get_host_address(GuestAddress(0)).map_err(|e| KvmError::Memory(format!("host address of RAM: {e}")))?;
    let region = kvm_userspace_memory_region {
        slot: 0,
        flags: 0,
        guest_phys_addr: 0,
        memory_size: config.mem_size,
        userspace_addr: host_addr as u64,
    };
    // SAFETY: the region is backed by `mem`, which lives as long as the VM (both are
    // owned by one MicroVm, and `vm` is dropped before `mem`).
    unsafe { vm.set_user_memory_region(region) }.map_err(ioctl("KVM_SET_USER_MEMORY_REGION"))?;
    let vcpu = vm.create_vcpu(0).map_err(ioctl("KVM_CREATE_VCPU"))?;
    Ok((kvm, vm, vcpu))
}

impl MicroVm {
    /// Steps 1-3 and 5 of the boot order, shared by boot and restore: /dev/kvm, VM, RAM
    /// slot, vCPU. Leaves registers at KVM's reset state.
    pub(crate) fn create(config: VmConfig, mem: GuestMemoryMmap) -> Result<MicroVm> {
        let (kvm, vm, vcpu) = kvm_objects(&config, &mem)?;
        let supported = kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES).map_err(ioctl("KVM_GET_SUPPORTED_CPUID"))?;
        let (cpuid, cpuid_shaping) = arch::shape_cpuid(&supported)?;
        Ok(MicroVm {
            vm,
            vcpu,
            mem,
            clock: VirtualClock::new(Duration::from_nanos(config.exit_cost_ns)),
            config,
            cpuid,
            cpuid_shaping,
            bus: PioBus::default(),
            mmio: MmioBus::default(),
            pending: PendingIrqs::default(),
            halted: false,
            stats: ExitStats::default(),
            trace: Sha256::new(),
            exit_log: None,
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
    /// Current virtual time.
    pub fn now(&self) -> VirtualTime {
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
        self.trace.update(self.clock.now().as_ns().to_le_bytes());
        self.trace.update(arg.to_le_bytes());
        self.trace.update([data.len() as u8]);
        self.trace.update(data);
        if self.exit_log.is_some() {
            self.log_exit(ev, arg, data);
        }
    }

    /// Writes every later traced event (exit, injection, timer jump) to `path`, one line
    /// each: exit count, kind, virtual ns, argument, rip, data. Two runs that should be
    /// identical and are not part at the first line that differs (`cmp`), with the guest
    /// instruction that saw the difference. Costs a KVM_GET_REGS per event.
    pub fn log_exits_to(&mut self, path: &std::path::Path) -> Result<()> {
        let f = std::fs::File::create(path).map_err(|e| KvmError::Config(format!("{}: {e}", path.display())))?;
        self.exit_log = Some(std::io::BufWriter::new(f));
        Ok(())
    }

    fn log_exit(&mut self, ev: Ev, arg: u64, data: &[u8]) {
        use std::io::Write;
        let rip = self.vcpu.get_regs().map(|r| r.rip).unwrap_or(u64::MAX);
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        let line = format!(
            "{} {ev:?} t={} arg={arg:#x} rip={rip:#x} data={hex}\n",
            self.stats.exits,
            self.clock.now().as_ns()
        );
        if let Some(w) = self.exit_log.as_mut() {
            // A debugging aid: a full disk ends the log, never the run.
            if w.write_all(line.as_bytes()).is_err() {
                self.exit_log = None;
            }
        }
    }

    /// Reads guest memory (for tests and inspection).
    pub fn read_memory(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.mem.read_slice(buf, GuestAddress(addr)).map_err(|e| KvmError::Memory(format!("read {addr:#x}: {e}")))
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
