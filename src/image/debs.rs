//! Debian packages for guest root filesystems: resolved by name to an exact
//! version and checksum, downloaded once into the cache, unpacked with
//! `dpkg-deb -x` (no root needed, no maintainer scripts run).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::cache::{cache_root, sha256_file};
use super::host::{apt_update, have_program, run_capture};

/// One package, pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deb {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

/// A package name apt does not know (a user input error).
#[derive(Debug, thiserror::Error)]
#[error("{file}: [image] packages: no Debian package named {name:?} (checked with apt-cache show after apt-get update)")]
pub struct UnknownPackage {
    pub file: PathBuf,
    pub name: String,
}

fn show(name: &str) -> Option<Deb> {
    let out = Command::new("apt-cache")
        .args(["show", "--no-all-versions", name])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
    };
    Some(Deb {
        name: field("Package: ")?,
        version: field("Version: ")?,
        sha256: field("SHA256: ")?,
    })
}

/// Pins each package to apt's candidate version. Refreshes apt's lists once
/// if a name is unknown, as on a fresh machine.
pub fn resolve(names: &[String], cluster_file: &Path) -> Result<Vec<Deb>> {
    if !have_program("apt-cache") {
        bail!("apt-cache not found: simcluster's image builder needs a Debian-based host");
    }
    let mut out = Vec::new();
    let mut refreshed = false;
    for name in names {
        let deb = match show(name) {
            Some(d) => d,
            None if !refreshed => {
                apt_update()?;
                refreshed = true;
                show(name).ok_or_else(|| UnknownPackage { file: cluster_file.into(), name: name.clone() })?
            }
            None => return Err(UnknownPackage { file: cluster_file.into(), name: name.clone() }.into()),
        };
        out.push(deb);
    }
    Ok(out)
}

/// Path of the cached .deb, downloading it if needed. The file is named by
/// its checksum and verified against the archive's SHA256 field.
pub fn fetch(deb: &Deb) -> Result<PathBuf> {
    let dir = cache_root().join("debs");
    let path = dir.join(format!("{}.deb", deb.sha256));
    if path.is_file() {
        return Ok(path);
    }
    let tmp = dir.join(format!("download-{}-{}", std::process::id(), deb.name));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    run_capture(
        Command::new("apt-get")
            .current_dir(&tmp)
            .args(["download", "-q", &format!("{}={}", deb.name, deb.version)]),
    )
    .with_context(|| format!("downloading Debian package {} {}", deb.name, deb.version))?;
    let got = std::fs::read_dir(&tmp)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .with_context(|| format!("apt-get download {} produced no .deb", deb.name))?;
    let sum = sha256_file(&got)?;
    if sum != deb.sha256 {
        bail!("{}: checksum {sum} does not match the archive's {}", got.display(), deb.sha256);
    }
    std::fs::rename(&got, &path)?;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(path)
}

/// Unpacks a .deb's data into `root`.
pub fn unpack(deb_file: &Path, root: &Path) -> Result<()> {
    run_capture(Command::new("dpkg-deb").arg("-x").arg(deb_file).arg(root))
        .with_context(|| format!("unpacking {}", deb_file.display()))?;
    Ok(())
}
