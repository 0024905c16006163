//! Debian packages for guest root filesystems: resolved with apt against the
//! image's suite (dependencies followed, no Recommends), pinned to exact
//! versions and checksums, then installed one of two ways:
//!
//! - **configured** (the default when a cluster names any package besides
//!   busybox-static): mmdebstrap builds the suite's Essential set plus the
//!   packages in a chroot and runs their maintainer scripts, so system users
//!   and groups, alternatives and directories exist as on a Debian machine;
//! - **unpacked** (`maintainer_scripts = false`, and busybox-only images):
//!   each .deb's data is unpacked with `dpkg-deb -x`; small and fast, for
//!   programs that need only their files.
//!
//! Either way the closure is the cache key: same names, same archive state,
//! same image.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use compose::shell_quote;

use super::apt::{Archive, Pin, ResolveError};
use super::cache::{build_entry, cache_root, KeyHasher};
use super::host::{apt_install, have_program, is_root, run_capture};
use crate::cluster::ImageSection;
pub use crate::cluster::{AGENT_PACKAGE, DEFAULT_SUITE};

/// Apt picks the first alternative of init-system-helpers' "usrmerge |
/// usr-is-merged"; usrmerge drags in perl (46 MB) to convert a /usr that
/// mmdebstrap already creates merged.
const CONFIGURED_EXTRA: &[&str] = &["usr-is-merged"];

/// Time stamp maintainer scripts and mmdebstrap see (shadow's last-change
/// day, generated files): fixed, so that builds are reproducible.
pub const SOURCE_DATE_EPOCH: &str = "1700000000";

/// How packages land in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// `dpkg-deb -x` of every package in the closure; no scripts run.
    Unpacked,
    /// The Essential set and the closure, installed and configured by
    /// mmdebstrap in a chroot.
    Configured,
}

/// The user's `[image]` request failed to resolve: an input error (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{file}: [image] packages: {problem}")]
pub struct PackageError {
    /// The cluster's file (cluster.toml, or the compose file).
    pub file: PathBuf,
    /// What apt could not resolve.
    pub problem: ResolveError,
}

/// What goes into an image, pinned.
#[derive(Debug, Clone)]
pub struct PackageSet {
    /// The Debian suite the packages come from (`[image] suite`).
    pub suite: String,
    /// Unpacked or configured (`[image] maintainer_scripts`).
    pub base: Base,
    /// The names the cluster asked for (plus the agent's package).
    pub requested: Vec<String>,
    /// The whole closure apt chose, sorted by name.
    pub pins: Vec<Pin>,
    /// Shell commands run in the configured image root (chroot).
    pub customize: Vec<String>,
    /// Absolute globs removed after installing.
    pub exclude: Vec<String>,
}

/// Resolves `names` (the agent's package added) against `suite`.
pub fn resolve(image: &ImageSection, file: &Path) -> Result<PackageSet> {
    let base = if image.configured() { Base::Configured } else { Base::Unpacked };
    let (suite, names) = (image.suite(), &image.packages);
    let mut requested: Vec<String> = names.to_vec();
    requested.push(AGENT_PACKAGE.to_string());
    if base == Base::Configured {
        requested.extend(CONFIGURED_EXTRA.iter().map(|s| s.to_string()));
    }
    requested.sort();
    requested.dedup();
    let archive = Archive::open(suite)?;
    let pins =
        archive.resolve(&requested, base == Base::Configured).map_err(|e| match e.downcast::<ResolveError>() {
            Ok(problem) => PackageError { file: file.into(), problem }.into(),
            Err(e) => e,
        })?;
    Ok(PackageSet {
        suite: suite.into(),
        base,
        requested,
        pins,
        customize: image.customize.clone(),
        exclude: image.exclude.clone(),
    })
}

