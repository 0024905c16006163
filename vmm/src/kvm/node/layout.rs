//! The machine a KVM node's Linux guest sees: where each virtio-mmio device is,
//! which IRQ it raises, and the kernel command line that tells the guest.
//!
//! # Devices (virtio-mmio windows, see [`crate::kvm::virtio_mmio`])
//! | window | device                                               | IRQ | vector |
//! |--------|------------------------------------------------------|-----|--------|
//! | 0      | virtio-net ([`crate::kvm::ports::NetPort`]) to netsim | 5   | 0x35   |
//! | 1      | virtio-blk ([`crate::kvm::ports::BlkPort`]) over disksim | 6 | 0x36   |
//! | 2      | virtio-console: the engine's control line            | 7   | 0x37   |
//! | 3      | virtio-rng: entropy from the seed                    | 3   | 0x33   |
//! | 4      | virtio-blk, read-only: the root image                | 10  | 0x3a   |
//!
//! The guest console is the serial port (COM1, `console=ttyS0`); the control line is
//! a virtio console, `/dev/hvc0` in a Linux guest, exactly as under user-mode Linux,
//! so the same initramfs and agent run on both. A Linux guest learns the windows from
//! its command line (`virtio_mmio.device=4K@0xd0000000:5 ...`, see [`kernel_cmdline`]).
//! The transports inject vector `0x30 + IRQ` directly (KVM_INTERRUPT, no in-kernel
//! irqchip), the vectors Linux gives legacy IRQs; the timer tick (IRQ 0) and the
//! serial port (IRQ 4) go through the userspace 8259A ([`crate::kvm::legacy`]).

use crate::kvm::devices::PVCLOCK_BASE;
use crate::kvm::linux::DEFAULT_CMDLINE;
use crate::kvm::virtio_mmio::window_base;
use nodeapi::NodeConfig;

/// Legacy IRQ of each device (vector `0x30 + IRQ`): virtio-net's.
pub const NET_IRQ: u8 = 5;
/// The data disk's (virtio-blk over disksim) IRQ.
pub const BLK_IRQ: u8 = 6;
/// The control line's (virtio-console) IRQ.
pub const CTL_IRQ: u8 = 7;
/// IRQ 3 is COM2 on a PC; this machine has no COM2 (its ports read as all
/// ones, so Linux's 8250 driver finds no UART there and never claims it).
pub const RNG_IRQ: u8 = 3;
/// The root disk's IRQ: 10 is free on a PC (no ISA card claims it).
pub const ROOT_IRQ: u8 = 10;
/// Vector of legacy IRQ 0 in Linux (ISA_IRQ_VECTOR(0)).
pub const IRQ_VECTOR_BASE: u8 = 0x30;

/// Window base of each device (guest physical address): virtio-net's,
/// window 0.
pub fn net_base() -> u64 {
    window_base(0)
}
/// The data disk's window base, window 1.
pub fn blk_base() -> u64 {
    window_base(1)
}
/// The control line's window base, window 2.
pub fn ctl_base() -> u64 {
    window_base(2)
}
/// virtio-rng's window base, window 3.
pub fn rng_base() -> u64 {
    window_base(3)
}
/// The read-only root disk's window base, window 4.
pub fn root_base() -> u64 {
    window_base(4)
}

/// The kernel command line of a Linux node: serial console, the virtual clock port as
/// clocksource, no delay-loop calibration, virtio-mmio windows, then `KEY=value` pairs for
/// init and the extra words.
pub fn kernel_cmdline(cfg: &NodeConfig, net: bool, blk: bool) -> String {
    // The TSC reads host time: never a clocksource. The image builder's kernel reads
    // virtual ns at the PvClock port instead (its patch 0002, `simclock=`); a kernel
    // without that patch ignores both words and keeps time with jiffies. lpj: no
    // delay-loop calibration (it spins until the tick, which a guest without exits
    // never gets).
    let mut c = format!(
        "{DEFAULT_CMDLINE} tsc=unstable simclock={PVCLOCK_BASE:#x} clocksource=simcluster lpj=1000000 rdinit=/init"
    );
    let mut dev = |base: u64, irq: u8| c.push_str(&format!(" virtio_mmio.device=4K@{base:#x}:{irq}"));
    if net {
        dev(net_base(), NET_IRQ);
    }
    if blk {
        dev(blk_base(), BLK_IRQ);
    }
    dev(ctl_base(), CTL_IRQ);
    dev(rng_base(), RNG_IRQ);
    if cfg.root_disk.is_some() {
        dev(root_base(), ROOT_IRQ);
    }
    for (k, v) in &cfg.init_env {
        c.push_str(&format!(" {k}={v}"));
    }
    for w in &cfg.extra_args {
        c.push(' ');
        c.push_str(w);
    }
    c
}

/// Whether `image` is a Linux kernel: a bzImage ("HdrS" at 0x202) or an ELF file.
pub fn is_linux_kernel(image: &[u8]) -> bool {
    image.starts_with(b"\x7fELF") || image.get(0x202..0x206) == Some(b"HdrS")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvm::virtio_mmio::WINDOW;
    use std::path::PathBuf;

    fn cfg() -> NodeConfig {
        NodeConfig {
            kernel: PathBuf::from("bzImage"),
            initrd: PathBuf::from("rootfs.cpio"),
            mem_mb: 256,
            node_id: simtime::NodeId::new(2).unwrap(),
            run_dir: PathBuf::from("/tmp"),
            init_env: vec![("NODE_ID".into(), "2".into()), ("PEERS".into(), "n1,n2".into())],
            extra_args: vec!["quiet".into()],
            net: true,
            entropy_seed: 1,
            read_faults: Default::default(),
            shared_clock: false,
            root_disk: None,
            kernel_faults_cpuid: false,
        }
    }

    #[test]
    fn cmdline_announces_windows_and_init_environment() {
        let c = kernel_cmdline(&cfg(), true, true);
        assert!(c.starts_with(DEFAULT_CMDLINE), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0000000:5"), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0001000:6"), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0002000:7"), "{c}");
        assert!(c.contains("virtio_mmio.device=4K@0xd0003000:3"), "{c}");
        assert!(c.contains("simclock=0x520 clocksource=simcluster"), "{c}");
        assert!(c.ends_with("NODE_ID=2 PEERS=n1,n2 quiet"), "{c}");
        let c = kernel_cmdline(&cfg(), false, false);
        assert!(!c.contains(":5") && !c.contains(":6") && c.contains(":7") && c.contains("0xd0003000:3"), "{c}");
    }

    #[test]
    fn linux_kernels_are_told_from_flat_images() {
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert!(is_linux_kernel(&bz));
        assert!(is_linux_kernel(b"\x7fELF\x02\x01\x01"));
        assert!(!is_linux_kernel(&[0xfa, 0xf4]));
        assert!(!is_linux_kernel(&[]));
    }

    #[test]
    fn windows_do_not_overlap() {
        assert_eq!(blk_base() - net_base(), WINDOW);
        assert_eq!(ctl_base() - blk_base(), WINDOW);
        assert_eq!(rng_base() - ctl_base(), WINDOW);
    }
}
