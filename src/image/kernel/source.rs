//! Where a kernel series' source tarball comes from, and fetching it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::KernelSeries;
use crate::image::cache::{build_entry, cache_root};
use crate::image::host::{apt_install, have_program, installed_version, run_capture};

/// Where a series' source tarball comes from.
pub(super) enum Source {
    /// Installed into the host with apt-get (the host's own suite).
    HostPackage { tarball: &'static str },
    /// Downloaded with apt-get through a private root for `suite`, pinned.
    Pinned { suite: &'static str, version: &'static str, sha256: &'static str },
}

/// The Debian source package of `series`; it unpacks to a directory of
/// this name.
pub(super) fn package(series: KernelSeries) -> &'static str {
    match series {
        KernelSeries::V7_2 => "linux-source-7.2",
        KernelSeries::V6_1 => "linux-source-6.1",
    }
}

/// Where the source of `series` comes from.
pub(super) fn source(series: KernelSeries) -> Source {
    match series {
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

/// The exact source version of `series`, without fetching anything where
/// it is pinned (so a cached kernel needs neither network nor root).
pub(super) fn source_version(series: KernelSeries) -> Result<String> {
    match source(series) {
        Source::Pinned { version, .. } => Ok(version.to_string()),
        Source::HostPackage { tarball } => match installed_version(package(series)) {
            Some(v) if Path::new(tarball).is_file() => Ok(v),
            _ => ensure_source(series).map(|(_, v)| v),
        },
    }
}

/// The source tarball of `series` and its exact version, fetching it first
/// if needed. For a pinned source this needs the network once; afterwards
/// the tarball is in the cache.
pub(super) fn ensure_source(series: KernelSeries) -> Result<(PathBuf, String)> {
    match source(series) {
        Source::HostPackage { tarball } => {
            let version = match installed_version(package(series)) {
                Some(v) if Path::new(tarball).is_file() => v,
                _ => {
                    apt_install(&[package(series)])?;
                    installed_version(package(series))
                        .with_context(|| format!("{} is not installed after apt-get install", package(series)))?
                }
            };
            Ok((PathBuf::from(tarball), version))
        }
        Source::Pinned { suite, version, sha256 } => {
            let dir = cache_root().join("sources");
            let tarball = dir.join(format!("{}_{}.tar.xz", package(series), version.replace('~', "_")));
            let what = format!("the {} source", package(series));
            build_entry(
                &tarball,
                &what,
                true,
                || tarball.is_file(),
                |work| fetch_pinned(package(series), suite, version, sha256, work),
            )?;
            Ok((tarball, version.to_string()))
        }
    }
}

/// Downloads `package=version` from `suite` through the suite's private apt
/// root, checks the .deb against `sha256`, and unpacks it in `work`;
/// returns the source tarball in there.
fn fetch_pinned(package: &str, suite: &str, version: &str, sha256: &str, work: &Path) -> Result<PathBuf> {
    if !have_program("dpkg-deb") {
        bail!("dpkg-deb is needed to fetch {package} (a Debian-based host)");
    }
    let archive = crate::image::apt::Archive::open(suite)?;
    archive.ensure_lists()?;
    let pin = crate::image::apt::Pin { name: package.into(), version: version.into(), sha256: sha256.into() };
    let deb = match archive.fetch(std::slice::from_ref(&pin)) {
        Ok(files) => files.into_iter().next().expect("one pin, one file"),
        Err(_) => {
            archive.update()?;
            archive.fetch(std::slice::from_ref(&pin)).with_context(|| {
                format!("downloading {package} {version} from {suite}: the pinned version may have left the archive; pin the current one in src/image/kernel/source.rs")
            })?.into_iter().next().expect("one pin, one file")
        }
    };
    let unpacked = work.join("x");
    run_capture(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
    let inner = unpacked.join("usr/src").join(format!("{package}.tar.xz"));
    if !inner.is_file() {
        bail!("{} has no usr/src/{package}.tar.xz", deb.display());
    }
    Ok(inner)
}
