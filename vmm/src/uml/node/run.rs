//! Running a user-mode Linux node: a grant ([`UmlNode::run_until_stop`]),
//! the wait for its next time-travel message while its devices are served
//! ([`UmlNode::read_msg`]), and what reaches it while it is stopped
//! ([`UmlNode::settle`], [`UmlNode::raise_interrupts`]).
//!
//! Invariant: everything the node produced is stamped at a message
//! boundary ([`UmlNode::drain`]) with the clock as the guest handed control
//! to us; the node is stopped while we handle each of its messages.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use simtime::{NodeId, VirtualTime};

use super::UmlNode;
use crate::uml::error::UmlError;
use crate::uml::net::Net;
use crate::uml::timetravel::{Msg, Op, ProtocolError};
use crate::vhost_user::VhostUserError;
use nodeapi::{GuestOutput, OutputStream, RunOutcome};

/// How long one wait in `poll` lasts at most, ms (the watchdogs are checked
/// in between).
const POLL_MS: i32 = 100;

/// A wait for the next message without a watchdog gives up after this.
const NO_LIMIT_GIVES_UP: Duration = Duration::from_secs(120);

impl UmlNode {
    /// Lets the node run at virtual time `at`, which may be later than the
    /// node asked for (never earlier): the engine may let other events due
    /// within its clock window go first, and this node's timer then fires
    /// late, as a timer on a loaded machine does. Runs until the node
    /// waits, exits, or trips the wall-clock `watchdog`; its output goes to
    /// `out`, stamped. `time_of_day` answers GET_TOD. With `free_until`,
    /// the node may take its own wake-ups before it without stopping
    /// (lookahead, [`nodeapi::NodeRuntime::grant_ahead`]); the watchdog
    /// then counts from its latest one, since each is a grant of its own.
    pub(super) fn run_until_stop(
        &mut self,
        at: VirtualTime,
        free_until: Option<VirtualTime>,
        time_of_day: u64,
        watchdog: Duration,
        out: &mut Vec<GuestOutput>,
    ) -> Result<RunOutcome, UmlError> {
        assert!(!self.exited, "grant to an exited node");
        assert!(self.clock.is_connected(), "grant before wait_connected");
        self.clock.grant(at, free_until)?;
        let mut began = Instant::now();
        let mut progress = 0;
        loop {
            let left = watchdog.saturating_sub(began.elapsed());
            let msg = match self.read_msg(Some(left))? {
                Some(m) => m,
                None if self.exited => {
                    self.drain(out);
                    let st = self.process.reap();
                    let (status, signal) = (st.and_then(|s| s.code()), st.and_then(|s| s.signal()));
                    return Ok(RunOutcome::Exited { status, signal });
                }
                None if self.clock.free_run_count() > progress => {
                    // Running ahead, not hung: it took wake-ups meanwhile.
                    progress = self.clock.free_run_count();
                    began = Instant::now();
                    continue;
                }
                None => {
                    self.drain(out);
                    return Ok(RunOutcome::Hung { wall: began.elapsed() });
                }
            };
            self.drain(out);
            match msg.op {
                Op::Ack => {} // the node's ACK of our RUN (not in shared-memory mode)
                Op::GetTod => self.clock.answer_time_of_day(msg.seq, time_of_day)?,
                Op::Wait => return Ok(RunOutcome::Waiting { requested: self.clock.waited(msg.seq)? }),
                _ if self.clock.answer_clock_message(&msg, self.clock.time())? => {}
                _ => return Err(UmlError::Unexpected { node: self.id, msg, state: "running" }),
            }
        }
    }

    /// Reads one message, serving the node's devices while waiting. `None`:
    /// the socket closed (the node exited; `self.exited` is set) or `limit`
    /// passed.
    pub(super) fn read_msg(&mut self, limit: Option<Duration>) -> Result<Option<Msg>, UmlError> {
        let began = Instant::now();
        loop {
            let wait_ms = match limit {
                Some(l) => {
                    let left = l.saturating_sub(began.elapsed());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.as_millis().min(POLL_MS as u128) as i32
                }
                None => POLL_MS,
            };
            // The console is a file, read at message boundaries only.
            let mut polled = self.devices.poll_set(self.clock.fd());
            if !poll(self.id, &mut polled.pfd, wait_ms.max(1))? {
                continue;
            }
            // Frames, disk requests and output are stamped with the guest's
            // clock as it stands when it hands control to us.
            self.clock.sync_shared_clock();
            // A guest running ahead stops at its next wake-up: what it
            // sent may change what happens next (written while it waits
            // for our reply; where a message needs none, stopping a little
            // later or sooner changes nothing but the number of round
            // trips).
            self.clock.end_free_run();
            // The guest waits for our answer to each device message (a kick
            // carries NEED_REPLY), so it is stopped while the device works,
            // and frames and disk requests are stamped with its current time.
            self.devices.serve_ready(&polled, self.clock.time())?;
            if polled.pfd[0].revents != 0 {
                return self.receive();
            }
            if limit.is_none() && began.elapsed() > NO_LIMIT_GIVES_UP {
                return Ok(None);
            }
        }
    }

