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
/// Read skew: a cycle with exactly one rw edge (item anti-dependencies only:
/// the histories here have no predicates, so every G-single is Elle's
/// G-single-item).
pub const G_SINGLE: &str = "G-single-item";
/// A cycle with two or more rw edges, no two of them adjacent (long fork).
/// Snapshot isolation forbids it: only cycles with two adjacent rw edges
/// (write skew) are allowed there.
pub const G_NONADJACENT: &str = "G-nonadjacent-item";
/// Item anti-dependency cycle: two or more rw edges, two of them adjacent.
pub const G2_ITEM: &str = "G2-item";
/// G0 once process-order edges are added.
pub const G0_PROCESS: &str = "G0-process";
/// G1c once process-order edges are added.
pub const G1C_PROCESS: &str = "G1c-process";
/// G-single once process-order edges are added.
pub const G_SINGLE_PROCESS: &str = "G-single-item-process";
/// G-nonadjacent once process-order edges are added.
pub const G_NONADJACENT_PROCESS: &str = "G-nonadjacent-item-process";
/// G2-item once process-order edges are added.
pub const G2_ITEM_PROCESS: &str = "G2-item-process";
/// G0 once real-time edges are added.
pub const G0_REALTIME: &str = "G0-realtime";
/// G1c once real-time edges are added.
pub const G1C_REALTIME: &str = "G1c-realtime";
/// G-single once real-time edges are added.
pub const G_SINGLE_REALTIME: &str = "G-single-item-realtime";
/// G-nonadjacent once real-time edges are added.
pub const G_NONADJACENT_REALTIME: &str = "G-nonadjacent-item-realtime";
/// G2-item once real-time edges are added.
pub const G2_ITEM_REALTIME: &str = "G2-item-realtime";
/// A transaction's read disagrees with its own earlier reads and writes.
pub const INTERNAL: &str = "internal";
/// A transaction read a value it only writes later itself (a wr edge from a
/// transaction to itself: Elle counts it as G1c).
pub const FUTURE_READ: &str = "future-read";
/// list-append: two reads of a key where neither is a prefix of the other.
pub const INCOMPATIBLE_ORDER: &str = "incompatible-order";
/// list-append: a read lists the same element twice.
pub const DUPLICATE_ELEMENTS: &str = "duplicate-elements";
/// list-append: a failed transaction's element is followed by a committed one.
pub const DIRTY_UPDATE: &str = "dirty-update";
/// Two committed transactions read the same version of a key and both
/// overwrote it (Adya's P4). Under snapshot isolation one of them must abort.
pub const LOST_UPDATE: &str = "lost-update";
/// rw-register: the version order the reads imply for a key has a cycle
/// (a read of `a` then a write of `b`, and elsewhere a read of `b` then a write of `a`).
pub const CYCLIC_VERSIONS: &str = "cyclic-versions";
/// The workload broke its contract: the same value appended or written twice to
/// a key. The check cannot tell the two writes apart.
pub const DUPLICATE_WRITES: &str = "duplicate-writes";
/// An op that does not belong to the model (a `w` in list-append, a list read in
/// rw-register, ...). It is ignored otherwise.
pub const MODEL_MISMATCH: &str = "model-mismatch";

/// A set of consistency models, one bit each (see [`Consistency::bit`]).
type Levels = u8;
const RU: Levels = 1 << 0;
const RC: Levels = 1 << 1;
const SI: Levels = 1 << 2;
const SSSI: Levels = 1 << 3;
const RR: Levels = 1 << 4;
const SER: Levels = 1 << 5;
const SSSER: Levels = 1 << 6;
const STRICT: Levels = 1 << 7;
const ALL_LEVELS: Levels = u8::MAX;
/// From read committed up: every model but read uncommitted.
const RC_UP: Levels = ALL_LEVELS & !RU;
/// Snapshot isolation and every model above it.
const SI_UP: Levels = SI | SSSI | RR | SER | SSSER | STRICT;