impl PackageSet {
    /// Adds everything that decides the installed tree to an image key.
    pub fn add_to_key(&self, key: &mut KeyHasher) {
        key.add_str(&self.suite).add_str(match self.base {
            Base::Unpacked => "unpacked",
            Base::Configured => "configured-1",
        });
        self.add_closure_and_hooks(key);
        for g in &self.exclude {
            key.add_str("exclude").add_str(g);
        }
    }

    /// Installs the set into `root`, which must not exist yet.
    pub fn install(&self, root: &Path, report: &dyn Fn(&str)) -> Result<()> {
        match self.base {
            Base::Unpacked => self.unpack(root, report),
            Base::Configured => self.configure(root, report),
        }
    }

    fn unpack(&self, root: &Path, report: &dyn Fn(&str)) -> Result<()> {
        let archive = Archive::open(&self.suite)?;
        report(&format!("downloading {} packages", self.pins.len()));
        let files = archive.fetch(&self.pins)?;
        std::fs::create_dir_all(root)?;
        for (pin, file) in self.pins.iter().zip(&files) {
            report(&format!("unpacking {} {}", pin.name, pin.version));
            run_capture(Command::new("dpkg-deb").arg("-x").arg(file).arg(root))
                .with_context(|| format!("unpacking {} ({})", pin.spec(), file.display()))?;
        }
        Ok(())
    }

    /// The configured tree, from the cache of configured bases when it
    /// holds this set, else built there first: mmdebstrap's output depends
    /// only on the suite, the pinned closure and the customize hooks, and
    /// clusters that install the same packages (db-cluster and the
    /// gallery's etcd cases: about 40 CPU-s each) share it. The copy is
    /// `cp -a` (owners, modes, times, hard links, xattrs), so an image
    /// built from a cached base is the same bytes as one built from a
    /// fresh one. Only as root: without root, `cp` cannot keep the owners
    /// mmdebstrap gave, so each build configures its own tree; and not with
    /// `SIMCLUSTER_CACHE_BASES=0` (tests/packages.rs compares the two ways).
    fn configure(&self, root: &Path, report: &dyn Fn(&str)) -> Result<()> {
        if !is_root() || std::env::var_os("SIMCLUSTER_CACHE_BASES").is_some_and(|v| v == "0") {
            return self.mmdebstrap(root, report);
        }
        let entry = cache_root().join("bases").join(self.configured_key());
        build_entry(
            &entry,
            "the configured base",
            true,
            || entry.is_dir(),
            |work| -> Result<PathBuf> {
                self.mmdebstrap(&work.join("root"), report)?;
                Ok(work.to_path_buf())
            },
        )?;
        report("copying the configured packages from the cache");
        run_capture(Command::new("cp").arg("-a").arg(entry.join("root")).arg(root))
            .with_context(|| format!("copying the configured base {} to {}", entry.display(), root.display()))?;
        Ok(())
    }

    /// The key of the configured tree in the cache of bases: what
    /// [`PackageSet::mmdebstrap`] reads (not `exclude`, applied later to
    /// the image's copy). Bump the domain's number when the mmdebstrap
    /// command changes.
    fn configured_key(&self) -> String {
        let mut key = KeyHasher::new("configured-base-1");
        key.add_str(&self.suite);
        self.add_closure_and_hooks(&mut key);
        key.finish()
    }

    /// The pinned closure and the customize hooks, in both keys above.
    fn add_closure_and_hooks(&self, key: &mut KeyHasher) {
        for p in &self.pins {
            key.add_str(&p.name).add_str(&p.version).add_str(&p.sha256);
        }
        for c in &self.customize {
            key.add_str("customize").add_str(c);
        }
    }

