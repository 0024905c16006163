//! Checks transactional client histories for the anomalies of Adya's
//! consistency hierarchy, the way Jepsen's Elle does.
//!
//! A history ([`History`]) is a list of transactions, each a list of
//! micro-operations on keys: appends and list reads ([`Model::ListAppend`]) or
//! register writes and reads ([`Model::RwRegister`]). [`parse_json_lines`] and
//! [`parse_edn`] (Jepsen's `history.edn`) read one; [`check`] infers the
//! dependency graph between transactions (ww, wr and rw edges from the values
//! read; process and realtime edges from the clients), searches it for cycles,
//! checks the non-cycle anomalies (aborted and intermediate reads, internal
//! inconsistency, ...), and returns a [`CheckReport`]: valid or not for the
//! [`Consistency`] model asked, with the evidence for each anomaly.
//!
//! ```
//! use txncheck::{check, parse_json_lines, Consistency, Model};
//! // Write skew: each transaction read both keys empty and appended to one.
//! let h = parse_json_lines(r#"
//! {"type":"invoke","process":0,"time":1,"f":"txn","value":[["r","x",null],["r","y",null],["append","x",1]]}
//! {"type":"invoke","process":1,"time":2,"f":"txn","value":[["r","x",null],["r","y",null],["append","y",1]]}
//! {"type":"ok","process":0,"time":3,"f":"txn","value":[["r","x",[]],["r","y",[]],["append","x",1]]}
//! {"type":"ok","process":1,"time":4,"f":"txn","value":[["r","x",[]],["r","y",[]],["append","y",1]]}
//! {"type":"invoke","process":0,"time":5,"f":"txn","value":[["r","x",null],["r","y",null]]}
//! {"type":"ok","process":0,"time":6,"f":"txn","value":[["r","x",[1]],["r","y",[1]]]}
//! "#).unwrap();
//! assert!(!check(&h, Model::ListAppend, Consistency::Serializable).valid);
//! assert!(check(&h, Model::ListAppend, Consistency::SnapshotIsolation).valid);
//! ```
//!
//! Modules: `txn_history` (the data model and pairing), `json` and `edn` (parsers),
//! `model` (the consistency hierarchy), `list_append` and `rw_register` (the
//! per-model analyses), `order` (process and realtime edges), `graph` (the
//! graph, Tarjan, BFS), `cycles` (cycle classification), `report`, `check`, and
//! `gen` (a generator of histories for tests and benches).

#![deny(missing_docs)]

mod analysis;
mod check;
mod cycles;
pub mod edn;
pub mod gen;
mod graph;
pub mod json;
mod list_append;
pub mod model;
mod order;
pub mod report;
mod rw_register;
pub mod txn_history;

pub use check::{check, check_model, ModelMismatch};
pub use edn::parse_edn;
pub use json::{parse_json_lines, to_json_lines};
pub use txn_history::{Event, EventKind, History, Key, Mop, Outcome, ParseError, Process, ReadValue, Txn};

/// Whether `text` is an EDN history rather than JSON: its first character
/// that is not blank is `;` (a comment) or `#` (a record), or `{` followed by `:`.
pub fn looks_like_edn(text: &str) -> bool {
    let mut rest = text.trim_start().chars().filter(|c| !c.is_whitespace());
    match rest.next() {
        Some('#' | ';') => true,
        Some('{') => rest.next() == Some(':'),
        _ => false,
    }
}

/// Parses a history in whichever format it is written in: Jepsen's EDN
/// ([`looks_like_edn`]), JSON lines, or a JSON array ([`parse_json_lines`]).
pub fn parse_history(text: &str) -> Result<History, ParseError> {
    if looks_like_edn(text) {
        parse_edn(text)
    } else {
        parse_json_lines(text)
    }
}
pub use model::{Consistency, Model, UnknownName};
pub use report::{Anomaly, CheckReport, Cycle, Edge, EdgeKind, Finding, TxnCounts, TxnRef};