/// Which models forbid which anomaly: Elle's table, the closure of
/// `elle.consistency-model`'s `direct-proscribed-anomalies` over its `models`
/// and `implied-anomalies` graphs, for the eight models here. The source of
/// each row is in docs/reference.md ("Which model forbids what"). Rows marked
/// DEVIATION forbid more than Elle does, on purpose (the reasons are there too).
pub(crate) const FORBIDDEN_AT: &[(&str, Levels)] = &[
    // PL-1 (Adya): no dirty writes; Elle adds duplicate elements and cyclic versions.
    (G0, ALL_LEVELS),
    (DUPLICATE_ELEMENTS, ALL_LEVELS),
    (CYCLIC_VERSIONS, ALL_LEVELS),
    // PL-2 (Adya): G1 = G1a, G1b, G1c; Elle: incompatible-order and dirty-update imply G1a,
    // future-read implies G1c.
    (G1A, RC_UP),
    (G1B, RC_UP),
    (G1C, RC_UP),
    (DIRTY_UPDATE, RC_UP),
    (FUTURE_READ, RC_UP),
    // DEVIATION: Elle forbids incompatible-order from read committed up.
    (INCOMPATIBLE_ORDER, ALL_LEVELS),
    // DEVIATION: Elle forbids internal at snapshot isolation and serializable (Cerone's INT),
    // not at read committed or repeatable read.
    (INTERNAL, ALL_LEVELS),
    // Consistent view (Adya's PL-2+) forbids G-single; snapshot isolation forbids
    // G-nonadjacent (Cerone and Gotsman); cursor stability and update atomic forbid lost update.
    (G_SINGLE, SI_UP),
    (G_NONADJACENT, SI_UP),
    (LOST_UPDATE, SI_UP),
    // PL-2.99 (Adya): G2-item.
    (G2_ITEM, RR | SER | SSSER | STRICT),
    // Strong session models (Daudjee and Salem; Elle's strong-session-PL-1/2).
    (G0_PROCESS, SSSI | SSSER | STRICT),
    (G1C_PROCESS, SSSI | SSSER | STRICT),
    (G_SINGLE_PROCESS, SSSI | SSSER | STRICT),
    (G_NONADJACENT_PROCESS, SSSI | SSSER | STRICT),
    (G2_ITEM_PROCESS, SSSER | STRICT),
    // Strict serializability (Adya's PL-SS).
    (G0_REALTIME, STRICT),
    (G1C_REALTIME, STRICT),
    (G_SINGLE_REALTIME, STRICT),
    (G_NONADJACENT_REALTIME, STRICT),
    (G2_ITEM_REALTIME, STRICT),
    // DEVIATION: not in Elle, which refuses such histories outright.
    (DUPLICATE_WRITES, ALL_LEVELS),
    (MODEL_MISMATCH, ALL_LEVELS),
];

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

    /// This model's bit in [`FORBIDDEN_AT`].
    fn bit(self) -> Levels {
        match self {
            Consistency::ReadUncommitted => RU,
            Consistency::ReadCommitted => RC,
            Consistency::SnapshotIsolation => SI,
            Consistency::StrongSessionSnapshotIsolation => SSSI,
            Consistency::RepeatableRead => RR,
            Consistency::Serializable => SER,
            Consistency::StrongSessionSerializable => SSSER,
            Consistency::StrictSerializable => STRICT,
        }
    }

    /// The anomalies this model forbids, sorted by name. A stronger model
    /// forbids a superset of what a weaker one forbids: strict-serializable ⊇
    /// strong-session-serializable ⊇ serializable ⊇ repeatable-read ⊇
    /// read-committed ⊇ read-uncommitted, serializable ⊇ snapshot-isolation ⊇
    /// read-committed, and strong-session-snapshot-isolation ⊇
    /// snapshot-isolation. Snapshot isolation allows G2-item (write skew);
    /// repeatable read does not, and allows G-nonadjacent's long forks no more
    /// than snapshot isolation does.
    pub fn forbidden(self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> =
            FORBIDDEN_AT.iter().filter(|(_, levels)| levels & self.bit() != 0).map(|(name, _)| *name).collect();
        all.sort_unstable();
        all
    }

    /// Whether this model forbids the anomaly `name`.
    pub fn forbids(self, name: &str) -> bool {
        FORBIDDEN_AT.iter().any(|(n, levels)| *n == name && levels & self.bit() != 0)
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
