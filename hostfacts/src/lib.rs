//! Facts about the host a run ran on, for the record and for replay, and
//! nothing else: nothing of it reaches a guest.
//!
//! Why: the same seed gives the same execution only where guests see the
//! same machine. Under user-mode Linux that holds where the host cpu can
//! fault CPUID (`ARCH_SET_CPUID`): the guest kernel then answers guest
//! programs' CPUIDs itself. Where it cannot, guest programs execute CPUID
//! natively and see the host. So a run records its [`HostFacts`] (never
//! in anything a guest sees), and a replay compares the [`HostClass`] it
//! was recorded on with its own.
//!
//! [`NO_CPUID_FAULTING_ENV`] makes a host with CPUID faulting behave as
//! one without, to test that case where it cannot be had otherwise.

#![deny(missing_docs)]

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use nodeapi::RuntimeKind;

/// `ARCH_SET_CPUID` (asm/prctl.h).
pub const ARCH_SET_CPUID: libc::c_ulong = 0x1012;

/// `SIMCLUSTER_DEBUG_NO_CPUID_FAULTING=1`: report no CPUID faulting, never
/// turn it on for simcluster's thread (`uml::host_cpuid::enable`), and deny
/// `ARCH_SET_CPUID` to user-mode Linux nodes (`uml::seccomp`), as a host
/// without it does.
pub const NO_CPUID_FAULTING_ENV: &str = "SIMCLUSTER_DEBUG_NO_CPUID_FAULTING";

/// Whether [`NO_CPUID_FAULTING_ENV`] is set to 1.
pub fn cpuid_faulting_forced_off() -> bool {
    std::env::var_os(NO_CPUID_FAULTING_ENV).is_some_and(|v| v == "1")
}

/// Whether the host cpu (and hypervisor) can fault CPUID: tried once, in
/// a thread of its own, since the setting is per thread and the caller's
/// must not change; turned back off there at once.
pub fn cpuid_faulting_native() -> bool {
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(|| {
        std::thread::spawn(|| {
            // SAFETY: arch_prctl on this short-lived thread only.
            let on = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 0 as libc::c_ulong) } == 0;
            if on {
                // SAFETY: as above; CPUID native again before the thread ends.
                unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 1 as libc::c_ulong) };
            }
            on
        })
        .join()
        .unwrap_or(false)
    })
}

/// What CPUID answers guest programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuestCpuid {
    /// User-mode Linux with CPUID faulting: the guest kernel answers from
    /// the host's table less RDRAND, RDSEED, RDPID, TSX, WAITPKG, APIC ids.
    Virtual,
    /// User-mode Linux where CPUID stays native (no faulting, or `[cluster]
    /// cpuid = "host"`): guest programs see the host cpu.
    Host,
    /// KVM: the VMM answers CPUID (`kvm::arch::shape_cpuid`).
    Vmm,
}

impl GuestCpuid {
    /// What guests see under `runtime` when the cluster asks for virtual
    /// CPUID (`virtualise`) on a host that can (`faulting`) or cannot
    /// fault it.
    pub fn of(runtime: RuntimeKind, virtualise: bool, faulting: bool) -> GuestCpuid {
        match runtime {
            RuntimeKind::Kvm => GuestCpuid::Vmm,
            RuntimeKind::Uml if virtualise && faulting => GuestCpuid::Virtual,
            RuntimeKind::Uml => GuestCpuid::Host,
        }
    }
}

/// The host a run ran on. Host-side only: nothing here reaches a guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// CPUID's vendor string ("GenuineIntel", "AuthenticAMD").
    pub cpu_vendor: String,
    /// /proc/cpuinfo's model name.
    pub cpu_model: String,
    /// A process can fault CPUID (false when forced off).
    pub cpuid_faulting: bool,
    /// [`NO_CPUID_FAULTING_ENV`] forced `cpuid_faulting` off.
    #[serde(default)]
    pub cpuid_faulting_forced_off: bool,
    /// The host kernel's release (uname -r).
    pub kernel_release: String,
    /// vmx or svm among the cpu flags.
    pub hardware_virt: bool,
    /// The node runtime ("uml", "kvm").
    pub runtime: String,
    /// What CPUID answered guest programs, from the runtime, the cluster's
    /// `cpuid` setting and `cpuid_faulting`.
    pub guest_cpuid: GuestCpuid,
}

