//! The root filesystem image: squashfs, made by Debian's mksquashfs.
//!
//! Why squashfs: the root is read-only and shared by every node, and a
//! read-only block device lets each guest hold only the pages it reads
//! (an initramfs is unpacked whole into every guest's RAM). mksquashfs
//! sorts directory entries (the format requires it) and, with times and
//! the superblock's time pinned, gives the same bytes for the same tree.
//! Nothing is compressed: the image stays in the host's page cache, shared
//! by all nodes, and a guest's read is a copy, not a decompression.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::host::{apt_install, have_program, run_capture};

/// mksquashfs's version line (part of the image key: another version may
/// lay the same tree out differently). Installs squashfs-tools if missing.
pub fn tool_version() -> Result<String> {
    if !have_program("mksquashfs") {
        apt_install(&["squashfs-tools"]).context("the root image needs mksquashfs (Debian's squashfs-tools)")?;
    }
    let out = run_capture(Command::new("mksquashfs").arg("-version"))?;
    Ok(out.lines().next().unwrap_or_default().to_string())
}

/// Packs the tree at `root` into the squashfs image `out`.
///
/// Owners are kept (a configured image has system users), except that a
/// builder that is not root makes every file root's: such a builder can
/// only have made files of its own, and the image carries no host ids.
pub fn pack(root: &Path, out: &Path) -> Result<()> {
    let mut cmd = Command::new("mksquashfs");
    cmd.arg(root)
        .arg(out)
        .args(["-noappend", "-quiet", "-no-progress", "-no-xattrs", "-noI", "-noD", "-noF", "-noX", "-no-fragments"])
        .args(["-all-time", "0", "-mkfs-time", "0"])
        // It refuses both ways of pinning times at once.
        .env_remove("SOURCE_DATE_EPOCH");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        cmd.arg("-all-root");
    }
    run_capture(&mut cmd).with_context(|| format!("packing {} into {}", root.display(), out.display()))?;
    Ok(())
}
