//! Snapshots: a node's whole state in a directory, restored copy-on-write.
//!
//! Layout of a snapshot directory:
//! - `memory.img`: guest RAM, byte for byte, as a sparse file (all-zero 4 KiB pages are
//!   holes, so an idle 256 MiB guest costs only what it touched);
//! - `state.bin`: magic `SIMKVM\0\x01`, then length-prefixed sections: config, CPUID,
//!   REGS, SREGS, FPU, MSRs, vCPU events, XCRs, port devices, virtual clock, pending
//!   interrupt and halted flag, exit counters, trace chain digest, MMIO counters.
//!
//! Restore maps `memory.img` MAP_PRIVATE: pages are shared with the page cache until the
//! guest writes them, so N restores of one snapshot cost N times the dirtied pages only,
//! and the image is never modified.
//!
//! Trace hash across a snapshot: taking a snapshot replaces the running hash with
//! sha256(digest so far) (a chain), and restore starts from the same chain, so a restored
//! node and the node that kept running report identical hashes for identical futures.
//!
//! Not saved (limits): the TSC (guest RDTSC is not deterministic anyway, see the module
//! docs of `kvm`), xsave state beyond `kvm_fpu` (AVX upper halves), MMIO device state
//! (virtio transports must be re-attached and are not yet snapshotted).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kvm_bindings::{
    kvm_cpuid_entry2, kvm_fpu, kvm_msr_entry, kvm_regs, kvm_sregs, kvm_vcpu_events, kvm_xcrs, CpuId, Msrs,
};
use sha2::{Digest, Sha256};
use simtime::VirtualTime;
use vm_memory::{GuestAddress, GuestMemoryBackend};

use super::error::{ioctl, KvmError, Result};
use super::vm::{private_file_memory, ExitStats, MicroVm, VirtualClock, VmConfig};

const MAGIC: &[u8; 8] = b"SIMKVM\0\x01";
const PAGE: usize = 4096;

/// MSRs saved when the host lets us read them (each probed on its own).
const MSR_CANDIDATES: &[u32] = &[
    0x174,       // SYSENTER_CS
    0x175,       // SYSENTER_ESP
    0x176,       // SYSENTER_EIP
    0x277,       // PAT
    0xc000_0081, // STAR
    0xc000_0082, // LSTAR
    0xc000_0083, // CSTAR
    0xc000_0084, // SFMASK
    0xc000_0102, // KERNEL_GS_BASE
    0xc000_0103, // TSC_AUX
];

/// A vCPU's state: sections 1-7 of a snapshot's state file (see [`MicroVm::restore`]).
pub(crate) struct VcpuSections {
    pub(crate) sections: [Vec<u8>; 7],
    msrs: usize,
    events: bool,
}

/// What [`MicroVm::snapshot`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The snapshot directory.
    pub dir: PathBuf,
    /// Bytes of RAM actually written (non-zero pages).
    pub memory_bytes_written: u64,
    /// MSRs saved.
    pub msrs_saved: usize,
    /// Whether vCPU events (pending exceptions, interrupt shadow) were saved.
    pub vcpu_events_saved: bool,
}

fn pod_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: T is a plain-old-data kvm-bindings struct (integers and arrays only);
    // reading its bytes is always defined.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }.to_vec()
}

fn pod_read<T: Copy>(b: &[u8], path: &Path, what: &str) -> Result<T> {
    if b.len() != std::mem::size_of::<T>() {
        return Err(bad(path, format!("{what}: {} bytes, expected {}", b.len(), std::mem::size_of::<T>())));
    }
    // SAFETY: the length matches and T is plain-old-data: every bit pattern is valid.
    Ok(unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) })
}

fn bad(path: &Path, reason: String) -> KvmError {
    KvmError::BadSnapshot { path: path.to_path_buf(), reason }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> KvmError + 'a {
    move |source| KvmError::Io { what, path: path.to_path_buf(), source }
}

