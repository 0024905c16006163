//! A user-mode Linux node's devices, each a [`Port`] (`uml/port.rs`) on a
//! socket in the node's run directory:
//!
//! - [`Devices`]: the node's set, in the orders the node's loops visit
//!   them (`uml/node/run.rs`: serving kicks, raising owed interrupts);
//! - the kinds: [`Control`] (the control line) and [`Entropy`] here,
//!   [`super::net::Net`] and [`super::disk::Blk`] (data and root disk) in
//!   their own files.

use std::os::fd::RawFd;

use disksim::Disk;
use simtime::NodeId;

use super::disk::{Blk, DiskPort};
use super::error::UmlError;
use super::net::{Net, NetPort};
use simtime::VirtualTime;

use super::port::Port;
use super::process::Attached;
use crate::vhost_user::VhostUserError;
use crate::virtio::console::{self, VirtioConsole};
use crate::virtio::rng::VirtioRng;
use crate::virtio::{DeviceError, KickHook, NoHook, Queues};
use nodeapi::{NodeConfig, NodeError};

/// The control line (virtio-console, `ctl.sock`, `/dev/hvc0` in the
/// guest): engine commands in, the agent's replies out.
#[derive(Default)]
pub(super) struct Control {
    /// What the guest wrote since its last protocol message, not yet
    /// stamped (stamped with the console's bytes, at that message).
    output: Vec<u8>,
}

impl Control {
    /// The device, as errors name it.
    const NAME: &'static str = "control line";
}

impl KickHook for Control {
    type Device = VirtioConsole;

    fn kicked(&mut self, dev: &mut VirtioConsole, _: &mut Queues, _: u16, _: VirtualTime) -> Result<bool, DeviceError> {
        self.output.extend(dev.take_output());
        Ok(false)
    }
}

pub(super) type ControlPort = Port<Control>;

impl Port<Control> {
    /// What the guest wrote since the last call.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.kind.output)
    }

    /// Moves queued engine input into the receive buffers the guest posted
    /// (the node is stopped) and owes the receive interrupt.
    pub fn flush_input(&mut self) -> Result<(), VhostUserError> {
        if !self.backend.device().has_input() {
            return Ok(());
        }
        let (dev, queues) = self.backend.device_and_queues();
        let moved = dev.flush_input(queues)?;
        if moved && queues.needs_interrupt(console::RX_QUEUE).unwrap_or(true) {
            self.owe(console::RX_QUEUE as u16);
        }
        Ok(())
    }
}

/// The entropy device (virtio-rng, `rng.sock`): fills the guest's buffers
/// inside its kick, while the guest waits for our reply (so guest memory is
/// quiescent and the bytes depend only on the guest's own requests); the
/// used-buffer interrupt is owed like every other device's. Nothing beside
/// the model.
pub(super) type EntropyPort = Port<NoHook<VirtioRng>>;

/// The entropy device, as errors name it.
const ENTROPY: &str = "entropy device";

/// Every device of one node.
pub(super) struct Devices {
    node: NodeId,
    pub ctl: ControlPort,
    pub net: Option<NetPort>,
    /// The data disk (`/dev/vda`), if the node has one.
    pub disk: Option<DiskPort>,
    pub rng: EntropyPort,
    /// The read-only root disk ([`NodeConfig::root_disk`]).
    pub root: Option<DiskPort>,
}

/// The devices at one poll: `pfd[0]` is the time-travel socket, then each
/// device's descriptors in service order, `ends[i]` past device `i`'s.
pub(super) struct PollSet {
    pub pfd: Vec<libc::pollfd>,
    ends: [usize; 5],
}

fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// Runs `$body` for each device slot in the order a wait for the guest's
/// next message polls and serves them: control line, network, data disk,
/// entropy, root disk; `$slot` is the slot's index, `$port` its
/// `Option<&mut Port<_>>` (each call is of the port's own type). The
/// orders are part of what the guest observes, and so of the recorded
/// trace hashes: keep them.
macro_rules! in_service_order {
    ($devices:expr, |$slot:ident, $port:ident| $body:block) => {{
        let d: &mut Devices = $devices;
        {
            let ($slot, $port) = (0usize, Some(&mut d.ctl));
            $body
        }
        {
            let ($slot, $port) = (1usize, d.net.as_mut());
            $body
        }
        {
            let ($slot, $port) = (2usize, d.disk.as_mut());
            $body
        }
        {
            let ($slot, $port) = (3usize, Some(&mut d.rng));
            $body
        }
        {
            let ($slot, $port) = (4usize, d.root.as_mut());
            $body
        }
    }};
}

