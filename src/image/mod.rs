//! `simcluster image build`: everything a cluster needs before it can run,
//! built into the cache and reused while its inputs are unchanged.
//!
//! Boot order of a build: kernel (minutes, once) -> packages (resolved by
//! apt, downloaded once; configured by mmdebstrap where scripts must run)
//! -> root filesystem (seconds to a minute).

pub mod apt;
pub use simcache as cache;
pub mod clock_helper;
pub mod compose_root;
pub use simcpio as cpio;
pub mod debs;
pub mod disk;
pub mod host;
pub mod kernel;
pub mod oci;
pub mod rootfs;
pub mod squashfs;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cluster::{Cluster, RootMode};
use cache::{cache_root, sha256_file, KeyHasher};

/// Bump when the root filesystem layout or agent protocol changes.
const ROOTFS_RECIPE: &str = "rootfs-4";

/// `[image] root = "auto"` keeps a root filesystem of at most this many
/// bytes of files in the initramfs (hello-cluster's is 2 MB; etcd's, with
/// the Essential set, about 100 MB): below it the device round trips of a
/// root disk cost more boot time than unpacking the archive does.
pub const INITRAMFS_ROOT_MAX: u64 = 32 << 20;

/// What a cluster runs on.
#[derive(Debug, Clone)]
pub struct Images {
    /// The kernel every node boots.
    pub kernel: PathBuf,
    /// The initramfs: the whole root filesystem, or with [`Self::root`]
    /// the boot init that mounts it.
    pub initrd: PathBuf,
    /// The root filesystem as a squashfs image every node mounts read-only
    /// from its root disk (see [`crate::cluster::RootMode`]).
    pub root: Option<PathBuf>,
    /// Names kernel, root filesystem and data disk exactly ([`images_hash`]);
    /// recorded in failure files, so a replay on other images says so. The
    /// kernel is the one nodes boot: the UML kernel's cache key here, the KVM
    /// kernel's identity once [`crate::run::images_for_runtime`] swaps it in.
    pub hash: String,
    /// The root filesystem's cache key (part of [`Self::hash`]).
    pub rootfs_key: String,
    /// The kernel was in the cache already (`image build`'s JSON line:
    /// `kernel_cached`).
    pub kernel_cached: bool,
    /// The root filesystem was in the cache already (`rootfs_cached`).
    pub rootfs_cached: bool,
    /// The empty ext4 filesystem every node's data disk starts as.
    pub disk: Option<PathBuf>,
    /// Wall time spent building (or finding) all of it.
    pub wall_seconds: f64,
}

