//! docker-compose files as simcluster clusters.
//!
//! A cluster directory that holds a compose file (`compose.yaml`,
//! `compose.yml`, `docker-compose.yaml` or `docker-compose.yml`) and no
//! cluster.toml describing nodes is read here: every service becomes a
//! node, in file order, named by its service name (its `hostname`,
//! `container_name` and network aliases resolve to it too). [`load`] checks
//! every key and turns the file into a [`Project`]: the services, and the
//! cluster.toml text simcluster already knows how to run ([`Project::cluster_toml`]),
//! whose faults, run settings, checks and workload come from the file's
//! `x-simcluster:` block or a cluster.toml beside it without `[image]` or
//! `[node]`.
//!
//! Every node boots one root filesystem: simcluster's own (busybox) with
//! each service's container image unpacked under [`image_dir`]. A node runs
//! its service in a chroot of its image ([`Service::scripts`] writes the
//! shell scripts that do it): `/proc`, `/sys`, `/dev`, `/tmp` and the
//! node's `/etc/hosts` bound in, named volumes on the node's data disk,
//! the environment, user and working directory that Docker would give it.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod interpolate;
mod script;
mod services;
mod settings;
#[cfg(test)]
mod tests;

pub use script::{ImageConfig, ServiceScripts};

/// The file names a compose file may have, in the order Docker Compose
/// prefers them.
pub const FILE_NAMES: [&str; 4] = ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"];

/// Where the compose scripts live in the node's root filesystem.
pub const GUEST_DIR: &str = "/sim/compose";

/// The TCP port of the beacon a service serves when another depends on it
/// (`depends_on`): `started`, `healthy` and `completed` files over HTTP.
pub const BEACON_PORT: u16 = 61999;

/// The source of the script generator: part of a compose image's cache
/// key, so that an image built by another version of the scripts is not
/// reused (the scripts also depend on the services and the images, which
/// the key holds too).
pub const SCRIPTS_RECIPE: &str = include_str!("script.rs");

/// The guest directory of the `k`-th distinct image ([`Project::images`]).
pub fn image_dir(k: usize) -> String {
    format!("{GUEST_DIR}/img/{k}")
}

/// What is wrong with a compose cluster. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The directory holds more than one compose file.
    #[error("{dir}: holds both {first} and {second}: keep one compose file")]
    TwoFiles {
        /// The cluster directory.
        dir: PathBuf,
        /// The file Docker Compose would read.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// Not YAML (or not TOML, for a cluster.toml beside it).
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Where (line, column) and what.
        message: String,
    },
    /// Keys or values simcluster cannot honour; every one found is listed.
    #[error("{path}: {}", Problems(problems))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Each key and what is wrong there.
        problems: Vec<Problem>,
    },
}

/// One key of a compose file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, as a dotted path: `services.web.build`.
    pub at: String,
    /// What is wrong, starting with its own separator (`": ..."`, `" = ..."`).
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.at, self.detail)
    }
}

struct Problems<'a>(&'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} problems (docs/antithesis.md lists the keys simcluster honours):", many.len())?;
                for p in many {
                    write!(f, "\n  {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// A key simcluster reads but ignores, and why that is safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The compose file.
    pub path: PathBuf,
    /// Where: `services.web.restart`.
    pub at: String,
    /// Why it is ignored.
    pub why: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} is ignored: {}", self.path.display(), self.at, self.why)
    }
}

/// Where a service's image comes from, in skopeo's transport syntax.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImageRef {
    /// `docker-archive:PATH`: a `docker save` archive.
    DockerArchive {
        /// The archive, relative paths resolved against the cluster directory.
        file: PathBuf,
    },
    /// `oci:PATH[:TAG]`: an OCI image layout directory.
    Oci {
        /// The layout.
        dir: PathBuf,
        /// Which image of its index.json (its ref name).
        tag: Option<String>,
    },
}

