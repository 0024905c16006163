//! Direct boot of a Linux kernel (bzImage or ELF vmlinux) into a [`MicroVm`], with the
//! 64-bit boot protocol: the vCPU starts in long mode at the kernel's 64-bit entry with
//! `rsi` pointing at the zero page (boot_params: setup header, command line, e820).
//!
//! Needs hardware virtualization in practice: under PVM a stock kernel's ring-0 code is
//! emulated and stops with an emulation failure (see DESIGN.md, "Measured facts").
//! The devices are the microVM's: serial (ttyS0), the legacy 8259A/8254 pair for the
//! tick ([`super::legacy`]), pvclock and power ports; [`super::node::KvmNode`] adds the
//! virtio-mmio devices and the initramfs. No local APIC/IO-APIC model: boot with
//! `noapic nolapic` ([`DEFAULT_CMDLINE`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use linux_loader::cmdline::Cmdline;
use linux_loader::loader::bootparam::{boot_e820_entry, boot_params};
use linux_loader::loader::{load_cmdline, BzImage, Elf, KernelLoader};
use vm_memory::{Bytes, GuestAddress};

use super::arch::{self, layout};
use super::error::{ioctl, KvmError, Result};
use super::vm::{anonymous_memory, MicroVm, VmConfig};

/// Guest physical address of the zero page (boot_params).
pub const ZERO_PAGE_ADDR: u64 = 0x7000;
/// Guest physical address of the kernel command line.
pub const CMDLINE_ADDR: u64 = 0x2_0000;
/// Maximum command line length (including NUL).
pub const CMDLINE_MAX: usize = 4096;
/// Start of high memory, where bzImage and vmlinux are loaded.
pub const HIMEM_START: u64 = 0x10_0000;
/// Default command line: serial console, no APIC/PIC probing surprises.
pub const DEFAULT_CMDLINE: &str =
    "console=ttyS0 earlyprintk=serial,ttyS0 reboot=k panic=-1 nosmp noapic nolapic tsc=reliable";

/// Builder for a Linux microVM.
#[derive(Debug, Clone)]
pub struct LinuxBootBuilder {
    kernel: PathBuf,
    cmdline: String,
    config: VmConfig,
    initrd: Option<PathBuf>,
}

impl LinuxBootBuilder {
    /// A kernel image path; 256 MiB RAM, [`DEFAULT_CMDLINE`].
    pub fn new(kernel: &Path) -> Self {
        LinuxBootBuilder {
            kernel: kernel.to_path_buf(),
            cmdline: DEFAULT_CMDLINE.to_string(),
            config: VmConfig { mem_size: 256 << 20, ..VmConfig::default() },
            initrd: None,
        }
    }
    /// An initramfs (newc cpio, optionally compressed), loaded page-aligned at the top
    /// of RAM and announced in the zero page (ramdisk_image/ramdisk_size).
    pub fn initrd(mut self, path: &Path) -> Self {
        self.initrd = Some(path.to_path_buf());
        self
    }
    /// Replaces the command line.
    pub fn cmdline(mut self, c: &str) -> Self {
        self.cmdline = c.to_string();
        self
    }
    /// RAM in MiB.
    pub fn memory_mib(mut self, mib: u64) -> Self {
        self.config.mem_size = mib << 20;
        self
    }

