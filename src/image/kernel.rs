//! The guest kernel: Linux built for `ARCH=um` from a Debian source
//! package, with simcluster's config fragment and patches.
//!
//! Two series are known ([`KernelSeries`]):
//! - 7.2 (the default): `linux-source-7.2` from Debian's trixie-backports,
//!   fetched by package name with apt's own tools through a private root
//!   (its own sources list, lists and archive directories under the cache;
//!   the host's apt setup is never touched), pinned to one version and the
//!   archive's SHA-256. Its seccomp userspace and shared-memory time travel
//!   are what make executions fast.
//! - 6.1: `linux-source-6.1` from the host's own bookworm archive, the
//!   kernel simcluster started on, kept so benchmarks can put old and new
//!   side by side (ptrace userspace only).
//!
//! The recipe's inputs (series, source version, the fragment, the series'
//! patches and this file's recipe version) are compiled into the binary and
//! hashed into the cache key, so a kernel is rebuilt exactly when one of
//! them changes. A build takes minutes on two cores; a cached one is free.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use super::cache::{cache_root, publish, KeyHasher};
use super::host::{apt_install, have_program, installed_version, run_capture};

/// Bump when the build steps below change in a way that changes the output.
const RECIPE_VERSION: &str = "uml-kernel-3";
const CONFIG_FRAGMENT: &str = include_str!("../../guest-images/kernel/uml.config");

/// Which kernel a cluster's nodes run (`[cluster] kernel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
pub enum KernelSeries {
    /// linux-source-7.2 (trixie-backports), seccomp userspace available.
    #[default]
    #[serde(rename = "7.2")]
    V7_2,
    /// linux-source-6.1 (bookworm): the previous kernel, for comparisons.
    #[serde(rename = "6.1")]
    V6_1,
}

/// Where a series' source tarball comes from.
enum Source {
    /// Installed into the host with apt-get (the host's own suite).
    HostPackage { tarball: &'static str },
    /// Downloaded with apt-get through a private root for `suite`, pinned.
    Pinned { suite: &'static str, version: &'static str, sha256: &'static str },
}

impl KernelSeries {
    pub fn name(self) -> &'static str {
        match self {
            KernelSeries::V7_2 => "7.2",
            KernelSeries::V6_1 => "6.1",
        }
    }

    /// The Debian source package; it unpacks to a directory of this name.
    fn package(self) -> &'static str {
        match self {
            KernelSeries::V7_2 => "linux-source-7.2",
            KernelSeries::V6_1 => "linux-source-6.1",
        }
    }

    fn source(self) -> Source {
        match self {
            // Pinned like guest packages: the exact version and the
            // archive's checksum (apt-cache show in the private root).
            KernelSeries::V7_2 => Source::Pinned {
                suite: "trixie-backports",
                version: "7.2.12-1~bpo13+1",
                sha256: "73ca6c22599ba411ab3179642d33501ca2c90174e13c3c8d86e996ea1cbf2a8f",
            },
            KernelSeries::V6_1 => Source::HostPackage { tarball: "/usr/src/linux-source-6.1.tar.xz" },
        }
    }

    fn patches(self) -> &'static [(&'static str, &'static str)] {
        match self {
            KernelSeries::V7_2 => PATCHES_7_2,
            KernelSeries::V6_1 => PATCHES_6_1,
        }
    }

    /// Whether the series has UML's seccomp userspace (Linux 6.16+).
    pub fn has_seccomp_userspace(self) -> bool {
        self == KernelSeries::V7_2
    }

    /// Whether the series speaks time travel's shared-memory mode (6.11+).
    pub fn has_shared_clock(self) -> bool {
        self == KernelSeries::V7_2
    }

    /// Whether the kernel, trapping its guest programs' CPUID, keeps CPUID
    /// faulting on for its own process too (the 7.2 patch; see its text).
    pub fn faults_cpuid_itself(self) -> bool {
        self == KernelSeries::V7_2
    }

    /// Roughly how many lines `make` prints for this build; only for the
    /// progress bar.
    fn expected_build_steps(self) -> u64 {
        match self {
            KernelSeries::V7_2 => 1500,
            KernelSeries::V6_1 => 1420,
        }
    }
}

