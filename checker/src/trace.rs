//! The trace of one execution: every guest-visible event in the order the
//! engine decided it, with its virtual time, and the hash that names it.
//!
//! The trace is the product's contract: two runs with the same seed and the
//! same images must produce the same trace, byte for byte, so the hash is
//! taken over a canonical encoding (one JSON object per event, fields in
//! declaration order, `\n`-terminated). Nothing host-specific (wall time,
//! pids, host paths) may enter an event.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Node number 0 stands for the engine itself (partitions, notes).
pub const ENGINE: u16 = 0;

/// One event. `time` is virtual nanoseconds since the cluster booted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub time: u64,
    pub node: u16,
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
    /// The engine let the node run (at `Event::time`).
    Run,
    /// One line the node printed on its console (without the newline).
    Console { text: String },
    /// The engine sent a command to the node's agent.
    Command { name: String },
    /// The node's agent reported a command finished.
    CommandDone { name: String, status: i32 },
    /// The node's agent is up and the node's start command was launched.
    Ready,
    /// The node's kernel exited.
    Exit { status: Option<i32>, signal: Option<i32>, panic: bool },
    /// The node stopped yielding to the time controller.
    Hung,
    /// A frame left `node` for `to`; `id` pairs it with its delivery.
    Send { id: u64, to: u16, len: u32, summary: String },
    /// A frame from `from` reached `node`.
    Deliver { id: u64, from: u16, len: u32, summary: String },
    /// A frame from `node` to `to` was lost.
    Drop { id: u64, to: u16, cause: String },
    /// The network was partitioned (engine event).
    Partition { description: String },
    /// The partition healed (engine event).
    Heal,
    /// The node lost power.
    Crash { detail: String },
    /// The node was started again after a crash.
    Restart,
    /// An invariant was checked.
    Invariant { name: String, ok: bool },
    /// Free-form engine remark that still belongs to the execution.
    Note { text: String },
    /// A disk request of the node completed: `op` is read, write or flush;
    /// writes and flushes complete when the engine chooses, reads at once.
    Disk { id: u64, op: String, sector: u64, sectors: u64 },
}

/// An append-only trace with a running hash.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    events: Vec<Event>,
    hasher: Sha256,
}

impl Trace {
    pub fn new() -> Trace {
        Trace::default()
    }

    pub fn push(&mut self, time: u64, node: u16, kind: EventKind) {
        let ev = Event { time, node, kind };
        let mut line = serde_json::to_vec(&ev).expect("events always serialise");
        line.push(b'\n');
        self.hasher.update(&line);
        self.events.push(ev);
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Hex SHA-256 of the canonical encoding of every event so far.
    pub fn hash(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
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
    pub fn from_jsonl(text: &str) -> Result<Trace, serde_json::Error> {
        let mut t = Trace::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let ev: Event = serde_json::from_str(line)?;
            t.push(ev.time, ev.node, ev.kind);
        }
        Ok(t)
    }
}

/// Splits a byte stream into lines, keeping an unfinished line until its
/// newline arrives. A line is stamped with the time its newline was seen,
/// which is deterministic because the chunks themselves are.
#[derive(Debug, Clone, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes; returns the completed lines (lossy UTF-8, `\r` and
    /// terminal escape noise removed).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                lines.push(clean(&std::mem::take(&mut self.partial)));
            } else {
                self.partial.push(b);
            }
        }
        lines
    }

    /// The unfinished line, if any (at the end of an execution).
    pub fn finish(&mut self) -> Option<String> {
        if self.partial.is_empty() {
            None
        } else {
            Some(clean(&std::mem::take(&mut self.partial)))
        }
    }
}

fn clean(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().filter(|&c| c != '\r').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_events_same_hash_and_order_matters() {
        let mut a = Trace::new();
        let mut b = Trace::new();
        for t in [&mut a, &mut b] {
            t.push(0, 1, EventKind::Boot);
            t.push(5, 2, EventKind::Console { text: "hi".into() });
        }
        assert_eq!(a.hash(), b.hash());
        let mut c = Trace::new();
        c.push(5, 2, EventKind::Console { text: "hi".into() });
        c.push(0, 1, EventKind::Boot);
        assert_ne!(a.hash(), c.hash());
        let mut d = a.clone();
        d.push(6, 1, EventKind::Run);
        assert_ne!(a.hash(), d.hash());
    }

    #[test]
    fn time_is_part_of_the_hash() {
        let mut a = Trace::new();
        a.push(1, 1, EventKind::Run);
        let mut b = Trace::new();
        b.push(2, 1, EventKind::Run);
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn jsonl_round_trip_keeps_hash() {
        let mut a = Trace::new();
        a.push(0, 1, EventKind::Boot);
        a.push(7, 0, EventKind::Partition { description: "{n1} | {n2,n3}".into() });
        a.push(9, 1, EventKind::Exit { status: Some(0), signal: None, panic: false });
        let b = Trace::from_jsonl(&a.to_jsonl()).unwrap();
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.events(), b.events());
    }

    #[test]
    fn line_splitter_holds_partial_lines() {
        let mut s = LineSplitter::default();
        assert!(s.feed(b"hel").is_empty());
        assert_eq!(s.feed(b"lo\r\nwor"), vec!["hello".to_string()]);
        assert_eq!(s.feed(b"ld\n\n"), vec!["world".to_string(), String::new()]);
        assert_eq!(s.finish(), None);
        s.feed(b"tail");
        assert_eq!(s.finish().as_deref(), Some("tail"));
    }
}
