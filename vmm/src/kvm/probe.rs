//! Probe of what this host's /dev/kvm can do, step by step, for reports.
//!
//! Each step is attempted independently and its exact result (or errno) recorded, so the
//! output documents a hypervisor such as PVM precisely.

use kvm_bindings::{kvm_userspace_memory_region, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Cap, Kvm, VcpuExit};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend};

use super::host::HostCaps;
use super::vm::{anonymous_memory, MicroVmBuilder, RunOutcome};

/// One probe step and its outcome.
#[derive(Debug, Clone)]
pub struct ProbeStep {
    /// What was tried.
    pub step: String,
    /// `Ok(detail)` or `Err(error text)`.
    pub result: Result<String, String>,
}

/// The whole probe.
#[derive(Debug, Clone)]
pub struct ProbeReport {
    /// Host capabilities.
    pub host: HostCaps,
    /// Steps in order.
    pub steps: Vec<ProbeStep>,
}

impl std::fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let branch_counter = match &self.host.branch_counter {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("no ({e})"),
        };
        writeln!(
            f,
            "host: hardware_virt={} pvm={} branch_counter={branch_counter}",
            self.host.hardware_virt, self.host.pvm
        )?;
        for s in &self.steps {
            match &s.result {
                Ok(d) => writeln!(f, "  ok   {}: {}", s.step, d)?,
                Err(e) => writeln!(f, "  FAIL {}: {}", s.step, e)?,
            }
        }
        Ok(())
    }
}

impl ProbeReport {
    /// Whether a step with this name succeeded.
    pub fn ok(&self, step: &str) -> bool {
        self.steps.iter().any(|s| s.step == step && s.result.is_ok())
    }
}

/// Runs the probe. Never panics; a missing /dev/kvm is one failed step.
pub fn probe() -> ProbeReport {
    let mut steps = Vec::new();
    let mut push =
        |step: &str, result: Result<String, String>| steps.push(ProbeStep { step: step.to_string(), result });
    let kvm = match Kvm::new() {
        Ok(k) => {
            push("open /dev/kvm", Ok(format!("api version {}", k.get_api_version())));
            k
        }
        Err(e) => {
            push("open /dev/kvm", Err(e.to_string()));
            return ProbeReport { host: HostCaps::detect(), steps };
        }
    };
    let caps = [
        ("KVM_CAP_IRQCHIP (not used)", Cap::Irqchip),
        ("KVM_CAP_USER_MEMORY", Cap::UserMemory),
        ("KVM_CAP_SET_TSS_ADDR", Cap::SetTssAddr),
        ("KVM_CAP_VCPU_EVENTS", Cap::VcpuEvents),
        ("KVM_CAP_XCRS", Cap::Xcrs),
        ("KVM_CAP_XSAVE", Cap::Xsave),
        ("KVM_CAP_IMMEDIATE_EXIT", Cap::ImmediateExit),
        ("KVM_CAP_TSC_CONTROL", Cap::TscControl),
        ("KVM_CAP_GET_TSC_KHZ", Cap::GetTscKhz),
    ];
    let list: Vec<String> = caps.iter().map(|(n, c)| format!("{n}={}", kvm.check_extension_int(*c))).collect();
    push("check extensions", Ok(list.join(", ")));
    push(
        "KVM_GET_SUPPORTED_CPUID",
        kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .map(|c| format!("{} entries", c.as_slice().len()))
            .map_err(|e| e.to_string()),
    );
    push(
        "KVM_GET_MSR_INDEX_LIST",
        kvm.get_msr_index_list().map(|l| format!("{} MSRs", l.as_slice().len())).map_err(|e| e.to_string()),
    );

    // 16-bit real mode: mov dx,0x3f8; mov al,'R'; out dx,al; hlt.
    push("real-mode guest: out 0x3f8 + hlt", real_mode_guest(&kvm));

    // 64-bit long mode through the microVM builder: mov edx,0x3f8; mov al,'L'; out; hlt.
    let code = [0xba, 0xf8, 0x03, 0x00, 0x00, 0xb0, b'L', 0xee, 0xf4];
    let r = MicroVmBuilder::new().memory_mib(4).image(&code).build().map_err(|e| e.to_string()).and_then(|mut vm| {
        let out = vm.run_to_end(100).map_err(|e| e.to_string())?;
        if out == RunOutcome::Halted && vm.console() == b"L" {
            Ok(format!(
                "console {:?}, {} exits, shaped CPUID dropped {} hypervisor leaves",
                String::from_utf8_lossy(vm.console()),
                vm.stats().exits,
                vm.cpuid_shaping().dropped_hypervisor_leaves
            ))
        } else {
            Err(format!("outcome {out:?}, console {:?}", vm.console()))
        }
    });
    push("long-mode guest (microVM): out 0x3f8 + hlt", r);

    // What a vCPU can save (snapshot prerequisites).
    let r = Kvm::new().and_then(|k| k.create_vm()).and_then(|vm| vm.create_vcpu(0));
    match r {
        Ok(vcpu) => {
            push("KVM_GET_VCPU_EVENTS", vcpu.get_vcpu_events().map(|_| String::new()).map_err(|e| e.to_string()));
            push("KVM_GET_XCRS", vcpu.get_xcrs().map(|x| format!("{} xcrs", x.nr_xcrs)).map_err(|e| e.to_string()));
            push("KVM_GET_XSAVE", vcpu.get_xsave().map(|_| String::new()).map_err(|e| e.to_string()));
            push(
                "KVM_GET_LAPIC (no irqchip: expected to fail)",
                vcpu.get_lapic().map(|_| String::new()).map_err(|e| e.to_string()),
            );
            push("KVM_GET_TSC_KHZ", vcpu.get_tsc_khz().map(|k| format!("{k} kHz")).map_err(|e| e.to_string()));
        }
        Err(e) => push("create vCPU", Err(e.to_string())),
    }
    ProbeReport { host: HostCaps::detect(), steps }
}

