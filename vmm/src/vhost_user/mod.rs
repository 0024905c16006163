//! vhost-user transport for the user-mode Linux runtime.
//!
//! Each guest device is a [`VhostUserBackend`]: a unix socket we listen on
//! and the guest's `virtio_uml` driver connects to
//! (`virtio_uml.device=<socket>:<virtio id>` on the kernel command line;
//! `virtio_uml_probe` → `os_connect_socket`). The back end is
//! single-threaded and never blocks on the guest: the engine polls
//! [`VhostUserBackend::fds`] next to the node's time-travel socket and calls
//! [`VhostUserBackend::handle_readable`].
//!
//! # Negotiation (what `virtio_uml.c` in linux 6.1 does)
//!
//! The driver sends SET_OWNER, GET_FEATURES, GET_PROTOCOL_FEATURES and
//! SET_PROTOCOL_FEATURES (masked with its own set: REPLY_ACK, SLAVE_REQ,
//! CONFIG, INBAND_NOTIFICATIONS; we offer all four), then SET_SLAVE_REQ_FD
//! with one end of a `socketpair` (the *back-end channel*). From
//! SET_PROTOCOL_FEATURES on, every message that does not already expect an
//! answer carries NEED_REPLY and the driver waits for our ACK. Later come
//! GET_CONFIG (always `offset 0, size offset+len`), SET_FEATURES,
//! SET_MEM_TABLE (one region of its physical-memory file, passed as a
//! descriptor; `guest_addr == user_addr`), and per queue SET_VRING_NUM,
//! SET_VRING_BASE, SET_VRING_ADDR, SET_VRING_ENABLE. With in-band
//! notifications *and* the back-end channel it sends no SET_VRING_KICK or
//! SET_VRING_CALL at all (`vu_setup_vq` / `vu_setup_vq_call_fd`).
//!
//! # Kicks: the guest waits for us
//!
//! `vu_notify` first sends UPDATE on the time-travel socket
//! (`time_travel_propagate_time`, only if its clock moved since the last
//! one) and waits for the ACK, then sends VHOST_USER_VRING_KICK with
//! NEED_REPLY on the vhost-user socket and waits for our reply in
//! `time_travel_wait_readable`, which polls that socket *and* the
//! time-travel socket. So while a node runs, the engine must poll the
//! node's device sockets alongside its time-travel socket.
//! [`VhostUserBackend::handle_readable`] lets the device process the queue
//! (TX frames are copied out, block requests accepted) *before* writing the
//! ACK: the guest is blocked, so guest memory is quiescent, and the frame's
//! virtual timestamp is the node's current time (the last RUN, GET answer
//! or UPDATE).
//!
//! # Interrupts: an engine action, delivered while the node is stopped
//!
//! Device effects on guest memory (RX frames, block completions) and the
//! interrupts that announce them are written only while the node is
//! stopped, i.e. after it sent WAIT and before we send RUN. The exact
//! sequence, from `vu_req_read_message` (registered with
//! `um_request_irq_tt`, so it runs straight from the SIGIO handler even
//! while the node idles waiting for RUN) and `time_travel_add_irq_event`
//! in `arch/um/kernel/time.c`:
//!
//! 1. node → controller: WAIT; controller ACKs; the node is stopped in
//!    `time_travel_ext_wait`, waiting for RUN. Say it last REQUESTed `R`.
//! 2. engine: writes the effect (`VirtioNet::deliver`,
//!    `VirtioBlk::complete`), asks `Queues::needs_interrupt`, and if so
//!    [`VhostUserBackend::send_call`]`(queue)`: a SLAVE_VRING_CALL with
//!    NEED_REPLY on the back-end channel. Nothing else is written yet.
//! 3. node (SIGIO handler, `vu_req_read_message`): reads the call, marks
//!    the queue, and calls `time_travel_add_irq_event`, which sends
//!    GET on the time-travel socket. The controller ACKs it with the
//!    delivery time `T` (`node time <= T <= R`); the node sets its clock
//!    to `T`.
//! 4. node: queues the interrupt event at `T` and, since that is now its
//!    earliest event, sends REQUEST(`T`); the controller ACKs and records
//!    `T` as the node's requested time. (A second call while the first
//!    event is still pending sends GET but no REQUEST.)
//! 5. node: replies to the call on the back-end channel (u64 0 = taken).
//!    The engine collects it with [`VhostUserBackend::take_call_replies`]
//!    (or `try_call_reply` until `None`: replies already buffered do not
//!    make the fd readable again), polling
//!    [`VhostUserBackend::call_reply_fd`] while it keeps serving steps 3
//!    and 4 on the time-travel socket. Several calls (RX and TX of one
//!    device, or several devices) may be outstanding at once; the guest's
//!    handler reads every queued call in one go.
//! 6. engine, later: RUN(`T`). The node runs the interrupt handler
//!    (`vring_interrupt`) at exactly `T`.
//!
//! A call sent while the node runs would be handled at a host-scheduling
//! dependent point of its execution; don't. TX completions reported by
//! [`DeviceEvent::Kicked`] with `interrupt: true` are delivered the same
//! way at the node's next stop.
//!
//! `vmm/tests/vhost_user_uml.rs` checks this sequence against a real guest
//! (every call's handling starts with GET and leaves the node requesting
//! `T`) and that two runs produce the same time-travel message stream,
//! frames and disk contents — given the same kernel command line (Linux
//! mixes it into its RNG) and with the host's getrandom(2) denied to the
//! UML process (UML's `arch_get_random_longs` is host getrandom).

pub mod backend;
pub mod memory;
pub mod message;
pub mod protocol_error;

pub use backend::{DeviceEvent, VhostUserBackend, VhostUserError, OFFERED_PROTOCOL_FEATURES};

#[cfg(test)]
mod tests;