    /// Reads the message the socket polled readable for; `None` when the
    /// node closed it (it exited).
    fn receive(&mut self) -> Result<Option<Msg>, UmlError> {
        match self.clock.read() {
            Ok(m) => Ok(Some(m)),
            Err(ProtocolError::Closed) => {
                self.exited = true;
                Ok(None)
            }
            Err(ProtocolError::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                self.exited = true;
                Ok(None)
            }
            Err(source) => Err(UmlError::Protocol { node: self.id, source }),
        }
    }

    /// Stamps everything the node wrote since its previous message (its
    /// console, then its control line) with its current virtual time. Call
    /// at every message boundary.
    pub(super) fn drain(&mut self, out: &mut Vec<GuestOutput>) {
        self.console.read_new();
        let time = self.clock.time();
        let console = self.console.take_unstamped();
        let control = self.devices.ctl.take_output();
        for (stream, bytes) in [(OutputStream::Console, console), (OutputStream::Control, control)] {
            if !bytes.is_empty() {
                out.push(GuestOutput { time, stream, bytes });
            }
        }
    }

    /// Delivers what is owed to the stopped guest at virtual time `t`:
    /// queued control input and backlogged frames that now fit, and every
    /// pending interrupt. Every grant that ends in a wait ends with this.
    pub(super) fn settle(&mut self, t: VirtualTime, watchdog: Duration) -> Result<(), UmlError> {
        let node = self.id;
        self.devices.flush_control_input()?;
        if let Some(net) = self.devices.net.as_mut().filter(|n| n.has_backlog()) {
            net.fill_from_backlog().map_err(|e| UmlError::Device {
                node,
                device: Net::NAME,
                source: VhostUserError::Device(e),
            })?;
        }
        self.raise_interrupts(t, watchdog)
    }

    /// Delivers every interrupt owed to the stopped guest, at virtual time
    /// `t`: each is an in-band call the guest's SIGIO handler takes by
    /// asking us the time (we answer `t`) and requesting to run at it.
    /// See `vmm::vhost_user` for the exact sequence.
    pub(super) fn raise_interrupts(&mut self, t: VirtualTime, watchdog: Duration) -> Result<(), UmlError> {
        self.clock.interrupt_at(t)?;
        self.devices.raise_owed()?;
        let began = Instant::now();
        loop {
            let mut fds = vec![self.clock.fd()];
            if self.devices.collect_call_replies(&mut fds)? == 0 {
                return Ok(());
            }
            if began.elapsed() > watchdog {
                return Err(UmlError::InterruptTimeout { node: self.id, secs: watchdog.as_secs() });
            }
            let mut pfd: Vec<libc::pollfd> =
                fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
            if !poll(self.id, &mut pfd, POLL_MS)? || pfd[0].revents == 0 {
                continue;
            }
            let msg = match self.clock.read() {
                Ok(m) => m,
                Err(ProtocolError::Closed) => {
                    self.exited = true;
                    return Ok(());
                }
                Err(source) => return Err(UmlError::Protocol { node: self.id, source }),
            };
            if !self.clock.answer_clock_message(&msg, t)? {
                return Err(UmlError::Unexpected { node: self.id, msg, state: "taking an interrupt" });
            }
        }
    }
}

/// Polls `pfd` for readability for up to `ms` milliseconds. False when a
/// signal interrupted the wait (poll again).
fn poll(node: NodeId, pfd: &mut [libc::pollfd], ms: i32) -> Result<bool, UmlError> {
    // SAFETY: pfd is a valid array of pollfd.
    let n = unsafe { libc::poll(pfd.as_mut_ptr(), pfd.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(UmlError::Io { node, what: "poll", source: e });
    }
    Ok(true)
}