/// What decides whether a replay sees the machine its recording saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostClass {
    /// CPUID's vendor string ([`HostFacts::cpu_vendor`]).
    pub cpu_vendor: String,
    /// Whether a process can fault CPUID ([`HostFacts::cpuid_faulting`]).
    pub cpuid_faulting: bool,
}

impl std::fmt::Display for HostClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yes = if self.cpuid_faulting { "yes" } else { "no" };
        write!(f, "{}, CPUID faulting {yes}", self.cpu_vendor)
    }
}

impl HostFacts {
    /// This host, running nodes under `runtime`, with a cluster that asks
    /// for virtual CPUID (`virtualise`) or not.
    pub fn probe(runtime: RuntimeKind, virtualise: bool) -> HostFacts {
        let info = CpuInfo::read();
        let forced = cpuid_faulting_forced_off();
        let faulting = !forced && cpuid_faulting_native();
        HostFacts {
            cpu_vendor: info.vendor.unwrap_or_else(cpuid_vendor),
            cpu_model: info.model.unwrap_or_default(),
            cpuid_faulting: faulting,
            cpuid_faulting_forced_off: forced,
            kernel_release: kernel_release(),
            hardware_virt: info.hardware_virt,
            runtime: runtime.name().to_string(),
            guest_cpuid: GuestCpuid::of(runtime, virtualise, faulting),
        }
    }

    /// The facts that decide what a guest sees: vendor and CPUID faulting.
    pub fn class(&self) -> HostClass {
        HostClass { cpu_vendor: self.cpu_vendor.clone(), cpuid_faulting: self.cpuid_faulting }
    }

    /// Whether replaying on `self` what was recorded on `recorded` may see
    /// another machine: another vendor, or under user-mode Linux another
    /// answer to CPUID faulting (under KVM the VMM answers CPUID either way).
    pub fn differs_for_replay(&self, recorded: &HostFacts) -> bool {
        let (a, b) = (self.class(), recorded.class());
        a.cpu_vendor != b.cpu_vendor || (recorded.runtime != "kvm" && a.cpuid_faulting != b.cpuid_faulting)
    }
}

/// What /proc/cpuinfo says of the first cpu.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CpuInfo {
    /// The `vendor_id` line's value ("GenuineIntel", "AuthenticAMD").
    pub vendor: Option<String>,
    /// The `model name` line's value.
    pub model: Option<String>,
    /// Whether the `flags` line has `vmx` or `svm`.
    pub hardware_virt: bool,
}

impl CpuInfo {
    /// This host's (an empty one where /proc/cpuinfo cannot be read).
    pub fn read() -> CpuInfo {
        CpuInfo::parse(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
    }

    /// Reads the first `vendor_id`, `model name` and `flags` lines.
    pub fn parse(text: &str) -> CpuInfo {
        let mut info = CpuInfo::default();
        let mut flags_seen = false;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            match key.trim() {
                "vendor_id" if info.vendor.is_none() => info.vendor = Some(value.to_string()),
                "model name" if info.model.is_none() => info.model = Some(value.to_string()),
                "flags" if !flags_seen => {
                    flags_seen = true;
                    info.hardware_virt = value.split_whitespace().any(|f| f == "vmx" || f == "svm");
                }
                _ => {}
            }
        }
        info
    }
}

/// CPUID leaf 0's vendor string, where /proc/cpuinfo gives none.
fn cpuid_vendor() -> String {
    let r = core::arch::x86_64::__cpuid(0);
    let bytes: Vec<u8> = [r.ebx, r.edx, r.ecx].iter().flat_map(|w| w.to_le_bytes()).collect();
    String::from_utf8_lossy(&bytes).trim_end_matches('\0').to_string()
}

