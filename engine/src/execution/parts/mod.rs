//! The parts of an [`crate::Execution`]'s state, each with private fields
//! and the methods that change them, and the context they all act on.
//!
//! - [`Ctx`] (`ctx.rs`): the clock, the spec, the seed, the nodes, the
//!   trace; every part's method that acts takes it.
//! - [`Wire`] (`wire.rs`): netsim and the host client on it.
//! - [`Crashes`] (`crashes.rs`): power losses, restarts, the crash
//!   schedule's place, the crash points.
//! - [`DiskFaults`] (`disks.rs`): completing disk requests, and the faults
//!   drawn at completion.
//! - [`NodeFaults`] (`node_faults.rs`): pauses, clock jumps, kills.
//! - [`ConnFaults`] (`conn_faults.rs`): connection resets and stalls.
//! - [`Roles`] (`roles.rs`): what each node's role probe said.
//! - [`Inspection`] (`inspection.rs`): a command run in a guest.
//! - [`Choices`] (`choices.rs`): the strategy's side and the step log.
//! - [`Script`] (`script.rs`): the boot, workload and checks, the verdict.
//! - [`FaultPeriod`], [`Grants`], [`Branching`], [`Wall`] (`small.rs`).
//!
//! A part reads another only where a fault's enabled check needs it
//! ([`FaultGates`]: whether faults have stopped, the wire, the roles) or an
//! action hits it (a crash takes a node off the wire); what several parts
//! do together is `Execution`'s (see `super`).

mod choices;
mod conn_faults;
mod crashes;
mod ctx;
mod disks;
mod gates;
mod inspection;
mod node_faults;
mod roles;
mod script;
mod small;
mod wire;

pub(super) use self::choices::Choices;
pub(super) use self::conn_faults::ConnFaults;
pub(super) use self::crashes::Crashes;
pub(super) use self::ctx::Ctx;
pub(super) use self::disks::DiskFaults;
pub(super) use self::gates::FaultGates;
pub(super) use self::inspection::Inspection;
pub(super) use self::node_faults::NodeFaults;
pub(super) use self::roles::Roles;
pub(crate) use self::script::Phase;
pub(super) use self::script::Script;
pub(super) use self::small::{Branching, FaultPeriod, Grants, Wall};
pub(super) use self::wire::Wire;