impl ImageRef {
    /// The image as a compose file names it.
    pub fn display(&self) -> String {
        match self {
            ImageRef::DockerArchive { file } => format!("docker-archive:{}", file.display()),
            ImageRef::Oci { dir, tag: Some(t) } => format!("oci:{}:{t}", dir.display()),
            ImageRef::Oci { dir, tag: None } => format!("oci:{}", dir.display()),
        }
    }
}

/// A volume or tmpfs mounted in a service's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// A named volume: a directory of the node's data disk.
    Volume {
        /// The volume's name (top-level `volumes:`).
        name: String,
        /// Absolute path in the container.
        target: String,
        /// Mounted read-only.
        read_only: bool,
    },
    /// A tmpfs (`tmpfs:` or a volume of `type: tmpfs`).
    Tmpfs {
        /// Absolute path in the container.
        target: String,
    },
}

/// `healthcheck:`, durations in nanoseconds (Docker's defaults applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Healthcheck {
    /// The command, run in the container: `CMD` form as is, `CMD-SHELL` as
    /// `/bin/sh -c STRING`.
    pub test: Vec<String>,
    /// Between checks (default 30 s).
    pub interval_ns: u64,
    /// A check running longer fails (default 30 s).
    pub timeout_ns: u64,
    /// Consecutive failures that make the service unhealthy (default 3).
    pub retries: u64,
    /// Failures before this do not count (default 0).
    pub start_period_ns: u64,
    /// Between checks during the start period (default: `interval`).
    pub start_interval_ns: Option<u64>,
}

/// What a service waits for before it starts (`depends_on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// `service_started`: the dependency's start script has begun.
    Started,
    /// `service_healthy`: its healthcheck has passed.
    Healthy,
    /// `service_completed_successfully`: its command has exited 0.
    Completed,
}

impl Condition {
    /// The beacon file that says so.
    pub fn beacon_file(self) -> &'static str {
        match self {
            Condition::Started => "started",
            Condition::Healthy => "healthy",
            Condition::Completed => "completed",
        }
    }
}

/// One service of the file: one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The service name: the node's name.
    pub name: String,
    /// Other names the node answers to: `hostname`, `container_name`,
    /// network aliases.
    pub aliases: Vec<String>,
    /// `image:`.
    pub image: ImageRef,
    /// Index of [`Self::image`] in [`Project::images`].
    pub image_index: usize,
    /// `entrypoint:` (`None`: the image's Entrypoint).
    pub entrypoint: Option<Vec<String>>,
    /// `command:` (`None`: the image's Cmd, unless `entrypoint` is set).
    pub command: Option<Vec<String>>,
    /// `env_file:` then `environment:`, later wins, in key order.
    pub environment: BTreeMap<String, String>,
    /// `user:` (`None`: the image's User).
    pub user: Option<String>,
    /// `working_dir:` (`None`: the image's WorkingDir, else `/`).
    pub working_dir: Option<String>,
    /// `hostname:` (`None`: the service name).
    pub hostname: Option<String>,
    /// `extra_hosts:` as (name, address).
    pub extra_hosts: Vec<(String, String)>,
    /// `volumes:` and `tmpfs:`.
    pub mounts: Vec<Mount>,
    /// `healthcheck:` (`None`: none, or `disable`/`NONE`).
    pub healthcheck: Option<Healthcheck>,
    /// `depends_on:` as (service, condition).
    pub depends_on: Vec<(String, Condition)>,
}

/// A compose file, checked: its services and the cluster.toml it stands for.
#[derive(Debug, Clone)]
pub struct Project {
    /// The compose file.
    pub file: PathBuf,
    /// The services, in file order: node `i` runs `services[i]`.
    pub services: Vec<Service>,
    /// Each distinct image, in order of first use.
    pub images: Vec<ImageRef>,
    /// The cluster description in cluster.toml's syntax: `[cluster] nodes`,
    /// `[node]` (start, readiness), and the settings of `x-simcluster:` or
    /// of the cluster.toml beside the file, node names as `nK`.
    pub cluster_toml: String,
    /// Which file wrote each top-level table of [`Self::cluster_toml`] that
    /// the user gave (`faults` -> the compose file or cluster.toml).
    pub origins: BTreeMap<String, PathBuf>,
    /// Where the node's data disk is mounted (named volumes live there).
    pub disk_mount: Option<String>,
    /// Keys read but ignored.
    pub warnings: Vec<Warning>,
}

