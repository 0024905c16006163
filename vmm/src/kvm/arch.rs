//! x86-64 machine setup: guest physical layout, GDT, identity page tables, control
//! registers and segments so that the vCPU starts directly in 64-bit long mode, and
//! the shaped CPUID.
//!
//! Invariants:
//! - Guest RAM is one region at guest physical 0; everything below [`layout::LOAD_ADDR`]
//!   (1 MiB) belongs to the VMM (GDT, page tables, boot stack); a guest image is loaded
//!   at 1 MiB and entered there.
//! - The identity map covers the first 4 GiB with 2 MiB pages, so MMIO regions above RAM
//!   (virtio-mmio) are addressable; accesses there exit to the VMM.
//! - CPUID is set before SREGS: KVM validates EFER.LME against the guest's CPUID (LM bit).

use kvm_bindings::{kvm_cpuid_entry2, kvm_fpu, kvm_regs, kvm_segment, kvm_sregs, CpuId};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::error::{KvmError, Result};

/// Guest physical memory layout used by the microVM.
pub mod layout {
    /// GDT: null, 64-bit code (0x08), data (0x10), TSS (0x18, 16 bytes).
    pub const GDT_ADDR: u64 = 0x500;
    /// Boot IDT (zeroed, limit 0xfff): guests that take interrupts fill their entries.
    pub const IDT_ADDR: u64 = 0x1000;
    /// A zeroed 104-byte TSS, required for a valid TR on entry.
    pub const TSS_ADDR: u64 = 0x2000;
    /// Page map level 4.
    pub const PML4_ADDR: u64 = 0x9000;
    /// Page directory pointer table (4 entries used).
    pub const PDPT_ADDR: u64 = 0xa000;
    /// Four page directories of 512 x 2 MiB pages: 0xb000..0xf000.
    pub const PD_ADDR: u64 = 0xb000;
    /// Initial stack pointer (grows down, below the page tables' zone is free).
    pub const BOOT_STACK: u64 = 0x8_0000;
    /// Where a raw guest image is loaded and entered.
    pub const LOAD_ADDR: u64 = 0x10_0000;
    /// Start of the MMIO hole: RAM must end below it.
    pub const MMIO_START: u64 = 0xc000_0000;
    /// Where virtio-mmio device windows begin (4 KiB each).
    pub const VIRTIO_MMIO_BASE: u64 = 0xd000_0000;
    /// Selector of the 64-bit code segment.
    pub const CODE_SEL: u16 = 0x08;
    /// Selector of the data segment.
    pub const DATA_SEL: u16 = 0x10;
    /// Selector of the TSS.
    pub const TSS_SEL: u16 = 0x18;
}

const CR0_PE: u64 = 1;
const CR0_MP: u64 = 1 << 1;
const CR0_ET: u64 = 1 << 4;
const CR0_NE: u64 = 1 << 5;
const CR0_WP: u64 = 1 << 16;
const CR0_AM: u64 = 1 << 18;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const CR4_OSFXSR: u64 = 1 << 9;
const CR4_OSXMMEXCPT: u64 = 1 << 10;
const EFER_SCE: u64 = 1;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;

/// Builds a GDT descriptor from (flags, base, limit), the usual packing.
fn gdt_entry(flags: u16, base: u32, limit: u32) -> u64 {
    ((u64::from(base) & 0xff00_0000) << 32)
        | ((u64::from(flags) & 0xf0ff) << 40)
        | ((u64::from(limit) & 0x000f_0000) << 32)
        | ((u64::from(base) & 0x00ff_ffff) << 16)
        | (u64::from(limit) & 0x0000_ffff)
}

/// The segment register image matching a GDT entry (what KVM wants in SREGS).
fn segment(sel: u16, flags: u16, base: u32, limit: u32) -> kvm_segment {
    let g = (flags >> 15) & 1;
    kvm_segment {
        base: u64::from(base),
        // With G=1 the limit is in 4 KiB pages; KVM wants the byte limit.
        limit: if g == 1 { (limit << 12) | 0xfff } else { limit },
        selector: sel,
        type_: (flags & 0xf) as u8,
        present: ((flags >> 7) & 1) as u8,
        dpl: ((flags >> 5) & 3) as u8,
        db: ((flags >> 14) & 1) as u8,
        s: ((flags >> 4) & 1) as u8,
        l: ((flags >> 13) & 1) as u8,
        g: g as u8,
        avl: ((flags >> 12) & 1) as u8,
        unusable: 0,
        padding: 0,
    }
}

const CODE64_FLAGS: u16 = 0xa09b; // G, L, present, DPL0, code exec/read, accessed
const DATA_FLAGS: u16 = 0xc093; // G, D/B, present, DPL0, data read/write, accessed
const TSS_FLAGS: u16 = 0x008b; // present, 64-bit TSS (busy)

