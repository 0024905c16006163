//! Container images as nodes: an OCI image layout (`[image] oci`, as
//! `skopeo copy`/`umoci` write it) or a `docker save` archive
//! (`[image] docker_archive`). skopeo converts an archive to a layout, umoci
//! unpacks a layout's layers (whiteouts, ownership, digests checked), and
//! oci-spec reads the image configuration: its Entrypoint and Cmd become
//! the node's start command, Env its environment, WorkingDir the start
//! command's directory and User the account it runs as, unless `[node]
//! start` says otherwise. simcluster's init and agent are layered on top,
//! with a static busybox of their own under /sim, so an image needs no
//! shell or tools of its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use compose::shell_quote;
use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest, MediaType};

use super::cache::{sha256_file, KeyHasher};
use super::host::{apt_install, have_program};
use crate::cluster::Cluster;

/// The tag a converted archive gets in its temporary layout.
const CONVERTED_TAG: &str = "simcluster";

/// Which `[image]` key named the image, and the path it gave.
#[derive(Debug, Clone)]
pub enum Source {
    /// `[image] oci`: an OCI image layout directory.
    Layout {
        /// The layout, relative paths resolved against the cluster
        /// directory.
        dir: PathBuf,
        /// `[image] tag`: which of its images (`None`: the only one).
        tag: Option<String>,
    },
    /// `[image] docker_archive`: a `docker save` tar file.
    DockerArchive {
        /// The archive, resolved against the cluster directory.
        file: PathBuf,
    },
}

impl Source {
    /// The image a cluster names, if any.
    pub fn of(cluster: &Cluster) -> Option<Source> {
        let image = &cluster.spec.image;
        if let Some(dir) = &image.oci {
            return Some(Source::Layout { dir: cluster.dir.join(dir), tag: image.tag.clone() });
        }
        image.docker_archive.as_ref().map(|f| Source::DockerArchive { file: cluster.dir.join(f) })
    }

    fn key_name(&self) -> &'static str {
        match self {
            Source::Layout { .. } => "oci",
            Source::DockerArchive { .. } => "docker_archive",
        }
    }

    fn path(&self) -> &Path {
        match self {
            Source::Layout { dir, .. } => dir,
            Source::DockerArchive { file } => file,
        }
    }
}

/// A container image the user gave that cannot be used: exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{file}: [image] {key} = {path}: {problem}")]
pub struct ImageError {
    /// The cluster's file.
    pub file: PathBuf,
    /// The `[image]` key that named the image: `oci` or `docker_archive`.
    pub key: &'static str,
    /// The path it gave, resolved against the cluster directory.
    pub path: PathBuf,
    /// What is wrong with the image.
    pub problem: String,
}

/// What the image's configuration says about running it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunConfig {
    /// `Entrypoint`: the program and its first arguments.
    pub entrypoint: Vec<String>,
    /// `Cmd`: arguments after the entrypoint (the whole command without
    /// one).
    pub cmd: Vec<String>,
    /// `Env`: `KEY=VALUE` entries.
    pub env: Vec<String>,
    /// `WorkingDir`: the start command `cd`s there first (`None` or empty:
    /// it starts where the agent does).
    pub working_dir: Option<String>,
    /// `User`: the account the image asks to run as.
    pub user: Option<String>,
}

impl RunConfig {
    /// The start command (Entrypoint followed by Cmd, as a container
    /// runtime runs them), or `None` if the image names no program.
    pub fn start_command(&self) -> Option<String> {
        let argv: Vec<String> = self.entrypoint.iter().chain(&self.cmd).map(|a| shell_quote(a)).collect();
        if argv.is_empty() {
            return None;
        }
        let cd = self.working_dir.as_deref().filter(|d| !d.is_empty()).map(|d| format!("cd {} && ", shell_quote(d)));
        Some(format!("{}exec {}", cd.unwrap_or_default(), argv.join(" ")))
    }

    /// The environment as shell lines for /sim/env (`export K='V'`).
    pub fn env_script(&self) -> String {
        let mut out = String::new();
        for kv in &self.env {
            if let Some((k, v)) = kv.split_once('=') {
                if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    out.push_str(&format!("export {k}={}\n", shell_quote(v)));
                }
            }
        }
        out
    }

    /// Whether the image asks for an account other than root.
    pub fn non_root_user(&self) -> Option<&str> {
        self.user.as_deref().filter(|u| !matches!(*u, "" | "root" | "0" | "0:0" | "root:root"))
    }
}

/// A layout ready to unpack: where it is, the tag to unpack, its config.
pub struct Opened {
    /// The layout directory: the user's, or a converted archive's in a
    /// work directory.
    pub layout: PathBuf,
    /// The tag of the image to unpack.
    pub tag: String,
    /// That image's configuration.
    pub config: RunConfig,
}

