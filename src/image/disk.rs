//! Base images for the nodes' data disks: an empty ext4 filesystem of a
//! given size, byte-identical on every build.
//!
//! A node's disk is an [`engine::BlockStore`] over a read-only base image
//! (shared by every node and every execution) plus the blocks the node
//! wrote. The base must be the same bytes every time: it is an input of
//! every execution, so a difference would change the trace hash and break
//! replay. `mke2fs` puts randomness and host state into a filesystem by
//! default; each source is pinned here:
//! - the filesystem UUID (`-U`), which also seeds the metadata checksums
//!   and names the internal journal;
//! - the directory-index hash seed (`-E hash_seed=`);
//! - the creation, write and check timestamps (`E2FSPROGS_FAKE_TIME`; also
//!   `SOURCE_DATE_EPOCH` for e2fsprogs versions that read that), set to
//!   the guests' boot epoch;
//! - the feature set, block and inode sizes, which otherwise come from the
//!   host's `/etc/mke2fs.conf`: we pass our own ([`MKE2FS_CONF`]);
//! - the root directory's owner (`-E root_owner=0:0`, not the builder's);
//! - lazy initialisation is off (`lazy_itable_init=0,lazy_journal_init=0`),
//!   so every metadata block is written now and the guest kernel starts no
//!   background thread zeroing inode tables (disk traffic nobody asked
//!   for, and state that differs by how long a node ran).
//!
//! The bytes still depend on the e2fsprogs version, so its version string
//! is part of the cache key.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::cache::{build_entry, cache_root, EntryError, KeyHasher};
use super::host;

/// Bump when anything below changes the image bytes.
const RECIPE: &str = "ext4-disk-1";

/// The filesystem UUID of every data disk. Nodes never share a disk, and
/// ext4 does not mind two filesystems with one UUID on different machines.
pub const EXT4_UUID: &str = "5c4d7a1e-0b1d-4c5e-9a3f-51c1a5e7d15c";
/// The directory-index (htree) hash seed.
pub const EXT4_HASH_SEED: &str = "0b6e9a55-7f1c-4d2b-8e3a-6c9d1f2a4b70";
/// The filesystem label; guests may `mount LABEL=simdata`.
pub const EXT4_LABEL: &str = "simdata";
/// Timestamps written by mke2fs, seconds since the Unix epoch: the guests'
/// boot epoch (2026-01-01, `engine::GUEST_EPOCH_NS`), so the
/// filesystem is not created in the guest's future.
pub const EXT4_TIME: u64 = 1_767_225_600;
/// Smallest and largest size accepted, MiB. Below 16 MiB mke2fs shrinks or
/// drops the journal; the upper bound keeps a typo from filling the cache
/// (the image is sparse, but BlockStore reads it whole once for crcs).
pub const MIN_MIB: u64 = 16;
/// The largest size accepted, MiB (64 GiB); see [`MIN_MIB`].
pub const MAX_MIB: u64 = 64 * 1024;

/// Our mke2fs configuration, used instead of the host's: 4 KiB blocks,
/// 256-byte inodes, and ext4 features the guest kernel (linux 6.1, see
/// guest-images/kernel/uml.config) supports. `-T default` selects the
/// empty `default` usage type, so the size-based ones ("small", ...) that
/// would otherwise apply are never looked up.
pub const MKE2FS_CONF: &str = "\
[defaults]
\tbase_features = sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr
\tenable_periodic_fsck = 0
\tblocksize = 4096
\tinode_size = 256
\tinode_ratio = 16384

[fs_types]
\tdefault = {
\t}
\text4 = {
\t\tfeatures = has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize
\t}
";

