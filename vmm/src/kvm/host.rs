//! What the host offers for deterministic execution, detected once per VM.
//!
//! - Hardware virtualization (`vmx`/`svm` in /proc/cpuinfo): without it /dev/kvm may still
//!   exist as a PVM hypervisor (kvm_pvm), which runs guest ring 3 natively and emulates
//!   guest ring 0; stock Linux does not boot there.
//! - A PMU that counts retired branches (perf_event_open of
//!   PERF_COUNT_HW_BRANCH_INSTRUCTIONS): needed to stop a guest at an exact instruction
//!   count (deterministic preemption). Without it a guest that never exits is never
//!   preempted.

/// Host capabilities relevant to the KVM runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCaps {
    /// `vmx` or `svm` appears in /proc/cpuinfo.
    pub hardware_virt: bool,
    /// The kvm_pvm module is loaded (/sys/module/kvm_pvm exists).
    pub pvm: bool,
    /// A hardware retired-branch counter could be opened, or why not.
    pub branch_counter: Result<(), NoBranchCounter>,
}

impl HostCaps {
    /// Probes the host (cheap: one file read and one perf_event_open).
    pub fn detect() -> HostCaps {
        HostCaps {
            hardware_virt: has_hardware_virt(),
            pvm: std::path::Path::new("/sys/module/kvm_pvm").exists(),
            branch_counter: probe_branch_counter(),
        }
    }

    /// Human-readable limits, printed with run results.
    pub fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Err(e) = &self.branch_counter {
            v.push(format!(
                "no PMU ({e}): deterministic preemption by retired-branch counts is unavailable; \
                 a guest that never exits is never preempted"
            ));
        }
        if !self.hardware_virt {
            v.push(format!(
                "no vmx/svm{}: guest ring 0 is emulated (about 1000x slower); stock Linux guests \
                 cannot boot under this KVM",
                if self.pvm { " (kvm_pvm)" } else { "" }
            ));
        }
        v
    }
}

/// `vmx` or `svm` among the CPU flags in /proc/cpuinfo.
pub fn has_hardware_virt() -> bool {
    hostfacts::CpuInfo::read().hardware_virt
}

/// perf_event_attr, version 0 layout (64 bytes): all the fields we set.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_BRANCH_INSTRUCTIONS: u64 = 4;
const FLAG_DISABLED: u64 = 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// `perf_event_open` refused a retired-branch counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("perf_event_open(branch-instructions): {}", std::io::Error::from_raw_os_error(*.errno))]
pub struct NoBranchCounter {
    /// The errno it returned.
    pub errno: i32,
}

/// Tries to open a retired-branch counter on this thread.
pub fn probe_branch_counter() -> Result<(), NoBranchCounter> {
    let attr = PerfEventAttr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
        flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
        ..Default::default()
    };
    // SAFETY: perf_event_open reads `attr.size` bytes of a valid, initialized struct.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, 0, -1, -1, 0) };
    if fd < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(NoBranchCounter { errno });
    }
    // SAFETY: fd was just returned by the kernel and is owned here.
    unsafe { libc::close(fd as i32) };
    Ok(())
}