/// Runs `$body` for each device present, `$port` a `&mut Port<_>`, in the
/// order owed interrupts are raised and their replies collected: control
/// line, network, data disk, root disk, entropy.
macro_rules! in_interrupt_order {
    ($devices:expr, |$port:ident| $body:block) => {{
        let d: &mut Devices = $devices;
        {
            let $port = &mut d.ctl;
            $body
        }
        if let Some($port) = d.net.as_mut() {
            $body
        }
        if let Some($port) = d.disk.as_mut() {
            $body
        }
        if let Some($port) = d.root.as_mut() {
            $body
        }
        {
            let $port = &mut d.rng;
            $body
        }
    }};
}

impl Devices {
    /// Listens on each device's socket in `cfg.run_dir`, with `disk` behind
    /// the data disk. (The guest connects to them only once it runs.)
    pub fn listen(cfg: &NodeConfig, disk: Option<Disk>) -> Result<Devices, NodeError> {
        let node = cfg.node_id;
        let dir = &cfg.run_dir;
        let err = |device: &'static str| move |source| UmlError::Device { node, device, source };
        let net =
            if cfg.net { Some(NetPort::listen(&dir.join("net.sock"), node).map_err(err(Net::NAME))?) } else { None };
        let disk = match disk {
            None => None,
            Some(d) => {
                let outstanding = d.outstanding().count();
                if outstanding > 0 {
                    return Err(NodeError::DiskBusy { node, outstanding });
                }
                Some(DiskPort::listen(&dir.join("blk.sock"), d, cfg.read_faults).map_err(err(Blk::NAME))?)
            }
        };
        let root = match &cfg.root_disk {
            None => None,
            Some(image) => Some(DiskPort::listen_root(&dir.join("root.sock"), image.clone()).map_err(err(Blk::NAME))?),
        };
        let ctl = Port::open(&dir.join("ctl.sock"), Control::NAME, VirtioConsole::new(), Control::default())
            .map_err(err(Control::NAME))?;
        let rng = Port::open(&dir.join("rng.sock"), ENTROPY, VirtioRng::new(cfg.entropy_seed), NoHook::default())
            .map_err(err(ENTROPY))?;
        Ok(Devices { node, ctl, net, disk, rng, root })
    }

    /// The optional devices, for the kernel command line.
    pub fn attached(&self) -> Attached {
        Attached { net: self.net.is_some(), disk: self.disk.is_some(), root: self.root.is_some() }
    }

    /// The poll set of a wait for the guest's next message on `conn`.
    pub fn poll_set(&mut self, conn: RawFd) -> PollSet {
        let mut pfd = vec![pollin(conn)];
        let mut ends = [0usize; 5];
        in_service_order!(self, |slot, port| {
            pfd.extend(port.map(|p| p.fds()).unwrap_or_default().into_iter().map(pollin));
            ends[slot] = pfd.len();
        });
        PollSet { pfd, ends }
    }

    /// Serves every device that `polled` found readable, in service order;
    /// what the guest submitted is stamped with `time`.
    pub fn serve_ready(&mut self, polled: &PollSet, time: VirtualTime) -> Result<(), UmlError> {
        let node = self.node;
        in_service_order!(self, |slot, port| {
            let from = if slot == 0 { 1 } else { polled.ends[slot - 1] };
            let ready = polled.pfd[from..polled.ends[slot]].iter().any(|p| p.revents != 0);
            if let Some(port) = port.filter(|_| ready) {
                port.serve(time).map_err(|source| UmlError::Device { node, device: port.name(), source })?;
            }
        });
        Ok(())
    }

    /// Sends a call for every interrupt owed, device by device.
    pub fn raise_owed(&mut self) -> Result<(), UmlError> {
        let node = self.node;
        in_interrupt_order!(self, |port| {
            port.raise_owed().map_err(|source| UmlError::Device { node, device: port.name(), source })?;
        });
        Ok(())
    }

    /// Collects call replies; returns how many calls are still unanswered,
    /// and adds the descriptors to poll for their replies to `fds`.
    pub fn collect_call_replies(&mut self, fds: &mut Vec<RawFd>) -> Result<usize, UmlError> {
        let node = self.node;
        let mut in_flight = 0;
        in_interrupt_order!(self, |port| {
            in_flight +=
                port.collect_call_replies().map_err(|source| UmlError::Device { node, device: port.name(), source })?;
            fds.extend(port.call_reply_fd());
        });
        Ok(in_flight)
    }

    /// Engine input for the control line that now fits the guest's buffers
    /// goes in (the node is stopped); its interrupt is owed.
    /// Whether input waits for the guest's buffers: control bytes or
    /// frames that did not fit yet.
    pub fn owes_input(&self) -> bool {
        self.ctl.backend.device().has_input() || self.net.as_ref().is_some_and(|n| n.has_backlog())
    }

    pub fn flush_control_input(&mut self) -> Result<(), UmlError> {
        let node = self.node;
        self.ctl.flush_input().map_err(|source| UmlError::Device { node, device: Control::NAME, source })
    }
}
