//! Error types of the KVM runtime.
//!
//! Every failure carries the KVM operation that failed, so that a report from a host
//! where KVM is unusual (a PVM hypervisor, nested virtualization) says exactly which
//! step broke.

use std::path::PathBuf;

/// Errors of the KVM microVM runtime.
#[derive(Debug, thiserror::Error)]
pub enum KvmError {
    /// `/dev/kvm` could not be opened (absent, or no permission).
    #[error("cannot open /dev/kvm: {0}")]
    Open(#[source] kvm_ioctls::Error),
    /// A KVM ioctl failed; `op` names it (e.g. "KVM_SET_SREGS").
    #[error("{op} failed: {source}")]
    Ioctl {
        /// The ioctl or step that failed.
        op: &'static str,
        /// The errno from the kernel.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// Guest memory could not be created, mapped or accessed.
    #[error("guest memory: {0}")]
    Memory(String),
    /// The requested configuration is invalid (memory size, image too big, ...).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// KVM reported `KVM_EXIT_INTERNAL_ERROR` (on PVM: an instruction it cannot emulate).
    #[error("KVM internal error (suberror {suberror}) at rip {rip:#x}")]
    InternalError {
        /// `kvm_run.internal.suberror` (1 = emulation failure).
        suberror: u32,
        /// Guest rip at the time of the exit.
        rip: u64,
    },
    /// KVM could not enter the guest (`KVM_EXIT_FAIL_ENTRY`): invalid guest state.
    #[error("KVM failed to enter the guest: hardware reason {reason:#x}")]
    FailEntry {
        /// `hardware_entry_failure_reason`.
        reason: u64,
    },
    /// The vCPU exited for a reason the runtime does not handle.
    #[error("unhandled VM exit: {0}")]
    UnhandledExit(String),
    /// Reading or writing a snapshot or guest image failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done ("write snapshot memory", ...).
        what: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A snapshot file is malformed or from an incompatible version.
    #[error("bad snapshot {path}: {reason}")]
    BadSnapshot {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Assembling a test guest failed (missing `as`/`ld`, or a syntax error).
    #[error("assembling guest {name}: {reason}")]
    Assemble {
        /// Guest name.
        name: String,
        /// Tool output.
        reason: String,
    },
    /// Loading a Linux kernel failed.
    #[error("loading kernel: {0}")]
    Kernel(String),
}

/// Result alias for the KVM runtime.
pub type Result<T> = std::result::Result<T, KvmError>;

/// Shorthand: map a kvm-ioctls error to [`KvmError::Ioctl`] naming the operation.
pub(crate) fn ioctl(op: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> KvmError {
    move |source| KvmError::Ioctl { op, source }
}
