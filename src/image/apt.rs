//! Debian's own resolver, run against a pinned suite through a private apt
//! root: its own sources list, package lists and archive cache under the
//! cache directory, no dpkg status (nothing is installed), and the host's
//! apt configuration left as it is.
//!
//! Invariant: every package list an image or kernel build reads comes from
//! one `Archive` per suite, refreshed only when a name is unknown or a pinned
//! version has left the mirror, so two builds on one machine resolve the same
//! names to the same versions.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::cache::{cache_root, sha256_file};
use super::host::{have_program, run_capture};

/// One package pinned to an exact version and the archive's checksum.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Pin {
    /// The Debian package name.
    pub name: String,
    /// The exact version apt chose (`1.2-3+deb12u1`).
    pub version: String,
    /// SHA-256 of its .deb, as the suite's package lists give it, in hex.
    pub sha256: String,
}

impl Pin {
    /// `name=version`, as apt-get and mmdebstrap take it.
    pub fn spec(&self) -> String {
        format!("{}={}", self.name, self.version)
    }
}

/// Why a set of names could not be resolved: the user's input, not the host.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A name the suite does not have.
    #[error("no Debian package named {name:?} in {suite} (checked with apt after refreshing its package lists)")]
    Unknown {
        /// The suite looked in.
        suite: String,
        /// The name as `[image] packages` wrote it.
        name: String,
    },
    /// The names exist but their dependencies conflict.
    #[error("the packages cannot be installed together in {suite}; apt says:\n{apt}")]
    Unsatisfiable {
        /// The suite.
        suite: String,
        /// apt's own explanation, as it printed it.
        apt: String,
    },
    /// `[image] suite` names no suite the archive has.
    #[error("unknown Debian suite {suite:?}: apt-get update found no package lists for it ({apt})")]
    UnknownSuite {
        /// The suite as written.
        suite: String,
        /// What apt-get update said.
        apt: String,
    },
}

/// A private apt root for one suite.
pub struct Archive {
    suite: String,
    root: PathBuf,
}

const MIRROR: &str = "http://deb.debian.org/debian";
const SECURITY: &str = "http://deb.debian.org/debian-security";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

