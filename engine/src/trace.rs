//! The trace of one execution: every guest-visible event in the order the
//! engine decided it, with its virtual time, and the hash that names it.
//!
//! The trace is the product's contract: two runs with the same seed and the
//! same images must produce the same trace, byte for byte, so the hash is
//! taken over a canonical encoding (one JSON object per event, fields in
//! declaration order, `\n`-terminated). Nothing host-specific (wall time,
//! pids, host paths) may enter an event.
//!
//! # Quiet stretches fold
//!
//! The engine pushes a [`EventKind::Run`] for every grant, and a guest that
//! spins (a busy loop on the clock, the kernel's jitter-entropy loop) is
//! granted millions of times in a few virtual seconds while showing nothing
//! to anyone: one event per grant made a 422 MB trace of 9.9 million events
//! for 3 virtual seconds. So the trace is bounded by what guests saw, not by
//! how often the engine let them run. The rule, a pure function of the
//! sequence of pushes (so the same execution gives the same trace and hash,
//! and a replay compares line by line):
//!
//! - A *quiet stretch* is a maximal run of consecutive `Run` pushes (no other
//!   event between them, of any node).
//! - A quiet stretch is written as one `Run` event per node that ran in it,
//!   in the order of each node's first grant in the stretch, at the time of
//!   that first grant, with `grants` (how many grants of that node the
//!   stretch holds) and `until` (the time of its last one); both are left
//!   out for a single grant, so a lone grant encodes exactly as `Run` always
//!   did.
//! - Any other event ends the stretch. The grant that produced it (console
//!   output, a frame, a disk completion, an exit, an agent message) is the
//!   last grant of its node in the stretch before it: nothing a guest saw is
//!   folded away, only the count and interleaving of grants that showed
//!   nothing.
//!
//! Hence a trace holds at most (nodes + 1) `Run` events per other event.
//! Why across nodes and not only consecutive grants of one node: two nodes
//! spinning together alternate grants, and folding only same-node neighbours
//! would still write one event per grant. Between two visible events no
//! guest can have observed another's grants (nodes interact only through
//! frames, disks and the engine, all of which are events), so their
//! interleaving is not part of what guests saw.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::time::{Actor, NodeId};
use simtime::VirtualTime;

/// One event. It encodes as `{"time":NS,"node":N,"event":...}`: the time
/// in virtual ns since the cluster booted, the node by number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When it happened.
    pub time: VirtualTime,
    /// Where: a node, or [`Actor::Engine`] for the engine's own events.
    /// Encoded as the node's number (1-based, [`NodeId::number`]), 0 for
    /// the engine: the number traces always carried.
    pub node: Actor,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened. Variants are appended, never reordered or renamed:
/// their encoding is part of every recorded trace hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The node's kernel connected to the time controller.
    Boot,
    /// The engine let the node run (at `Event::time`), `grants` times in a
    /// quiet stretch, the last of them at `until` (see the module docs).
    /// A single grant leaves both out, so it encodes as `{"event":"run"}`
    /// exactly as before the fields existed: the fields were added to the
    /// variant instead of appending a new one so that every reader that
    /// matches `Run` (reports, the space-time diagram) keeps treating a
    /// folded stretch as runs, and old traces still parse.
    Run {
        /// Grants folded into this event (1: omitted).
        #[serde(default = "one", skip_serializing_if = "is_one")]
        grants: u64,
        /// Time of the last of them (omitted for one grant).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<VirtualTime>,
    },
    /// One line the node printed on its console (without the newline).
    Console {
        /// The line.
        text: String,
    },
    /// The engine sent a command to the node's agent.
    Command {
        /// The command's name (`workload`, an invariant, ...).
        name: String,
    },
    /// The node's agent reported a command finished.
    CommandDone {
        /// The command's name.
        name: String,
        /// Its exit status.
        status: i32,
    },
    /// The node's agent is up and the node's start command was launched.
    Ready,
    /// The node's kernel exited.
    Exit {
        /// The kernel process's exit status, if it exited.
        status: Option<i32>,
        /// The signal that killed it, if one did.
        signal: Option<i32>,
        /// The console showed a kernel panic.
        panic: bool,
    },
    /// The node stopped yielding to the time controller.
    Hung,
    /// A frame left `node` for `to`; `id` pairs it with its delivery.
    Send {
        /// The copy's delivery id.
        id: u64,
        /// The receiver (encoded as its number).
        to: NodeId,
        /// Frame length in bytes.
        len: u32,
        /// What the frame is (see `frames`).
        summary: String,
    },
    /// A frame from `from` reached `node`.
    Deliver {
        /// The delivery id its `send` carried.
        id: u64,
        /// The sender (encoded as its number).
        from: NodeId,
        /// Frame length in bytes.
        len: u32,
        /// What the frame is.
        summary: String,
    },
    /// A frame from `node` to `to` was lost.
    Drop {
        /// The copy's delivery id (top bit set for a copy never scheduled).
        id: u64,
        /// The receiver (encoded as its number).
        to: NodeId,
        /// Why it was lost.
        cause: DropCause,
    },
    /// The network was partitioned (engine event).
    Partition {
        /// Which links are cut.
        description: String,
    },
    /// The partition healed (engine event).
    Heal,
    /// The node lost power.
    Crash {
        /// The disk's crash state, for humans.
        detail: String,
    },
    /// The node was started again after a crash.
    Restart,
    /// A coordinated power failure (engine event): `nodes` lose power
    /// together; each node's `crash` follows at the same instant.
    PowerFailure {
        /// The nodes' names, in node order.
        nodes: Vec<String>,
    },
    /// An invariant was checked.
    Invariant {
        /// The check's name.
        name: String,
        /// It held.
        ok: bool,
    },
    /// Free-form engine remark that still belongs to the execution.
    Note {
        /// The remark.
        text: String,
    },
    /// A disk request of the node completed: `op` is read, write or flush;
    /// writes and flushes complete when the engine chooses, reads at once.
    Disk {
        /// The request's id on its disk.
        id: u64,
        /// Read, write or flush.
        op: DiskOp,
        /// First sector.
        sector: u64,
        /// Number of sectors.
        sectors: u64,
    },
    /// A disk fault (`[faults.disk]`) hit request `id` of the node, which
    /// completed just before (its `Disk` event): `fault` is corrupt_read,
    /// lost_flush, write_error or misdirect; `detail` says what the guest
    /// got.
    DiskFault {
        /// The request's id on its disk.
        id: u64,
        /// Which fault.
        fault: DiskFaultKind,
        /// What the guest got, for humans.
        detail: String,
    },
    /// The engine stopped the node's start command (SIGSTOP to its process
    /// group, `[faults.pause]`); it continues at `resume_at` unless the node
    /// crashes first or the quiet period begins.
    Pause {
        /// Virtual time (ns) the pause ends.
        resume_at: VirtualTime,
    },
    /// The node's paused start command continued (SIGCONT).
    Resume,
    /// The node booted with its wall clock `offset_ns` away from the
    /// cluster's (`[faults.clock] offset`; negative: behind).
    ClockOffset {
        /// The offset (ns).
        offset_ns: i64,
    },
    /// The node booted with its clocks running `ppm` parts per million
    /// fast (negative: slow) against virtual time (`[faults.clock] drift_ppm`).
    ClockDrift {
        /// The drift (parts per million).
        ppm: i64,
    },
    /// The node's wall clock jumped by `delta_ns` (`[faults.clock] bump`).
    ClockBump {
        /// The jump (ns).
        delta_ns: i64,
    },
    /// The node's wall clock began to jump forward by `delta_ns` and back
    /// again every `period_ns`, for `length_ns` (`[faults.clock] strobe`).
    ClockStrobe {
        /// Each jump (ns).
        delta_ns: i64,
        /// Time between jumps (ns).
        period_ns: u64,
        /// How long the strobe lasts (ns).
        length_ns: u64,
    },
    /// The engine reset a TCP connection (`[faults.connection]`, engine
    /// event): its frames in flight were lost, and an RST goes to each
    /// end (their `send`s follow).
    ConnReset {
        /// One end, `node:port` (the lesser).
        a: String,
        /// The other end.
        b: String,
        /// The connection's frames in flight it dropped.
        dropped: u64,
    },
    /// The engine stalled a TCP connection (engine event): its frames
    /// from `from` to `to` (both ways with `both`) arrive at `until` at
    /// the earliest, in order; other connections flow.
    ConnStall {
        /// The sending end, `node:port`.
        from: String,
        /// The receiving end.
        to: String,
        /// Both ways.
        both: bool,
        /// When the stall ends (virtual ns).
        until: VirtualTime,
        /// Frames in flight it held.
        held: u64,
    },
    /// The engine killed the node's start command (SIGKILL to its process
    /// group, `[faults.kill]`): the kernel, its page cache and the disk
    /// stay. The start command runs again at `restart_at` (its `respawn`)
    /// unless the node crashes first.
    Kill {
        /// Virtual time (ns) the start command runs again.
        restart_at: VirtualTime,
    },
    /// The node's killed start command was started again.
    Respawn,
    /// The node's role probe (`[roles]`) printed `role` first, a word other
    /// than the one it printed last since the node booted.
    Role {
        /// The first word the probe printed.
        role: String,
    },
}