fn kernel_release() -> String {
    // SAFETY: uname fills the zeroed struct we pass.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    // SAFETY: uname NUL-terminates its fields.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
        model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n\
        flags\t\t: fpu vme de pse tsc msr vmx cpuid_fault\n\n\
        processor\t: 1\nvendor_id\t: OtherVendor\nmodel name\t: Other\nflags\t\t: fpu\n";

    #[test]
    fn cpuinfo_gives_the_first_cpus_vendor_model_and_virtualization() {
        let i = CpuInfo::parse(CPUINFO);
        assert_eq!(i.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(i.model.as_deref(), Some("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"));
        assert!(i.hardware_virt);
        let amd = CpuInfo::parse("vendor_id : AuthenticAMD\nmodel name : AMD EPYC\nflags : fpu svmx hypervisor\n");
        assert_eq!((amd.vendor.as_deref(), amd.model.as_deref()), (Some("AuthenticAMD"), Some("AMD EPYC")));
        assert!(!amd.hardware_virt, "svmx is not svm");
        assert_eq!(CpuInfo::parse(""), CpuInfo::default());
    }

    fn facts(vendor: &str, faulting: bool, runtime: RuntimeKind) -> HostFacts {
        HostFacts {
            cpu_vendor: vendor.into(),
            cpu_model: "m".into(),
            cpuid_faulting: faulting,
            cpuid_faulting_forced_off: false,
            kernel_release: "6.1".into(),
            hardware_virt: false,
            runtime: runtime.name().into(),
            guest_cpuid: GuestCpuid::of(runtime, true, faulting),
        }
    }

    #[test]
    fn replay_compares_vendor_and_faulting_where_guests_see_it() {
        let intel = facts("GenuineIntel", true, RuntimeKind::Uml);
        let amd = facts("AuthenticAMD", false, RuntimeKind::Uml);
        let intel_no = facts("GenuineIntel", false, RuntimeKind::Uml);
        assert!(!intel.differs_for_replay(&intel.clone()));
        assert!(intel.differs_for_replay(&amd) && amd.differs_for_replay(&intel));
        assert!(intel.differs_for_replay(&intel_no));
        // Other facts do not count.
        let mut other_kernel = intel.clone();
        other_kernel.kernel_release = "6.12".into();
        other_kernel.cpu_model = "another".into();
        assert!(!intel.differs_for_replay(&other_kernel));
        // Under KVM the VMM answers CPUID: only the vendor counts.
        let (k1, k2) = (facts("GenuineIntel", true, RuntimeKind::Kvm), facts("GenuineIntel", false, RuntimeKind::Kvm));
        assert!(!k1.differs_for_replay(&k2));
        assert_eq!(intel_no.class().to_string(), "GenuineIntel, CPUID faulting no");
    }

    #[test]
    fn guest_cpuid_follows_runtime_mode_and_host() {
        assert_eq!(GuestCpuid::of(RuntimeKind::Uml, true, true), GuestCpuid::Virtual);
        assert_eq!(GuestCpuid::of(RuntimeKind::Uml, true, false), GuestCpuid::Host);
        assert_eq!(GuestCpuid::of(RuntimeKind::Uml, false, true), GuestCpuid::Host);
        assert_eq!(GuestCpuid::of(RuntimeKind::Kvm, true, false), GuestCpuid::Vmm);
        let j = serde_json::to_value(facts("AuthenticAMD", false, RuntimeKind::Uml)).unwrap();
        assert_eq!((j["guest_cpuid"].as_str(), j["cpuid_faulting"].as_bool()), (Some("host"), Some(false)));
    }

    #[test]
    fn the_probe_leaves_the_calling_thread_alone() {
        let f = HostFacts::probe(RuntimeKind::Uml, true);
        assert!(!f.cpu_vendor.is_empty() && !f.kernel_release.is_empty(), "{f:?}");
        println!("{f:?}");
        // ARCH_GET_CPUID: 1 while CPUID is native in this thread.
        // SAFETY: a query of this thread's setting.
        assert_eq!(unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1011 as libc::c_ulong, 0 as libc::c_ulong) }, 1);
    }
}
