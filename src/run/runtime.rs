//! Which node runtime a run uses, and the images as that runtime boots them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use engine::RuntimeKind;

use crate::image::cache::sha256_file;
use crate::image::{images_hash, Images};
use crate::BadInput;

/// What the host offers a KVM runtime.
#[derive(Debug, Clone)]
pub struct HostVirt {
    /// /proc/cpuinfo lists vmx or svm.
    pub vmx_svm: bool,
    /// /dev/kvm opened (or why not).
    pub dev_kvm: std::result::Result<(), DevKvmError>,
    /// The kernel KVM nodes would boot ([`KVM_KERNEL_ENV`]).
    pub kvm_kernel: Option<PathBuf>,
}

impl HostVirt {
    /// Looks at this host.
    pub fn detect() -> HostVirt {
        let vmx_svm = engine::has_hardware_virt();
        let dev_kvm = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .map(|_| ())
            .map_err(DevKvmError::from_open);
        HostVirt { vmx_svm, dev_kvm, kvm_kernel: std::env::var_os(KVM_KERNEL_ENV).map(PathBuf::from) }
    }
}

/// Why /dev/kvm could not be opened read-write. Each reason prints as
/// `/dev/kvm: ` and the OS's words ("/dev/kvm: No such file or directory
/// (os error 2)"), which [`choose_runtime`] puts in its why. The error is
/// shared (`Arc`) because [`HostVirt`] is `Clone` and `io::Error` is not.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DevKvmError {
    /// There is no /dev/kvm: the kvm module is not loaded, or a container
    /// was started without the device.
    #[error("/dev/kvm: {0}")]
    Missing(Arc<std::io::Error>),
    /// /dev/kvm is there but this user may not open it (not in its group).
    #[error("/dev/kvm: {0}")]
    Denied(Arc<std::io::Error>),
    /// Opening it failed otherwise.
    #[error("/dev/kvm: {0}")]
    Open(Arc<std::io::Error>),
}

impl DevKvmError {
    /// The reason for `e`, the error of opening /dev/kvm.
    pub fn from_open(e: std::io::Error) -> DevKvmError {
        match e.kind() {
            std::io::ErrorKind::NotFound => DevKvmError::Missing(Arc::new(e)),
            std::io::ErrorKind::PermissionDenied => DevKvmError::Denied(Arc::new(e)),
            _ => DevKvmError::Open(Arc::new(e)),
        }
    }
}

/// Environment variable naming a kernel (bzImage or vmlinux) for KVM nodes
/// to boot instead of the image builder's ([`crate::image::kernel::ensure_kvm_kernel`]).
pub const KVM_KERNEL_ENV: &str = "SIMCLUSTER_KVM_KERNEL";

/// Picks the node runtime and says why: `asked` is `None` for `--runtime
/// auto` (KVM when /proc/cpuinfo has vmx/svm and /dev/kvm opens, user-mode
/// Linux otherwise). Asking for KVM on a host that cannot run it is bad
/// input. The why names the kernel KVM nodes boot: [`KVM_KERNEL_ENV`]'s, or
/// the image builder's (built on first use).
pub fn choose_runtime(
    asked: Option<RuntimeKind>,
    host: &HostVirt,
) -> std::result::Result<(RuntimeKind, String), BadInput> {
    let kvm_problem = match (&host.dev_kvm, host.vmx_svm) {
        (Err(e), _) => Some(format!("{e} cannot be opened")),
        (Ok(()), false) => Some(
            "/dev/kvm offers no hardware virtualization (no vmx/svm in /proc/cpuinfo; a PVM or nested \
             host emulates guest kernel code about 1000x slower and cannot boot stock Linux)"
                .to_string(),
        ),
        (Ok(()), true) => None,
    };
    let kernel = match &host.kvm_kernel {
        Some(k) => format!("kernel {KVM_KERNEL_ENV}={}", k.display()),
        None => "the image builder's KVM kernel".to_string(),
    };
    match (asked, kvm_problem) {
        (Some(RuntimeKind::Uml), _) => Ok((RuntimeKind::Uml, "uml (asked for)".into())),
        (Some(RuntimeKind::Kvm), None) => {
            Ok((RuntimeKind::Kvm, format!("kvm (asked for; /dev/kvm with vmx/svm; {kernel})")))
        }
        (Some(RuntimeKind::Kvm), Some(why)) => {
            Err(BadInput(format!("--runtime kvm: this host cannot run the KVM runtime: {why}; use --runtime uml")))
        }
        (None, None) => Ok((RuntimeKind::Kvm, format!("kvm (auto: /dev/kvm opens and the CPU has vmx/svm; {kernel})"))),
        (None, Some(why)) => Ok((RuntimeKind::Uml, format!("uml (auto: {why})"))),
    }
}

