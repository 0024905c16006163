//! The user-mode Linux guest kernel: `make ARCH=um defconfig`, the series'
//! patches and `guest-images/kernel/uml.config`, `make linux`.

use anyhow::Result;

use super::build::ensure_built;
use super::{Kernel, KernelSeries, Recipe};
use crate::image::cache::KeyHasher;

/// Bump when the build steps change in a way that changes the output.
const RECIPE_VERSION: &str = "uml-kernel-3";
/// The fragment merged over `make ARCH=um defconfig`.
pub const UML_CONFIG_FRAGMENT: &str = include_str!("../../../guest-images/kernel/uml.config");

macro_rules! patch {
    ($series:literal, $name:literal) => {
        ($name, include_str!(concat!("../../../guest-images/kernel/patches/", $series, "/", $name)))
    };
}

const PATCHES_7_2: &[(&str, &str)] = &[
    patch!("7.2", "0001-um-trap-rdtsc-rdtscp-cpuid.patch"),
    patch!("7.2", "0002-um-time-travel-free-runs.patch"),
    patch!("7.2", "0003-um-time-travel-dirty-files.patch"),
    patch!("7.2", "0004-um-time-travel-vdso-clock.patch"),
];
const PATCHES_6_1: &[(&str, &str)] = &[
    patch!("6.1", "0001-um-room-for-the-host-xstate.patch"),
    patch!("6.1", "0002-um-emulate-rdtsc-from-virtual-time.patch"),
    patch!("6.1", "0003-um-guest-cpuid-without-host-randomness.patch"),
];

fn patches(series: KernelSeries) -> &'static [(&'static str, &'static str)] {
    match series {
        KernelSeries::V7_2 => PATCHES_7_2,
        KernelSeries::V6_1 => PATCHES_6_1,
    }
}

fn recipe(series: KernelSeries) -> Recipe {
    Recipe {
        label: "kernel",
        arch: "um",
        base_config: "defconfig",
        fragment: UML_CONFIG_FRAGMENT,
        patches: patches(series),
        target: "linux",
        artifact: "linux",
        output: "linux",
        expected_steps: match series {
            KernelSeries::V7_2 => 1500,
            KernelSeries::V6_1 => 1420,
        },
        extra_deps: &[],
    }
}

/// The cache key for the kernel of `series` built from `source_version`.
pub fn kernel_key(series: KernelSeries, source_version: &str) -> String {
    let mut k = KeyHasher::new(RECIPE_VERSION);
    k.add_str(series.name()).add_str(source_version).add_str(UML_CONFIG_FRAGMENT);
    for (name, body) in patches(series) {
        k.add_str(name).add_str(body);
    }
    k.finish()
}

/// Returns the user-mode Linux kernel of `series`, building it first if the
/// cache lacks it (`kernel/<key>/linux`).
pub fn ensure_kernel(series: KernelSeries, quiet: bool) -> Result<Kernel> {
    ensure_built(&recipe(series), series, |v| kernel_key(series, v), quiet)
}

#[cfg(test)]
mod tests {
    use super::super::verify_config;
    use super::*;

    #[test]
    fn key_depends_on_series_and_source_version() {
        let s = KernelSeries::V6_1;
        assert_ne!(kernel_key(s, "6.1.1-1"), kernel_key(s, "6.1.1-2"));
        assert_eq!(kernel_key(s, "6.1.1-1"), kernel_key(s, "6.1.1-1"));
        assert_ne!(kernel_key(KernelSeries::V7_2, "x"), kernel_key(KernelSeries::V6_1, "x"));
    }

    #[test]
    fn each_series_has_its_patches() {
        let v7 = patches(KernelSeries::V7_2);
        assert_eq!(v7.len(), 4);
        assert!(v7[0].1.contains("arch/um/kernel/trap.c") && v7[0].1.contains("stub_exe.c"));
        assert!(v7[1].1.contains("time_travel_end_free_run") && v7[1].1.contains("arch/um/drivers/chan_kern.c"));
        assert!(v7[2].1.contains("TIME_TRAVEL_DIRTY_FILES_OFFSET 80") && v7[2].1.contains("PAGECACHE_TAG_DIRTY"));
        assert!(v7[3].1.contains("time_travel_vdso_enter") && v7[3].1.contains("arch/x86/um/vdso/um_vdso.c"));
        assert_eq!(patches(KernelSeries::V6_1).len(), 3);
        assert!(KernelSeries::V7_2.has_seccomp_userspace() && !KernelSeries::V6_1.has_seccomp_userspace());
    }

    #[test]
    fn verify_config_catches_a_dropped_option() {
        let mut good = String::new();
        for line in UML_CONFIG_FRAGMENT.lines() {
            if line.starts_with("CONFIG_") {
                good.push_str(line);
                good.push('\n');
            }
        }
        assert!(verify_config(UML_CONFIG_FRAGMENT, &good).is_ok());
        let bad = good.replace("CONFIG_UML_TIME_TRAVEL_SUPPORT=y\n", "");
        let e = verify_config(UML_CONFIG_FRAGMENT, &bad).unwrap_err().to_string();
        assert!(e.contains("UML_TIME_TRAVEL_SUPPORT"), "{e}");
        let bad = format!("{good}CONFIG_MCONSOLE=y\n");
        assert!(verify_config(UML_CONFIG_FRAGMENT, &bad).unwrap_err().to_string().contains("MCONSOLE"));
    }
}
