//! Where built artefacts live, and how their names are derived.
//!
//! Every artefact is stored under a key that is the SHA-256 of all of its
//! inputs, so a changed input builds anew and an unchanged one is reused,
//! and nothing is ever overwritten in place: a build writes into a
//! temporary sibling and renames it into place when complete.
//!
//! The image builder keeps its artefacts here (kernels, root filesystems,
//! packages); testkit keeps what tests fetch (a static busybox) under the
//! same [`cache_root`].

#![deny(missing_docs)]

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
    /// A key whose first input is `domain` (a recipe's name and version),
    /// so keys of different recipes never collide.
    pub fn new(domain: &str) -> KeyHasher {
        let mut k = KeyHasher(Sha256::new());
        k.add(domain.as_bytes());
        k
    }

    /// Adds one input, length-prefixed.
    pub fn add(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// Adds a string's UTF-8 bytes as one input.
    pub fn add_str(&mut self, s: &str) -> &mut Self {
        self.add(s.as_bytes())
    }

    /// The key: SHA-256 of the inputs so far, in lower-case hex. Does not
    /// consume the hasher, so more inputs may follow for a longer key.
    pub fn finish(&self) -> String {
        hex::encode(self.0.clone().finalize())
    }
}

/// SHA-256 of `bytes`, in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// SHA-256 of the file at `path`, in lower-case hex, read in 64 KiB
/// pieces (a root image may not fit in memory twice).
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

/// Errors of [`build_entry`]'s own steps; a failed build returns its own
/// error instead. The source is the OS's reason, kept as the error's cause
/// (so `{:#}` prints "cannot create X: No space left on device").
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// The entry's lock file (`ENTRY.lock`) could not be created or locked.
    #[error("cannot take the build lock {}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// The temporary sibling the build writes into could not be created.
    #[error("cannot create {}", path.display())]
    Create {
        /// The temporary sibling (`ENTRY.build-PID`).
        path: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// The finished build could not be renamed to the entry's name.
    #[error("cannot move {what} into {}", path.display())]
    Publish {
        /// What was built, as the caller named it ("the kernel").
        what: String,
        /// The entry.
        path: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
}

/// Whether [`build_entry`] found its entry or built it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// It was in the cache: from an earlier run, or built by another
    /// process while this one waited for the lock.
    Cached,
    /// This call built it.
    Built,
}

/// Moves a finished temporary file or directory into its final place.
fn publish(tmp: &Path, fin: &Path) -> std::io::Result<()> {
    if let Some(parent) = fin.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(tmp, fin)
}

/// The one way to put an entry into the cache: returns at once if
/// `is_built` says the entry `entry` (a directory, or a file) is there;
/// otherwise takes its [`BuildLock`] (saying so unless `quiet` when
/// another process holds it), asks `is_built` again (that process may
/// have built it), and builds it in a fresh temporary sibling
/// (`ENTRY.build-PID`): `build` fills it and returns what to publish (the
/// sibling itself, or a file or directory inside it), which is renamed to
/// `entry`. The sibling is removed whatever `build` returns (a killed
/// process leaves it, for the next build by that pid to remove), so a
/// failed build never leaves a half-built entry under its final name.
/// `what` names the artefact in the error of a failed rename ("the
/// kernel").
///
/// Invariants the builders rely on: `build` runs only under the lock, so
/// at most one process (or thread: `flock` locks per open file) writes an
/// entry at a time; `entry` appears only by one `rename`, complete. The
/// sibling's name holds the pid, so a build must keep it out of its
/// output (the kernel build maps it out of its debug info).
pub fn build_entry<E: From<EntryError>>(
    entry: &Path,
    what: &str,
    quiet: bool,
    is_built: impl Fn() -> bool,
    build: impl FnOnce(&Path) -> Result<PathBuf, E>,
) -> Result<Entry, E> {
    // Checked before locking too, so that a cached entry costs a stat and
    // creates no lock file.
    if is_built() {
        return Ok(Entry::Cached);
    }
    let _lock = BuildLock::acquire(entry, quiet)
        .map_err(|source| EntryError::Lock { path: entry.with_extension("lock"), source })?;
    if is_built() {
        return Ok(Entry::Cached);
    }
    let work = entry.with_extension(format!("build-{}", std::process::id()));
    // Only a killed earlier process with this pid can have left one: under
    // the lock, no one else writes it.
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|source| EntryError::Create { path: work.clone(), source })?;
    let result = build(&work).and_then(|built| {
        publish(&built, entry)
            .map_err(|source| EntryError::Publish { what: what.to_string(), path: entry.to_path_buf(), source }.into())
    });
    let _ = std::fs::remove_dir_all(&work);
    result.map(|()| Entry::Built)
}

