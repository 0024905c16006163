//! [`Ctx`]: what every part of an execution acts on.
//!
//! A part (the wire, the crashes, the disk and node faults, ...) keeps its
//! own state private and takes the context for what they all share: the
//! clock, the spec, the seed, the nodes and the trace. `Execution` owns the
//! context beside its parts, so a call such as
//! `self.crashes.crash_chosen(&mut self.cx, ...)` borrows the two apart.
//!
//! Invariants: only the step moves `now` (to the chosen action's time, a
//! scheduled crash's, the last wake-up a node took by itself, the time
//! limit, or an inspection's stop), never backwards; a part acts at `now`.
//! `seed` changes once, when a warm start's boot ends; `spec` once, in a
//! warm start's forked child.

use crate::agent::AgentCommand;
use crate::node::Nodes;
use crate::spec::{EngineError, ExecutionSpec};
use crate::trace::Trace;
use crate::NodeId;
use simtime::VirtualTime;

/// The clock, the spec, the seed, the nodes and the trace of one execution.
pub(in crate::execution) struct Ctx<'a> {
    /// The spec the execution runs.
    pub spec: &'a ExecutionSpec,
    /// The seed every stream of the execution is drawn from: the
    /// execution's own ([`ExecutionSpec::seed`]), or in warm-start mode
    /// the boot seed until every agent is ready.
    pub seed: u64,
    /// The one clock: every node's time, and every event's.
    pub now: VirtualTime,
    /// What happened, in order.
    pub trace: Trace,
    /// The guests, in node order.
    pub nodes: Nodes,
}

impl Ctx<'_> {
    /// Sends one command to `node`'s agent now (the node is up).
    pub fn control(&mut self, node: NodeId, command: &AgentCommand) -> Result<(), EngineError> {
        let (now, watchdog) = (self.now, self.spec.watchdog);
        self.nodes[node].vm().send_control(now, &command.encode(), watchdog)?;
        Ok(())
    }
}