/// The images as `runtime` boots them: KVM nodes boot the kernel named by
/// [`KVM_KERNEL_ENV`], or else the image builder's KVM kernel (built now if
/// the cache lacks it, with progress unless `quiet`), with the same root
/// filesystem, and the images hash names that kernel (`with_kvm_kernel`).
/// User-mode Linux runs never build the KVM kernel, and keep their hash.
pub fn images_for_runtime(images: Images, runtime: RuntimeKind, quiet: bool) -> Result<Images> {
    if runtime != RuntimeKind::Kvm {
        return Ok(images);
    }
    let (kernel, identity) = match std::env::var_os(KVM_KERNEL_ENV) {
        Some(k) => {
            let k = PathBuf::from(k);
            if !k.is_file() {
                return Err(BadInput(format!("{KVM_KERNEL_ENV}={}: no such file", k.display())).into());
            }
            let identity = kernel_file_identity(&k)?;
            (k, identity)
        }
        None => {
            let k = crate::image::kernel::ensure_kvm_kernel(quiet)?;
            if !quiet && !k.cached {
                eprintln!("kvm kernel: built {}", k.path.display());
            }
            (k.path, built_kernel_identity(&k.key))
        }
    };
    Ok(with_kvm_kernel(images, kernel, &identity))
}

/// What names a kernel file given by path ([`KVM_KERNEL_ENV`]) in the images
/// hash: its SHA-256, since no cache key vouches for its contents.
fn kernel_file_identity(path: &Path) -> Result<String> {
    let sha = sha256_file(path).with_context(|| format!("{KVM_KERNEL_ENV}={}: read", path.display()))?;
    Ok(format!("kvm-sha256:{sha}"))
}

/// What names the image builder's KVM kernel in the images hash: its cache
/// key, which names the exact recipe and inputs.
fn built_kernel_identity(key: &str) -> String {
    format!("kvm:{key}")
}

