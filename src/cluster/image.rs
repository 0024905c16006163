//! `[image]`: the nodes' root filesystem: Debian packages, or a container
//! image, and files from the cluster directory.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{Invalid, KeyPath};

/// The suite images come from unless `[image] suite` says otherwise.
pub const DEFAULT_SUITE: &str = "bookworm";

/// The package the agent runs on; in every image.
pub const AGENT_PACKAGE: &str = "busybox-static";

/// `[image]`: what the nodes' root filesystem holds.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSection {
    /// Debian packages for the root filesystem, their dependencies resolved
    /// by apt (busybox-static is always added: the in-guest agent runs on it).
    #[serde(default)]
    pub packages: Vec<String>,
    /// The Debian suite packages come from (default "bookworm").
    pub suite: Option<String>,
    /// Install with maintainer scripts (users, alternatives, directories)
    /// on the suite's Essential set; default: yes when `packages` names
    /// anything besides busybox-static.
    pub maintainer_scripts: Option<bool>,
    /// Shell commands run in the configured image root (chroot), in order,
    /// after the packages are configured: remove generated state, preset
    /// configuration.
    #[serde(default)]
    pub customize: Vec<String>,
    /// Paths (globs, absolute) removed from the image after the packages
    /// are installed: what a node never uses (a JIT compiler's libraries,
    /// locale data) costs guest memory in every node of every execution.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// A container image as the node's root filesystem: an OCI image layout
    /// directory (relative to the cluster directory).
    pub oci: Option<String>,
    /// ... or a `docker save` archive.
    pub docker_archive: Option<String>,
    /// Which image of the layout's index.json (its ref name); needed when
    /// it holds more than one.
    pub tag: Option<String>,
    /// Guest path -> path relative to the cluster directory.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Where the root filesystem lives in a node (default "auto").
    #[serde(default)]
    pub root: RootMode,
}

/// `[image] root`: how a node holds its root filesystem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootMode {
    /// `initramfs` for a root of at most
    /// [`crate::image::INITRAMFS_ROOT_MAX`] bytes, `disk` above.
    #[default]
    Auto,
    /// Unpacked whole into every node's RAM at boot: no device round trips
    /// while the node reads its files, but the guest holds all of it.
    Initramfs,
    /// A read-only squashfs image on a virtio-blk device under a tmpfs
    /// overlay: a node holds only the pages it reads, and the host keeps
    /// one copy in its page cache for every node.
    Disk,
}

impl RootMode {
    /// The setting as written in cluster.toml.
    pub fn name(self) -> &'static str {
        match self {
            RootMode::Auto => "auto",
            RootMode::Initramfs => "initramfs",
            RootMode::Disk => "disk",
        }
    }
}

impl ImageSection {
    /// Whether packages are installed with their maintainer scripts.
    pub fn configured(&self) -> bool {
        self.maintainer_scripts.unwrap_or_else(|| self.packages.iter().any(|p| p != AGENT_PACKAGE))
    }

    /// The Debian suite packages come from: `suite`, else `"bookworm"`.
    pub fn suite(&self) -> &str {
        self.suite.as_deref().unwrap_or(DEFAULT_SUITE)
    }

    /// Checks the table against the cluster directory `dir` (files it
    /// names exist).
    pub(super) fn check(&self, dir: &Path) -> Result<(), Invalid> {
        self.check_files(dir)?;
        self.check_names()?;
        self.check_container(dir)?;
        if !self.customize.is_empty() && !self.configured() {
            return Err(KeyPath::table("image")
                .key("customize")
                .invalid(" runs in a configured image: it needs maintainer_scripts = true"));
        }
        Ok(())
    }

    /// `files`: absolute guest paths outside the agent's, host files that exist.
    fn check_files(&self, dir: &Path) -> Result<(), Invalid> {
        for (guest, host) in &self.files {
            let at = KeyPath::table("image").key("files").key(guest);
            if !guest.starts_with('/') || guest.split('/').any(|c| c == "..") {
                return Err(at.invalid(": a guest path must be absolute and must not contain '..'"));
            }
            if guest.starts_with("/sim/") || guest == "/init" {
                return Err(at.invalid(" is reserved for simcluster's agent"));
            }
            let p = dir.join(host);
            if !p.is_file() {
                return Err(at.invalid(format!(" = {host:?}: {} does not exist", p.display())));
            }
        }
        Ok(())
    }

    /// `packages`, `suite` and `exclude`: well-formed names and globs.
    fn check_names(&self) -> Result<(), Invalid> {
        let at = KeyPath::table("image");
        for (k, p) in self.packages.iter().enumerate() {
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric() || "+-.:".contains(c)) {
                return Err(at.key("packages").nth(k).invalid(format!(" = {p:?} is not a Debian package name")));
            }
        }
        if let Some(s) = &self.suite {
            if s.is_empty() || !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                return Err(at
                    .key("suite")
                    .invalid(format!(" = {s:?} is not a Debian suite name (examples: \"bookworm\", \"trixie\")")));
            }
        }
        for (k, g) in self.exclude.iter().enumerate() {
            let at = at.key("exclude").nth(k);
            if !g.starts_with('/') || g.split('/').any(|c| c == "..") || glob::Pattern::new(g).is_err() {
                return Err(at.invalid(format!(" = {g:?} must be an absolute glob without '..'")));
            }
            if g == "/" || g.starts_with("/sim") || g.starts_with("/init") || g.starts_with("/*") {
                return Err(at.invalid(format!(" = {g:?} would remove the root or simcluster's agent")));
            }
        }
        Ok(())
    }

    /// `oci` or `docker_archive` (one at most, existing, and not mixed with
    /// Debian settings); `tag` only with `oci`.
    fn check_container(&self, dir: &Path) -> Result<(), Invalid> {
        let at = KeyPath::table("image");
        let container =
            self.oci.as_ref().map(|p| ("oci", p)).or(self.docker_archive.as_ref().map(|p| ("docker_archive", p)));
        if self.oci.is_some() && self.docker_archive.is_some() {
            return Err(at.key("docker_archive").invalid(" and oci: name one container image, not two"));
        }
        if let Some((key, path)) = container {
            if self.packages.iter().any(|p| p != AGENT_PACKAGE)
                || self.maintainer_scripts == Some(true)
                || !self.customize.is_empty()
            {
                return Err(at.key(key).invalid(
                    ": a container image is the whole root filesystem; packages, maintainer_scripts and \
                     customize apply to Debian images only",
                ));
            }
            let p = dir.join(path);
            let exists = if key == "oci" { p.is_dir() } else { p.is_file() };
            if !exists {
                return Err(at.key(key).invalid(format!(" = {path:?}: {} does not exist", p.display())));
            }
        } else if self.tag.is_some() {
            return Err(at.key("tag").invalid(" names an image of an OCI layout: it needs [image] oci"));
        }
        Ok(())
    }
}
