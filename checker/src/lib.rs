//! checker: everything around one execution that is not the engine itself.
//!
//! The engine (one execution step by step, the trace, and the strategy
//! vocabulary: `Strategy`, `EnabledAction`, `Decision`) is the `engine`
//! crate; checker builds on it:
//!
//! - [`strategy`]: the strategies (random walk, PCT, delay bounding, DPOR,
//!   the hybrid DFS, guided replay) and the critical-transition search;
//! - [`register_history`], [`history_check`], [`linearizability`]: client histories
//!   and their linearizability check, or their transactional check with
//!   the `txncheck` crate (the engine runs either through
//!   [`history_check::hook_for`]);
//! - [`collection_history`], [`set_full`], [`total_queue`]: set and queue
//!   histories and their checks, after Jepsen's `set-full` and
//!   `total-queue` (lost, stale, never-read, unexpected, duplicated and
//!   recovered elements);
//! - [`reach`]: reachability counts over a run;
//! - [`shrink`]: ddmin over a failure's decisions;
//! - [`report`]: text, JSON and HTML reports of a trace;
//! - [`failure_file`]: failure files (format 2).

#![deny(missing_docs)]
pub mod antithesis;
pub mod collection_history;
pub mod failure_file;
pub mod register_history;
pub mod history_check;
pub mod linearizability;
pub mod reach;
pub mod report;
pub mod set_full;
pub mod shrink;
pub mod strategy;
pub mod total_queue;
