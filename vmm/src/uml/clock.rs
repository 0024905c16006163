//! A user-mode Linux node's clock, as its time controller keeps it: our end
//! of the node's time-travel socket (`tt.sock`, the protocol of
//! [`super::timetravel`]) and, with the 7.2 kernel, the shared scheduling
//! page.
//!
//! Invariants:
//! - the node executes only between our grant (the ACK of its START, or
//!   RUN: [`Clock::grant`]) and its next WAIT ([`Clock::waited`]);
//! - the node's clock never moves backwards: every message that moves it
//!   (UPDATE, the answer to GET, an interrupt's time) takes the maximum;
//! - in shared-memory mode the guest's own clock is engine time less
//!   `boot_time`: only RUN's time is sent in the guest's domain.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use simtime::{NodeId, VirtualTime};

use super::error::UmlError;
use super::timetravel::{Msg, Op, ProtocolError, SchedShm};

/// One node's clock and the socket its guest talks time over.
pub(super) struct Clock {
    node: NodeId,
    /// Until the node connects.
    listener: Option<UnixListener>,
    conn: Option<UnixStream>,
    /// Sequence number of the START we have not acknowledged yet.
    pending_start: Option<u32>,
    /// The shared scheduling page, in shared-memory mode (see
    /// [`SchedShm`]); set when the guest's START is acknowledged with it.
    shm: Option<SchedShm>,
    /// Whether to offer the page at START
    /// ([`nodeapi::NodeConfig::shared_clock`]).
    offer_shm: bool,
    /// The engine time the node was started at ([`Self::start_at`]): 0 for
    /// a node that boots with the cluster. In shared-memory mode it is
    /// also the guest's offset into engine time (the page's clock when its
    /// START is acknowledged, before it ever runs; see [`Self::ack_start`]):
    /// its own clock is engine time less this.
    boot_time: VirtualTime,
    /// The node's virtual time as last granted or reported.
    time: VirtualTime,
    /// The time of the latest RUN.
    run_at: VirtualTime,
    /// The time the node asked to run at next (by message).
    requested: VirtualTime,
}

impl Clock {
    /// Listens on `tt.sock` in `run_dir` for node `node`.
    pub fn listen(node: NodeId, run_dir: &Path, offer_shm: bool) -> Result<Clock, UmlError> {
        let io_err = |what: &'static str| move |source| UmlError::Io { node, what, source };
        let sock = run_dir.join("tt.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).map_err(io_err("bind time-travel socket"))?;
        listener.set_nonblocking(true).map_err(io_err("socket"))?;
        Ok(Clock {
            node,
            listener: Some(listener),
            conn: None,
            pending_start: None,
            shm: None,
            offer_shm,
            boot_time: VirtualTime::ZERO,
            time: VirtualTime::ZERO,
            run_at: VirtualTime::ZERO,
            requested: VirtualTime::ZERO,
        })
    }

    /// Accepts the node's connection if it has connected (never blocks).
    pub fn try_accept(&mut self) -> Result<bool, UmlError> {
        let node = self.node;
        let io_err = |what: &'static str| move |source| UmlError::Io { node, what, source };
        let listener = self.listener.as_ref().expect("the node connects once");
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(source) => return Err(io_err("accept")(source)),
        };
        stream.set_nonblocking(false).map_err(io_err("socket"))?;
        self.listener = None;
        self.conn = Some(stream);
        Ok(true)
    }

    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// The connection's descriptor, to poll.
    pub fn fd(&self) -> RawFd {
        self.conn.as_ref().expect("the node is connected").as_raw_fd()
    }

    /// Reads one message (the descriptor polled readable).
    pub fn read(&mut self) -> Result<Msg, ProtocolError> {
        Msg::read_from(self.conn.as_mut().expect("the node is connected"))
    }

    /// The node's clock starts at engine time `t`.
    pub fn start_at(&mut self, t: VirtualTime) {
        self.time = t;
        self.run_at = t;
        self.boot_time = t;
        self.requested = t;
    }

    /// The node sent START (sequence number `seq`): it waits for its first
    /// grant, which acknowledges it.
    pub fn hold_start(&mut self, seq: u32) {
        self.pending_start = Some(seq);
    }

    /// The node's virtual time as last granted or reported.
    pub fn time(&self) -> VirtualTime {
        self.time
    }

