//! How to start one node, in either runtime.

use std::path::PathBuf;

use simtime::NodeId;

/// How to start one node. Both runtimes take the same configuration; the
/// fields one of them has no use for are documented as such.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The kernel: a `linux` executable built for `ARCH=um` with
    /// time-travel support (user-mode Linux), or a bzImage, an ELF vmlinux
    /// or a flat microVM image (KVM).
    pub kernel: PathBuf,
    /// The initramfs, an uncompressed or gzip newc cpio archive: the whole
    /// root filesystem, or with [`Self::root_disk`] the boot init that
    /// mounts it.
    pub initrd: PathBuf,
    /// The root filesystem image (squashfs), served read-only as a virtio-blk
    /// device whose serial is [`super::ROOT_DISK_SERIAL`]; every node of a
    /// run shares one open image. `None`: the initramfs is the root.
    pub root_disk: Option<disksim::BlockStore>,
    /// Guest memory in MiB.
    pub mem_mb: u32,
    /// Which node; its number is also the time-travel connection id.
    pub node_id: NodeId,
    /// Scratch directory owned by this node (sockets, UML's pid files,
    /// its memory backing file). Must exist and be short enough for a
    /// unix socket path.
    pub run_dir: PathBuf,
    /// `KEY=value` pairs put on the kernel command line. The kernel hands
    /// parameters it does not know to init as environment variables, which
    /// is how a node learns NODE_ID, NODE_NAME and PEERS.
    pub init_env: Vec<(String, String)>,
    /// Extra kernel command-line words.
    pub extra_args: Vec<String>,
    /// Give the node a virtio-net device (eth0, MAC 02:00:0a:00:00:NN).
    pub net: bool,
    /// Seed of the node's entropy device (virtio-rng, both runtimes): the
    /// guest's random bytes are this seed's stream (see
    /// `vmm::virtio::rng`). The engine derives it from the execution
    /// seed, the node and the boot, so the same execution gives every
    /// guest the same bytes.
    pub entropy_seed: u64,
    /// The data disk's read faults (`[faults.disk] corrupt_read`, both
    /// runtimes): the probability and the seed of the device's own stream,
    /// which the engine derives from the execution seed, the node and the
    /// boot. The default corrupts nothing.
    pub read_faults: disksim::ReadFaults,
    /// User-mode Linux only: speak time travel's shared-memory mode (Linux
    /// 6.11+; the 7.2 guest kernel): the guest keeps its clock and its run
    /// request in a page shared with us, and only RUN and WAIT cross the
    /// socket. The 6.1 kernel does not know it.
    pub shared_clock: bool,
    /// User-mode Linux only: the guest kernel keeps CPUID faulting on for
    /// its own process (the 7.2 patch, unless `host_cpuid`): the thread
    /// that drives the node then turns it on too
    /// (`vmm::uml::host_cpuid`), so the host does not rewrite an MSR at
    /// each switch between them.
    pub kernel_faults_cpuid: bool,
}
