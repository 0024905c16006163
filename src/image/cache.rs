//! Where built artefacts live, and how their names are derived.
//!
//! Every artefact is stored under a key that is the SHA-256 of all of its
//! inputs, so a changed input builds anew and an unchanged one is reused,
//! and nothing is ever overwritten in place: a build writes into a
//! temporary sibling and renames it into place when complete.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The cache root: `$SIMCLUSTER_CACHE`, else `$XDG_CACHE_HOME/simcluster`,
/// else `~/.cache/simcluster`.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("SIMCLUSTER_CACHE") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(p).join("simcluster");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| "/tmp".into());
    home.join(".cache").join("simcluster")
}

/// Accumulates inputs into a cache key. Each input is length-prefixed so
/// that ("ab","c") and ("a","bc") differ.
#[derive(Clone, Default)]
pub struct KeyHasher(Sha256);

impl KeyHasher {
    pub fn new(domain: &str) -> KeyHasher {
        let mut k = KeyHasher(Sha256::new());
        k.add(domain.as_bytes());
        k
    }

    pub fn add(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    pub fn add_str(&mut self, s: &str) -> &mut Self {
        self.add(s.as_bytes())
    }

    pub fn finish(&self) -> String {
        hex::encode(self.0.clone().finalize())
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Moves a finished temporary file or directory into its final place.
pub fn publish(tmp: &Path, fin: &Path) -> std::io::Result<()> {
    if let Some(parent) = fin.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(tmp, fin)
}

/// Builds cache entry `entry` in a fresh temporary sibling
/// (`ENTRY.build-PID`): `build` fills it and returns the directory to
/// publish (the sibling itself or a directory inside it), which is renamed
/// to `entry`; the sibling is removed whatever happens, so a failed or
/// interrupted build never leaves a half-built entry under its final name.
/// `what` names the artefact in the error of a failed rename.
pub fn build_entry(
    entry: &Path,
    what: &str,
    build: impl FnOnce(&Path) -> anyhow::Result<PathBuf>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let work = entry.with_extension(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let result = build(&work).and_then(|built| {
        publish(&built, entry).with_context(|| format!("cannot move {what} into {}", entry.display()))
    });
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// An exclusive lock on a cache entry, held while it is built, so two
/// simcluster processes never build the same artefact at once (the second
/// waits, then finds it built). Released on drop.
pub struct BuildLock {
    _file: std::fs::File,
}

impl BuildLock {
    pub fn acquire(entry: &Path, quiet: bool) -> std::io::Result<BuildLock> {
        use std::os::fd::AsRawFd;
        if let Some(parent) = entry.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let lock_path = entry.with_extension("lock");
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            if !quiet {
                eprintln!("waiting for another simcluster process building {}", entry.display());
            }
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(BuildLock { _file: file })
    }
}
