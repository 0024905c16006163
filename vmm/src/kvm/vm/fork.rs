//! Forking a running node with its process: fork(2) gives the child every byte of the
//! VMM's state (devices, virtio queues, virtual clock, pending interrupts, trace hash)
//! and, copy-on-write, the guest's RAM, but not the KVM objects. KVM refuses a VM's
//! and its vCPU's ioctls from any process other than the one that created the VM
//! (EIO), and their state lives in the kernel. So:
//!
//! 1. the parent calls [`MicroVm::prepare_fork`]: it finishes the last exit's
//!    instruction and captures the vCPU (registers, MSRs, events, XCRs) in memory;
//! 2. the process forks;
//! 3. the child calls [`MicroVm::rehome`] with that capture: a new VM on the same RAM
//!    mapping (now the child's private copy), a new vCPU, the vCPU state set back.
//!
//! The parent may go on running its VM; it and every child then continue from the
//! same point, independently. What this is for: starting many executions from one
//! boot (warm start) without writing the node's state anywhere.
//!
//! Invariant: guest RAM must be a MAP_PRIVATE mapping without MADV_DONTFORK (what
//! [`super::anonymous_memory`] and [`super::private_file_memory`] create), so that the
//! child gets its own copy-on-write view. Only the forking thread exists in the child:
//! a node's watchdog thread must be started again there.

use std::path::Path;

use super::{kvm_objects, MicroVm};
use crate::kvm::error::Result;

/// The vCPU of a [`MicroVm`], captured before fork(2) for [`MicroVm::rehome`].
pub struct ForkPoint {
    vcpu: [Vec<u8>; 7],
}

impl MicroVm {
    /// Captures what a forked child needs to go on running this VM. The guest does not
    /// notice: the last exit's instruction is completed as KVM_RUN would complete it.
    pub fn prepare_fork(&mut self) -> Result<ForkPoint> {
        self.complete_pending_io()?;
        Ok(ForkPoint { vcpu: self.capture_vcpu()?.sections })
    }

    /// In a child of fork(2): replaces the inherited KVM objects, unusable here, by a
    /// new VM on the same guest RAM with the vCPU of `point`. Everything else is the
    /// parent's state at the fork, which the child already has. The exit log
    /// ([`MicroVm::log_exits_to`]) is closed: its file is the parent's.
    pub fn rehome(&mut self, point: &ForkPoint) -> Result<()> {
        let (_kvm, vm, vcpu) = kvm_objects(&self.config, &self.mem)?;
        // The vCPU before its VM: the inherited descriptors close in that order too.
        self.vcpu = vcpu;
        self.vm = vm;
        self.exit_log = None;
        let mut sections: Vec<&[u8]> = vec![&[]];
        sections.extend(point.vcpu.iter().map(Vec::as_slice));
        self.restore_vcpu(&sections, Path::new("(fork point)"))
    }
}
