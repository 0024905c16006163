//! KVM microVM node runtime: one vCPU, userspace devices, virtual time, snapshots.
//!
//! A node is a [`MicroVm`] (`vm/`: the VM and its state, its builder and boot order,
//! its run loop): one KVM vCPU started directly in 64-bit long mode, one RAM region,
//! and devices emulated in userspace:
//! - [`devices`]: an 8250 serial subset, a paravirtual clock/timer, a power port; the
//!   legacy 8259A/8254 pair and the CMOS clock of [`legacy`];
//! - [`mmio`]: the MMIO bus, with the [`virtio_mmio`] transport (any device model of
//!   [`crate::virtio`] behind it, with its queues and its kick hook); [`ports`]: the
//!   hooks that stamp virtio-net and virtio-blk with virtual time.
//!
//! Around it: [`node`] (the node as the engine drives it; several nodes on one
//! timeline are the engine's business), [`linux`] (booting a Linux kernel),
//! [`snapshot`], [`arch`] (long mode, CPUID shaping), [`host`] and [`probe`] (what
//! this host can do), [`watchdog`], [`asm`] (the test guests).
//!
//! The run loop ([`MicroVm::run`]) is deterministic: virtual time advances by a fixed
//! cost per exit and jumps to the next timer deadline when the guest halts; interrupts
//! are injected from userspace with KVM_INTERRUPT. No in-kernel irqchip or PIT is
//! created (their timers run on host time).
//!
//! # What stock KVM cannot make deterministic (limits, by design documented here)
//! - **RDTSC/RDTSCP** execute without exiting (TSC offsetting/scaling only shift and
//!   scale host time), including from guest user mode; CR4.TSD makes RDTSC fault only at
//!   CPL>0 and would need a guest kernel that cooperates. The guest TSC is host time;
//!   CPUID hides it (and the invariant-TSC and TSC-deadline bits), so Linux neither
//!   calibrates nor reads it ([`arch::shape_cpuid`]).
//! - **Asynchronous preemption**: without a PMU (retired-branch counting via
//!   perf_event_open, guest-only) the VMM can only act at the guest's own exits; a guest
//!   spinning without exits is never interrupted. [`host::HostCaps::notes`] says so in
//!   the run output where the PMU is absent.
//! - **RDRAND/RDSEED** do not exit on stock KVM when present; CPUID shaping hides them
//!   ([`arch::shape_cpuid`]), but a guest that ignores CPUID can still execute them.
//! - **Transactional memory** (HLE/RTM) aborts depend on host events: hidden by CPUID.
//! - **Paravirt clocks** (kvmclock) read host time: the KVM leaves (0x4000_0000..) are
//!   dropped, and so are VMX/SVM (no nested guests).
//! - **Host-specific CPU features** (xsave layout, cache/topology leaves) are passed
//!   through from KVM_GET_SUPPORTED_CPUID minus the list above; a fixed CPU model is a gap.
//! - **MONITOR/MWAIT, UMWAIT/TPAUSE** (WAITPKG) wake on host time: hidden by CPUID.
//!
//! [`node::KvmNode`] is this runtime as the engine drives it (the
//! [`nodeapi::NodeRuntime`] trait, shared with user-mode Linux).
//!
//! # Under PVM (kvm_pvm, no vmx/svm)
//! Guest ring 3 runs natively, guest ring 0 is emulated about 1000x slower; the test
//! guests in vmm/guests/ run at ring 0 and are kept to a few hundred instructions. See
//! [`probe`] for the per-ioctl results on the current host.

pub mod arch;
pub mod asm;
pub mod devices;
mod error;
pub mod host;
pub mod legacy;
pub mod linux;
pub mod mmio;
pub mod node;
pub mod ports;
pub mod probe;
pub mod snapshot;
pub mod virtio_mmio;
mod vm;
pub mod watchdog;

pub use devices::{DeviceEvent, PioBus, PioDevice, PowerPort, PvClock, Serial};
pub use error::{KvmError, Result};
pub use host::HostCaps;
pub use linux::LinuxBootBuilder;
pub use mmio::{MmioBus, MmioDevice};
pub use snapshot::SnapshotInfo;
pub use vm::{
    read_image, ExitStats, ForkPoint, MicroVm, MicroVmBuilder, RunLimits, RunOutcome, VirtualClock, VmConfig,
};
