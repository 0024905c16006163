//! explore: the search for a failing execution, and what is made of one.
//!
//! The engine runs one execution and asks a `Strategy` at each choice
//! point; the `checker` crate checks what it did. This crate is the
//! exploration around them:
//!
//! - [`strategy`]: the strategies (random walk, PCT, delay bounding, DPOR,
//!   the hybrid DFS, coverage, guided replay) and the critical-transition
//!   search;
//! - [`shrink`]: ddmin over a failure's decisions;
//! - [`report`]: text, JSON and HTML reports of a trace;
//! - [`failure_file`]: failure files (format 2).

#![deny(missing_docs)]
pub mod failure_file;
pub mod report;
pub mod shrink;
pub mod strategy;
