//! Node runtimes for simcluster.
//!
//! A node runtime turns a guest (kernel + root filesystem) into something the
//! engine can schedule: it starts the guest, hands the engine every
//! guest-visible event, and never lets host time or host scheduling reach
//! the guest.
//!
//! - [`node`] (the `nodeapi` crate, re-exported): what both runtimes
//!   share: the [`node::NodeRuntime`] trait the engine drives, a node's configuration, what a node produces
//!   (output, frames, disk requests) and how its host side fails.
//! - [`runtime`]: choosing a runtime ([`runtime::RuntimeKind`]) and
//!   starting a node in it ([`runtime::spawn`]).
//! - [`uml`]: stock Linux built for `ARCH=um`, with simcluster as its
//!   time-travel controller. Works on any x86-64 Linux host.
//! - [`kvm`]: a KVM microVM (one vCPU, userspace devices, virtual time,
//!   snapshots) for hosts with hardware virtualization.
//! - [`virtio`]: the virtio device models both runtimes share (net, blk,
//!   console, rng), transport-independent.
//! - [`vhost_user`]: the vhost-user back end that carries them to a
//!   user-mode Linux guest.
//!
//! Dependencies point one way: `runtime → {uml, kvm} → node`, `host → node`,
//! and `{uml → vhost_user, kvm::virtio_mmio} → virtio` (one device trait,
//! [`virtio::VirtioDevice`], and one kick hook, [`virtio::KickHook`], for
//! both transports). `scripts/module-cycles.py vmm/src` checks that the
//! module graph has no circle.

#![deny(missing_docs)]

pub mod fork;
pub mod kvm;
pub use nodeapi as node;
pub mod runtime;
pub mod uml;
pub mod vhost_user;
pub mod virtio;