/// Adds the image's identity to a cache key: the manifest digest of a
/// layout (it names config and layers), the checksum of an archive.
pub fn add_to_key(source: &Source, cluster_file: &Path, key: &mut KeyHasher) -> Result<()> {
    let bad = |problem: String| bad(source, cluster_file, problem);
    match source {
        Source::Layout { dir, tag } => {
            let (_, manifest) = pick_manifest(dir, tag.as_deref()).map_err(|e| bad(e.to_string()))?;
            key.add_str("oci").add_str(manifest.digest().as_ref());
        }
        Source::DockerArchive { file } => {
            let sum = sha256_file(file).map_err(|e| bad(format!("cannot read it: {e}")))?;
            key.add_str("docker-archive").add_str(&sum);
        }
    }
    Ok(())
}

fn bad(source: &Source, file: &Path, problem: String) -> anyhow::Error {
    ImageError { file: file.into(), key: source.key_name(), path: source.path().into(), problem }.into()
}

fn ensure_tools() -> Result<()> {
    let missing: Vec<&str> = [("umoci", "umoci"), ("skopeo", "skopeo")]
        .iter()
        .filter(|(prog, _)| !have_program(prog))
        .map(|(_, pkg)| *pkg)
        .collect();
    apt_install(&missing)
}

/// Opens the image for unpacking: a layout as it is, an archive converted
/// into `work` first.
pub fn open(source: &Source, cluster_file: &Path, work: &Path) -> Result<Opened> {
    ensure_tools()?;
    let bad = |problem: String| bad(source, cluster_file, problem);
    let (layout, tag) = match source {
        Source::Layout { dir, tag } => {
            let (tag, _) = pick_manifest(dir, tag.as_deref()).map_err(|e| bad(e.to_string()))?;
            (dir.clone(), tag)
        }
        Source::DockerArchive { file } => {
            let layout = work.join("layout");
            let out = Command::new("skopeo")
                .arg("--insecure-policy")
                .arg("copy")
                .arg("--quiet")
                .arg(format!("docker-archive:{}", file.display()))
                .arg(format!("oci:{}:{CONVERTED_TAG}", layout.display()))
                .output()
                .context("cannot run skopeo")?;
            if !out.status.success() {
                return Err(bad(format!(
                    "not a readable docker-save archive (skopeo: {})",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            (layout, CONVERTED_TAG.to_string())
        }
    };
    let (_, config) = inspect(&layout, Some(&tag)).map_err(|e| bad(e.to_string()))?;
    Ok(Opened { layout, tag, config })
}

/// Unpacks the layers into `root` (which must not exist).
pub fn unpack(opened: &Opened, source: &Source, cluster_file: &Path, root: &Path) -> Result<()> {
    let mut cmd = Command::new("umoci");
    cmd.args(["raw", "unpack"]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        cmd.arg("--rootless");
    }
    let out = cmd
        .arg("--image")
        .arg(format!("{}:{}", opened.layout.display(), opened.tag))
        .arg(root)
        .output()
        .context("cannot run umoci")?;
    if !out.status.success() {
        return Err(bad(
            source,
            cluster_file,
            format!("cannot unpack its layers (umoci: {})", String::from_utf8_lossy(&out.stderr).trim()),
        ));
    }
    Ok(())
}

/// What is wrong with an OCI image layout's contents.
#[derive(Debug, thiserror::Error)]
pub enum LayoutProblem {
    /// The directory has no `index.json` and `oci-layout`.
    #[error("not an OCI image layout (no index.json and oci-layout; `skopeo copy ... oci:DIR:TAG` writes one)")]
    NotALayout,
    /// A JSON document of the layout does not parse.
    #[error("{what}: {source}")]
    Unreadable {
        /// Which: "index.json", "nested index", "manifest", "image config".
        what: &'static str,
        /// oci-spec's reason.
        source: oci_spec::OciSpecError,
    },
    /// `[image] tag` names no image of the index.
    #[error("no image tagged {tag:?} in its index.json (tags: {tags:?})")]
    NoSuchTag {
        /// The tag asked for.
        tag: String,
        /// The tags the index has.
        tags: Vec<String>,
    },
    /// The index holds several images and no `[image] tag` says which.
    #[error("its index.json holds {} images: choose one with [image] tag (tags: {tags:?})", tags.len())]
    WhichImage {
        /// The tags the index has.
        tags: Vec<String>,
    },
    /// A multi-platform index without a linux/amd64 image.
    #[error("its image index has no linux/amd64 image (simcluster's guests are x86_64)")]
    NoAmd64,
    /// A blob the manifest names cannot be read under `blobs/`.
    #[error("blob {digest}: {source}")]
    MissingBlob {
        /// Its digest (`sha256:...`).
        digest: String,
        /// The OS's reason.
        source: std::io::Error,
    },
    /// A blob's contents do not hash to its digest.
    #[error("blob {digest} is corrupt (its sha256 differs)")]
    CorruptBlob {
        /// Its digest.
        digest: String,
    },
    /// The image's config says it is for another platform.
    #[error("an image for {os}/{arch}: simcluster's guests are linux/amd64 (x86_64)")]
    WrongPlatform {
        /// The config's `os`.
        os: String,
        /// The config's `architecture`.
        arch: String,
    },
}

/// What an OCI layout's image (the one tagged `tag`, or the only one) says
/// about running it, and its tag: everything simcluster reads of the
/// layout's metadata before unpacking its layers.
pub fn inspect(dir: &Path, tag: Option<&str>) -> Result<(String, RunConfig), LayoutProblem> {
    let (name, manifest) = pick_manifest(dir, tag)?;
    Ok((name, read_config(dir, &manifest)?))
}

/// The manifest to use: the one tagged `tag`, or the only one; an image
/// index (multi-platform) is followed to its linux/amd64 entry.
fn pick_manifest(dir: &Path, tag: Option<&str>) -> Result<(String, Descriptor), LayoutProblem> {
    if !dir.join("index.json").is_file() || !dir.join("oci-layout").is_file() {
        return Err(LayoutProblem::NotALayout);
    }
    let index = ImageIndex::from_file(dir.join("index.json"))
        .map_err(|source| LayoutProblem::Unreadable { what: "index.json", source })?;
    let name_of = |d: &Descriptor| {
        d.annotations().as_ref().and_then(|a| a.get("org.opencontainers.image.ref.name")).cloned().unwrap_or_default()
    };
    let entries = index.manifests();
    let chosen = match tag {
        Some(t) => entries.iter().find(|d| name_of(d) == t).ok_or_else(|| LayoutProblem::NoSuchTag {
            tag: t.to_string(),
            tags: entries.iter().map(name_of).collect(),
        })?,
        None if entries.len() == 1 => &entries[0],
        None => return Err(LayoutProblem::WhichImage { tags: entries.iter().map(name_of).collect() }),
    };
    let name = name_of(chosen);
    if *chosen.media_type() == MediaType::ImageIndex {
        let nested = ImageIndex::from_reader(blob(dir, chosen)?.as_slice())
            .map_err(|source| LayoutProblem::Unreadable { what: "nested index", source })?;
        let amd64 = nested
            .manifests()
            .iter()
            .find(|d| {
                d.platform()
                    .as_ref()
                    .is_some_and(|p| p.architecture().to_string() == "amd64" && p.os().to_string() == "linux")
            })
            .ok_or(LayoutProblem::NoAmd64)?;
        return Ok((name, amd64.clone()));
    }
    Ok((name, chosen.clone()))
}

/// A blob's bytes, its digest checked.
fn blob(dir: &Path, d: &Descriptor) -> Result<Vec<u8>, LayoutProblem> {
    let digest = d.digest();
    let path = dir.join("blobs").join(digest.algorithm().to_string()).join(digest.digest());
    let bytes =
        std::fs::read(&path).map_err(|source| LayoutProblem::MissingBlob { digest: digest.to_string(), source })?;
    if digest.algorithm().to_string() == "sha256" && super::cache::sha256_hex(&bytes) != digest.digest() {
        return Err(LayoutProblem::CorruptBlob { digest: digest.to_string() });
    }
    Ok(bytes)
}

/// What the image's configuration says about running it.
fn read_config(dir: &Path, manifest: &Descriptor) -> Result<RunConfig, LayoutProblem> {
    let manifest = ImageManifest::from_reader(blob(dir, manifest)?.as_slice())
        .map_err(|source| LayoutProblem::Unreadable { what: "manifest", source })?;
    let config = ImageConfiguration::from_reader(blob(dir, manifest.config())?.as_slice())
        .map_err(|source| LayoutProblem::Unreadable { what: "image config", source })?;
    let (arch, os) = (config.architecture().to_string(), config.os().to_string());
    if arch != "amd64" || os != "linux" {
        return Err(LayoutProblem::WrongPlatform { os, arch });
    }
    let c = config.config().clone().unwrap_or_default();
    Ok(RunConfig {
        entrypoint: c.entrypoint().clone().unwrap_or_default(),
        cmd: c.cmd().clone().unwrap_or_default(),
        env: c.env().clone().unwrap_or_default(),
        working_dir: c.working_dir().clone(),
        user: c.user().clone(),
    })
}

/// The account line of `user` (a name, or a uid, optionally `:group`) in
/// the image's /etc/passwd: the start command runs as it through su.
pub fn account(root: &Path, user: &str) -> Option<String> {
    let who = user.split(':').next().unwrap_or(user);
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && (f[0] == who || f[2] == who)).then(|| f[0].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::RunConfig;

    #[test]
    fn entrypoint_cmd_and_workdir_make_the_start_command() {
        let c = RunConfig {
            entrypoint: vec!["/bin/server".into()],
            cmd: vec!["--name".into(), "it's".into()],
            working_dir: Some("/srv".into()),
            ..Default::default()
        };
        assert_eq!(c.start_command().unwrap(), "cd '/srv' && exec '/bin/server' '--name' 'it'\\''s'");
        assert_eq!(RunConfig::default().start_command(), None);
        let e = RunConfig { env: vec!["A=1 2".into(), "bad-key=x".into(), "PATH=/x".into()], ..Default::default() };
        assert_eq!(e.env_script(), "export A='1 2'\nexport PATH='/x'\n");
        assert_eq!(RunConfig { user: Some("0".into()), ..Default::default() }.non_root_user(), None);
        assert_eq!(RunConfig { user: Some("app".into()), ..Default::default() }.non_root_user(), Some("app"));
    }
}