/// Errors building a disk image.
#[derive(Debug, thiserror::Error)]
pub enum DiskImageError {
    /// The size asked for, MiB, is outside [`MIN_MIB`]..=[`MAX_MIB`].
    #[error("data disk size {0} MiB is outside {MIN_MIB}..={MAX_MIB} MiB")]
    BadSize(u64),
    /// mke2fs is not on the host and installing e2fsprogs failed.
    #[error("mke2fs (e2fsprogs) is missing and could not be installed: {0:#}")]
    Install(anyhow::Error),
    /// A file step failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The step: "writing", "creating", "sizing", "running".
        what: &'static str,
        /// The file it was done to (for "running", the program).
        path: PathBuf,
        /// The OS's reason.
        source: std::io::Error,
    },
    /// mke2fs ran and failed.
    #[error("{mke2fs} failed ({status}): {stderr}")]
    Mkfs {
        /// The mke2fs program run.
        mke2fs: PathBuf,
        /// Its exit status, as text.
        status: String,
        /// Its error output, trimmed.
        stderr: String,
    },
    /// Locking the cache entry, or creating or publishing its build.
    #[error(transparent)]
    Entry(#[from] EntryError),
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DiskImageError {
    let path = path.to_owned();
    move |source| DiskImageError::Io { what, path, source }
}

/// An empty ext4 filesystem of `size_mib` MiB, built once into the cache
/// (`<cache>/disks/<key>/ext4.img`, the key hashing every input) and
/// returned from there afterwards. The file is sparse; open it read-only
/// (it is shared by every node and every build that asks for this size).
pub fn ext4_image(size_mib: u64, quiet: bool) -> Result<PathBuf, DiskImageError> {
    ext4_image_in(&cache_root(), size_mib, quiet)
}

/// [`ext4_image`] with the cache at `root`.
pub fn ext4_image_in(root: &Path, size_mib: u64, quiet: bool) -> Result<PathBuf, DiskImageError> {
    if !(MIN_MIB..=MAX_MIB).contains(&size_mib) {
        return Err(DiskImageError::BadSize(size_mib));
    }
    let mke2fs = ensure_mke2fs()?;
    let version = mke2fs_version(&mke2fs)?;
    let mut key = KeyHasher::new(RECIPE);
    key.add(&size_mib.to_le_bytes())
        .add_str(&version)
        .add_str(MKE2FS_CONF)
        .add_str(EXT4_UUID)
        .add_str(EXT4_HASH_SEED)
        .add_str(EXT4_LABEL)
        .add(&EXT4_TIME.to_le_bytes());
    for a in mkfs_args() {
        key.add_str(&a);
    }
    let dir = root.join("disks").join(key.finish());
    let image = dir.join("ext4.img");
    build_entry(
        &dir,
        "the data disk image",
        quiet,
        || image.is_file(),
        |work| -> Result<PathBuf, DiskImageError> {
            if !quiet {
                eprintln!("disk: building a {size_mib} MiB ext4 image");
            }
            mkfs_ext4(&mke2fs, &work.join("ext4.img"), size_mib)?;
            Ok(work.to_path_buf())
        },
    )?;
    Ok(image)
}

/// Formats `out` (created or truncated to `size_mib` MiB) as the ext4
/// filesystem described in the module docs. Deterministic: the same
/// e2fsprogs and size give the same bytes.
pub fn mkfs_ext4(mke2fs: &Path, out: &Path, size_mib: u64) -> Result<(), DiskImageError> {
    let conf = out.with_extension("mke2fs.conf");
    std::fs::write(&conf, MKE2FS_CONF).map_err(io_err("writing", &conf))?;
    let file = std::fs::File::create(out).map_err(io_err("creating", out))?;
    file.set_len(size_mib << 20).map_err(io_err("sizing", out))?;
    drop(file);
    let time = EXT4_TIME.to_string();
    let result = Command::new(mke2fs)
        .args(mkfs_args())
        .arg(out)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .env("MKE2FS_CONFIG", &conf)
        .env("E2FSPROGS_FAKE_TIME", &time)
        .env("SOURCE_DATE_EPOCH", &time)
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_file(&conf);
    let output = result.map_err(io_err("running", mke2fs))?;
    if !output.status.success() {
        return Err(DiskImageError::Mkfs {
            mke2fs: mke2fs.to_owned(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// The mke2fs arguments before the device path.
fn mkfs_args() -> Vec<String> {
    vec![
        "-q".into(),
        "-F".into(),
        "-t".into(),
        "ext4".into(),
        "-T".into(),
        "default".into(),
        "-L".into(),
        EXT4_LABEL.into(),
        // Guests run as root; reserved blocks would only hide space.
        "-m".into(),
        "0".into(),
        "-U".into(),
        EXT4_UUID.into(),
        "-E".into(),
        format!("hash_seed={EXT4_HASH_SEED},lazy_itable_init=0,lazy_journal_init=0,nodiscard,root_owner=0:0"),
    ]
}

/// The mke2fs executable, installing e2fsprogs if it is missing. Looked up
/// in the sbin directories too, which a non-root PATH often lacks.
pub fn ensure_mke2fs() -> Result<PathBuf, DiskImageError> {
    let find = || {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
            .map(|d| d.join("mke2fs"))
            .find(|p| p.is_file())
    };
    if let Some(p) = find() {
        return Ok(p);
    }
    host::apt_install(&["e2fsprogs"]).map_err(DiskImageError::Install)?;
    find().ok_or_else(|| DiskImageError::Install(anyhow::anyhow!("e2fsprogs installed, but no mke2fs found")))
}

/// `mke2fs -V`'s first line, e.g. "mke2fs 1.47.0 (5-Feb-2023)".
fn mke2fs_version(mke2fs: &Path) -> Result<String, DiskImageError> {
    let out = Command::new(mke2fs)
        .arg("-V")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(io_err("running", mke2fs))?;
    // It prints the version on stderr.
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::cache::sha256_file;

    #[test]
    fn two_builds_are_byte_identical() {
        let mke2fs = match ensure_mke2fs() {
            Ok(p) => p,
            Err(e) => {
                testkit::skip(
                    testkit::Cause::Missing,
                    format!("no mke2fs: {e} (Debian package e2fsprogs: apt-get install e2fsprogs)"),
                );
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.img"), dir.path().join("b.img"));
        mkfs_ext4(&mke2fs, &a, 16).unwrap();
        // mke2fs would stamp the current second without the fake time.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        mkfs_ext4(&mke2fs, &b, 16).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().len(), 16 << 20);
        assert_eq!(sha256_file(&a).unwrap(), sha256_file(&b).unwrap());
        // It is an ext4 superblock (magic 0xEF53 at byte 1080) with our UUID.
        let bytes = std::fs::read(&a).unwrap();
        assert_eq!(&bytes[1080..1082], &[0x53, 0xef]);
        let uuid: String = bytes[1128..1144].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(uuid, EXT4_UUID.replace('-', ""));
    }

    #[test]
    fn cached_image_is_built_once_and_checked_size() {
        if let Err(e) = ensure_mke2fs() {
            testkit::skip(
                testkit::Cause::Missing,
                format!("no mke2fs: {e} (Debian package e2fsprogs: apt-get install e2fsprogs)"),
            );
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let p1 = ext4_image_in(root.path(), 16, true).unwrap();
        let m1 = std::fs::metadata(&p1).unwrap().modified().unwrap();
        let p2 = ext4_image_in(root.path(), 16, true).unwrap();
        assert_eq!(p1, p2);
        assert_eq!(std::fs::metadata(&p2).unwrap().modified().unwrap(), m1, "not rebuilt");
        let p3 = ext4_image_in(root.path(), 32, true).unwrap();
        assert_ne!(p1, p3, "the size is part of the key");
        assert!(matches!(ext4_image_in(root.path(), 1, true), Err(DiskImageError::BadSize(1))));
    }
}
