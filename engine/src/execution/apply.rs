//! Applying the action a step chose: one call into the part it belongs to.
//! Each applies it at `self.cx.now` and records what it produced in the trace.

use super::Execution;
use crate::actions::Action;
use crate::spec::EngineError;

impl Execution<'_> {
    /// Applies `action` at `self.cx.now`.
    pub(crate) fn apply(&mut self, action: Action) -> Result<(), EngineError> {
        match action {
            // The wire (`wire`).
            Action::Deliver(id) => {
                self.wire.deliver(id, self.cx.now, &mut self.cx.nodes, &mut self.cx.trace, self.cx.spec.watchdog)
            }
            Action::NetworkFault { .. } => {
                self.apply_network_fault();
                Ok(())
            }
            // Power losses (`crashes`).
            Action::Crash(node) => self.crash_chosen(node),
            Action::PowerFailure => self.power_failure(),
            Action::Restart(node) => self.restart(node),
            // Pauses, clock jumps and kills (`node_faults`).
            Action::Pause(node) => self.pause(node),
            Action::Resume(node) => self.resume(node),
            Action::ClockJump(node) => self.clock_jump(node),
            Action::Kill(node) => self.kill(node),
            Action::Respawn(node) => self.respawn(node),
            // Connection faults (`conn_faults`).
            Action::ConnReset(key) => {
                self.conn_reset(key);
                Ok(())
            }
            Action::ConnStall(key) => {
                self.conn_stall(key);
                Ok(())
            }
            // The disks (`disks`).
            Action::CompleteDisk(node, request) => self.complete_disk(node, request),
            // Runs (`run`).
            Action::Run(node) => self.run_node(node),
            Action::RunHost => self.run_host(),
        }
    }
}
