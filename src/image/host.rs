//! Host tools the image builder needs, installed from Debian on demand.

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Runs a command, returning stdout; on failure the error carries stderr.
pub fn run_capture(cmd: &mut Command) -> Result<String> {
    let desc = format!("{cmd:?}");
    let out = cmd.stdin(Stdio::null()).output().with_context(|| format!("cannot run {desc}"))?;
    if !out.status.success() {
        bail!("{desc} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether an executable file `name` is in a directory of `$PATH`.
pub fn have_program(name: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file())).unwrap_or(false)
}

/// Whether this process runs as root (effective uid 0), as installing
/// host packages needs.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Installs Debian packages with apt-get (refreshing the package lists once
/// if the first attempt fails, as on a fresh machine).
pub fn apt_install(packages: &[&str]) -> Result<()> {
    if packages.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!("missing host packages; install them first: sudo apt-get install -y {}", packages.join(" "));
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
    };
    let first = install().context("cannot run apt-get")?;
    if first.status.success() {
        return Ok(());
    }
    apt_update()?;
    let second = install().context("cannot run apt-get")?;
    if !second.status.success() {
        bail!("apt-get install {} failed: {}", packages.join(" "), String::from_utf8_lossy(&second.stderr).trim());
    }
    Ok(())
}

/// Refreshes the host's Debian package lists (`apt-get update`); as root
/// only, else an error that says what to run.
pub fn apt_update() -> Result<()> {
    if !is_root() {
        bail!("the Debian package lists need refreshing: sudo apt-get update");
    }
    run_capture(Command::new("apt-get").args(["update", "-q"])).map(|_| ()).context("apt-get update")
}

/// Installed version of a Debian package, if installed.
pub fn installed_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}|${Version}", package])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let (status, version) = s.split_once('|')?;
    (out.status.success() && status.ends_with("installed") && !version.is_empty()).then(|| version.to_string())
}