impl Project {
    /// Every node's name: the service names.
    pub fn node_names(&self) -> Vec<String> {
        self.services.iter().map(|s| s.name.clone()).collect()
    }

    /// Lines for every node's /etc/hosts naming the aliases of all
    /// services (the service names themselves are there already:
    /// simcluster writes node names).
    pub fn hosts_lines(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.services.iter().enumerate() {
            if !s.aliases.is_empty() {
                out.push_str(&format!("10.0.0.{} {}\n", i + 1, s.aliases.join(" ")));
            }
        }
        out
    }
}

/// The compose file of `dir`, if it holds one.
pub fn find(dir: &Path) -> Result<Option<PathBuf>, ComposeError> {
    let present: Vec<&'static str> = FILE_NAMES.iter().copied().filter(|f| dir.join(f).is_file()).collect();
    match present[..] {
        [] => Ok(None),
        [one] => Ok(Some(dir.join(one))),
        [first, second, ..] => Err(ComposeError::TwoFiles { dir: dir.to_path_buf(), first, second }),
    }
}

/// Reads and checks the compose file `file` of cluster directory `dir`;
/// `beside` is the cluster.toml next to it, if any, as (path, text).
pub fn load(dir: &Path, file: &Path, beside: Option<(&Path, &str)>) -> Result<Project, ComposeError> {
    let text = std::fs::read_to_string(file).map_err(|source| ComposeError::Read { path: file.into(), source })?;
    parse(dir, file, &text, beside)
}

/// [`load`] on the file's text.
pub fn parse(dir: &Path, file: &Path, text: &str, beside: Option<(&Path, &str)>) -> Result<Project, ComposeError> {
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| ComposeError::Syntax { path: file.into(), message: describe_yaml_error(&e) })?;
    doc.apply_merge().map_err(|e| ComposeError::Syntax { path: file.into(), message: describe_yaml_error(&e) })?;
    let mut cx = services::Cx::new(dir, file);
    let read = services::read(&mut cx, &doc);
    let invalid = |problems: Vec<Problem>| ComposeError::Invalid { path: file.into(), problems };
    let Some(mut project) = read else { return Err(invalid(cx.problems)) };
    if !cx.problems.is_empty() {
        return Err(invalid(cx.problems));
    }
    settings::add(&mut project, &doc, beside)?;
    project.warnings = cx.warnings;
    Ok(project)
}

/// serde_yaml's message, with its place first: `line 3 column 5: ...`.
fn describe_yaml_error(e: &serde_yaml_ng::Error) -> String {
    let message = e.to_string();
    match e.location() {
        Some(l) => {
            let place = format!(" at line {} column {}", l.line(), l.column());
            format!("line {} column {}: {}", l.line(), l.column(), message.replace(&place, ""))
        }
        None => message,
    }
}

/// Splits a string the way Docker Compose splits a string-form
/// `command`/`entrypoint` (shell words: quotes and backslashes, no
/// expansion); `None` for an unterminated quote.
pub fn split_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => cur.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\' | '$' | '`') => cur.push(c),
                            c => {
                                cur.push('\\');
                                cur.push(c);
                            }
                        },
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// `s` quoted for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A Go-style duration (`1m30s`, `500ms`, `10s`, `1h`), as compose writes
/// them, in nanoseconds.
pub fn parse_duration(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let v: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += v * scale;
    }
    (total.is_finite() && total < u64::MAX as f64).then_some(total as u64)
}
