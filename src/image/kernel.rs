//! The guest kernel: linux 6.1 built for `ARCH=um` from Debian's
//! `linux-source-6.1`, with simcluster's config fragment and patches.
//!
//! The recipe's inputs (the fragment, the patches, the source package's
//! version and this file's recipe version) are compiled into the binary and
//! hashed into the cache key, so the kernel is rebuilt exactly when one of
//! them changes. A build takes minutes on two cores; a cached one is free.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use super::cache::{cache_root, publish, KeyHasher};
use super::host::{apt_install, have_program, installed_version, run_capture};

/// Bump when the build steps below change in a way that changes the output.
const RECIPE_VERSION: &str = "uml-kernel-2";
const SOURCE_PACKAGE: &str = "linux-source-6.1";
const SOURCE_TARBALL: &str = "/usr/src/linux-source-6.1.tar.xz";
const CONFIG_FRAGMENT: &str = include_str!("../../guest-images/kernel/uml.config");
const PATCHES: &[(&str, &str)] = &[
    (
        "0001-um-room-for-the-host-xstate.patch",
        include_str!("../../guest-images/kernel/patches/0001-um-room-for-the-host-xstate.patch"),
    ),
    (
        "0002-um-emulate-rdtsc-from-virtual-time.patch",
        include_str!("../../guest-images/kernel/patches/0002-um-emulate-rdtsc-from-virtual-time.patch"),
    ),
    (
        "0003-um-guest-cpuid-without-host-randomness.patch",
        include_str!("../../guest-images/kernel/patches/0003-um-guest-cpuid-without-host-randomness.patch"),
    ),
];
/// Roughly how many lines `make` prints for this build; only for the
/// progress bar.
const EXPECTED_BUILD_STEPS: u64 = 1420;

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
];

/// A built kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub path: PathBuf,
    /// The cache key, which names the exact recipe and inputs.
    pub key: String,
    pub cached: bool,
}

fn ensure_build_deps() -> Result<String> {
    let mut missing: Vec<&str> = BUILD_DEPS
        .iter()
        .filter(|(prog, _)| !have_program(prog))
        .map(|(_, pkg)| *pkg)
        .collect();
    if installed_version(SOURCE_PACKAGE).is_none() || !Path::new(SOURCE_TARBALL).is_file() {
        missing.push(SOURCE_PACKAGE);
    }
    apt_install(&missing)?;
    installed_version(SOURCE_PACKAGE)
        .with_context(|| format!("{SOURCE_PACKAGE} is not installed after apt-get install"))
}

/// The cache key for the kernel built from `source_version`.
pub fn kernel_key(source_version: &str) -> String {
    let mut k = KeyHasher::new(RECIPE_VERSION);
    k.add_str(source_version).add_str(CONFIG_FRAGMENT);
    for (name, body) in PATCHES {
        k.add_str(name).add_str(body);
    }
    k.finish()
}

/// Returns the kernel, building it first if the cache lacks it.
pub fn ensure_kernel(quiet: bool) -> Result<Kernel> {
    // The common case (cached) must not need apt or root: look for the key
    // of the installed source first.
    let version = match installed_version(SOURCE_PACKAGE) {
        Some(v) if Path::new(SOURCE_TARBALL).is_file() => v,
        _ => ensure_build_deps()?,
    };
    let key = kernel_key(&version);
    let dir = cache_root().join("kernel").join(&key);
    let path = dir.join("linux");
    if path.is_file() {
        return Ok(Kernel { path, key, cached: true });
    }
    let _lock = super::cache::BuildLock::acquire(&dir, quiet)?;
    if path.is_file() {
        return Ok(Kernel { path, key, cached: true });
    }
    ensure_build_deps()?;
    build(&dir, &version, quiet)?;
    Ok(Kernel { path, key, cached: false })
}

fn build(final_dir: &Path, version: &str, quiet: bool) -> Result<()> {
    let work = final_dir.with_extension(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let result = build_in(&work, version, quiet);
    if result.is_ok() {
        let staged = work.join("out");
        std::fs::create_dir_all(&staged)?;
        std::fs::copy(work.join("src/linux"), staged.join("linux"))?;
        std::fs::write(staged.join("config"), std::fs::read(work.join("src/.config"))?)?;
        std::fs::write(staged.join("source-version"), version)?;
        publish(&staged, final_dir)
            .with_context(|| format!("cannot move the kernel into {}", final_dir.display()))?;
    }
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn build_in(work: &Path, version: &str, quiet: bool) -> Result<()> {
    let pb = if quiet { ProgressBar::hidden() } else { ProgressBar::new_spinner() };
    pb.set_style(ProgressStyle::with_template("{spinner} kernel: {msg}").unwrap());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb.set_message(format!("unpacking {SOURCE_PACKAGE} {version}"));
    run_capture(Command::new("tar").arg("-C").arg(work).args(["-xf", SOURCE_TARBALL]))?;
    let src = work.join("src");
    std::fs::rename(work.join(SOURCE_PACKAGE), &src)
        .with_context(|| format!("{SOURCE_TARBALL} did not unpack to {SOURCE_PACKAGE}/"))?;
    for (name, body) in PATCHES {
        pb.set_message(format!("applying {name}"));
        let p = work.join(name);
        std::fs::write(&p, body)?;
        run_capture(Command::new("patch").current_dir(&src).args(["-p1", "--forward", "-i"]).arg(&p))
            .with_context(|| format!("patch {name} does not apply to {SOURCE_PACKAGE} {version}"))?;
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

    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(EXPECTED_BUILD_STEPS) };
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
        let wanted = if line.starts_with("CONFIG_") {
            line.to_string()
        } else if line.starts_with("# CONFIG_") && line.ends_with(" is not set") {
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
    fn key_depends_on_source_version() {
        assert_ne!(kernel_key("6.1.1-1"), kernel_key("6.1.1-2"));
        assert_eq!(kernel_key("6.1.1-1"), kernel_key("6.1.1-1"));
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