macro_rules! patch {
    ($series:literal, $name:literal) => {
        ($name, include_str!(concat!("../../guest-images/kernel/patches/", $series, "/", $name)))
    };
}

const PATCHES_7_2: &[(&str, &str)] = &[patch!("7.2", "0001-um-trap-rdtsc-rdtscp-cpuid.patch")];
const PATCHES_6_1: &[(&str, &str)] = &[
    patch!("6.1", "0001-um-room-for-the-host-xstate.patch"),
    patch!("6.1", "0002-um-emulate-rdtsc-from-virtual-time.patch"),
    patch!("6.1", "0003-um-guest-cpuid-without-host-randomness.patch"),
];

/// Kbuild's stamps, fixed (see the kernel's reproducible-builds docs).
const REPRODUCIBLE_BUILD_ENV: &[(&str, &str)] = &[
    ("KBUILD_BUILD_TIMESTAMP", "Thu Jan  1 00:00:00 UTC 2026"),
    ("KBUILD_BUILD_USER", "simcluster"),
    ("KBUILD_BUILD_HOST", "simcluster"),
    ("KBUILD_BUILD_VERSION", "1"),
];

/// Host packages the kernel build needs.
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

/// A built kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub path: PathBuf,
    /// The cache key, which names the exact recipe and inputs.
    pub key: String,
    pub cached: bool,
    pub series: KernelSeries,
}

fn ensure_build_deps() -> Result<()> {
    let missing: Vec<&str> = BUILD_DEPS
        .iter()
        .filter(|(prog, _)| !have_program(prog))
        .map(|(_, pkg)| *pkg)
        .collect();
    apt_install(&missing)
}

/// The exact source version of `series`, without fetching anything where
/// it is pinned (so a cached kernel needs neither network nor root).
fn source_version(series: KernelSeries) -> Result<String> {
    match series.source() {
        Source::Pinned { version, .. } => Ok(version.to_string()),
        Source::HostPackage { tarball } => match installed_version(series.package()) {
            Some(v) if Path::new(tarball).is_file() => Ok(v),
            _ => ensure_source(series).map(|(_, v)| v),
        },
    }
}

/// The source tarball of `series` and its exact version, fetching it first
/// if needed. For a pinned source this needs the network once; afterwards
/// the tarball is in the cache.
fn ensure_source(series: KernelSeries) -> Result<(PathBuf, String)> {
    match series.source() {
        Source::HostPackage { tarball } => {
            let version = match installed_version(series.package()) {
                Some(v) if Path::new(tarball).is_file() => v,
                _ => {
                    apt_install(&[series.package()])?;
                    installed_version(series.package())
                        .with_context(|| format!("{} is not installed after apt-get install", series.package()))?
                }
            };
            Ok((PathBuf::from(tarball), version))
        }
        Source::Pinned { suite, version, sha256 } => {
            let dir = cache_root().join("sources");
            let tarball = dir.join(format!("{}_{}.tar.xz", series.package(), version.replace('~', "_")));
            if !tarball.is_file() {
                let _lock = super::cache::BuildLock::acquire(&tarball, true)?;
                if !tarball.is_file() {
                    fetch_pinned(series.package(), suite, version, sha256, &tarball)?;
                }
            }
            Ok((tarball, version.to_string()))
        }
    }
}