/// Writes the GDT, TSS, an empty IDT and identity page tables (first 4 GiB, 2 MiB pages)
/// into guest memory.
pub fn write_boot_tables(mem: &GuestMemoryMmap) -> Result<()> {
    let w = |addr: u64, v: u64| {
        mem.write_obj(v, GuestAddress(addr))
            .map_err(|e| KvmError::Memory(format!("write boot tables at {addr:#x}: {e}")))
    };
    let tss = layout::TSS_ADDR as u32;
    let gdt = [
        0u64,
        gdt_entry(CODE64_FLAGS, 0, 0xfffff),
        gdt_entry(DATA_FLAGS, 0, 0xfffff),
        gdt_entry(TSS_FLAGS, tss, 0x67),
        0, // upper half of the 16-byte TSS descriptor (base bits 63..32 = 0)
    ];
    for (i, e) in gdt.iter().enumerate() {
        w(layout::GDT_ADDR + 8 * i as u64, *e)?;
    }
    // PML4[0] -> PDPT; PDPT[0..4] -> PD0..PD3; PDn[i] -> 2 MiB page.
    w(layout::PML4_ADDR, layout::PDPT_ADDR | 0x3)?;
    for n in 0..4u64 {
        let pd = layout::PD_ADDR + n * 0x1000;
        w(layout::PDPT_ADDR + 8 * n, pd | 0x3)?;
        for i in 0..512u64 {
            let phys = (n << 30) | (i << 21);
            w(pd + 8 * i, phys | 0x83)?; // present, writable, page size
        }
    }
    Ok(())
}

/// Special registers for 64-bit long mode with the tables of [`write_boot_tables`].
/// `base` is the vCPU's current SREGS (keeps apic_base and the interrupt bitmap).
pub fn long_mode_sregs(base: &kvm_sregs) -> kvm_sregs {
    let mut s = *base;
    let code = segment(layout::CODE_SEL, CODE64_FLAGS, 0, 0xfffff);
    let data = segment(layout::DATA_SEL, DATA_FLAGS, 0, 0xfffff);
    s.cs = code;
    s.ds = data;
    s.es = data;
    s.fs = data;
    s.gs = data;
    s.ss = data;
    s.tr = segment(layout::TSS_SEL, TSS_FLAGS, layout::TSS_ADDR as u32, 0x67);
    s.gdt.base = layout::GDT_ADDR;
    s.gdt.limit = (5 * 8 - 1) as u16;
    s.idt.base = layout::IDT_ADDR;
    s.idt.limit = 0xfff;
    s.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_AM | CR0_PG;
    s.cr3 = layout::PML4_ADDR;
    s.cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT;
    s.efer = EFER_LME | EFER_LMA | EFER_SCE;
    s
}

/// General registers at entry: rip = `entry`, rsp = boot stack, rsi = RAM size,
/// interrupts disabled (RFLAGS = 0x2, the reserved bit).
pub fn boot_regs(entry: u64, mem_size: u64) -> kvm_regs {
    kvm_regs {
        rip: entry,
        rsp: layout::BOOT_STACK,
        rbp: layout::BOOT_STACK,
        rsi: mem_size,
        rflags: 0x2,
        ..Default::default()
    }
}

/// FPU at reset as Linux expects it (x87 control word 0x37f, MXCSR 0x1f80).
pub fn boot_fpu() -> kvm_fpu {
    kvm_fpu { fcw: 0x37f, mxcsr: 0x1f80, ..Default::default() }
}

/// What [`shape_cpuid`] removed, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuidShaping {
    /// Hypervisor leaves (0x4000_0000..) dropped: kvmclock and friends.
    pub dropped_hypervisor_leaves: usize,
}

/// Shapes the host-supported CPUID for determinism:
/// - leaf 1: no TSC (EDX 4: Linux then never reads it, for a clocksource, sched_clock
///   or delay calibration), no RDRAND (ECX 30), no TSC-deadline timer (ECX 24), no
///   hypervisor bit (ECX 31), no x2APIC (ECX 21), no VMX (ECX 5), no PDCM (ECX 15), no
///   MONITOR (ECX 3); APIC id 0;
/// - leaf 7.0: no RDSEED (EBX 18), no HLE/RTM (EBX 4/11: transactional aborts depend on
///   host events), no SGX (EBX 2), no WAITPKG (ECX 5: umwait/tpause read the TSC);
/// - leaf 0xA: no architectural PMU (guest perf counters count host noise);
/// - leaf 0x8000_0001: no SVM (ECX 2), no RDTSCP (EDX 27);
/// - leaf 0x8000_0007: no invariant TSC (EDX 8);
/// - leaves 0x4000_0000..=0x4fff_ffff removed: no KVM signature, no kvmclock, no
///   paravirt features (steal time, async page faults, PV EOI).
pub fn shape_cpuid(supported: &CpuId) -> Result<(CpuId, CpuidShaping)> {
    let (out, report) = shape_cpuid_entries(supported.as_slice());
    let cpuid = CpuId::from_entries(&out).map_err(|e| KvmError::Config(format!("building CPUID: {e:?}")))?;
    Ok((cpuid, report))
}