    /// Boot order: VM and RAM, boot tables, kernel (bzImage, else ELF), command line,
    /// zero page with e820, vCPU (CPUID, SREGS, REGS, FPU).
    pub fn build(self) -> Result<MicroVm> {
        let mem = anonymous_memory(self.config.mem_size)?;
        let vm = MicroVm::create(self.config.clone(), mem)?;
        arch::write_boot_tables(&vm.mem)?;
        let kerr = |e: std::io::Error| KvmError::Io { what: "open kernel", path: self.kernel.clone(), source: e };
        let mut f = File::open(&self.kernel).map_err(kerr)?;
        let himem = Some(GuestAddress(HIMEM_START));
        let (loaded, entry) = match BzImage::load(&vm.mem, None, &mut f, himem) {
            Ok(r) => {
                let entry = r.kernel_load.0 + 0x200; // startup_64 in a bzImage
                (r, entry)
            }
            Err(bz) => {
                let mut f = File::open(&self.kernel).map_err(kerr)?;
                let r = Elf::load(&vm.mem, None, &mut f, himem)
                    .map_err(|elf| KvmError::Kernel(format!("not a bzImage ({bz}) nor an ELF vmlinux ({elf})")))?;
                let entry = r.kernel_load.0;
                (r, entry)
            }
        };
        let mut cl = Cmdline::new(CMDLINE_MAX).map_err(|e| KvmError::Kernel(format!("cmdline: {e}")))?;
        cl.insert_str(&self.cmdline).map_err(|e| KvmError::Kernel(format!("cmdline: {e}")))?;
        load_cmdline(&vm.mem, GuestAddress(CMDLINE_ADDR), &cl)
            .map_err(|e| KvmError::Kernel(format!("write cmdline: {e}")))?;

        let mut params = boot_params::default();
        if let Some(hdr) = loaded.setup_header {
            params.hdr = hdr;
        }
        params.hdr.type_of_loader = 0xff;
        params.hdr.boot_flag = 0xaa55;
        params.hdr.header = 0x5372_6448; // "HdrS"
        params.hdr.cmd_line_ptr = CMDLINE_ADDR as u32;
        params.hdr.cmdline_size = self.cmdline.len() as u32 + 1;
        params.hdr.kernel_alignment = 0x0100_0000;
        let e820 = [(0u64, 0x9_fc00u64), (HIMEM_START, self.config.mem_size - HIMEM_START)];
        for (i, (addr, size)) in e820.iter().enumerate() {
            params.e820_table[i] = boot_e820_entry { addr: *addr, size: *size, r#type: 1 };
        }
        params.e820_entries = e820.len() as u8;
        if let Some(path) = &self.initrd {
            let bytes = super::vm::read_image(path)?;
            let (addr, size) = initrd_placement(self.config.mem_size, bytes.len() as u64, loaded.kernel_end)
                .ok_or_else(|| KvmError::Kernel(format!("initrd {} does not fit in RAM", path.display())))?;
            vm.mem
                .write_slice(&bytes, GuestAddress(addr))
                .map_err(|e| KvmError::Memory(format!("write initrd: {e}")))?;
            params.hdr.ramdisk_image = addr as u32;
            params.hdr.ramdisk_size = size as u32;
        }
        // SAFETY: boot_params is a plain-old-data bindgen struct.
        let bytes = unsafe {
            std::slice::from_raw_parts(&params as *const boot_params as *const u8, std::mem::size_of::<boot_params>())
        };
        vm.mem
            .write_slice(bytes, GuestAddress(ZERO_PAGE_ADDR))
            .map_err(|e| KvmError::Memory(format!("write zero page: {e}")))?;

        vm.vcpu.set_cpuid2(&vm.cpuid).map_err(ioctl("KVM_SET_CPUID2"))?;
        let sregs = vm.vcpu.get_sregs().map_err(ioctl("KVM_GET_SREGS"))?;
        vm.vcpu.set_sregs(&arch::long_mode_sregs(&sregs)).map_err(ioctl("KVM_SET_SREGS"))?;
        let mut regs = arch::boot_regs(entry, self.config.mem_size);
        regs.rsi = ZERO_PAGE_ADDR;
        regs.rsp = layout::BOOT_STACK;
        vm.vcpu.set_regs(&regs).map_err(ioctl("KVM_SET_REGS"))?;
        vm.vcpu.set_fpu(&arch::boot_fpu()).map_err(ioctl("KVM_SET_FPU"))?;
        Ok(vm)
    }
}

/// Where an initrd of `len` bytes goes: page-aligned, as high as RAM (and the 32-bit
/// ramdisk_image field) allows, above the kernel's end. `None` when it does not fit.
pub fn initrd_placement(mem_size: u64, len: u64, kernel_end: u64) -> Option<(u64, u64)> {
    let top = mem_size.min(1 << 32);
    let addr = top.checked_sub(len)? & !0xfff;
    (addr >= kernel_end && len > 0).then_some((addr, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initrd_goes_page_aligned_at_the_top_of_ram() {
        assert_eq!(initrd_placement(256 << 20, 5000, 0x100_0000), Some(((256 << 20) - 8192, 5000)));
        assert_eq!(initrd_placement(16 << 20, 15 << 20, 8 << 20), None);
        assert_eq!(initrd_placement(16 << 20, 0, 0), None);
    }
}
