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
            s.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
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

/// Environment variable naming the kernel (bzImage or vmlinux) KVM nodes boot;
/// the image builder builds only the user-mode Linux kernel.
pub const KVM_KERNEL_ENV: &str = "SIMCLUSTER_KVM_KERNEL";

/// Picks the node runtime and says why: `asked` is `None` for `--runtime
/// auto` (KVM when /proc/cpuinfo has vmx/svm, /dev/kvm opens and a KVM
/// kernel is named by [`KVM_KERNEL_ENV`]; user-mode Linux otherwise). Asking
/// for KVM on a host that cannot run it is bad input (a missing kernel is
/// reported by [`images_for_runtime`]).
pub fn choose_runtime(asked: Option<RuntimeKind>, host: &HostVirt) -> std::result::Result<(RuntimeKind, String), BadInput> {
    let kvm_problem = match (&host.dev_kvm, host.vmx_svm) {
        (Err(e), _) => Some(format!("{e} cannot be opened")),
        (Ok(()), false) => Some(
            "/dev/kvm offers no hardware virtualization (no vmx/svm in /proc/cpuinfo; a PVM or nested \
             host emulates guest kernel code about 1000x slower and cannot boot stock Linux)"
                .to_string(),
        ),
        (Ok(()), true) => None,
    };
    match (asked, kvm_problem) {
        (Some(RuntimeKind::Uml), _) => Ok((RuntimeKind::Uml, "uml (asked for)".into())),
        (Some(RuntimeKind::Kvm), None) => Ok((RuntimeKind::Kvm, "kvm (asked for; /dev/kvm with vmx/svm)".into())),
        (Some(RuntimeKind::Kvm), Some(why)) => {
            Err(BadInput(format!("--runtime kvm: this host cannot run the KVM runtime: {why}; use --runtime uml")))
        }
        (None, None) if host.kvm_kernel.is_none() => Ok((
            RuntimeKind::Uml,
            format!(
                "uml (auto: the host has vmx/svm, but {KVM_KERNEL_ENV} names no kernel for KVM nodes; the image \
                 builder builds only the user-mode Linux kernel)"
            ),
        )),
        (None, None) => Ok((RuntimeKind::Kvm, "kvm (auto: /dev/kvm opens and the CPU has vmx/svm)".into())),
        (None, Some(why)) => Ok((RuntimeKind::Uml, format!("uml (auto: {why})"))),
    }
}

/// The images as `runtime` boots them: KVM nodes boot the kernel named by
/// [`KVM_KERNEL_ENV`] with the same root filesystem.
pub fn images_for_runtime(mut images: Images, runtime: RuntimeKind) -> Result<Images> {
    if runtime == RuntimeKind::Kvm {
        let Some(k) = std::env::var_os(KVM_KERNEL_ENV) else {
            return Err(BadInput(format!(
                "--runtime kvm: set {KVM_KERNEL_ENV} to an x86-64 bzImage or vmlinux (the image builder builds \
                 only the user-mode Linux kernel)"
            ))
            .into());
        };
        let k = PathBuf::from(k);
        if !k.is_file() {
            return Err(BadInput(format!("{KVM_KERNEL_ENV}={}: no such file", k.display())).into());
        }
        images.kernel = k;
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
        assert!(why.starts_with("kvm (auto"), "{why}");
        let (k, why) = choose_runtime(None, &host(false, true)).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains("no vmx/svm"), "{why}");
        let (k, why) = choose_runtime(None, &host(true, false)).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains("/dev/kvm"), "{why}");
        let no_kernel = HostVirt { kvm_kernel: None, ..host(true, true) };
        let (k, why) = choose_runtime(None, &no_kernel).unwrap();
        assert_eq!(k, RuntimeKind::Uml);
        assert!(why.contains(KVM_KERNEL_ENV), "{why}");
    }

    #[test]
    fn kvm_without_hardware_virtualization_is_bad_input() {
        let e = choose_runtime(Some(RuntimeKind::Kvm), &host(false, true)).unwrap_err();
        assert!(e.0.contains("--runtime kvm") && e.0.contains("vmx/svm"), "{}", e.0);
        assert_eq!(choose_runtime(Some(RuntimeKind::Kvm), &host(true, true)).unwrap().0, RuntimeKind::Kvm);
        assert_eq!(choose_runtime(Some(RuntimeKind::Uml), &host(false, false)).unwrap().0, RuntimeKind::Uml);
    }
}
