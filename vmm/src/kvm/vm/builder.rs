//! Building a [`MicroVm`]: its configuration, the boot order, guest RAM.

use std::fs::File;
use std::path::Path;

use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use super::MicroVm;
use crate::kvm::arch::{self, layout};
use crate::kvm::error::{ioctl, KvmError, Result};

/// Configuration of a microVM.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// Guest RAM in bytes (multiple of 4 KiB, at least 2 MiB, below the MMIO hole).
    pub mem_size: u64,
    /// Virtual nanoseconds charged per VM exit.
    pub exit_cost_ns: u64,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig { mem_size: 16 << 20, exit_cost_ns: 1_000 }
    }
}

/// Builds a [`MicroVm`]; the order of [`MicroVmBuilder::build`] is the boot order.
#[derive(Debug, Default)]
pub struct MicroVmBuilder {
    config: VmConfig,
    image: Vec<u8>,
}

impl MicroVmBuilder {
    /// Defaults: 16 MiB RAM, 1 µs per exit, empty image.
    pub fn new() -> Self {
        Self::default()
    }
    /// Guest RAM size in MiB.
    pub fn memory_mib(mut self, mib: u64) -> Self {
        self.config.mem_size = mib << 20;
        self
    }
    /// Virtual nanoseconds per exit.
    pub fn exit_cost_ns(mut self, ns: u64) -> Self {
        self.config.exit_cost_ns = ns;
        self
    }
    /// A flat binary loaded at [`layout::LOAD_ADDR`] and entered there in long mode.
    pub fn image(mut self, bytes: &[u8]) -> Self {
        self.image = bytes.to_vec();
        self
    }

    /// Creates the VM and leaves the vCPU at the image's entry in 64-bit mode.
    pub fn build(self) -> Result<MicroVm> {
        let cfg = &self.config;
        let max_image = cfg.mem_size.saturating_sub(layout::LOAD_ADDR);
        if self.image.len() as u64 > max_image {
            return Err(KvmError::Config(format!(
                "image of {} bytes does not fit in {} bytes of RAM above {:#x}",
                self.image.len(),
                cfg.mem_size,
                layout::LOAD_ADDR
            )));
        }
        // 1-3. /dev/kvm, VM, RAM.
        let mem = anonymous_memory(cfg.mem_size)?;
        let vm = MicroVm::create(cfg.clone(), mem)?;
        // 4. Boot tables and image.
        arch::write_boot_tables(&vm.mem)?;
        vm.mem
            .write_slice(&self.image, GuestAddress(layout::LOAD_ADDR))
            .map_err(|e| KvmError::Memory(format!("load image: {e}")))?;
        // 5-9. vCPU: CPUID (before SREGS), SREGS, REGS, FPU.
        vm.vcpu.set_cpuid2(&vm.cpuid).map_err(ioctl("KVM_SET_CPUID2"))?;
        let sregs = vm.vcpu.get_sregs().map_err(ioctl("KVM_GET_SREGS"))?;
        vm.vcpu.set_sregs(&arch::long_mode_sregs(&sregs)).map_err(ioctl("KVM_SET_SREGS"))?;
        vm.vcpu.set_regs(&arch::boot_regs(layout::LOAD_ADDR, cfg.mem_size)).map_err(ioctl("KVM_SET_REGS"))?;
        vm.vcpu.set_fpu(&arch::boot_fpu()).map_err(ioctl("KVM_SET_FPU"))?;
        Ok(vm)
    }
}

/// Creates anonymous, zeroed guest RAM at guest physical 0.
pub(crate) fn anonymous_memory(size: u64) -> Result<GuestMemoryMmap> {
    check_mem_size(size)?;
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size as usize)])
        .map_err(|e| KvmError::Memory(format!("allocate {size} bytes: {e}")))
}

/// Maps `file` (a saved memory image) as guest RAM, MAP_PRIVATE: the guest's writes are
/// copy-on-write and never reach the file, so one image serves any number of restores.
pub(crate) fn private_file_memory(file: File, size: u64) -> Result<GuestMemoryMmap> {
    check_mem_size(size)?;
    let region = MmapRegion::build(
        Some(FileOffset::new(file, 0)),
        size as usize,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_NORESERVE,
    )
    .map_err(|e| KvmError::Memory(format!("map image MAP_PRIVATE: {e}")))?;
    let region = GuestRegionMmap::new(region, GuestAddress(0))
        .ok_or_else(|| KvmError::Memory("region does not fit the address space".into()))?;
    GuestMemoryMmap::from_regions(vec![region]).map_err(|e| KvmError::Memory(format!("region collection: {e}")))
}

fn check_mem_size(size: u64) -> Result<()> {
    if size < (2 << 20) || !size.is_multiple_of(4096) || size > layout::MMIO_START {
        return Err(KvmError::Config(format!(
            "memory size {size:#x} must be a multiple of 4 KiB in [2 MiB, {:#x}]",
            layout::MMIO_START
        )));
    }
    Ok(())
}

/// Reads a whole file (guest images).
pub fn read_image(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| KvmError::Io { what: "read image", path: path.into(), source })
}
