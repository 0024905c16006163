//! One vhost-user device of a user-mode Linux node, whatever its kind:
//! [`Port`]: its back end, the interrupts owed on it, and its [`KickHook`]
//! (what differs between devices: what a kick does); and the face the
//! node's loops use, the same for every kind: poll, serve, raise owed
//! interrupts, collect their replies.
//!
//! Invariant: a device's effects on guest memory happen only while the
//! guest waits for our reply to its kick (NEED_REPLY) or is stopped; its
//! interrupts are owed and delivered in-band while the node is stopped, at
//! a virtual time the engine picks.

use std::collections::BTreeSet;
use std::os::fd::RawFd;
use std::path::Path;

use simtime::VirtualTime;

use crate::vhost_user::{DeviceEvent, VhostUserBackend, VhostUserError};
use crate::virtio::KickHook;

/// One device of the node: its vhost-user back end, the interrupts owed on
/// it, and its kind's own state: the hook its kicks go through (with the
/// node's clock; the guest waits for our reply), whose `reset` is the
/// front end's disconnection.
pub(super) struct Port<K: KickHook> {
    pub backend: VhostUserBackend<K::Device>,
    /// The device, as errors name it.
    name: &'static str,
    /// Queues whose used-buffer interrupt is owed to the guest at its next
    /// stop, raised in queue order.
    owed: BTreeSet<u16>,
    pub kind: K,
}

impl<K: KickHook> Port<K> {
    /// Listens on `path` with `device` behind it; errors call it `name`.
    pub fn open(path: &Path, name: &'static str, device: K::Device, kind: K) -> Result<Port<K>, VhostUserError> {
        Ok(Port { backend: VhostUserBackend::listen(path, device)?, name, owed: BTreeSet::new(), kind })
    }

    /// `queue`'s interrupt is owed at the node's next stop.
    pub fn owe(&mut self, queue: u16) {
        self.owed.insert(queue);
    }
}

/// What the node's loops do with every device, whatever its kind (see
/// `uml/devices.rs`, which visits them in fixed orders, each with its own
/// type: no dynamic dispatch).
impl<K: KickHook> Port<K> {
    /// The device, as errors name it.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Descriptors to poll for the guest's messages.
    pub fn fds(&self) -> Vec<RawFd> {
        self.backend.fds()
    }

    /// Answers everything the guest sent; kicks go through the hook with
    /// `time`.
    pub fn serve(&mut self, time: VirtualTime) -> Result<(), VhostUserError> {
        for ev in self.backend.handle_readable()? {
            match ev {
                DeviceEvent::Kicked { queue, interrupt } => {
                    let (dev, queues) = self.backend.device_and_queues();
                    let more = self.kind.kicked(dev, queues, queue, time)?;
                    if interrupt || more {
                        self.owed.insert(queue);
                    }
                }
                DeviceEvent::Disconnected => {
                    if self.kind.reset() {
                        self.owed.clear();
                    }
                }
                DeviceEvent::Connected | DeviceEvent::Ready => {}
            }
        }
        Ok(())
    }

    /// Sends a call for every owed interrupt (none while disconnected:
    /// they stay owed).
    pub fn raise_owed(&mut self) -> Result<(), VhostUserError> {
        if self.backend.is_connected() {
            for q in std::mem::take(&mut self.owed) {
                self.backend.send_call(q)?;
            }
        }
        Ok(())
    }

    /// Collects the guest's replies to calls; returns the calls still
    /// unanswered.
    pub fn collect_call_replies(&mut self) -> Result<usize, VhostUserError> {
        if self.backend.calls_in_flight() > 0 {
            self.backend.take_call_replies()?;
        }
        Ok(self.backend.calls_in_flight())
    }

    /// The descriptor to poll for call replies, while calls are unanswered.
    pub fn call_reply_fd(&self) -> Option<RawFd> {
        self.backend.call_reply_fd().filter(|_| self.backend.calls_in_flight() > 0)
    }
}
