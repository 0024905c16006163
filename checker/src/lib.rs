//! checker: the checks of what an execution did, after it ran.
//!
//! The engine (one execution step by step, the trace, and the strategy
//! vocabulary: `Strategy`, `EnabledAction`, `Decision`) is the `engine`
//! crate; the exploration around it (strategies, shrinking, reports,
//! failure files) is the `explore` crate, which uses these checks:
//!
//! - [`register_history`], [`history_check`], [`linearizability`]: client histories
//!   and their linearizability check, or their transactional check with
//!   the `txncheck` crate (the engine runs either through
//!   [`history_check::hook_for`]);
//! - [`collection_history`], [`set_full`], [`total_queue`]: set and queue
//!   histories and their checks, after Jepsen's `set-full` and
//!   `total-queue` (lost, stale, never-read, unexpected, duplicated and
//!   recovered elements);
//! - [`printed_history`]: the history block a node printed, which each
//!   model's check reads;
//! - [`reach`]: reachability counts over a run;
//! - [`antithesis`]: the Antithesis SDK's assertions as properties of a
//!   run, and their coverage features.

#![deny(missing_docs)]
pub mod antithesis;
pub mod collection_history;
pub mod history_check;
pub mod linearizability;
pub mod printed_history;
pub mod reach;
pub mod register_history;
pub mod set_full;
pub mod total_queue;
