//! Workload models, consistency models, and which anomalies each consistency
//! model forbids (Adya's hierarchy as Elle uses it).

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// How the workload's transactions read and write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// Keys hold lists; `append` adds a unique value, `r` returns the whole list.
    /// Every read reveals the order of all earlier appends: version orders are known.
    ListAppend,
    /// Keys hold one value; `w` sets a unique value, `r` returns it. Version
    /// orders are only partly known (see [`crate::check`]).
    RwRegister,
}

/// A consistency model to check a history against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Consistency {
    /// Serializable, in an order consistent with real time.
    StrictSerializable,
    /// Equivalent to some serial order of the committed transactions.
    Serializable,
    /// Serializable, in an order consistent with each process's own order.
    StrongSessionSerializable,
    /// Every transaction reads one snapshot; no two concurrent ones write a key both write.
    SnapshotIsolation,
    /// Snapshot isolation, in an order consistent with each process's own order.
    StrongSessionSnapshotIsolation,
    /// Adya's PL-2.99: serializable but for predicate anomalies (so, here,
    /// where histories have no predicates, the same as serializable).
    RepeatableRead,
    /// Adya's PL-2: no dirty reads, no circular information flow.
    ReadCommitted,
    /// Adya's PL-1: no dirty writes (no G0).
    ReadUncommitted,
}

// Anomaly names, as Elle spells them.
/// Write cycle: a cycle of ww edges only (dirty write).
pub const G0: &str = "G0";
/// Aborted read: a committed transaction read a failed one's write.
pub const G1A: &str = "G1a";
/// Intermediate read: a read of a value its writer later overwrote itself.
pub const G1B: &str = "G1b";
/// Circular information flow: a cycle of ww and wr edges.
pub const G1C: &str = "G1c";
/// Read skew: a cycle with exactly one rw edge.
pub const G_SINGLE: &str = "G-single";
/// Item anti-dependency cycle: a cycle with one or more rw edges.
pub const G2_ITEM: &str = "G2-item";
/// G0 once process-order edges are added.
pub const G0_PROCESS: &str = "G0-process";
/// G1c once process-order edges are added.
pub const G1C_PROCESS: &str = "G1c-process";
/// G-single once process-order edges are added.
pub const G_SINGLE_PROCESS: &str = "G-single-process";
/// G2-item once process-order edges are added.
pub const G2_ITEM_PROCESS: &str = "G2-item-process";
/// G0 once real-time edges are added.
pub const G0_REALTIME: &str = "G0-realtime";
/// G1c once real-time edges are added.
pub const G1C_REALTIME: &str = "G1c-realtime";
/// G-single once real-time edges are added.
pub const G_SINGLE_REALTIME: &str = "G-single-realtime";
/// G2-item once real-time edges are added.
pub const G2_ITEM_REALTIME: &str = "G2-item-realtime";
/// A transaction's read disagrees with its own earlier reads and writes.
pub const INTERNAL: &str = "internal";
/// list-append: two reads of a key where neither is a prefix of the other.
pub const INCOMPATIBLE_ORDER: &str = "incompatible-order";
/// list-append: a read lists the same element twice.
pub const DUPLICATE_ELEMENTS: &str = "duplicate-elements";
/// list-append: a failed transaction's element is followed by a committed one.
pub const DIRTY_UPDATE: &str = "dirty-update";
/// rw-register: two committed transactions read the same version of a key and
/// both overwrote it (Adya's P4). Under snapshot isolation one of them must abort.
pub const LOST_UPDATE: &str = "lost-update";
/// The workload broke its contract: the same value appended or written twice to
/// a key. The check cannot tell the two writes apart.
pub const DUPLICATE_WRITES: &str = "duplicate-writes";
/// An op that does not belong to the model (a `w` in list-append, a list read in
/// rw-register, ...). It is ignored otherwise.
pub const MODEL_MISMATCH: &str = "model-mismatch";