/// Why a frame copy was lost (`Drop::cause`). The serde names are the
/// strings traces always carried: part of every recorded trace hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DropCause {
    /// The link was cut by a partition when the frame was sent.
    #[serde(rename = "partition")]
    Partition,
    /// The link's `loss` probability drew it.
    #[serde(rename = "loss")]
    Loss,
    /// The receiver was down when the frame was due.
    #[serde(rename = "node down")]
    NodeDown,
}

impl DropCause {
    /// The trace's string: `partition`, `loss` or `node down`.
    pub fn as_str(self) -> &'static str {
        match self {
            DropCause::Partition => "partition",
            DropCause::Loss => "loss",
            DropCause::NodeDown => "node down",
        }
    }
}

/// What a disk request did (`Disk::op`); serialised as `read`, `write`,
/// `flush`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiskOp {
    /// A read (answered at its kick).
    Read,
    /// A write (completed when the engine chooses).
    Write,
    /// A flush (completed when the engine chooses).
    Flush,
}

impl DiskOp {
    /// The trace's string: `read`, `write` or `flush`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskOp::Read => "read",
            DiskOp::Write => "write",
            DiskOp::Flush => "flush",
        }
    }
}

/// Which `[faults.disk]` fault hit a request (`DiskFault::fault`), by its
/// `[faults.disk]` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiskFaultKind {
    /// A read returned flipped bits.
    CorruptRead,
    /// A flush made nothing durable.
    LostFlush,
    /// A write failed with an I/O error.
    WriteError,
    /// A write landed at another sector.
    Misdirect,
}

impl DiskFaultKind {
    /// The trace's string: the `[faults.disk]` key.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskFaultKind::CorruptRead => "corrupt_read",
            DiskFaultKind::LostFlush => "lost_flush",
            DiskFaultKind::WriteError => "write_error",
            DiskFaultKind::Misdirect => "misdirect",
        }
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(DropCause, DiskOp, DiskFaultKind);

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

impl EventKind {
    /// One grant of a node.
    pub fn run() -> EventKind {
        EventKind::Run { grants: 1, until: None }
    }

    /// Grants a `Run` event stands for; 0 for other events.
    pub fn grants(&self) -> u64 {
        match self {
            EventKind::Run { grants, .. } => *grants,
            _ => 0,
        }
    }
}

impl Event {
    /// The latest virtual time the event covers: `until` of a folded run,
    /// else `time`.
    pub fn end_time(&self) -> VirtualTime {
        match self.kind {
            EventKind::Run { until: Some(u), .. } => u.max(self.time),
            _ => self.time,
        }
    }

    /// The node the event happened on; `None` for the engine's events.
    pub fn node_id(&self) -> Option<NodeId> {
        self.node.node()
    }
}

/// As its JSON lines ([`Trace::to_jsonl`]), one string.
impl Serialize for Trace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_jsonl())
    }
}

/// From its JSON lines, the hash recomputed ([`Trace::from_jsonl`]).
impl<'de> Deserialize<'de> for Trace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Trace, D::Error> {
        let text = String::deserialize(d)?;
        Trace::from_jsonl(&text).map_err(serde::de::Error::custom)
    }
}