/// [`shape_cpuid`] on a slice of entries.
pub fn shape_cpuid_entries(supported: &[kvm_cpuid_entry2]) -> (Vec<kvm_cpuid_entry2>, CpuidShaping) {
    let mut out: Vec<kvm_cpuid_entry2> = Vec::new();
    let mut report = CpuidShaping::default();
    for e in supported {
        let mut e = *e;
        match e.function {
            0x4000_0000..=0x4fff_ffff => {
                report.dropped_hypervisor_leaves += 1;
                continue;
            }
            1 => {
                e.ecx &= !((1 << 30) | (1 << 24) | (1 << 31) | (1 << 21) | (1 << 5) | (1 << 15) | (1 << 3));
                e.edx &= !(1 << 4);
                e.ebx &= 0x00ff_ffff;
            }
            7 if e.index == 0 => {
                e.ebx &= !((1 << 18) | (1 << 4) | (1 << 11) | (1 << 2));
                e.ecx &= !(1 << 5);
            }
            0xa => {
                e.eax = 0;
                e.ebx = 0;
                e.ecx = 0;
                e.edx = 0;
            }
            0x8000_0001 => {
                e.ecx &= !(1 << 2);
                e.edx &= !(1 << 27);
            }
            0x8000_0007 => {
                e.edx &= !(1 << 8);
            }
            _ => {}
        }
        out.push(e);
    }
    (out, report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdt_code_entry_matches_known_value() {
        assert_eq!(gdt_entry(CODE64_FLAGS, 0, 0xfffff), 0x00af_9b00_0000_ffff);
        assert_eq!(gdt_entry(DATA_FLAGS, 0, 0xfffff), 0x00cf_9300_0000_ffff);
    }

    #[test]
    fn segment_from_flags() {
        let c = segment(8, CODE64_FLAGS, 0, 0xfffff);
        assert_eq!((c.l, c.db, c.g, c.type_, c.present, c.s), (1, 0, 1, 0xb, 1, 1));
        assert_eq!(c.limit, 0xffff_ffff);
    }

    fn entry(function: u32, index: u32) -> kvm_cpuid_entry2 {
        kvm_cpuid_entry2 { function, index, eax: !0, ebx: !0, ecx: !0, edx: !0, ..Default::default() }
    }

    fn shaped(entries: &[kvm_cpuid_entry2], function: u32, index: u32) -> kvm_cpuid_entry2 {
        let (out, _) = shape_cpuid_entries(entries);
        *out.iter().find(|e| e.function == function && e.index == index).expect("leaf kept")
    }

    #[test]
    fn shaping_hides_tsc_randomness_and_virtualization() {
        let all = [entry(1, 0), entry(7, 0), entry(7, 1), entry(0x8000_0001, 0), entry(0x8000_0007, 0)];
        let l1 = shaped(&all, 1, 0);
        assert_eq!(l1.edx & (1 << 4), 0, "TSC");
        assert_eq!(l1.ecx & (1 << 30), 0, "RDRAND");
        assert_eq!(l1.ecx & (1 << 5), 0, "VMX");
        assert_eq!(l1.ecx & (1 << 31), 0, "hypervisor bit");
        assert_eq!(l1.ecx & (1 << 24), 0, "TSC deadline");
        assert_eq!(l1.ebx >> 24, 0, "APIC id");
        assert_ne!(l1.edx & 1, 0, "FPU stays");
        assert_eq!(shaped(&all, 7, 0).ebx & (1 << 18), 0, "RDSEED");
        assert_eq!(shaped(&all, 7, 1).ebx, !0, "leaf 7.1 untouched");
        let ext = shaped(&all, 0x8000_0001, 0);
        assert_eq!(ext.ecx & (1 << 2), 0, "SVM");
        assert_eq!(ext.edx & (1 << 27), 0, "RDTSCP");
        assert_ne!(ext.edx & (1 << 29), 0, "long mode stays");
        assert_eq!(shaped(&all, 0x8000_0007, 0).edx & (1 << 8), 0, "invariant TSC");
    }

    #[test]
    fn shaping_drops_the_kvm_paravirt_leaves() {
        let all = [entry(0, 0), entry(0x4000_0000, 0), entry(0x4000_0001, 0), entry(0x4000_0100, 0), entry(1, 0)];
        let (out, report) = shape_cpuid_entries(&all);
        assert_eq!(report.dropped_hypervisor_leaves, 3);
        assert!(out.iter().all(|e| !(0x4000_0000..=0x4fff_ffff).contains(&e.function)));
        assert_eq!(out.len(), 2);
    }
}
