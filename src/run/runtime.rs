//! Which node runtime a run uses, and the images as that runtime boots them.

use std::path::PathBuf;

use anyhow::Result;
use engine::RuntimeKind;

use crate::image::Images;
use crate::BadInput;

/// What the host offers a KVM runtime.
#[derive(Debug, Clone)]
pub struct HostVirt {
    /// /proc/cpuinfo lists vmx or svm.
    pub vmx_svm: bool,
    /// /dev/kvm opened (or why not).
    pub dev_kvm: std::result::Result<(), String>,
    /// The kernel KVM nodes would boot ([`KVM_KERNEL_ENV`]).
    pub kvm_kernel: Option<PathBuf>,
}

impl HostVirt {
    /// Looks at this host.
    pub fn detect() -> HostVirt {
        let vmx_svm = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
            s.lines().filter(|l| l.starts_with("flags")).any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
        });
        let dev_kvm = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .map(|_| ())
            .map_err(|e| format!("/dev/kvm: {e}"));
        HostVirt { vmx_svm, dev_kvm, kvm_kernel: std::env::var_os(KVM_KERNEL_ENV).map(PathBuf::from) }
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
/// filesystem. User-mode Linux runs never build the KVM kernel.
pub fn images_for_runtime(mut images: Images, runtime: RuntimeKind, quiet: bool) -> Result<Images> {
    if runtime == RuntimeKind::Kvm {
        images.kernel = match std::env::var_os(KVM_KERNEL_ENV) {
            Some(k) => {
                let k = PathBuf::from(k);
                if !k.is_file() {
                    return Err(BadInput(format!("{KVM_KERNEL_ENV}={}: no such file", k.display())).into());
                }
                k
            }
            None => {
                let k = crate::image::kernel::ensure_kvm_kernel(quiet)?;
                if !quiet && !k.cached {
                    eprintln!("kvm kernel: built {}", k.path.display());
                }
                k.path
            }
        };
    }
    Ok(images)
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    fn host(vmx_svm: bool, opens: bool) -> HostVirt {
        HostVirt {
            vmx_svm,
            dev_kvm: if opens { Ok(()) } else { Err("/dev/kvm: No such file or directory".into()) },
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

    #[test]
    fn kvm_without_hardware_virtualization_is_bad_input() {
        let e = choose_runtime(Some(RuntimeKind::Kvm), &host(false, true)).unwrap_err();
        assert!(e.0.contains("--runtime kvm") && e.0.contains("vmx/svm"), "{}", e.0);
        assert_eq!(choose_runtime(Some(RuntimeKind::Kvm), &host(true, true)).unwrap().0, RuntimeKind::Kvm);
        assert_eq!(choose_runtime(Some(RuntimeKind::Uml), &host(false, false)).unwrap().0, RuntimeKind::Uml);
    }
}
