//! The guest kernels, built from Debian source packages with simcluster's
//! config fragments (and, for user-mode Linux, patches):
//! - [`ensure_kernel`] (`uml.rs`): Linux for `ARCH=um`, the kernel every
//!   user-mode Linux node runs, built by `simcluster image build`.
//! - [`ensure_kvm_kernel`] (`kvm.rs`): an x86-64 microVM bzImage for the KVM
//!   runtime, built on first use by a KVM run or `simcluster image kernel
//!   --runtime kvm`.
//!
//! Two source series are known ([`KernelSeries`], a `[cluster]` setting;
//! where each one's source comes from is in `source.rs`):
//! - 7.2 (the default): `linux-source-7.2` from Debian's trixie-backports,
//!   fetched by package name with apt's own tools through a private root
//!   (its own sources list, lists and archive directories under the cache;
//!   the host's apt setup is never touched), pinned to one version and the
//!   archive's SHA-256. Its seccomp userspace and shared-memory time travel
//!   are what make executions fast. The KVM kernel is built from it too.
//! - 6.1: `linux-source-6.1` from the host's own bookworm archive, the
//!   kernel simcluster started on, kept so benchmarks can put old and new
//!   side by side (ptrace userspace only).
//!
//! A recipe's inputs (series, source version, the fragment, patches and its
//! recipe version) are compiled into the binary and hashed into the cache
//! key, so a kernel is rebuilt exactly when one of them changes. A build
//! takes minutes on two cores; a cached one is free. Shared here: the
//! `Recipe` of a build, the build itself (`ensure_built`), its
//! reproducible environment and the check that every fragment line
//! survived `olddefconfig` ([`verify_config`]).

mod build;
mod kvm;
mod source;

mod uml;

use std::path::PathBuf;

use anyhow::Result;

use crate::image::host::{apt_install, have_program};

pub use crate::cluster::KernelSeries;
pub use build::verify_config;
pub use kvm::{ensure_kvm_kernel, kvm_kernel_key, kvm_kernel_path_if_cached, KVM_CONFIG_FRAGMENT};
pub use uml::{ensure_kernel, kernel_key, UML_CONFIG_FRAGMENT};

/// A built kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The kernel binary in the cache.
    pub path: PathBuf,
    /// The cache key, which names the exact recipe and inputs.
    pub key: String,
    /// It was in the cache already (false: this call built it).
    pub cached: bool,
    /// The source series it was built from.
    pub series: KernelSeries,
}

/// How one kernel is built from a series' source.
struct Recipe {
    /// Progress and error messages name the build by this ("kernel").
    pub label: &'static str,
    /// `make ARCH=`.
    pub arch: &'static str,
    /// The config target the fragment is merged over (`defconfig`).
    pub base_config: &'static str,
    pub fragment: &'static str,
    /// Applied with `patch -p1` before configuring, in order.
    pub patches: &'static [(&'static str, &'static str)],
    /// The `make` target and the file it leaves, relative to the tree.
    pub target: &'static str,
    pub artifact: &'static str,
    /// The result's name in its cache directory.
    pub output: &'static str,
    /// Roughly how many lines `make` prints; only for the progress bar.
    pub expected_steps: u64,
    /// Host packages beyond [`BUILD_DEPS`]: (a file that shows it is
    /// installed, package).
    pub extra_deps: &'static [(&'static str, &'static str)],
}

/// Kbuild's stamps, fixed (see the kernel's reproducible-builds docs).
const REPRODUCIBLE_BUILD_ENV: &[(&str, &str)] = &[
    ("KBUILD_BUILD_TIMESTAMP", "Thu Jan  1 00:00:00 UTC 2026"),
    ("KBUILD_BUILD_USER", "simcluster"),
    ("KBUILD_BUILD_HOST", "simcluster"),
    ("KBUILD_BUILD_VERSION", "1"),
];

/// Host packages every kernel build needs.
const BUILD_DEPS: &[(&str, &str)] = &[
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
    ("make", "make"),
    ("gcc", "gcc"),
    ("patch", "patch"),
    ("xz", "xz-utils"),
    ("dpkg-deb", "dpkg"),
];

fn ensure_build_deps(recipe: &Recipe) -> Result<()> {
    let mut missing: Vec<&str> =
        BUILD_DEPS.iter().filter(|(prog, _)| !have_program(prog)).map(|(_, pkg)| *pkg).collect();
    missing
        .extend(recipe.extra_deps.iter().filter(|(file, _)| !std::path::Path::new(file).exists()).map(|(_, pkg)| *pkg));
    apt_install(&missing)
}