/// An append-only trace with a running hash; `Run` pushes fold (see the
/// module docs).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    events: Vec<Event>,
    /// Covers `events[..sealed]`. Invariant: `events[sealed..]` is the open
    /// quiet stretch, `Run` events only, at most one per node; they are
    /// hashed when the stretch ends (or, on a copy of the hasher, by
    /// [`Trace::hash`]), because their counts may still grow.
    hasher: Sha256,
    sealed: usize,
    /// Events other than `Run` pushed so far: it changes exactly when a
    /// quiet stretch ends, so the engine can tell a grant that showed
    /// something from one that did not.
    visible: u64,
}

fn encode(ev: &Event) -> Vec<u8> {
    let mut line = serde_json::to_vec(ev).expect("events always serialise");
    line.push(b'\n');
    line
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Trace {
        Trace::default()
    }

    /// Appends an event of `node`; a `Run` folds into its node's `Run` of
    /// the open quiet stretch, if the node has one.
    pub fn push(&mut self, time: VirtualTime, node: NodeId, kind: EventKind) {
        self.push_at(time, Actor::Node(node), kind);
    }

    /// Appends an event of the engine's own ([`Actor::Engine`]: partitions,
    /// notes).
    pub fn push_engine(&mut self, time: VirtualTime, kind: EventKind) {
        self.push_at(time, Actor::Engine, kind);
    }

    /// Appends an event of `node`, a node or the engine.
    fn push_at(&mut self, time: VirtualTime, node: Actor, kind: EventKind) {
        if let EventKind::Run { grants, until } = kind {
            let last = until.unwrap_or(time);
            if let Some(open) = self.events[self.sealed..].iter_mut().find(|e| e.node == node) {
                let EventKind::Run { grants: g, until: u } = &mut open.kind else {
                    unreachable!("only runs stay open")
                };
                *g += grants;
                *u = Some(last);
                return;
            }
            // Normalised so that `until` is present exactly when the event
            // stands for more than one grant.
            let until = (grants > 1).then_some(last);
            self.events.push(Event { time, node, kind: EventKind::Run { grants, until } });
            return;
        }
        self.seal();
        self.visible += 1;
        self.append_sealed(Event { time, node, kind });
    }

    /// Ends the open quiet stretch: its runs are final and hashed.
    fn seal(&mut self) {
        for ev in &self.events[self.sealed..] {
            self.hasher.update(encode(ev));
        }
        self.sealed = self.events.len();
    }

    /// Appends `ev` as it is, hashed at once (no folding).
    fn append_sealed(&mut self, ev: Event) {
        self.seal();
        self.hasher.update(encode(&ev));
        self.events.push(ev);
        self.sealed = self.events.len();
    }

    /// Events other than `Run` pushed so far.
    pub fn visible(&self) -> u64 {
        self.visible
    }

    /// Every event, the open quiet stretch's runs included (with their
    /// counts so far).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Number of events (a folded stretch counts once).
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// No event yet.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Hex SHA-256 of the canonical encoding of every event so far (that
    /// is, of [`Trace::to_jsonl`]).
    pub fn hash(&self) -> String {
        let mut h = self.hasher.clone();
        for ev in &self.events[self.sealed..] {
            h.update(encode(ev));
        }
        hex::encode(h.finalize())
    }

    /// The canonical encoding (JSON lines), as hashed.
    pub fn to_jsonl(&self) -> String {
        let mut s = String::new();
        for ev in &self.events {
            s.push_str(&serde_json::to_string(ev).expect("events always serialise"));
            s.push('\n');
        }
        s
    }

    /// Parses a trace written by [`Trace::to_jsonl`], recomputing the hash.
    /// Events are taken as written, never folded again, so the hash is
    /// that of the text whatever it holds (a recording from before folding
    /// included).
    pub fn from_jsonl(text: &str) -> Result<Trace, serde_json::Error> {
        let mut t = Trace::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let ev: Event = serde_json::from_str(line)?;
            if !matches!(ev.kind, EventKind::Run { .. }) {
                t.visible += 1;
            }
            t.append_sealed(ev);
        }
        Ok(t)
    }
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