fn real_mode_guest(kvm: &Kvm) -> Result<String, String> {
    let e = |what: &str| {
        let what = what.to_string();
        move |err: kvm_ioctls::Error| format!("{what}: {err}")
    };
    let vm = kvm.create_vm().map_err(e("KVM_CREATE_VM"))?;
    let mem = anonymous_memory(2 << 20).map_err(|x| x.to_string())?;
    let code = [0xba, 0xf8, 0x03, 0xb0, b'R', 0xee, 0xf4];
    mem.write_slice(&code, GuestAddress(0x1000)).map_err(|x| x.to_string())?;
    let host = mem.get_host_address(GuestAddress(0)).map_err(|x| x.to_string())?;
    let region = kvm_userspace_memory_region {
        slot: 0,
        flags: 0,
        guest_phys_addr: 0,
        memory_size: 2 << 20,
        userspace_addr: host as u64,
    };
    // SAFETY: `mem` outlives `vm` within this function.
    unsafe { vm.set_user_memory_region(region) }.map_err(e("KVM_SET_USER_MEMORY_REGION"))?;
    let tss = vm.set_tss_address(0xfffb_d000).map_err(e("KVM_SET_TSS_ADDR"));
    let mut vcpu = vm.create_vcpu(0).map_err(e("KVM_CREATE_VCPU"))?;
    let mut sregs = vcpu.get_sregs().map_err(e("KVM_GET_SREGS"))?;
    sregs.cs.base = 0;
    sregs.cs.selector = 0;
    vcpu.set_sregs(&sregs).map_err(e("KVM_SET_SREGS"))?;
    let regs = kvm_bindings::kvm_regs { rip: 0x1000, rflags: 2, ..Default::default() };
    vcpu.set_regs(&regs).map_err(e("KVM_SET_REGS"))?;
    let mut out = Vec::new();
    for _ in 0..10 {
        match vcpu.run().map_err(e("KVM_RUN"))? {
            VcpuExit::IoOut(0x3f8, d) => out.extend_from_slice(d),
            VcpuExit::Hlt => {
                return Ok(format!("console {:?} (KVM_SET_TSS_ADDR: {:?})", String::from_utf8_lossy(&out), tss.err()));
            }
            other => return Err(format!("unexpected exit {other:?}")),
        }
    }
    Err("no hlt after 10 exits".into())
}
