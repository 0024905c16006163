//! The KVM runtime's guest kernel: an x86-64 microVM bzImage from the same
//! pinned source as the user-mode Linux kernel (7.2): `make ARCH=x86_64
//! tinyconfig`, `guest-images/kernel/kvm-microvm.config` merged over it,
//! `make bzImage`, with two patches (guest-images/kernel/patches/kvm-7.2).
//! Most of what UML's patch does (hide RDRAND, RDSEED, the APIC id) the
//! KVM runtime does from outside, by shaping CPUID
//! (`vmm::kvm::arch::shape_cpuid`). Two things need the kernel itself:
//! - 0001: user-mode RDTSC cannot be stopped from outside (KVM offers no
//!   RDTSC exit to userspace): the patch makes it fault (CR4.TSD) where
//!   CPUID has no TSC and answers with virtual time, as UML's patch does;
//! - 0002: without the TSC the kernel would keep time with jiffies (4 ms
//!   steps); the patch adds a clocksource that reads the node's virtual ns
//!   at the PvClock port (`simclock=0x520 clocksource=simcluster` on the
//!   command line, `vmm::kvm::node::kernel_cmdline`).
//!
//! Built on first use (a KVM run without `SIMCLUSTER_KVM_KERNEL`, or
//! `simcluster image kernel --runtime kvm`), never by `image build`.

use std::path::PathBuf;

use anyhow::Result;

use super::build::ensure_built;
use super::source::{source, Source};
use super::{Kernel, KernelSeries, Recipe};
use crate::image::cache::{cache_root, KeyHasher};

/// Bump when the build steps change in a way that changes the output.
const RECIPE_VERSION: &str = "kvm-microvm-kernel-1";
/// The series whose source the KVM kernel is built from.
const SERIES: KernelSeries = KernelSeries::V7_2;
/// The fragment merged over `make ARCH=x86_64 tinyconfig`.
pub const KVM_CONFIG_FRAGMENT: &str = include_str!("../../../guest-images/kernel/kvm-microvm.config");
/// The result's name in `kernel/<key>/`.
const OUTPUT: &str = "bzImage";

const RECIPE: Recipe = Recipe {
    label: "kvm kernel",
    arch: "x86_64",
    base_config: "tinyconfig",
    fragment: KVM_CONFIG_FRAGMENT,
    patches: &[
        (
            "0001-x86-user-rdtsc-reads-virtual-time-without-cpuid-tsc.patch",
            include_str!(
                "../../../guest-images/kernel/patches/kvm-7.2/0001-x86-user-rdtsc-reads-virtual-time-without-cpuid-tsc.patch"
            ),
        ),
        (
            "0002-x86-clocksource-reads-the-virtual-clock-port.patch",
            include_str!("../../../guest-images/kernel/patches/kvm-7.2/0002-x86-clocksource-reads-the-virtual-clock-port.patch"),
        ),
    ],
    target: "bzImage",
    artifact: "arch/x86/boot/bzImage",
    output: OUTPUT,
    expected_steps: 900,
    // objtool, which x86-64 builds always run, needs libelf's headers.
    extra_deps: &[("/usr/include/gelf.h", "libelf-dev")],
};

/// The cache key for the KVM kernel built from `source_version` of the
/// 7.2 series.
pub fn kvm_kernel_key(source_version: &str) -> String {
    let mut k = KeyHasher::new(RECIPE_VERSION);
    k.add_str(RECIPE.arch).add_str(RECIPE.base_config).add_str(RECIPE.target);
    k.add_str(SERIES.name()).add_str(source_version).add_str(KVM_CONFIG_FRAGMENT);
    for (name, body) in RECIPE.patches {
        k.add_str(name).add_str(body);
    }
    k.finish()
}

/// Returns the KVM guest kernel (`kernel/<key>/bzImage`, its `.config`
/// beside it as `config`), building it first if the cache lacks it.
pub fn ensure_kvm_kernel(quiet: bool) -> Result<Kernel> {
    ensure_built(&RECIPE, SERIES, kvm_kernel_key, quiet)
}

/// The built KVM kernel if the cache holds it; never builds or fetches.
pub fn kvm_kernel_path_if_cached() -> Option<PathBuf> {
    let version = match source(SERIES) {
        Source::Pinned { version, .. } => version,
        Source::HostPackage { .. } => return None,
    };
    let path = cache_root().join("kernel").join(kvm_kernel_key(version)).join(OUTPUT);
    path.is_file().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::super::verify_config;
    use super::*;

    #[test]
    fn key_depends_on_source_version_and_differs_from_uml() {
        assert_ne!(kvm_kernel_key("7.2.1-1"), kvm_kernel_key("7.2.1-2"));
        assert_eq!(kvm_kernel_key("7.2.1-1"), kvm_kernel_key("7.2.1-1"));
        assert_ne!(kvm_kernel_key("x"), super::super::kernel_key(SERIES, "x"));
    }

    #[test]
    fn fragment_asks_for_the_microvm_devices_and_no_paravirt() {
        for want in [
            "CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y",
            "CONFIG_VIRTIO_BLK=y",
            "CONFIG_VIRTIO_NET=y",
            "CONFIG_VIRTIO_CONSOLE=y",
            "CONFIG_HW_RANDOM_VIRTIO=y",
            "CONFIG_SERIAL_8250_CONSOLE=y",
            "CONFIG_SQUASHFS=y",
            "CONFIG_OVERLAY_FS=y",
            "CONFIG_EXT4_FS=y",
            "# CONFIG_MODULES is not set",
            "# CONFIG_IPV6 is not set",
            "# CONFIG_KVM_GUEST is not set",
            "# CONFIG_RANDOMIZE_BASE is not set",
        ] {
            assert!(KVM_CONFIG_FRAGMENT.lines().any(|l| l == want), "{want}");
        }
        assert!(verify_config(KVM_CONFIG_FRAGMENT, "CONFIG_KVM_GUEST=y\n").is_err());
    }
}