/// Downloads `package=version` from `suite` through the suite's private apt
/// root, checks the .deb against `sha256`, and moves its source tarball to
/// `dest`.
fn fetch_pinned(package: &str, suite: &str, version: &str, sha256: &str, dest: &Path) -> Result<()> {
    if !have_program("dpkg-deb") {
        bail!("dpkg-deb is needed to fetch {package} (a Debian-based host)");
    }
    let archive = super::apt::Archive::open(suite)?;
    archive.ensure_lists()?;
    let pin = super::apt::Pin { name: package.into(), version: version.into(), sha256: sha256.into() };
    let deb = match archive.fetch(std::slice::from_ref(&pin)) {
        Ok(files) => files.into_iter().next().expect("one pin, one file"),
        Err(_) => {
            archive.update()?;
            archive.fetch(std::slice::from_ref(&pin)).with_context(|| {
                format!("downloading {package} {version} from {suite}: the pinned version may have left the archive; pin the current one in src/image/kernel.rs")
            })?.into_iter().next().expect("one pin, one file")
        }
    };
    let work = dest.with_extension(format!("fetch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let result = (|| -> Result<()> {
        let unpacked = work.join("x");
        run_capture(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
        let inner = unpacked.join("usr/src").join(format!("{package}.tar.xz"));
        std::fs::create_dir_all(dest.parent().unwrap())?;
        std::fs::rename(&inner, dest).with_context(|| format!("{} has no usr/src/{package}.tar.xz", deb.display()))?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// The cache key for the kernel of `series` built from `source_version`.
pub fn kernel_key(series: KernelSeries, source_version: &str) -> String {
    let mut k = KeyHasher::new(RECIPE_VERSION);
    k.add_str(series.name()).add_str(source_version).add_str(CONFIG_FRAGMENT);
    for (name, body) in series.patches() {
        k.add_str(name).add_str(body);
    }
    k.finish()
}

/// Returns the kernel of `series`, building it first if the cache lacks it.
pub fn ensure_kernel(series: KernelSeries, quiet: bool) -> Result<Kernel> {
    let version = source_version(series)?;
    let key = kernel_key(series, &version);
    let dir = cache_root().join("kernel").join(&key);
    let path = dir.join("linux");
    if path.is_file() {
        return Ok(Kernel { path, key, cached: true, series });
    }
    let _lock = super::cache::BuildLock::acquire(&dir, quiet)?;
    if path.is_file() {
        return Ok(Kernel { path, key, cached: true, series });
    }
    ensure_build_deps()?;
    let (tarball, fetched) = ensure_source(series)?;
    if fetched != version {
        bail!("{} is {fetched} now, not {version}: run the build again", series.package());
    }
    build(&dir, series, &tarball, &version, quiet)?;
    Ok(Kernel { path, key, cached: false, series })
}

fn build(final_dir: &Path, series: KernelSeries, tarball: &Path, version: &str, quiet: bool) -> Result<()> {
    let work = final_dir.with_extension(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let result = build_in(&work, series, tarball, version, quiet);
    if result.is_ok() {
        let staged = work.join("out");
        std::fs::create_dir_all(&staged)?;
        std::fs::copy(work.join("src/linux"), staged.join("linux"))?;
        std::fs::write(staged.join("config"), std::fs::read(work.join("src/.config"))?)?;
        std::fs::write(staged.join("source-version"), format!("{} {version}\n", series.package()))?;
        publish(&staged, final_dir)
            .with_context(|| format!("cannot move the kernel into {}", final_dir.display()))?;
    }
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn build_in(work: &Path, series: KernelSeries, tarball: &Path, version: &str, quiet: bool) -> Result<()> {
    let package = series.package();
    let pb = if quiet { ProgressBar::hidden() } else { ProgressBar::new_spinner() };
    pb.set_style(ProgressStyle::with_template("{spinner} kernel: {msg}").unwrap());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb.set_message(format!("unpacking {package} {version}"));
    run_capture(Command::new("tar").arg("-C").arg(work).arg("-xf").arg(tarball))?;
    let src = work.join("src");
    std::fs::rename(work.join(package), &src)
        .with_context(|| format!("{} did not unpack to {package}/", tarball.display()))?;
    for (name, body) in series.patches() {
        pb.set_message(format!("applying {name}"));
        let p = work.join(name);
        std::fs::write(&p, body)?;
        run_capture(Command::new("patch").current_dir(&src).args(["-p1", "--forward", "-i"]).arg(&p))
            .with_context(|| format!("patch {name} does not apply to {package} {version}"))?;
    }
    pb.set_message("configuring");
    let frag = work.join("simcluster.config");
    std::fs::write(&frag, CONFIG_FRAGMENT)?;
    run_capture(Command::new("make").current_dir(&src).args(["ARCH=um", "defconfig"]))?;
    run_capture(
        Command::new("scripts/kconfig/merge_config.sh")
            .current_dir(&src)
            .args(["-m", "-O", ".", ".config"])
            .arg(&frag),
    )?;
    run_capture(Command::new("make").current_dir(&src).args(["ARCH=um", "olddefconfig"]))?;
    verify_config(&std::fs::read_to_string(src.join(".config"))?)?;
    pb.finish_and_clear();

    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(series.expected_build_steps()) };
    bar.set_style(
        ProgressStyle::with_template("kernel: [{elapsed_precise}] {bar:40} {pos}/~{len} {msg}")
            .unwrap(),
    );
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let mut child = Command::new("make")
        .current_dir(&src)
        .args(["ARCH=um", &format!("-j{jobs}"), "linux"])
        // The guest prints its kernel's build stamp at boot, so it is part of
        // every trace: make it a function of the inputs, not of the build
        // host and hour.
        .envs(REPRODUCIBLE_BUILD_ENV.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run make")?;
    let stderr = child.stderr.take().unwrap();
    let err_thread = std::thread::spawn(move || {
        let mut tail: Vec<String> = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tail.push(line);
            if tail.len() > 40 {
                tail.remove(0);
            }
        }
        tail
    });
    for line in BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok) {
        if line.starts_with("  ") {
            bar.inc(1);
            bar.set_message(line.split_whitespace().last().unwrap_or("").to_string());
        }
    }
    let status = child.wait()?;
    let tail = err_thread.join().unwrap_or_default();
    bar.finish_and_clear();
    if !status.success() {
        bail!("kernel build failed ({status}); last messages:\n{}", tail.join("\n"));
    }
    Ok(())
}

/// Every `CONFIG_X=y` and `# CONFIG_X is not set` line of the fragment must
/// have survived `olddefconfig`; a dependency that silently dropped one
/// would give guests a kernel without, say, time travel.
fn verify_config(config: &str) -> Result<()> {
    let mut lost = Vec::new();
    for line in CONFIG_FRAGMENT.lines().map(str::trim) {
        let wanted = if line.starts_with("CONFIG_")
            || (line.starts_with("# CONFIG_") && line.ends_with(" is not set"))
        {
            line.to_string()
        } else {
            continue;
        };
        let ok = if let Some(name) = wanted.strip_prefix("# ").and_then(|l| l.strip_suffix(" is not set")) {
            !config.lines().any(|l| l.starts_with(&format!("{name}=")))
        } else {
            config.lines().any(|l| l == wanted)
        };
        if !ok {
            lost.push(wanted);
        }
    }
    if !lost.is_empty() {
        bail!("kernel config fragment did not take effect for: {}", lost.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        assert!(KernelSeries::V7_2.patches().iter().all(|(_, b)| b.contains("arch/um/kernel/trap.c") || b.contains("stub_exe.c")));
        assert_eq!(KernelSeries::V6_1.patches().len(), 3);
        assert!(KernelSeries::V7_2.has_seccomp_userspace() && !KernelSeries::V6_1.has_seccomp_userspace());
    }

    #[test]
    fn verify_config_catches_a_dropped_option() {
        let mut good = String::new();
        for line in CONFIG_FRAGMENT.lines() {
            if line.starts_with("CONFIG_") {
                good.push_str(line);
                good.push('\n');
            }
        }
        assert!(verify_config(&good).is_ok());
        let bad = good.replace("CONFIG_UML_TIME_TRAVEL_SUPPORT=y\n", "");
        let e = verify_config(&bad).unwrap_err().to_string();
        assert!(e.contains("UML_TIME_TRAVEL_SUPPORT"), "{e}");
        let bad = format!("{good}CONFIG_MCONSOLE=y\n");
        assert!(verify_config(&bad).unwrap_err().to_string().contains("MCONSOLE"));
    }
}
