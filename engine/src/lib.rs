//! engine: one execution of a simulated cluster under virtual time.
//!
//! The engine is the only source of time for every node. At each step the
//! strategy picks one of the actions due first (a node's run, a frame's
//! delivery, a disk completion, a fault); a chosen node runs until it
//! waits again; the engine records everything it printed in the trace at
//! the virtual time it printed it, and reacts to what the node's agent
//! reported: all nodes ready -> start the workload; workload done -> run
//! the invariants; all invariants done -> the execution passes. Exactly
//! one node executes at any moment, so nothing a node sees can depend on
//! how the host scheduled the others.
//!
//! Contents:
//!
//! | module | what |
//! |---|---|
//! | [`Execution`] (`execution/`) | `new` / `step` / `finish`, and [`execute`] looping them; its state a context and named parts with their own behaviour (`parts/`: the context `Ctx`, the wire, crashes, disk, node and connection faults, roles, inspection, the strategy's side, the script, grants), and what several parts do together one module per concern: boot order (`boot.rs`), the enabled set (`enabled.rs`), applying an action (`apply.rs`, a dispatch), a node's run (`run.rs`), the script's agent messages (`script.rs`), lookahead (`lookahead.rs`), inspection (`inspect.rs`) |
//! | `pending.rs` | the pending events, read by the clock and the enabled set |
//! | `actions.rs` | an action, its description, the horizon |
//! | `faults.rs`, `disk.rs`, `network.rs`, `host.rs` | pauses and clocks (what they are), disks and crashes, netsim, the host client |
//! | `node.rs`, `agent.rs`, `frames.rs` | one node and its power state, the agent's line protocol, frame summaries |
//! | [`spec`] | [`ExecutionSpec`], [`ExploreSpec`], [`HistoryCheck`], [`EngineError`] |
//! | [`outcome`] | [`ExecutionResult`], [`Verdict`], [`Failure`], [`FailureKind`] |
//! | [`steps`] | [`StepLog`]: the actions taken, quiet runs folded |
//! | [`seeds`] | the execution's seed and the per-node device streams |
//! | [`time`] | [`NodeId`] (the `simtime` crate's, re-exported) and the guests' epoch; `VirtualTime` is named `simtime::VirtualTime` everywhere |
//! | [`trace`] | the trace and its hash |
//! | [`strategy`] | the strategy vocabulary: [`strategy::Strategy`], [`strategy::EnabledAction`], [`strategy::Decision`] |
//! | [`console`] | the guest console protocol: `@sim`, `@reached`, `@history` lines, kernel panics |
//! | [`WarmStart`] (`warm.rs`) | warm start: one boot, executions forked from it |
//!
//! Dependencies: vmm (the node runtimes), netsim, disksim, simtime; nothing of
//! `checker`, which depends on this crate. The one thing the engine runs
//! that is the checker's, the check of a client history (linearizability,
//! or a transactional consistency model), is passed in as a closure
//! ([`HistoryCheck`] in the spec).
#![deny(missing_docs)]

pub mod console;
pub mod outcome;
pub mod seeds;
pub mod spec;
pub mod steps;
pub mod strategy;
pub mod time;
pub mod trace;

mod actions;
mod agent;
mod conn_faults;
mod disk;
mod execution;
mod faults;
mod frames;
mod host;
mod network;
mod node;
mod pending;
mod roles;
pub mod sdk;
mod warm;

pub use agent::READY_PROBE;
pub use conn_faults::{ConnFaultCounts, ConnFaultSpec};
pub use disk::{CrashPoint, DiskFaultCounts, DiskFaultRates, DiskSpec};
pub use execution::{CrashBranch, ExecOutput, Execution, InspectError, Reached, Step, Until};
pub use faults::{ClockSpec, FaultCounts, KillSpec, NodeClock, PauseSpec, ScheduledCrash, StrobeSpec, DRIFT_ENV};
pub use host::{HostRequest, HostWorkload};
pub use network::{describe as describe_partition, NetworkSpec, ScheduledPartition};
pub use outcome::{ExecutionResult, Failure, FailureKind, Verdict};
pub use roles::{valid_role, RoleSpec, ROLE_PROBE};
pub use sdk::AntithesisSpec;
pub use seeds::{boot_seed, entropy_seed, execution_seed, read_fault_seed};
pub use spec::{EngineError, ExecutionSpec, ExploreSpec, HistoryCheck, HistoryCheckFn, HistoryOutcome, Lookahead};
pub use steps::{StepLog, StepSpan};
pub use time::{Actor, NodeId, GUEST_EPOCH_NS};
// What the engine takes or gives as netsim, disksim and vmm define it, named
// here so that the binary talks to the engine alone: the network and disk
// settings a cluster file writes ([`NetConfig`], [`LinkOverride`],
// [`Partition`], [`CrashModel`]; [`TomlKey`] spells their keys), the disk
// image a [`DiskSpec`] holds ([`BlockStore`]), the network's counts in an
// [`ExecutionResult`] ([`NetStats`]), and the host and its node processes.
pub use disksim::{BlockStore, CrashModel};
pub use hostfacts::{GuestCpuid, HostClass, HostFacts, NO_CPUID_FAULTING_ENV};
pub use netsim::{LinkOverride, NetConfig, NetStats, Partition, TomlKey};
pub use vmm::kvm::host::has_hardware_virt;
pub use vmm::runtime::RuntimeKind;
pub use vmm::uml::node::kill_all_nodes;
pub use warm::{Boot, Forked, Sibling, WarmStart};

use strategy::Strategy;

/// Runs one execution to its verdict: [`Execution::new`], then
/// [`Execution::step`] until [`Step::Done`], then [`Execution::finish`].
/// The caller has called the strategy's `begin_execution`; the engine
/// calls `choose` at every choice point (a step with more than one enabled
/// action).
pub fn execute(spec: &ExecutionSpec, strategy: &mut dyn Strategy) -> Result<ExecutionResult, EngineError> {
    let mut ex = Execution::new(spec)?;
    while ex.step(strategy)? == Step::Running {}
    Ok(ex.finish())
}