    /// The time this node wants to run at next. In shared-memory mode the
    /// guest publishes a request in the page (while it runs or takes an
    /// interrupt) instead of sending REQUEST; one it has not published
    /// since its last RUN leaves the previous request standing, as a
    /// missing REQUEST message does.
    pub fn requested(&self) -> VirtualTime {
        self.shm.as_ref().and_then(|s| s.request()).map(VirtualTime::from_ns).unwrap_or(self.requested)
    }

    /// Takes in the clock the guest published in the shared page (where it
    /// would send UPDATE), before anything is stamped with [`Self::time`].
    pub fn sync_shared_clock(&mut self) {
        if let Some(shm) = &self.shm {
            self.time = self.time.max(VirtualTime::from_ns(shm.current_time()));
        }
    }

    /// Lets the node run: acknowledges its START, or sends RUN at `at` (or
    /// its request, or its clock, whichever is latest). With the shared
    /// page and `free_until` later than that, the guest may take its own
    /// wake-ups before `free_until` without stopping (lookahead; see
    /// [`SchedShm`]); the message protocol has no such thing.
    pub fn grant(&mut self, at: VirtualTime, free_until: Option<VirtualTime>) -> Result<(), UmlError> {
        if let Some(seq) = self.pending_start.take() {
            return self.ack_start(seq);
        }
        self.requested = self.requested();
        self.time = at.max(self.requested).max(self.time);
        self.run_at = self.time;
        let run_at = match &self.shm {
            Some(shm) => {
                // What the guest's clock reads until it publishes its
                // own. RUN's time is not offset by the guest (7.2's
                // time.c sets it as is), so it is sent in the guest's
                // domain.
                shm.set_current_time(self.time.as_ns());
                shm.clear_free_runs();
                shm.set_free_until(free_until.filter(|&t| t > self.time).unwrap_or(self.boot_time).as_ns());
                self.time.as_ns() - self.boot_time.as_ns()
            }
            None => self.time.as_ns(),
        };
        self.send(Op::Run, 0, run_at)
    }

    /// Stops a guest that runs ahead at its next wake-up: a device message
    /// came, which the engine may have to act on before anything else.
    pub fn end_free_run(&mut self) {
        if let Some(shm) = &self.shm {
            shm.set_free_until(self.boot_time.as_ns());
        }
    }

    /// The wake-ups the guest took by itself since its last RUN (see
    /// [`SchedShm::free_runs`]), with the clock after the latest one.
    ///
    /// A guest clock past the RUN with nothing counted is a guest that ran
    /// ahead without counting (a kernel without patch 7.2/0002): its trace
    /// would silently lose grants, so that is an error, not a result.
    pub fn free_runs(&mut self) -> Result<nodeapi::FreeRuns, UmlError> {
        let Some(shm) = &self.shm else { return Ok(nodeapi::FreeRuns::default()) };
        let (count, prev) = shm.free_runs();
        let clock = VirtualTime::from_ns(shm.current_time());
        if count == 0 {
            if clock > self.run_at {
                return Err(UmlError::UncountedFreeRuns { node: self.node, run_at: self.run_at, clock });
            }
            return Ok(nodeapi::FreeRuns::default());
        }
        self.sync_shared_clock();
        let (prev, last) = (VirtualTime::from_ns(prev), self.time);
        Ok(nodeapi::FreeRuns { count, prev, last })
    }

    /// The regular files with dirty pages in the guest's page cache, as of
    /// its latest idle stop ([`SchedShm::dirty_files`]); `None` without a shared page
    /// (`time_travel = "messages"`).
    pub fn dirty_files(&self) -> Option<u64> {
        self.shm.as_ref().map(|s| s.dirty_files())
    }

    /// How many wake-ups the guest has taken by itself since its last RUN
    /// (progress, for the watchdog).
    pub fn free_run_count(&self) -> u64 {
        self.shm.as_ref().map_or(0, |s| s.free_runs().0)
    }

