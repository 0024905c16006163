//! Boots a stock Linux kernel to its first console lines. Needs hardware virtualization
//! (vmx/svm): under PVM a stock kernel's ring-0 code is emulated and fails. Skips with
//! a printed reason when vmx/svm is absent or $SIMCLUSTER_KVM_KERNEL (a bzImage or
//! vmlinux) is unset.

mod kvm_common;

use vmm::kvm::host::has_hardware_virt;
use vmm::kvm::{LinuxBootBuilder, RunLimits, RunOutcome};

#[test]
fn kvm_linux_boots_to_console() {
    if !has_hardware_virt() {
        eprintln!("SKIP kvm_linux_boots_to_console: /proc/cpuinfo has neither vmx nor svm (stock Linux cannot run under this KVM)");
        return;
    }
    let Some(kernel) = std::env::var_os("SIMCLUSTER_KVM_KERNEL") else {
        eprintln!("SKIP kvm_linux_boots_to_console: set SIMCLUSTER_KVM_KERNEL to a bzImage or vmlinux");
        return;
    };
    if !kvm_common::kvm_available("kvm_linux_boots_to_console") {
        return;
    }
    let mut vm = LinuxBootBuilder::new(std::path::Path::new(&kernel)).memory_mib(256).build().unwrap();
    let mut budget = 2_000_000u64;
    while budget > 0 && !String::from_utf8_lossy(vm.console()).contains("Linux version") {
        let limits = RunLimits { max_exits: Some(vm.stats().exits + 10_000), until_ns: None };
        match vm.run(limits) {
            Ok(RunOutcome::ExitLimit) => budget = budget.saturating_sub(10_000),
            Ok(other) => {
                eprintln!("guest stopped: {other:?}");
                break;
            }
            Err(e) => {
                eprintln!("guest failed: {e}");
                break;
            }
        }
    }
    let console = String::from_utf8_lossy(vm.console()).to_string();
    eprintln!("{console}");
    assert!(console.contains("Linux version"), "no kernel banner on the console");
}
