//! simcluster: a VM-level, whole-cluster deterministic simulator.
//!
//! The binary (`src/main.rs`) is a thin command line over these modules:
//! [`cluster`] reads `cluster.toml`, [`image`] builds what the nodes boot,
//! [`run`] drives executions through the engine (the `checker` crate) and
//! writes what a person or a machine needs to read about them.

#![deny(missing_docs)]

pub mod cluster;
pub mod exit_codes;
pub mod image;
pub mod inspect;
pub mod junit;
pub mod outputs;
pub mod pin;
pub mod replay;
pub mod run;

/// A problem with what the user gave us: the command line, a cluster
/// directory, a failure file. The binary exits with code 2 for it. The
/// message names the file and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);