    /// Answers the guest's START: with the shared page where the guest
    /// should use one (the ACK then carries its client id and the page's
    /// descriptor), else with a plain ACK.
    fn ack_start(&mut self, seq: u32) -> Result<(), UmlError> {
        if !self.offer_shm {
            return self.send(Op::Ack, seq, 0);
        }
        let node = self.node;
        // The guest takes the page's clock at START as its offset into our
        // time domain: from then on it reads and publishes engine time in
        // the page, while its own clock starts at 0. A node that boots with
        // the cluster starts at 0 anyway; one restarted after a power loss
        // boots at the engine's "now" with a monotonic clock from 0, as a
        // rebooted machine does. (With messages, its first GET moves its
        // clock to "now" instead; the page leaves no moment for that,
        // since the guest reads it as soon as it runs.)
        // START is acknowledged before the node ever runs, so its clock is
        // still the start time.
        debug_assert_eq!(self.time, self.boot_time);
        let shm = SchedShm::new().map_err(|source| UmlError::Io { node, what: "shared time-travel page", source })?;
        shm.start_at(self.boot_time.as_ns());
        let conn = self.conn.as_ref().expect("the node is connected");
        shm.send_start_ack(conn, seq).map_err(|source| UmlError::Protocol { node, source })?;
        self.shm = Some(shm);
        Ok(())
    }

    /// Answers GET_TOD: the cluster's time of day at virtual time 0 plus
    /// the node's start time. The guest takes this as the time of day
    /// "now", at its boot: a node restarted after a power loss at engine
    /// time t must read the cluster's date plus t, or its wall clock would
    /// be t behind every other node's (with either transport: the guest
    /// subtracts its own clock at the GET that follows, which is t with
    /// messages and 0 with the shared page, whose clock it counts from its
    /// offset).
    pub fn answer_time_of_day(&mut self, seq: u32, time_of_day: u64) -> Result<(), UmlError> {
        self.send(Op::Ack, seq, time_of_day + self.boot_time.as_ns())
    }

    /// The node sent WAIT (sequence number `seq`): it is stopped until the
    /// next grant. Returns the time it wants to run at.
    pub fn waited(&mut self, seq: u32) -> Result<VirtualTime, UmlError> {
        // A guest that refused the page (another layout version) speaks
        // the message protocol: so do we, from now on.
        if self.shm.as_ref().is_some_and(|s| !s.guest_attached()) {
            self.shm = None;
        }
        // No ACK for WAIT in shared-memory mode.
        if self.shm.is_none() {
            self.send(Op::Ack, seq, 0)?;
        }
        self.requested = self.requested();
        Ok(self.requested)
    }

    /// An interrupt reaches the stopped node at `t`: in shared-memory mode
    /// its handler reads its clock from the page (where it would send GET,
    /// answered with `t`).
    ///
    /// Nothing may reach a node in its past (its clock as it last published
    /// it): the engine bounds every node's lookahead by every delivery, so
    /// an interrupt before its clock is an engine bug, reported as one.
    pub fn interrupt_at(&mut self, t: VirtualTime) -> Result<(), UmlError> {
        self.sync_shared_clock();
        if let Some(shm) = &self.shm {
            if t < self.time {
                return Err(UmlError::InThePast { node: self.node, at: t, clock: self.time });
            }
            self.time = t;
            shm.set_current_time(self.time.as_ns());
        }
        Ok(())
    }

    /// Answers the messages a node may send whenever it talks to us, running
    /// or taking an interrupt: REQUEST (its next wake-up), UPDATE (its clock
    /// moved) and GET (answered with `get_time`, which its clock moves to;
    /// never backwards). Returns false, answering nothing, for other ops.
    pub fn answer_clock_message(&mut self, msg: &Msg, get_time: VirtualTime) -> Result<bool, UmlError> {
        let reply = match msg.op {
            Op::Request => {
                self.requested = VirtualTime::from_ns(msg.time);
                0
            }
            Op::Update => {
                self.time = self.time.max(VirtualTime::from_ns(msg.time));
                0
            }
            Op::Get => {
                self.time = self.time.max(get_time);
                self.time.as_ns()
            }
            _ => return Ok(false),
        };
        self.send(Op::Ack, msg.seq, reply)?;
        Ok(true)
    }

    /// Writes one message to the node's time-travel socket: where the
    /// node's times become the protocol's ns.
    fn send(&mut self, op: Op, seq: u32, time: u64) -> Result<(), UmlError> {
        let conn = self.conn.as_mut().expect("the node is connected");
        Msg::new(op, seq, time).write_to(conn).map_err(|source| UmlError::Protocol { node: self.node, source })
    }
}