/// An exclusive lock on a cache entry, held while it is built, so two
/// simcluster processes never build the same artefact at once (the second
/// waits, then finds it built). Released on drop.
pub struct BuildLock {
    _file: std::fs::File,
}

impl BuildLock {
    /// Locks `ENTRY.lock` (creating it and its directory), waiting while
    /// another process holds it, with a line on stderr unless `quiet`.
    /// Cache entries take it through [`build_entry`]; taken directly, it
    /// guards what is not one entry (apt's package lists).
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    /// Builds `entry` (there once it exists) with `build`.
    fn build_with(entry: &Path, build: impl FnOnce(&Path) -> anyhow::Result<PathBuf>) -> anyhow::Result<Entry> {
        build_entry(entry, "the test entry", true, || entry.exists(), build)
    }

    /// Writes each (path, body) of `files` under `dir`, making directories.
    fn write_files(dir: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
        for (path, body) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap())?;
            std::fs::write(p, body)?;
        }
        Ok(())
    }

    /// Builds `entry` holding one file `out` with `body`.
    fn build_file(entry: &Path, body: &str) -> anyhow::Result<Entry> {
        build_with(entry, |work| {
            write_files(work, &[("out", body)])?;
            Ok(work.to_path_buf())
        })
    }

    #[test]
    fn builds_once_then_finds_it_cached() {
        let root = tempfile::tempdir().unwrap();
        let entry = root.path().join("kind").join("key");
        assert_eq!(build_file(&entry, "one").unwrap(), Entry::Built);
        assert_eq!(std::fs::read_to_string(entry.join("out")).unwrap(), "one");
        // Only the entry and its lock remain: the work directory is gone.
        assert_eq!(names(&root.path().join("kind")), ["key", "key.lock"]);
        let again = build_with(&entry, |_| panic!("a cached entry is not built again"));
        assert_eq!(again.unwrap(), Entry::Cached);
    }

    #[test]
    fn publishes_what_the_build_returns_and_drops_the_rest() {
        let root = tempfile::tempdir().unwrap();
        let entry = root.path().join("key");
        // The kernel's shape: a source tree beside the staged output.
        build_with(&entry, |work| {
            write_files(work, &[("src/object", "scratch"), ("out/kernel", "image")])?;
            Ok(work.join("out"))
        })
        .unwrap();
        assert_eq!(names(&entry), ["kernel"]);
        assert_eq!(names(root.path()), ["key", "key.lock"]);
        // A single file, as a source tarball is published.
        let tarball = root.path().join("src_1.0.tar.xz");
        build_with(&tarball, |work| {
            write_files(work, &[("x/usr/src/src.tar.xz", "tar")])?;
            Ok(work.join("x/usr/src/src.tar.xz"))
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(&tarball).unwrap(), "tar");
        assert_eq!(names(root.path()), ["key", "key.lock", "src_1.0.tar.lock", "src_1.0.tar.xz"]);
    }

    #[test]
    fn a_failed_build_leaves_nothing_half_written() {
        let root = tempfile::tempdir().unwrap();
        let entry = root.path().join("key");
        let err = build_with(&entry, |work| {
            write_files(work, &[("half", "written")])?;
            anyhow::bail!("the build broke")
        })
        .unwrap_err();
        // The build's own error, unchanged.
        assert_eq!(format!("{err:#}"), "the build broke");
        assert_eq!(names(root.path()), ["key.lock"], "no entry and no work directory");
        // The lock was released and the next build starts afresh.
        assert_eq!(build_file(&entry, "two").unwrap(), Entry::Built);
        assert_eq!(names(&entry), ["out"]);
    }

    #[test]
    fn a_typed_build_error_comes_back_typed() {
        #[derive(Debug, thiserror::Error)]
        enum BuildError {
            #[error("no compiler")]
            NoCompiler,
            #[error(transparent)]
            Entry(#[from] EntryError),
        }
        let root = tempfile::tempdir().unwrap();
        let entry = root.path().join("key");
        let err = build_entry(&entry, "the test entry", true, || false, |_| Err(BuildError::NoCompiler)).unwrap_err();
        assert!(matches!(err, BuildError::NoCompiler), "{err:?}");
        // A failed rename is the entry's error, naming what and where.
        let err = build_entry(&entry, "the test entry", true, || false, |work| Ok(work.join("missing"))).unwrap_err();
        match &err {
            BuildError::Entry(e @ EntryError::Publish { path, .. }) => {
                assert_eq!(path, &entry);
                assert_eq!(e.to_string(), format!("cannot move the test entry into {}", entry.display()));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(names(root.path()), ["key.lock"]);
    }

    #[test]
    fn a_leftover_work_directory_is_not_published() {
        let root = tempfile::tempdir().unwrap();
        let entry = root.path().join("key");
        // What a build killed mid-way by a process with this pid left.
        let stale = entry.with_extension(format!("build-{}", std::process::id()));
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("stale"), "old").unwrap();
        build_file(&entry, "new").unwrap();
        assert_eq!(names(&entry), ["out"]);
    }

    #[test]
    fn a_second_builder_waits_for_the_lock_and_finds_the_entry_built() {
        let root = tempfile::tempdir().unwrap();
        let entry = root.path().join("key");
        let (started_tx, started_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let first = {
            let entry = entry.clone();
            std::thread::spawn(move || {
                build_with(&entry, |work| {
                    started_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    write_files(work, &[("out", "first")])?;
                    Ok(work.to_path_buf())
                })
            })
        };
        // The first builder holds the lock from here until `go`.
        started_rx.recv().unwrap();
        let checks = AtomicUsize::new(0);
        let (checked_tx, checked_rx) = mpsc::channel();
        std::thread::scope(|s| {
            let second = s.spawn(|| {
                build_entry(
                    &entry,
                    "the test entry",
                    true,
                    || {
                        checks.fetch_add(1, Ordering::SeqCst);
                        let _ = checked_tx.send(());
                        entry.exists()
                    },
                    |_| -> anyhow::Result<PathBuf> { panic!("the second builder built too") },
                )
            });
            // The second has looked once (not there yet) and is on its way
            // to the lock; give it time to block there, then let the first
            // finish.
            checked_rx.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert!(!second.is_finished(), "the second builder did not wait for the lock");
            go_tx.send(()).unwrap();
            assert_eq!(first.join().unwrap().unwrap(), Entry::Built);
            assert_eq!(second.join().unwrap().unwrap(), Entry::Cached);
        });
        // Looked before the lock and again under it.
        assert_eq!(checks.load(Ordering::SeqCst), 2);
        assert_eq!(std::fs::read_to_string(entry.join("out")).unwrap(), "first");
    }

    #[test]
    fn an_unlockable_entry_names_its_lock_file() {
        let root = tempfile::tempdir().unwrap();
        // The entry's directory is a file, so neither it nor the lock can be made.
        std::fs::write(root.path().join("kind"), "").unwrap();
        let entry = root.path().join("kind").join("key");
        let err = build_file(&entry, "x").unwrap_err();
        let lock = entry.with_extension("lock");
        assert!(format!("{err:#}").starts_with(&format!("cannot take the build lock {}: ", lock.display())), "{err:#}");
    }
}