/// Builds (or finds) the kernel and root filesystem for `cluster`.
pub fn build(cluster: &Cluster, quiet: bool) -> Result<Images> {
    let began = Instant::now();
    // Packages first: a wrong name fails in a second, not after a kernel.
    let image = &cluster.spec.image;
    let packages = debs::resolve(image, &cluster.file)?;
    let container = oci::Source::of(cluster);
    let mut key = KeyHasher::new(ROOTFS_RECIPE);
    key.add_str(rootfs::BOOT_INIT).add_str(rootfs::INIT).add_str(rootfs::AGENT);
    let root_mode = image.root;
    key.add_str(root_mode.name());
    if root_mode != RootMode::Initramfs {
        key.add_str(&squashfs::tool_version()?);
    }
    packages.add_to_key(&mut key);
    if let Some(source) = &container {
        oci::add_to_key(source, &cluster.file, &mut key)?;
    }
    if let Some(project) = &cluster.compose {
        compose_root::add_to_key(project, &cluster.file, &mut key)?;
    }
    let kernel = kernel::ensure_kernel(cluster.spec.cluster.kernel, quiet)?;
    let clock_helper = match cluster.spec.faults.clock.needs_helper() {
        true => Some(clock_helper::ensure(&cluster.file, quiet)?),
        false => None,
    };
    if let Some(h) = &clock_helper {
        key.add_str("clock-helper").add_str(&h.key);
    }
    if rootfs::agent_kills(cluster) {
        key.add_str("agent-kill").add_str(rootfs::AGENT_KILL);
    }
    // Only with [antithesis]: every other image keeps its key.
    if cluster.explore.antithesis.sdk {
        key.add_str("agent-sdk").add_str(rootfs::AGENT_SDK);
    }
    if let Some(composer) = &cluster.composer {
        key.add_str("test-composer").add_str(&crate::cluster::test_composer_runner(composer));
    }

    for (guest, host) in &cluster.spec.image.files {
        let p = cluster.dir.join(host);
        let sum = sha256_file(&p).with_context(|| format!("{}: reading {}", cluster.file.display(), p.display()))?;
        key.add_str(guest).add_str(&sum).add(&[is_executable(&p) as u8]);
    }
    key.add_str(cluster.spec.node.start.as_deref().unwrap_or(""));
    key.add_str(&cluster.spec.workload.command);
    for (name, _, command) in &cluster.invariants {
        key.add_str(name).add_str(command);
    }
    for (name, _, script) in &cluster.liveness {
        key.add_str("liveness").add_str(name).add_str(script);
    }
    // Only when set: the key of every image without a probe stays as it was.
    if let Some(script) = &cluster.ready_probe {
        key.add_str("ready").add_str(script);
    }
    if let Some(script) = &cluster.role_probe {
        key.add_str("role-probe").add_str(script);
    }
    if let Some(d) = &cluster.disk {
        key.add_str("disk-mount").add_str(&d.mount);
    }
    let rootfs_key = key.finish();
    let dir = cache_root().join("images").join(&rootfs_key);
    let helper = clock_helper.as_ref().map(|h| h.path.as_path());
    let rootfs = cache::build_entry(
        &dir,
        "the image",
        quiet,
        || RootLayout::find(&dir).is_some(),
        |work| build_rootfs(cluster, &packages, container.as_ref(), helper, work, quiet),
    )?;
    let rootfs_cached = rootfs == cache::Entry::Cached;
    let (initrd, root) = RootLayout::find(&dir).context("the image build left no root filesystem")?.paths(&dir);
    let disk = match &cluster.disk {
        None => None,
        Some(d) => {
            Some(disk::ext4_image(d.size_mb, quiet).with_context(|| format!("{}: [disk]", cluster.file.display()))?)
        }
    };
    let hash = images_hash(&kernel.key, &rootfs_key, disk.as_deref());
    Ok(Images {
        disk,
        kernel: kernel.path,
        initrd,
        root,
        hash,
        rootfs_key,
        kernel_cached: kernel.cached,
        rootfs_cached,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}

/// The images hash ([`Images::hash`]) of a kernel named by `kernel` (a cache
/// key, or another identity that names the file exactly), the root
/// filesystem of cache key `rootfs_key` and the data disk image `disk`.
/// Invariant: for a UML run `kernel` is the UML kernel's cache key, and the
/// encoding does not change without a deliberate re-record (it changed once:
/// the disk's whole path, cache location included, was hashed until
/// 2026-11-26, so the same images had another hash under another cache).
pub fn images_hash(kernel: &str, rootfs_key: &str, disk: Option<&Path>) -> String {
    let mut hash = KeyHasher::new("images");
    hash.add_str(kernel).add_str(rootfs_key);
    if let Some(p) = disk {
        // The image's own cache key (size, recipe, mke2fs) names its
        // directory: `<cache>/disks/<key>/ext4.img`. Only that much is
        // hashed, not where the cache is: a run and its replay under
        // another SIMCLUSTER_CACHE or HOME name the same images.
        hash.add_str(&disk_identity(p));
    }
    hash.finish()
}

/// A data disk image's identity: its path from the cache key's directory
/// on (`<key>/ext4.img`), or the whole path for a file outside the cache.
fn disk_identity(p: &Path) -> String {
    match (p.parent().and_then(Path::file_name), p.file_name()) {
        (Some(key), Some(file)) => format!("{}/{}", key.to_string_lossy(), file.to_string_lossy()),
        _ => p.to_string_lossy().into_owned(),
    }
}

/// The files of a built root filesystem in its cache directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootLayout {
    /// `rootfs.cpio`: the whole root as the initramfs.
    Initramfs,
    /// `boot.cpio` (the boot init) and `root.sqfs` (the root disk's image).
    Disk,
}

impl RootLayout {
    const INITRAMFS: &'static str = "rootfs.cpio";
    const BOOT: &'static str = "boot.cpio";
    const IMAGE: &'static str = "root.sqfs";

    /// The layout built into `dir`, if any (a directory is published whole).
    fn find(dir: &Path) -> Option<RootLayout> {
        if dir.join(Self::BOOT).is_file() && dir.join(Self::IMAGE).is_file() {
            Some(RootLayout::Disk)
        } else if dir.join(Self::INITRAMFS).is_file() {
            Some(RootLayout::Initramfs)
        } else {
            None
        }
    }

    /// (initramfs, root disk image).
    fn paths(self, dir: &Path) -> (PathBuf, Option<PathBuf>) {
        match self {
            RootLayout::Initramfs => (dir.join(Self::INITRAMFS), None),
            RootLayout::Disk => (dir.join(Self::BOOT), Some(dir.join(Self::IMAGE))),
        }
    }

    /// The layout `mode` asks for, for a tree of `bytes` bytes of files.
    fn choose(mode: RootMode, bytes: u64) -> RootLayout {
        match mode {
            RootMode::Initramfs => RootLayout::Initramfs,
            RootMode::Disk => RootLayout::Disk,
            RootMode::Auto if bytes <= INITRAMFS_ROOT_MAX => RootLayout::Initramfs,
            RootMode::Auto => RootLayout::Disk,
        }
    }
}

/// Bytes of regular files under `dir` (symbolic links not followed).
fn tree_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        if ft.is_dir() {
            total += tree_bytes(&entry.path())?;
        } else if ft.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// Writes `tree` as a newc archive at `out`, with `/dev/console` (the
/// kernel opens it for init before any devtmpfs is mounted).
fn write_initramfs(tree: &Path, out: &Path) -> Result<()> {
    let f = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut w = cpio::CpioWriter::new(f);
    w.add_tree(tree)?;
    w.add_device(&cpio::DeviceNode { path: "/dev/console", mode: 0o600, major: 5, minor: 1 })?;
    w.finish()?;
    Ok(())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Builds the root filesystem in `work` (the cache entry's temporary
/// directory) and returns `work/out`, which holds the files of its
/// [`RootLayout`].
fn build_rootfs(
    cluster: &Cluster,
    packages: &debs::PackageSet,
    container: Option<&oci::Source>,
    clock_helper: Option<&Path>,
    work: &Path,
    quiet: bool,
) -> Result<PathBuf> {
    let pb = if quiet { ProgressBar::hidden() } else { ProgressBar::new_spinner() };
    pb.set_style(ProgressStyle::with_template("rootfs: {spinner} {elapsed} {msg}").unwrap());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    // A closure, so that the bar is cleared whichever step fails.
    let result = (|| -> Result<PathBuf> {
        let root = work.join("root");
        let report = |msg: &str| pb.set_message(msg.to_string());
        let run_config = match container {
            None => {
                packages.install(&root, &report)?;
                // Init and agent name their busybox /sim/busybox.
                std::fs::create_dir_all(root.join("sim"))?;
                std::os::unix::fs::symlink("../bin/busybox", root.join("sim/busybox"))?;
                if let Some(project) = &cluster.compose {
                    report("unpacking the services' images");
                    compose_root::unpack(cluster, project, &root, work)?;
                }
                None
            }
            Some(source) => {
                report("unpacking the container image");
                let opened = oci::open(source, &cluster.file, work)?;
                oci::unpack(&opened, source, &cluster.file, &root)?;
                // simcluster's own static busybox, from the Debian package.
                report("adding simcluster's busybox");
                let bb = work.join("busybox");
                packages.install(&bb, &report)?;
                std::fs::create_dir_all(root.join("sim"))?;
                std::fs::copy(bb.join("bin/busybox"), root.join("sim/busybox"))?;
                Some(opened.config)
            }
        };
        debs::remove_matching(&root, &cluster.spec.image.exclude)?;
        pb.set_message("files and agent");
        for (guest, host) in &cluster.spec.image.files {
            let src = cluster.dir.join(host);
            let dst = root.join(guest.trim_start_matches('/'));
            std::fs::create_dir_all(dst.parent().unwrap())?;
            let _ = std::fs::remove_file(&dst);
            std::fs::copy(&src, &dst).with_context(|| format!("copying {} into the image", src.display()))?;
            // The user's files belong to root in the guest, whoever built it.
            std::os::unix::fs::lchown(&dst, Some(0), Some(0)).ok();
        }
        rootfs::write_agent_files(&root, cluster, run_config.as_ref(), clock_helper)?;
        rootfs::check_commands(&root, cluster)?;
        let out = work.join("out");
        std::fs::create_dir_all(&out)?;
        match RootLayout::choose(cluster.spec.image.root, tree_bytes(&root)?) {
            RootLayout::Initramfs => {
                pb.set_message("packing the initramfs");
                write_initramfs(&root, &out.join(RootLayout::INITRAMFS))?;
            }
            RootLayout::Disk => {
                pb.set_message("packing the root image");
                squashfs::pack(&root, &out.join(RootLayout::IMAGE))?;
                pb.set_message("packing the boot initramfs");
                let boot = work.join("boot");
                rootfs::write_boot_files(&boot, &root.join("sim/busybox"))?;
                write_initramfs(&boot, &out.join(RootLayout::BOOT))?;
            }
        }
        Ok(out)
    })();
    pb.finish_and_clear();
    result
}

/// Where `simcluster` keeps its cache (shown by `image build`).
pub fn cache_dir() -> PathBuf {
    cache_root()
}
