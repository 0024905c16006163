//! The user-mode Linux node runtime.
//!
//! Each node is one `linux` process (a kernel built for `ARCH=um`) started
//! with `time-travel=ext:ID:SOCKET`. simcluster is the calendar at the other
//! end of that socket, so the guest's clock moves only when the engine
//! says so, and the node executes only between a grant from the engine
//! (the ACK of START, or RUN) and its next WAIT.
//!
//! What reaches the guest from the host, and why each is deterministic:
//! - time: only through the time-travel socket ([`timetravel`]);
//! - the console (`con0`) is output-only, to a pipe we drain;
//! - the control line (`con1`) carries engine commands in; we write to it
//!   only while the node is stopped, so the guest sees the bytes at the
//!   next grant, a point fixed by the engine's schedule;
//! - host address-space randomisation is turned off for the process
//!   (`ADDR_NO_RANDOMIZE`), which otherwise changes the guest's memory
//!   layout from run to run; the environment is cleared and fixed;
//! - host entropy is cut off ([`seccomp`]): UML would otherwise seed the
//!   guest's random pool from the host's getrandom(2); the guest's entropy
//!   is a virtio-rng device (`rng.sock`, [`crate::virtio::rng`]) whose
//!   bytes come from the execution seed, handed out at the guest's kicks;
//! - the data disk ([`disk`]): requests are accepted while the guest is
//!   blocked on its kick; writes and flushes complete, and every disk
//!   interrupt is delivered, only while the node is stopped, when the
//!   engine says so;
//! - the kernel command line holds no host paths (the guest mixes it into
//!   its random pool, and prints it): everything is relative to the node's
//!   run directory, its working directory.

pub mod disk;
pub mod node;
pub mod seccomp;
pub mod timetravel;

pub use disk::{DiskCompletion, DiskRequest};
pub use node::{Delivered, GuestOutput, OutputStream, RunOutcome, TxFrame, UmlConfig, UmlError, UmlNode};
