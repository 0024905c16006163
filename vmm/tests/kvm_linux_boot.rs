//! Boots a stock Linux kernel to its first console lines. Needs hardware virtualization
//! (vmx/svm): under PVM a stock kernel's ring-0 code is emulated and fails. Skips
//! (recorded by `testkit`) when vmx/svm is absent or /dev/kvm does not open
//! (`Cause::Host`), or, on a host that has both, when $SIMCLUSTER_KVM_KERNEL (a bzImage
//! or vmlinux) is unset (`Cause::Missing`). The kernel stays an environment variable rather than a look into
//! simcluster's cache: vmm sits below the image builder (which owns the kernel's cache
//! key), and a test here must not build a kernel. The image builder's kernel:
//! `SIMCLUSTER_KVM_KERNEL=$(simcluster image kernel --runtime kvm | jq -r .kernel)`;
//! tests/kvm_kernel.rs boots it end to end. The loading half of the KVM node's Linux path (bzImage, initramfs,
//! command line, virtio-mmio windows) is also checked with a synthetic bzImage, which
//! is never run, wherever /dev/kvm opens.

mod kvm_common;

use vmm::kvm::host::has_hardware_virt;
use vmm::kvm::linux::DEFAULT_CMDLINE;
use vmm::kvm::{LinuxBootBuilder, RunLimits, RunOutcome};

#[test]
fn kvm_linux_boots_to_console() {
    if !has_hardware_virt() {
        testkit::skip(
            testkit::Cause::Host,
            "/proc/cpuinfo has neither vmx nor svm (stock Linux cannot run under this KVM)",
        );
        return;
    }
    if !kvm_common::kvm_available() {
        return;
    }
    let Some(kernel) = std::env::var_os("SIMCLUSTER_KVM_KERNEL") else {
        testkit::skip(
            testkit::Cause::Missing,
            "set SIMCLUSTER_KVM_KERNEL to a bzImage or vmlinux (simcluster image kernel --runtime kvm builds one)",
        );
        return;
    };
    // As a node boots (vmm::kvm::node::layout::kernel_cmdline): `lpj=` skips the
    // delay-loop calibration, which spins on jiffies without exiting, so it would
    // never see a tick (virtual time only moves at exits) and `run` would not return.
    let cmdline = format!("{DEFAULT_CMDLINE} tsc=unstable clocksource=jiffies lpj=1000000");
    let mut vm =
        LinuxBootBuilder::new(std::path::Path::new(&kernel)).cmdline(&cmdline).memory_mib(256).build().unwrap();
    let mut budget = 2_000_000u64;
    while budget > 0 && !String::from_utf8_lossy(vm.console()).contains("Linux version") {
        let limits = RunLimits { max_exits: Some(vm.stats().exits + 10_000), until: None };
        match vm.run(limits) {
            Ok(RunOutcome::ExitLimit) => budget = budget.saturating_sub(10_000),
            Ok(other) => {
                eprintln!("guest stopped: {other:?}");
                break;
            }
            Err(e) => {
                eprintln!("guest failed: {e}");
                break;
            }
        }
    }
    let console = String::from_utf8_lossy(vm.console()).to_string();
    eprintln!("{console}");
    assert!(console.contains("Linux version"), "no kernel banner on the console");
}

/// A newc cpio archive holding only its trailer: the smallest valid initramfs.
fn empty_initramfs() -> Vec<u8> {
    simcpio::CpioWriter::new(Vec::new()).finish().unwrap()
}

/// The engine's KVM node ([`vmm::kvm::node::KvmNode`]) boots a stock kernel with an
/// initramfs and the virtio-mmio windows on its command line, run by grants as the
/// engine runs it, to the kernel's early console lines. (It stops there: the microVM
/// has no 8259/8254 for a stock kernel's tick yet; see vmm/src/kvm/node/mod.rs.)
/// $SIMCLUSTER_KVM_INITRD may name the cluster's rootfs cpio; else an empty one.
#[test]
fn kvm_linux_node_boots_with_initramfs_and_virtio_windows() {
    use std::time::Duration;
    use vmm::node::{NodeConfig, NodeRuntime, OutputStream, RunOutcome as NodeOutcome};

    if !has_hardware_virt() {
        testkit::skip(
            testkit::Cause::Host,
            "/proc/cpuinfo has neither vmx nor svm (stock Linux cannot run under this KVM)",
        );
        return;
    }
    if !kvm_common::kvm_available() {
        return;
    }
    let Some(kernel) = std::env::var_os("SIMCLUSTER_KVM_KERNEL") else {
        testkit::skip(
            testkit::Cause::Missing,
            "set SIMCLUSTER_KVM_KERNEL to a bzImage or vmlinux (simcluster image kernel --runtime kvm builds one)",
        );
        return;
    };
    let dir = kvm_common::scratch("linux-node");
    let initrd = match std::env::var_os("SIMCLUSTER_KVM_INITRD") {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let p = dir.join("empty.cpio");
            std::fs::write(&p, empty_initramfs()).unwrap();
            p
        }
    };
    let cfg = NodeConfig {
        kernel: kernel.into(),
        initrd,
        mem_mb: 256,
        node_id: simtime::NodeId::new(1).unwrap(),
        run_dir: dir.clone(),
        init_env: vec![("NODE_ID".into(), "1".into())],
        extra_args: vec![],
        net: true,
        entropy_seed: 1,
        read_faults: Default::default(),
        shared_clock: false,
        root_disk: None,
        kernel_faults_cpuid: false,
    };
    let disk = disksim::Disk::new(disksim::BlockStore::zeros(2048));
    let mut node = vmm::kvm::node::KvmNode::spawn(&cfg, Some(disk)).unwrap();
    node.wait_connected(simtime::VirtualTime::ZERO, Duration::from_secs(1)).unwrap();
    let mut console = String::new();
    let mut out = Vec::new();
    for _ in 0..2_000 {
        if console.contains("RAMDISK:") && console.contains("Command line:") {
            break;
        }
        let at = node.requested();
        let grant = match node.grant(at, 0, Duration::from_secs(60)) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("node failed: {e}");
                break;
            }
        };
        out.extend(grant.output);
        match grant.outcome {
            NodeOutcome::Waiting { requested } if requested >= simtime::VirtualTime::IDLE => break,
            NodeOutcome::Waiting { .. } => {}
            other => {
                eprintln!("node stopped: {other:?}");
                break;
            }
        }
        for o in out.drain(..) {
            if o.stream == OutputStream::Console {
                console.push_str(&String::from_utf8_lossy(&o.bytes));
            }
        }
    }
    eprintln!("{console}");
    assert!(console.contains("Linux version"), "no kernel banner on the console");
    let cmdline = console.lines().find(|l| l.contains("Command line:")).expect("the kernel printed its command line");
    assert!(cmdline.contains("virtio_mmio.device=4K@0xd0000000:5"), "{cmdline}");
    assert!(cmdline.contains("virtio_mmio.device=4K@0xd0001000:6"), "{cmdline}");
    assert!(cmdline.contains("virtio_mmio.device=4K@0xd0002000:7"), "{cmdline}");
    assert!(console.contains("RAMDISK:"), "the kernel did not see the initramfs");
}

