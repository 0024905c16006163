//! The user-mode Linux node runtime.
//!
//! Each node is one `linux` process (a kernel built for `ARCH=um`) started
//! with `time-travel=ext:ID:SOCKET`. simcluster is the calendar at the other
//! end of that socket, so the guest's clock moves only when the engine
//! says so, and the node executes only between a grant from the engine
//! (the ACK of START, or RUN) and its next WAIT.
//!
//! - [`node`]: [`UmlNode`], the node as the engine drives it
//!   ([`nodeapi::NodeRuntime`]); `node/run.rs`: a grant, the wait for
//!   the node's next message, interrupts delivered to it while stopped;
//! - `process`: the host process group (spawn, confinement, kill, reap,
//!   [`kill_all_nodes`]); the [`jail`] crate: what the process can reach on the
//!   host; `procfs`: its memory, from /proc;
//! - `clock`: our end of the time-travel socket and the node's clock;
//!   [`timetravel`]: the protocol's messages and the shared page;
//! - `console`: the console file ([`CONSOLE_FILE`]) and its stamping;
//! - `port`: one vhost-user device, whatever its kind (`Port` and its `KickHook`);
//!   `devices`: the node's set and the orders they are served and
//!   interrupted in, with the control line and entropy; `net`
//!   (virtio-net), `disk` (the data and root disks);
//! - [`seccomp`], [`host_cpuid`]: what the process may not do, and the
//!   engine thread's CPUID faulting;
//! - [`UmlError`]: the host side failed.
//!
//! What reaches the guest from the host, and why each is deterministic:
//! - time: only through the time-travel socket and, with the 7.2 kernel,
//!   the shared scheduling page ([`timetravel`], [`timetravel::SchedShm`]);
//! - the console (`con0`) is output-only, to a regular file read at the
//!   node's protocol messages (a pipe's reader signals its writer, which
//!   reached the guest as an interrupt at a host-chosen moment);
//! - the control line (virtio-console, `/dev/hvc0`, `ctl.sock`) carries
//!   engine commands in; we fill it only while the node is stopped, and
//!   its interrupt is delivered in-band at a time the engine chooses;
//! - RDTSC, RDTSCP and CPUID in guest programs are trapped by the kernel
//!   patch (guest-images/kernel/patches) and answered from virtual time
//!   and a table of the host's answers less RDRAND/RDSEED/RDPID, TSX,
//!   WAITPKG and APIC ids;
//! - host address-space randomisation is turned off for the process
//!   (`ADDR_NO_RANDOMIZE`), which otherwise changes the guest's memory
//!   layout from run to run; the environment is cleared and fixed;
//! - host entropy is cut off ([`seccomp`]): UML would otherwise seed the
//!   guest's random pool from the host's getrandom(2); the guest's entropy
//!   is a virtio-rng device (`rng.sock`, [`crate::virtio::rng`]) whose
//!   bytes come from the execution seed, handed out at the guest's kicks;
//! - the data disk (`disk`): requests are accepted while the guest is
//!   blocked on its kick; writes and flushes complete, and every disk
//!   interrupt is delivered, only while the node is stopped, when the
//!   engine says so;
//! - the kernel command line holds no host paths (the guest mixes it into
//!   its random pool, and prints it): everything is relative to the node's
//!   run directory, its working directory.

mod clock;
mod console;
mod devices;
mod disk;
mod error;
pub mod host_cpuid;
mod net;
pub mod node;
mod port;
mod process;
mod procfs;
pub mod seccomp;
pub mod timetravel;

pub use console::CONSOLE_FILE;
pub use error::UmlError;
pub use node::UmlNode;
pub use process::kill_all_nodes;
