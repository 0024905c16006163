//! `[disk]`: a data disk per node. (Disks that misbehave are
//! `[faults.disk]`, in `faults`.)

use serde::Deserialize;

use super::values::optional_duration;
use super::{Invalid, KeyPath};

/// `[disk]`: every node gets a virtio-blk data disk (`/dev/vda`), an empty
/// ext4 filesystem built by the image builder, mounted at `mount`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSection {
    /// Size in MiB (at least 16: ext4's journal needs room).
    pub size_mb: u64,
    /// Absolute guest path the disk is mounted at.
    pub mount: String,
    /// Virtual time from a write's or flush's submission to its completion
    /// (default "100us").
    pub latency: Option<String>,
    /// After a crash, multi-sector writes may persist in part (torn at
    /// 512-byte sectors); default false: each write persists whole or not.
    #[serde(default)]
    pub torn_writes: bool,
    /// A crash point with at most this many crash states has every one of
    /// them explored (an execution per state); above it one state is drawn
    /// from the seed. Default 16.
    pub enumerate: Option<u64>,
}

/// `[disk]` with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSettings {
    /// Size of each node's data disk in MiB, 16 to 65536.
    pub size_mb: u64,
    /// Absolute guest path the disk is mounted at: not `/`, and not under
    /// `/proc`, `/sys`, `/dev`, `/sim`, `/tmp` or `/run`.
    pub mount: String,
    /// Virtual nanoseconds from a write's or flush's submission to its
    /// completion (default 100 us).
    pub latency_ns: u64,
    /// Whether a crash may persist a multi-sector write in part (torn at
    /// 512-byte sectors).
    pub torn_writes: bool,
    /// Crash points with at most this many crash states have every state
    /// explored; above it one is drawn from the seed (default 16).
    pub enumerate: u64,
}

impl DiskSection {
    /// The table, checked, with defaults applied.
    pub(super) fn settings(&self) -> Result<DiskSettings, Invalid> {
        let d = self;
        let at = KeyPath::table("disk");
        if !(16..=65536).contains(&d.size_mb) {
            return Err(at.key("size_mb").invalid(format!(" = {}: must be between 16 and 65536", d.size_mb)));
        }
        if !d.mount.starts_with('/')
            || d.mount == "/"
            || d.mount.split('/').any(|c| c == "..")
            || d.mount.chars().any(|c| c.is_whitespace() || c == '\'' || c == '"')
        {
            return Err(at.key("mount").invalid(format!(
                " = {:?}: must be an absolute guest path other than / (no spaces, quotes or '..')",
                d.mount
            )));
        }
        if ["/proc", "/sys", "/dev", "/sim", "/tmp", "/run"]
            .iter()
            .any(|p| d.mount == *p || d.mount.starts_with(&format!("{p}/")))
        {
            return Err(at
                .key("mount")
                .invalid(format!(" = {:?}: that path is used by the guest's own file systems", d.mount)));
        }
        let latency_ns = optional_duration(&at.key("latency"), &d.latency, 100_000)?;
        Ok(DiskSettings {
            size_mb: d.size_mb,
            mount: d.mount.clone(),
            latency_ns,
            torn_writes: d.torn_writes,
            enumerate: d.enumerate.unwrap_or(16),
        })
    }
}