fn words(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn read_words<const N: usize>(b: &[u8], path: &Path, what: &str) -> Result<[u64; N]> {
    if b.len() != 8 * N {
        return Err(bad(path, format!("{what}: {} bytes, expected {}", b.len(), 8 * N)));
    }
    let mut out = [0u64; N];
    for (i, w) in out.iter_mut().enumerate() {
        *w = u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
    }
    Ok(out)
}

/// Writes the RAM at `base` (length `len`) to `path` as a sparse file.
fn write_sparse(path: &Path, ram: &[u8]) -> Result<u64> {
    let f = OpenOptions::new().create(true).write(true).truncate(true).open(path).map_err(io("create", path))?;
    f.set_len(ram.len() as u64).map_err(io("size", path))?;
    let mut written = 0u64;
    let mut i = 0usize;
    while i < ram.len() {
        if is_zero(&ram[i..i + PAGE]) {
            i += PAGE;
            continue;
        }
        let start = i;
        while i < ram.len() && !is_zero(&ram[i..i + PAGE]) {
            i += PAGE;
        }
        f.write_all_at(&ram[start..i], start as u64).map_err(io("write", path))?;
        written += (i - start) as u64;
    }
    Ok(written)
}

fn is_zero(page: &[u8]) -> bool {
    // SAFETY: u64 has no invalid bit patterns; align_to handles any misalignment.
    let (head, body, tail) = unsafe { page.align_to::<u64>() };
    head.iter().all(|&b| b == 0) && body.iter().all(|&w| w == 0) && tail.iter().all(|&b| b == 0)
}

impl MicroVm {
    /// Lets KVM finish the instruction of the last exit. An `in` or MMIO load is only
    /// complete (data in the register, rip advanced) once KVM_RUN is entered again;
    /// saving before that would replay the access after restore. KVM_RUN with
    /// `immediate_exit` set completes it and returns EINTR without running the guest.
    pub(crate) fn complete_pending_io(&mut self) -> Result<()> {
        self.vcpu.set_kvm_immediate_exit(1);
        let r = self.vcpu.run().map(|_| ()).map_err(|e| e.errno());
        self.vcpu.set_kvm_immediate_exit(0);
        match r {
            Err(libc::EINTR) => Ok(()),
            Err(errno) => {
                Err(KvmError::Ioctl { op: "KVM_RUN (immediate_exit)", source: kvm_ioctls::Error::new(errno) })
            }
            Ok(()) => Err(KvmError::UnhandledExit("KVM_RUN with immediate_exit returned an exit".into())),
        }
    }

    /// Saves the node into `dir` (created if needed; existing files are replaced).
    ///
    /// The VM can keep running afterwards; its trace hash is re-chained exactly as a
    /// restore of this snapshot will be (see the module docs).
    pub fn snapshot(&mut self, dir: &Path) -> Result<SnapshotInfo> {
        fs::create_dir_all(dir).map_err(io("create snapshot dir", dir))?;
        self.complete_pending_io()?;
        // Memory.
        let size = self.config.mem_size as usize;
        let host = self
            .mem
            .get_host_address(GuestAddress(0))
            .map_err(|e| KvmError::Memory(format!("host address of RAM: {e}")))?;
        // SAFETY: RAM is one mapping of `size` bytes at `host`, alive while `self` is, and
        // the vCPU is not running (we hold &mut self), so nobody writes it meanwhile.
        let ram = unsafe { std::slice::from_raw_parts(host as *const u8, size) };
        let mem_tmp = dir.join("memory.img.tmp");
        let written = write_sparse(&mem_tmp, ram)?;

        let vcpu = self.capture_vcpu()?;
        let digest: [u8; 32] = self.trace.clone().finalize().into();
        let mut pending = words(&self.pending.0);
        pending.push(u8::from(self.halted));
        let mut sections: Vec<Vec<u8>> = vec![words(&[self.config.mem_size, self.config.exit_cost_ns])];
        sections.extend(vcpu.sections.iter().cloned());
        sections.extend([
            self.bus.save(),
            words(&[self.clock.now().as_ns()]),
            pending,
            words(&self.stats.to_words()),
            digest.to_vec(),
            words(&[self.mmio.unclaimed]),
        ]);

        let state_tmp = dir.join("state.bin.tmp");
        let mut f = File::create(&state_tmp).map_err(io("create", &state_tmp))?;
        let mut buf = MAGIC.to_vec();
        for s in &sections {
            buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
            buf.extend_from_slice(s);
        }
        f.write_all(&buf).map_err(io("write", &state_tmp))?;
        drop(f);
        let mem_path = dir.join("memory.img");
        let state_path = dir.join("state.bin");
        fs::rename(&mem_tmp, &mem_path).map_err(io("rename", &mem_path))?;
        fs::rename(&state_tmp, &state_path).map_err(io("rename", &state_path))?;

        // Re-chain the trace hash as a restore will.
        self.trace = Sha256::new();
        self.trace.update(digest);
        Ok(SnapshotInfo {
            dir: dir.to_path_buf(),
            memory_bytes_written: written,
            msrs_saved: vcpu.msrs,
            vcpu_events_saved: vcpu.events,
        })
    }

    /// The vCPU's state as sections 1-7 of the state file (CPUID, REGS, SREGS, FPU,
    /// MSRs, vCPU events, XCRs). Call after [`MicroVm::complete_pending_io`].
    pub(crate) fn capture_vcpu(&mut self) -> Result<VcpuSections> {
        let regs = self.vcpu.get_regs().map_err(ioctl("KVM_GET_REGS"))?;
        let sregs = self.vcpu.get_sregs().map_err(ioctl("KVM_GET_SREGS"))?;
        let fpu = self.vcpu.get_fpu().map_err(ioctl("KVM_GET_FPU"))?;
        let mut msrs: Vec<(u32, u64)> = Vec::new();
        for &index in MSR_CANDIDATES {
            let mut m = Msrs::from_entries(&[kvm_msr_entry { index, ..Default::default() }])
                .map_err(|e| KvmError::Config(format!("msr list: {e:?}")))?;
            if let Ok(1) = self.vcpu.get_msrs(&mut m) {
                msrs.push((index, m.as_slice()[0].data));
            }
        }
        let events = self.vcpu.get_vcpu_events().ok();
        let xcrs = self.vcpu.get_xcrs().ok();
        Ok(VcpuSections {
            sections: [
                self.cpuid.as_slice().iter().flat_map(pod_bytes).collect(),
                pod_bytes(&regs),
                pod_bytes(&sregs),
                pod_bytes(&fpu),
                msrs.iter().flat_map(|(i, d)| [i.to_le_bytes().to_vec(), d.to_le_bytes().to_vec()].concat()).collect(),
                events.as_ref().map(pod_bytes).unwrap_or_default(),
                xcrs.as_ref().map(pod_bytes).unwrap_or_default(),
            ],
            msrs: msrs.len(),
            events: events.is_some(),
        })
    }

    /// Creates a new VM from a snapshot directory. Guest RAM is `memory.img` mapped
    /// MAP_PRIVATE (copy-on-write): the snapshot is never modified.
    pub fn restore(dir: &Path) -> Result<MicroVm> {
        let state_path = dir.join("state.bin");
        let buf = fs::read(&state_path).map_err(io("read", &state_path))?;
        let p = state_path.as_path();
        let sections = split_sections(&buf, p)?;
        let [mem_size, exit_cost_ns] = read_words::<2>(sections[0], p, "config")?;
        let config = VmConfig { mem_size, exit_cost_ns };

        let mem_path = dir.join("memory.img");
        let file = File::open(&mem_path).map_err(io("open", &mem_path))?;
        let len = file.metadata().map_err(io("stat", &mem_path))?.len();
        if len != mem_size {
            return Err(bad(p, format!("memory.img has {len} bytes, state says {mem_size}")));
        }
        let mem = private_file_memory(file, mem_size)?;
        let mut vm = MicroVm::create(config, mem)?;
        vm.restore_vcpu(&sections, p)?;
        vm.bus.restore(sections[8])?;
        vm.restore_engine_state(&sections, p)?;
        Ok(vm)
    }

    /// Sections 1-7: CPUID, registers, special registers, FPU, MSRs, vCPU
    /// events and XCRs, set in the order KVM needs them (sregs before MSRs,
    /// regs after).
    pub(crate) fn restore_vcpu(&mut self, sections: &[&[u8]], p: &Path) -> Result<()> {
        let esz = std::mem::size_of::<kvm_cpuid_entry2>();
        if !sections[1].len().is_multiple_of(esz) {
            return Err(bad(p, "cpuid section size".into()));
        }
        let entries: Vec<kvm_cpuid_entry2> =
            sections[1].chunks(esz).map(|c| pod_read(c, p, "cpuid entry")).collect::<Result<_>>()?;
        self.cpuid = CpuId::from_entries(&entries).map_err(|e| bad(p, format!("cpuid: {e:?}")))?;
        self.vcpu.set_cpuid2(&self.cpuid).map_err(ioctl("KVM_SET_CPUID2"))?;

        let regs: kvm_regs = pod_read(sections[2], p, "regs")?;
        let sregs: kvm_sregs = pod_read(sections[3], p, "sregs")?;
        let fpu: kvm_fpu = pod_read(sections[4], p, "fpu")?;
        self.vcpu.set_sregs(&sregs).map_err(ioctl("KVM_SET_SREGS"))?;
        if !sections[5].len().is_multiple_of(12) {
            return Err(bad(p, "msr section size".into()));
        }
        let msrs: Vec<kvm_msr_entry> = sections[5]
            .chunks(12)
            .map(|c| kvm_msr_entry {
                index: u32::from_le_bytes(c[..4].try_into().unwrap()),
                data: u64::from_le_bytes(c[4..].try_into().unwrap()),
                ..Default::default()
            })
            .collect();
        if !msrs.is_empty() {
            let m = Msrs::from_entries(&msrs).map_err(|e| bad(p, format!("msrs: {e:?}")))?;
            let n = self.vcpu.set_msrs(&m).map_err(ioctl("KVM_SET_MSRS"))?;
            if n != msrs.len() {
                return Err(bad(p, format!("KVM_SET_MSRS set {n} of {} MSRs", msrs.len())));
            }
        }
        self.vcpu.set_regs(&regs).map_err(ioctl("KVM_SET_REGS"))?;
        self.vcpu.set_fpu(&fpu).map_err(ioctl("KVM_SET_FPU"))?;
        if !sections[7].is_empty() {
            let xcrs: kvm_xcrs = pod_read(sections[7], p, "xcrs")?;
            // A host without XSAVE reports no XCRs and refuses KVM_SET_XCRS
            // (EINVAL) even with none: there is nothing to restore.
            if xcrs.nr_xcrs > 0 {
                self.vcpu.set_xcrs(&xcrs).map_err(ioctl("KVM_SET_XCRS"))?;
            }
        }
        if !sections[6].is_empty() {
            let ev: kvm_vcpu_events = pod_read(sections[6], p, "vcpu events")?;
            self.vcpu.set_vcpu_events(&ev).map_err(ioctl("KVM_SET_VCPU_EVENTS"))?;
        }
        Ok(())
    }

    /// Sections 9-13: the virtual clock, pending interrupts and halt state,
    /// exit statistics, the trace digest and the MMIO counters.
    fn restore_engine_state(&mut self, sections: &[&[u8]], p: &Path) -> Result<()> {
        let exit_cost = Duration::from_nanos(self.config.exit_cost_ns);
        let [now] = read_words::<1>(sections[9], p, "clock")?;
        self.clock = VirtualClock::new(exit_cost);
        self.clock.jump_to(VirtualTime::from_ns(now));
        let sec = sections[10];
        if sec.len() != 33 || sec[32] > 1 {
            return Err(bad(p, "pending interrupt section".into()));
        }
        self.pending = super::vm::PendingIrqs(read_words::<4>(&sec[..32], p, "pending interrupts")?);
        self.halted = sec[32] == 1;
        self.stats = ExitStats::from_words(read_words::<7>(sections[11], p, "stats")?);
        if sections[12].len() != 32 {
            return Err(bad(p, "trace digest size".into()));
        }
        self.trace = Sha256::new();
        self.trace.update(sections[12]);
        let [unclaimed] = read_words::<1>(sections[13], p, "mmio")?;
        self.mmio.unclaimed = unclaimed;
        Ok(())
    }
}

/// The state file after its magic: 14 length-prefixed sections.
fn split_sections<'a>(buf: &'a [u8], p: &Path) -> Result<Vec<&'a [u8]>> {
    if buf.len() < 8 || &buf[..8] != MAGIC {
        return Err(bad(p, "wrong magic or version".into()));
    }
    let mut rest = &buf[8..];
    let mut sections: Vec<&[u8]> = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 8 {
            return Err(bad(p, "truncated section header".into()));
        }
        let n = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
        if rest.len() < 8 + n {
            return Err(bad(p, "truncated section".into()));
        }
        sections.push(&rest[8..8 + n]);
        rest = &rest[8 + n..];
    }
    if sections.len() != 14 {
        return Err(bad(p, format!("{} sections, expected 14", sections.len())));
    }
    Ok(sections)
}
