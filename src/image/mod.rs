//! `simcluster image build`: everything a cluster needs before it can run,
//! built into the cache and reused while its inputs are unchanged.
//!
//! Boot order of a build: kernel (minutes, once) -> packages (resolved by
//! apt, downloaded once; configured by mmdebstrap where scripts must run)
//! -> root filesystem (seconds to a minute).

pub mod apt;
pub mod cache;
pub mod clock_helper;
pub mod cpio;
pub mod debs;
pub mod disk;
pub mod host;
pub mod kernel;
pub mod oci;
pub mod rootfs;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cluster::Cluster;
use cache::{cache_root, publish, sha256_file, KeyHasher};

/// Bump when the root filesystem layout or agent protocol changes.
const ROOTFS_RECIPE: &str = "rootfs-4";

/// What a cluster runs on.
#[derive(Debug, Clone)]
pub struct Images {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Names kernel and root filesystem exactly; recorded in failure files.
    pub hash: String,
    pub kernel_cached: bool,
    pub rootfs_cached: bool,
    /// The empty ext4 filesystem every node's data disk starts as.
    pub disk: Option<PathBuf>,
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
    key.add_str(rootfs::INIT).add_str(rootfs::AGENT);
    packages.add_to_key(&mut key);
    if let Some(source) = &container {
        oci::add_to_key(source, &cluster.file, &mut key)?;
    }
    let kernel = kernel::ensure_kernel(cluster.spec.cluster.kernel, quiet)?;
    let clock_helper = match cluster.spec.faults.clock.needs_helper() {
        true => Some(clock_helper::ensure(&cluster.file, quiet)?),
        false => None,
    };
    if let Some(h) = &clock_helper {
        key.add_str("clock-helper").add_str(&h.key);
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
    if let Some(d) = &cluster.disk {
        key.add_str("disk-mount").add_str(&d.mount);
    }
    let rootfs_key = key.finish();
    let dir = cache_root().join("images").join(&rootfs_key);
    let initrd = dir.join("rootfs.cpio");
    let mut rootfs_cached = initrd.is_file();
    if !rootfs_cached {
        let _lock = cache::BuildLock::acquire(&dir, quiet)?;
        rootfs_cached = initrd.is_file();
        if !rootfs_cached {
            let helper = clock_helper.as_ref().map(|h| h.path.as_path());
            build_rootfs(cluster, &packages, container.as_ref(), helper, &dir, quiet)?;
        }
    }
    let disk = match &cluster.disk {
        None => None,
        Some(d) => Some(disk::ext4_image(d.size_mb, quiet).with_context(|| format!("{}: [disk]", cluster.file.display()))?),
    };
    let mut hash = KeyHasher::new("images");
    hash.add_str(&kernel.key).add_str(&rootfs_key);
    if let Some(p) = &disk {
        // The path holds the image's own cache key (size, recipe, mke2fs).
        hash.add_str(&p.to_string_lossy());
    }
    let hash = hash.finish();
    Ok(Images {
        disk,
        kernel: kernel.path,
        initrd,
        hash,
        kernel_cached: kernel.cached,
        rootfs_cached,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

fn build_rootfs(
    cluster: &Cluster,
    packages: &debs::PackageSet,
    container: Option<&oci::Source>,
    clock_helper: Option<&Path>,
    final_dir: &Path,
    quiet: bool,
) -> Result<()> {
    let pb = if quiet { ProgressBar::hidden() } else { ProgressBar::new_spinner() };
    pb.set_style(ProgressStyle::with_template("rootfs: {spinner} {elapsed} {msg}").unwrap());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    let work = final_dir.with_extension(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let root = work.join("root");
    std::fs::create_dir_all(&work)?;
    let result = (|| -> Result<()> {
        let report = |msg: &str| pb.set_message(msg.to_string());
        let run_config = match container {
            None => {
                packages.install(&root, &report)?;
                // Init and agent name their busybox /sim/busybox.
                std::fs::create_dir_all(root.join("sim"))?;
                std::os::unix::fs::symlink("../bin/busybox", root.join("sim/busybox"))?;
                None
            }
            Some(source) => {
                report("unpacking the container image");
                let opened = oci::open(source, &cluster.file, &work)?;
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
        pb.set_message("packing initramfs");
        let out = work.join("out");
        std::fs::create_dir_all(&out)?;
        let f = std::io::BufWriter::new(std::fs::File::create(out.join("rootfs.cpio"))?);
        let mut w = cpio::CpioWriter::new(f);
        w.add_tree(&root)?;
        w.add_device(&cpio::DeviceNode { path: "/dev/console", mode: 0o600, major: 5, minor: 1 })?;
        w.finish()?;
        publish(&out, final_dir).with_context(|| format!("cannot move the image into {}", final_dir.display()))?;
        Ok(())
    })();
    pb.finish_and_clear();
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// Where `simcluster` keeps its cache (shown by `image build`).
pub fn cache_dir() -> PathBuf {
    cache_root()
}
