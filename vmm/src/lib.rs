//! Node runtimes for simcluster.
//!
//! A node runtime turns a guest (kernel + root filesystem) into something the
//! engine can schedule: it starts the guest, hands the engine every
//! guest-visible event, and never lets host time or host scheduling reach
//! the guest.
//!
//! - [`kvm`]: a KVM microVM (one vCPU, userspace devices, virtual time,
//!   snapshots) for hosts with hardware virtualization.
//! - [`uml`]: stock Linux built for `ARCH=um`, with simcluster as its
//!   time-travel controller. Works on any x86-64 Linux host.

pub mod kvm;
pub mod runtime;
pub mod uml;
pub mod vhost_user;
pub mod virtio;