    fn mmdebstrap(&self, root: &Path, report: &dyn Fn(&str)) -> Result<()> {
        if !have_program("mmdebstrap") {
            apt_install(&["mmdebstrap"])?;
        }
        let archive = Archive::open(&self.suite)?;
        report(&format!("mmdebstrap: {} packages with their maintainer scripts", self.pins.len()));
        let mut cmd = Command::new("mmdebstrap");
        cmd.arg("--variant=custom")
            .arg("--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr")
            .arg("--mode=auto")
            .arg("--quiet")
            .arg(format!("--include={}", self.pins.iter().map(Pin::spec).collect::<Vec<_>>().join(",")))
            .arg("--aptopt=APT::Install-Recommends \"false\"")
            .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
            .env("LC_ALL", "C");
        for excluded in ["doc", "man", "info", "locale", "lintian", "linda"] {
            cmd.arg(format!("--dpkgopt=path-exclude=/usr/share/{excluded}/*"));
        }
        for c in &self.customize {
            cmd.arg(format!("--customize-hook=chroot \"$1\" /bin/sh -c {}", shell_quote(c)));
        }
        cmd.arg(&self.suite).arg(root);
        for source in archive.sources() {
            cmd.arg(source);
        }
        run_capture(&mut cmd).with_context(|| format!("mmdebstrap {} into {}", self.suite, root.display()))?;
        self.check_installed(root)?;
        tidy(root)
    }

    /// The chroot must hold exactly the closure the key names: if the
    /// mirror moved between resolving and building, say so rather than
    /// cache an image under the wrong name.
    fn check_installed(&self, root: &Path) -> Result<()> {
        let out = run_capture(
            Command::new("dpkg-query")
                .arg(format!("--admindir={}", root.join("var/lib/dpkg").display()))
                .args(["-W", "-f=${Package} ${Version}\\n"]),
        )?;
        let mut got: Vec<String> = out.lines().map(str::to_string).collect();
        got.sort();
        let mut want: Vec<String> = self.pins.iter().map(|p| format!("{} {}", p.name, p.version)).collect();
        want.sort();
        if got != want {
            let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
            let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
            bail!(
                "mmdebstrap installed a different package set than apt resolved for the cache key \
                 (extra: {extra:?}; missing: {missing:?}); the {} mirror may have moved: run the build again",
                self.suite
            );
        }
        Ok(())
    }
}

/// Removes what a configured build leaves that differs from build to build
/// or only served the build: logs, apt's lists and caches, backups of dpkg's
/// and debconf's databases, ldconfig's auxiliary cache.
fn tidy(root: &Path) -> Result<()> {
    for dir in ["var/log", "var/cache/apt", "var/lib/apt/lists", "var/cache/ldconfig"] {
        let d = root.join(dir);
        if let Ok(entries) = std::fs::read_dir(&d) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() && !p.is_symlink() {
                    std::fs::remove_dir_all(&p)?;
                } else {
                    std::fs::remove_file(&p)?;
                }
            }
        }
    }
    for dir in ["var/lib/dpkg", "var/cache/debconf", "etc"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with("-old") || name.ends_with('-') && e.path().is_file() {
                    std::fs::remove_file(e.path())?;
                }
            }
        }
    }
    // Written by mmdebstrap for systemd; a node's identity is its name.
    let _ = std::fs::remove_file(root.join("etc/machine-id"));
    Ok(())
}

/// Removes every path under `root` that one of `globs` (absolute, as seen
/// in the guest) matches.
pub fn remove_matching(root: &Path, globs: &[String]) -> Result<()> {
    for g in globs {
        let pattern = format!("{}/{}", glob::Pattern::escape(&root.to_string_lossy()), g.trim_start_matches('/'));
        let mut matches: Vec<PathBuf> =
            glob::glob(&pattern).with_context(|| format!("[image] exclude {g:?}"))?.filter_map(|m| m.ok()).collect();
        matches.sort();
        let inside = root.canonicalize()?;
        for m in matches {
            // A match below an absolute symlink would be a host path.
            let parent_inside = m.parent().and_then(|p| p.canonicalize().ok()).is_some_and(|p| p.starts_with(&inside));
            let Ok(md) = std::fs::symlink_metadata(&m) else { continue };
            if !parent_inside {
                continue;
            }
            if md.is_dir() {
                std::fs::remove_dir_all(&m)?;
            } else {
                std::fs::remove_file(&m)?;
            }
        }
    }
    Ok(())
}