/// A bzImage the loader accepts (boot protocol 2.15 header, LOADED_HIGH) whose
/// protected-mode part is `payload`. Never executed.
fn synthetic_bzimage(payload: &[u8]) -> Vec<u8> {
    let mut k = vec![0u8; 4 * 512];
    k[0x1f1] = 3; // setup_sects: 3 + 1 sectors of setup
    k[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
    k[0x202..0x206].copy_from_slice(b"HdrS");
    k[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    k[0x211] = 0x01; // loadflags: LOADED_HIGH
    k[0x214..0x218].copy_from_slice(&0x10_0000u32.to_le_bytes()); // code32_start
    k.extend_from_slice(payload);
    k
}

#[test]
fn kvm_linux_node_loads_kernel_initramfs_and_cmdline() {
    if !kvm_common::kvm_available() {
        return;
    }
    let dir = kvm_common::scratch("linux-load");
    let kernel = dir.join("bzImage");
    let payload: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&kernel, synthetic_bzimage(&payload)).unwrap();
    let initrd = dir.join("rootfs.cpio");
    let cpio = empty_initramfs();
    std::fs::write(&initrd, &cpio).unwrap();
    let cfg = vmm::node::NodeConfig {
        kernel,
        initrd,
        mem_mb: 64,
        node_id: simtime::NodeId::new(2).unwrap(),
        run_dir: dir.clone(),
        init_env: vec![("NODE_ID".into(), "2".into()), ("PEERS".into(), "n1,n2".into())],
        extra_args: vec![],
        net: true,
        entropy_seed: 1,
        read_faults: Default::default(),
        shared_clock: false,
        root_disk: None,
        kernel_faults_cpuid: false,
    };
    let disk = disksim::Disk::new(disksim::BlockStore::zeros(64));
    let node = vmm::kvm::node::KvmNode::spawn(&cfg, Some(disk)).unwrap();
    let vm = node.vm();
    let word = |addr: u64| {
        let mut b = [0u8; 4];
        vm.read_memory(addr, &mut b).unwrap();
        u32::from_le_bytes(b)
    };
    let zp = vmm::kvm::linux::ZERO_PAGE_ADDR;
    // The protected-mode kernel at 1 MiB.
    let mut loaded = vec![0u8; payload.len()];
    vm.read_memory(0x10_0000, &mut loaded).unwrap();
    assert_eq!(loaded, payload);
    // The initramfs: page-aligned at the top of RAM, announced in the zero page.
    let (image, size) = (word(zp + 0x218), word(zp + 0x21c));
    assert_eq!(size as usize, cpio.len());
    assert_eq!(u64::from(image), (64u64 << 20) - 4096);
    let mut got = vec![0u8; cpio.len()];
    vm.read_memory(u64::from(image), &mut got).unwrap();
    assert_eq!(got, cpio);
    // The command line: the virtio-mmio windows (net, blk, control line,
    // entropy) and init's env.
    let ptr = word(zp + 0x228);
    let mut cl = vec![0u8; 1024];
    vm.read_memory(u64::from(ptr), &mut cl).unwrap();
    let cl = String::from_utf8_lossy(&cl[..cl.iter().position(|&b| b == 0).unwrap()]).into_owned();
    for want in [
        "console=ttyS0",
        "virtio_mmio.device=4K@0xd0000000:5",
        "virtio_mmio.device=4K@0xd0001000:6",
        "virtio_mmio.device=4K@0xd0002000:7",
        "virtio_mmio.device=4K@0xd0003000:3",
        "NODE_ID=2 PEERS=n1,n2",
    ] {
        assert!(cl.contains(want), "command line lacks {want}: {cl}");
    }
    // The devices sit in those windows.
    let windows: Vec<_> = vm.mmio_windows().into_iter().map(|(_, base, _)| base).collect();
    assert_eq!(windows, vec![0xd000_0000, 0xd000_1000, 0xd000_2000, 0xd000_3000]);
}