/// `images` with KVM nodes booting `kernel`, named in the images hash by
/// `identity` in place of the UML kernel's key: a failure file replayed with
/// another KVM kernel is reported on other images, as one replayed with
/// another UML kernel is. The prefixes (`kvm:` for the builder's cache key,
/// `kvm-sha256:` for a file's digest) keep a KVM kernel from ever naming the
/// same images as a UML one.
fn with_kvm_kernel(mut images: Images, kernel: PathBuf, identity: &str) -> Images {
    images.hash = images_hash(identity, &images.rootfs_key, images.disk.as_deref());
    images.kernel = kernel;
    images
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    fn host(vmx_svm: bool, opens: bool) -> HostVirt {
        HostVirt {
            vmx_svm,
            dev_kvm: if opens {
                Ok(())
            } else {
                Err(DevKvmError::from_open(std::io::Error::from_raw_os_error(libc::ENOENT)))
            },
            kvm_kernel: Some("bzImage".into()),
        }
    }

    #[test]
    fn auto_picks_kvm_only_with_hardware_virtualization() {
        let (k, why) = choose_runtime(None, &host(true, true)).unwrap();
        assert_eq!(k, RuntimeKind::Kvm);
        assert!(why.starts_with("kvm (auto") && why.contains(KVM_KERNEL_ENV), "{why}");
        let (k, why) = choose_runtime(None, &host(false, true)).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains("no vmx/svm"), "{why}");
        let (k, why) = choose_runtime(None, &host(true, false)).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains("/dev/kvm"), "{why}");
        // Without the override, KVM nodes boot the image builder's kernel.
        let no_override = HostVirt { kvm_kernel: None, ..host(true, true) };
        let (k, why) = choose_runtime(None, &no_override).unwrap();
        assert_eq!(k, RuntimeKind::Kvm);
        assert!(why.contains("image builder's KVM kernel"), "{why}");
    }

    fn uml_images(disk: Option<&str>) -> Images {
        let disk = disk.map(PathBuf::from);
        Images {
            kernel: "kernel/uml/linux".into(),
            initrd: "images/r/rootfs.cpio".into(),
            root: None,
            hash: images_hash("uml-key", "rootfs-key", disk.as_deref()),
            rootfs_key: "rootfs-key".into(),
            kernel_cached: true,
            rootfs_cached: true,
            disk,
            wall_seconds: 0.0,
        }
    }

    /// The UML images hash is what it always was (failure files of UML runs
    /// keep their hash): length-prefixed "images", kernel key, rootfs key,
    /// disk path, SHA-256 (the value computed outside this code, in Python).
    #[test]
    fn uml_images_hash_is_unchanged() {
        let want = "e0f8c6e20eab85d0dc2421ea11d9e78dc8fafa4f28f066dac78510a5c287f98a";
        assert_eq!(images_hash("uml-key", "rootfs-key", Some(Path::new("disk/ext4.img"))), want);
    }

    /// Where the cache is does not change the images hash (a replay under
    /// another HOME or SIMCLUSTER_CACHE names the same images); the disk's
    /// cache key does.
    #[test]
    fn the_cache_location_is_not_in_the_images_hash() {
        let at = |p: &str| images_hash("uml-key", "rootfs-key", Some(Path::new(p)));
        assert_eq!(at("/root/.cache/simcluster/disks/k1/ext4.img"), at("/tmp/ci/cache/disks/k1/ext4.img"));
        assert_ne!(at("/root/.cache/simcluster/disks/k1/ext4.img"), at("/root/.cache/simcluster/disks/k2/ext4.img"));
    }

    /// Two different KVM kernels give two images hashes, neither the UML one;
    /// the same kernel gives the same hash. By file (SIMCLUSTER_KVM_KERNEL:
    /// its contents, not its path) and by the builder's cache key.
    #[test]
    fn kvm_kernel_is_named_in_the_images_hash() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let (a, a_again, b) = (file("a", b"bzImage one"), file("a2", b"bzImage one"), file("b", b"bzImage two"));
        for disk in [None, Some("disk/ext4.img")] {
            let uml = uml_images(disk);
            let kvm = |k: &PathBuf| {
                let images = with_kvm_kernel(uml.clone(), k.clone(), &kernel_file_identity(k).unwrap());
                assert_eq!(&images.kernel, k);
                images.hash
            };
            assert_ne!(kvm(&a), kvm(&b), "two kernels, one images hash");
            assert_eq!(kvm(&a), kvm(&a_again), "the same kernel under another name");
            assert_ne!(kvm(&a), uml.hash);
            let built = |key: &str| with_kvm_kernel(uml.clone(), "bzImage".into(), &built_kernel_identity(key)).hash;
            assert_ne!(built("key1"), built("key2"));
            assert_ne!(built("uml-key"), uml.hash, "a KVM kernel never names the UML images");
        }
    }

    /// Each reason prints as the String it replaced did ("/dev/kvm: " and
    /// the OS's words), and so does the why that names it.
    #[test]
    fn dev_kvm_reasons_print_as_the_os_says() {
        for (errno, reason) in [(libc::ENOENT, "Missing"), (libc::EACCES, "Denied"), (libc::EBUSY, "Open")] {
            let io = std::io::Error::from_raw_os_error(errno);
            let before = format!("/dev/kvm: {io}");
            let e = DevKvmError::from_open(io);
            assert_eq!(e.to_string(), before);
            assert!(format!("{e:?}").starts_with(reason), "{e:?}");
        }
        let (_, why) = choose_runtime(None, &host(true, false)).unwrap();
        assert_eq!(why, "uml (auto: /dev/kvm: No such file or directory (os error 2) cannot be opened)");
    }

    #[test]
    fn kvm_without_hardware_virtualization_is_bad_input() {
        let e = choose_runtime(Some(RuntimeKind::Kvm), &host(false, true)).unwrap_err();
        assert!(e.0.contains("--runtime kvm") && e.0.contains("vmx/svm"), "{}", e.0);
        assert_eq!(choose_runtime(Some(RuntimeKind::Kvm), &host(true, true)).unwrap().0, RuntimeKind::Kvm);
        assert_eq!(choose_runtime(Some(RuntimeKind::Uml), &host(false, false)).unwrap().0, RuntimeKind::Uml);
    }
}
