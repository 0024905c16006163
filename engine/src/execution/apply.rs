//! Applying the action a step chose: one call into the part it belongs to,
//! which applies it at the context's `now` and records what it produced in
//! the trace.

use super::Execution;
use crate::actions::Action;
use crate::spec::EngineError;

impl Execution<'_> {
    /// Applies `action` at `self.cx.now`.
    pub(crate) fn apply(&mut self, action: Action) -> Result<(), EngineError> {
        let cx = &mut self.cx;
        match action {
            Action::Deliver(id) => self.wire.deliver(cx, id),
            Action::NetworkFault { .. } => {
                self.wire.apply_fault(cx, &self.roles);
                Ok(())
            }
            Action::Crash(node) => self.crashes.crash_chosen(cx, &mut self.wire, node),
            Action::PowerFailure => self.crashes.power_failure(cx, &mut self.wire),
            Action::Restart(node) => {
                self.crashes.restart(cx, node)?;
                // Each boot traces the node's clock hardware, which the node
                // faults count.
                self.node_faults.record_clock(cx, node);
                Ok(())
            }
            Action::Pause(node) => self.node_faults.pause(cx, node),
            Action::Resume(node) => self.node_faults.resume(cx, node),
            Action::ClockJump(node) => self.node_faults.clock_jump(cx, node),
            Action::Kill(node) => self.node_faults.kill(cx, node),
            Action::Respawn(node) => self.node_faults.respawn(cx, node),
            Action::ConnReset(key) => {
                self.conn_faults.reset(cx, &mut self.wire, key);
                Ok(())
            }
            Action::ConnStall(key) => {
                self.conn_faults.stall(cx, &mut self.wire, key);
                Ok(())
            }
            Action::CompleteDisk(node, request) => self.disk_faults.complete(cx, &self.fault_period, node, request),
            // A node's run and the host client's poll take in what they did
            // into several parts (`run.rs`).
            Action::Run(node) => self.run_node(node),
            Action::RunHost => self.run_host(),
        }
    }
}