impl Archive {
    /// The archive for `suite` (e.g. "bookworm", "trixie-backports"); its
    /// directories are created, its lists fetched on first use.
    pub fn open(suite: &str) -> Result<Archive> {
        if !have_program("apt-get") || !have_program("apt-cache") {
            bail!("apt-get not found: simcluster's image builder needs a Debian-based host");
        }
        let root = cache_root().join("apt").join(suite);
        for d in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(root.join(d)).with_context(|| format!("cannot create {}", root.display()))?;
        }
        let archive = Archive { suite: suite.to_string(), root };
        let list = archive.root.join("sources.list");
        let want = archive.sources().join("\n") + "\n";
        if std::fs::read_to_string(&list).ok().as_deref() != Some(want.as_str()) {
            std::fs::write(&list, want)?;
        }
        Ok(archive)
    }

    /// The suite this archive resolves against.
    pub fn suite(&self) -> &str {
        &self.suite
    }

    /// The sources a release gets (its updates and security fixes too), in
    /// one-line form; a backports suite is its own source.
    pub fn sources(&self) -> Vec<String> {
        let s = &self.suite;
        let line = |uri: &str, suite: &str| format!("deb [signed-by={KEYRING}] {uri} {suite} main");
        if s.contains('-') {
            vec![line(MIRROR, s)]
        } else {
            vec![line(MIRROR, s), line(MIRROR, &format!("{s}-updates")), line(SECURITY, &format!("{s}-security"))]
        }
    }

    /// apt-get, apt-cache (or another apt tool) configured for this root.
    pub fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        c.arg(format!("-oDir::Etc::SourceList={}", self.root.join("sources.list").display()))
            .arg("-oDir::Etc::SourceParts=/dev/null")
            .arg(format!("-oDir::State::Lists={}", self.root.join("lists").display()))
            .arg(format!("-oDir::Cache={}", self.root.join("cache").display()))
            .arg("-oDir::State::Status=/dev/null")
            .arg("-oAPT::Sandbox::User=root")
            .arg("-oAPT::Install-Recommends=false")
            .arg("-q")
            .env("LC_ALL", "C");
        c
    }

    fn has_lists(&self) -> bool {
        std::fs::read_dir(self.root.join("lists"))
            .map(|d| d.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().contains("_Packages")))
            .unwrap_or(false)
    }

    /// Fetches the suite's package lists. One process at a time per root:
    /// two simcluster processes refreshing it together (a test suite's
    /// lanes, two runs) would otherwise meet apt's own lock, which fails the
    /// second instead of waiting.
    pub fn update(&self) -> Result<()> {
        let _lock = self.lock_lists()?;
        self.update_locked()
    }

    fn lock_lists(&self) -> Result<crate::image::cache::BuildLock> {
        let entry = self.root.join("lists-update");
        crate::image::cache::BuildLock::acquire(&entry, true)
            .with_context(|| format!("cannot lock {} for apt-get update", entry.display()))
    }

    fn update_locked(&self) -> Result<()> {
        let out = self.command("apt-get").arg("update").stdin(Stdio::null()).output().context("cannot run apt-get")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || !self.has_lists() {
            let apt =
                text.lines().filter(|l| l.starts_with("E:") || l.starts_with("W:")).collect::<Vec<_>>().join("; ");
            if text.contains("does not have a Release file") || !self.has_lists() {
                return Err(ResolveError::UnknownSuite { suite: self.suite.clone(), apt }.into());
            }
            bail!("apt-get update for {} (private lists in {}) failed: {apt}", self.suite, self.root.display());
        }
        Ok(())
    }

    /// Lists are fetched once; later builds reuse them (see the invariant).
    pub fn ensure_lists(&self) -> Result<()> {
        if self.has_lists() {
            return Ok(());
        }
        let _lock = self.lock_lists()?;
        if self.has_lists() {
            // Another process fetched them while this one waited.
            return Ok(());
        }
        self.update_locked()
    }

    /// The dependency closure of `names` (plus the suite's Essential set if
    /// `essential`), as apt would install it on an empty system, without
    /// Recommends. Refreshes the lists once if apt does not know a name.
    ///
    /// A resolution is a function of the lists and the request, and asking
    /// apt takes seconds (apt-get -s and apt-cache, about 4 s per image
    /// build here, paid by every `simcluster run`): it is kept under the
    /// root by the hash of both (`Self::resolution_key`) and reused until
    /// the lists change.
    pub fn resolve(&self, names: &[String], essential: bool) -> Result<Vec<Pin>> {
        self.ensure_lists()?;
        let mut saved = self.saved_resolution(names, essential);
        if let Some(pins) =
            saved.as_ref().and_then(|p| std::fs::read(p).ok()).and_then(|b| serde_json::from_slice(&b).ok())
        {
            return Ok(pins);
        }
        let pins = match self.simulate(names, essential) {
            Err(e) if e.downcast_ref::<ResolveError>().is_some_and(|r| matches!(r, ResolveError::Unknown { .. })) => {
                self.update()?;
                // Refreshed lists have another key.
                saved = self.saved_resolution(names, essential);
                self.simulate(names, essential)
            }
            other => other,
        }?;
        if let Some(path) = saved {
            // A cache: a failed write only costs the next build its seconds.
            let _ = std::fs::create_dir_all(self.root.join("resolved"));
            let _ = crate::outputs::write_atomic(&path, &serde_json::to_vec(&pins).expect("pins serialise"));
        }
        Ok(pins)
    }

    /// Where the resolution of this request against the current lists is
    /// kept ([`Self::resolution_key`]).
    fn saved_resolution(&self, names: &[String], essential: bool) -> Option<PathBuf> {
        let key = self.resolution_key(names, essential)?;
        Some(self.root.join("resolved").join(format!("{key}.json")))
    }

    /// The key of a resolution: the request and the identity of every
    /// package list and Release file (name, size, modification time; apt
    /// replaces a list whole when it refreshes it). `None` when the lists
    /// cannot be read (nothing is kept then).
    fn resolution_key(&self, names: &[String], essential: bool) -> Option<String> {
        let mut lists: Vec<(String, u64, u128)> = std::fs::read_dir(self.root.join("lists"))
            .ok()?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let m = e.metadata().ok().filter(|m| m.is_file())?;
                let modified = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
                Some((e.file_name().to_string_lossy().into_owned(), m.len(), modified))
            })
            .collect();
        lists.sort();
        let mut k = crate::image::cache::KeyHasher::new("apt-resolution-1");
        k.add_str(&self.suite).add_str(if essential { "essential" } else { "plain" });
        for n in names {
            k.add_str(n);
        }
        for (name, len, modified) in &lists {
            k.add_str(name).add_str(&len.to_string()).add_str(&modified.to_string());
        }
        Some(k.finish())
    }

    fn simulate(&self, names: &[String], essential: bool) -> Result<Vec<Pin>> {
        let mut cmd = self.command("apt-get");
        cmd.args(["-s", "install"]);
        if essential {
            // apt flags itself essential; a node needs no package manager.
            cmd.arg("?and(?essential,?not(?exact-name(apt)))");
        }
        cmd.args(names);
        let out = cmd.stdin(Stdio::null()).output().context("cannot run apt-get")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            for l in stderr.lines() {
                if let Some(rest) = l.strip_prefix("E: Unable to locate package ") {
                    return Err(ResolveError::Unknown { suite: self.suite.clone(), name: rest.trim().into() }.into());
                }
                if let Some(rest) = l.strip_prefix("E: Package '") {
                    let name = rest.split('\'').next().unwrap_or(rest);
                    return Err(ResolveError::Unknown { suite: self.suite.clone(), name: name.into() }.into());
                }
            }
            let apt: Vec<&str> = stdout
                .lines()
                .skip_while(|l| !l.contains("unmet dependencies"))
                .chain(stderr.lines().filter(|l| l.starts_with("E:")))
                .collect();
            return Err(ResolveError::Unsatisfiable { suite: self.suite.clone(), apt: apt.join("\n") }.into());
        }
        // "Inst libc6 (2.36-9+deb12u9 Debian:12.9/stable [amd64])"
        let mut specs: Vec<(String, String)> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("Inst "))
            .filter_map(|l| {
                let (name, rest) = l.split_once(' ')?;
                let version = rest.strip_prefix('(')?.split_whitespace().next()?;
                Some((name.to_string(), version.to_string()))
            })
            .collect();
        specs.sort();
        self.pin(&specs)
    }

    /// The archive's checksums for exact versions.
    fn pin(&self, specs: &[(String, String)]) -> Result<Vec<Pin>> {
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        let args: Vec<String> = specs.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let text = run_capture(self.command("apt-cache").arg("show").args(&args))?;
        let mut pins = Vec::new();
        for stanza in text.split("\n\n") {
            let field = |key: &str| stanza.lines().find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()));
            if let (Some(name), Some(version), Some(sha256)) =
                (field("Package: "), field("Version: "), field("SHA256: "))
            {
                if specs.iter().any(|(n, v)| *n == name && *v == version) && !pins.iter().any(|p: &Pin| p.name == name)
                {
                    pins.push(Pin { name, version, sha256 });
                }
            }
        }
        if pins.len() != specs.len() {
            bail!("apt-cache show gave {} of {} pinned packages in {}", pins.len(), specs.len(), self.suite);
        }
        pins.sort();
        Ok(pins)
    }

    /// Paths of the cached .debs for `pins`, downloading the missing ones in
    /// one apt-get call. Each file is named by its checksum and verified.
    pub fn fetch(&self, pins: &[Pin]) -> Result<Vec<PathBuf>> {
        let dir = cache_root().join("debs");
        std::fs::create_dir_all(&dir)?;
        let path = |p: &Pin| dir.join(format!("{}.deb", p.sha256));
        let missing: Vec<&Pin> = pins.iter().filter(|p| !path(p).is_file()).collect();
        if !missing.is_empty() {
            let work = dir.join(format!("download-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work)?;
            let result = self.download(&missing, &work, &path);
            let _ = std::fs::remove_dir_all(&work);
            result?;
        }
        Ok(pins.iter().map(path).collect())
    }

    fn download(&self, missing: &[&Pin], work: &Path, path: &dyn Fn(&Pin) -> PathBuf) -> Result<()> {
        let specs: Vec<String> = missing.iter().map(|p| p.spec()).collect();
        run_capture(self.command("apt-get").current_dir(work).arg("download").args(&specs)).with_context(|| {
            format!(
                "downloading {} package(s) from {}: a pinned version may have left the mirror",
                specs.len(),
                self.suite
            )
        })?;
        for entry in std::fs::read_dir(work)? {
            let got = entry?.path();
            let sum = sha256_file(&got)?;
            match missing.iter().find(|p| p.sha256 == sum) {
                Some(p) => std::fs::rename(&got, path(p))?,
                None => bail!("{}: checksum {sum} matches none of the pinned packages", got.display()),
            }
        }
        if let Some(p) = missing.iter().find(|p| !path(p).is_file()) {
            bail!("apt-get download gave no file for {}", p.spec());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolution_is_keyed_by_the_request_and_the_lists() {
        let root = tempfile::tempdir().unwrap();
        let a = Archive { suite: "bookworm".into(), root: root.path().to_path_buf() };
        assert_eq!(a.resolution_key(&["x".into()], false), None, "no lists, nothing kept");
        std::fs::create_dir_all(root.path().join("lists")).unwrap();
        let list = root.path().join("lists/deb_dists_bookworm_main_binary-amd64_Packages");
        std::fs::write(&list, "Package: x\n").unwrap();
        let k = a.resolution_key(&["x".into()], false).unwrap();
        assert_eq!(a.resolution_key(&["x".into()], false).unwrap(), k);
        assert_ne!(a.resolution_key(&["y".into()], false).unwrap(), k, "another name");
        assert_ne!(a.resolution_key(&["x".into()], true).unwrap(), k, "with the Essential set");
        std::fs::write(&list, "Package: x\nPackage: y\n").unwrap();
        assert_ne!(a.resolution_key(&["x".into()], false).unwrap(), k, "refreshed lists");
    }
}