/// Forbidden at every level: the history itself is malformed or contradicts itself.
const ALWAYS: &[&str] = &[INTERNAL, INCOMPATIBLE_ORDER, DUPLICATE_ELEMENTS, DUPLICATE_WRITES, MODEL_MISMATCH];
const RU: &[&str] = &[G0];
const RC: &[&str] = &[G0, G1A, G1B, G1C, DIRTY_UPDATE];
const SI: &[&str] = &[G0, G1A, G1B, G1C, DIRTY_UPDATE, G_SINGLE, LOST_UPDATE];
/// Adya's PL-2.99 forbids item anti-dependency cycles; without predicates that
/// is also what serializability (PL-3) adds over it.
const SER: &[&str] = &[G0, G1A, G1B, G1C, DIRTY_UPDATE, G_SINGLE, LOST_UPDATE, G2_ITEM];
const PROCESS_SI: &[&str] = &[G0_PROCESS, G1C_PROCESS, G_SINGLE_PROCESS];
const PROCESS_SER: &[&str] = &[G0_PROCESS, G1C_PROCESS, G_SINGLE_PROCESS, G2_ITEM_PROCESS];
const REALTIME: &[&str] = &[G0_REALTIME, G1C_REALTIME, G_SINGLE_REALTIME, G2_ITEM_REALTIME];

impl Consistency {
    /// Every model, strongest first.
    pub const ALL: [Consistency; 8] = [
        Consistency::StrictSerializable,
        Consistency::StrongSessionSerializable,
        Consistency::Serializable,
        Consistency::StrongSessionSnapshotIsolation,
        Consistency::SnapshotIsolation,
        Consistency::RepeatableRead,
        Consistency::ReadCommitted,
        Consistency::ReadUncommitted,
    ];

    /// The kebab-case name ([`FromStr`] reads it back).
    pub fn name(self) -> &'static str {
        match self {
            Consistency::StrictSerializable => "strict-serializable",
            Consistency::Serializable => "serializable",
            Consistency::StrongSessionSerializable => "strong-session-serializable",
            Consistency::SnapshotIsolation => "snapshot-isolation",
            Consistency::StrongSessionSnapshotIsolation => "strong-session-snapshot-isolation",
            Consistency::RepeatableRead => "repeatable-read",
            Consistency::ReadCommitted => "read-committed",
            Consistency::ReadUncommitted => "read-uncommitted",
        }
    }

    /// The anomalies this model forbids, sorted by name. A stronger model
    /// forbids a superset of what a weaker one forbids: strict-serializable ⊇
    /// strong-session-serializable ⊇ serializable = repeatable-read (no
    /// predicates here) ⊇ snapshot-isolation ⊇ read-committed ⊇ read-uncommitted,
    /// and strong-session-snapshot-isolation ⊇ snapshot-isolation. Snapshot
    /// isolation allows G2-item (write skew); repeatable read does not.
    pub fn forbidden(self) -> Vec<&'static str> {
        let parts: &[&[&str]] = match self {
            Consistency::ReadUncommitted => &[RU],
            Consistency::ReadCommitted => &[RC],
            Consistency::SnapshotIsolation => &[SI],
            Consistency::RepeatableRead | Consistency::Serializable => &[SER],
            Consistency::StrongSessionSnapshotIsolation => &[SI, PROCESS_SI],
            Consistency::StrongSessionSerializable => &[SER, PROCESS_SER],
            Consistency::StrictSerializable => &[SER, PROCESS_SER, REALTIME],
        };
        let mut all: Vec<&'static str> = ALWAYS.iter().chain(parts.iter().flat_map(|p| p.iter())).copied().collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Whether this model forbids the anomaly `name`.
    pub fn forbids(self, name: &str) -> bool {
        self.forbidden().contains(&name)
    }
}

impl fmt::Display for Consistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Model::ListAppend => "list-append",
            Model::RwRegister => "rw-register",
        })
    }
}

/// A name that is not a model.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown {what} {name:?} (expected one of: {expected})")]
pub struct UnknownName {
    /// What kind of name ("consistency model", "model").
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The names accepted, comma-separated.
    pub expected: String,
}

impl FromStr for Consistency {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Consistency::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| UnknownName {
            what: "consistency model",
            name: s.to_string(),
            expected: Consistency::ALL.map(Consistency::name).join(", "),
        })
    }
}

impl FromStr for Model {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "list-append" => Ok(Model::ListAppend),
            "rw-register" => Ok(Model::RwRegister),
            _ => Err(UnknownName { what: "model", name: s.to_string(), expected: "list-append, rw-register".into() }),
        }
    }
}
