//! The enabled set: what can happen next, gathered from the execution's
//! state into [`Pending`] and offered to the strategy.
//!
//! The enabled set is built in a fixed order (see `actions`), so a
//! strategy's index means the same thing every time the same state is
//! reached.

use std::time::Duration;

use super::parts::FaultGates;
use super::Execution;
use crate::actions::Enabled;
use crate::pending::Pending;
use simtime::VirtualTime;

impl Execution<'_> {
    /// Refills `into` with the pending events of the current state.
    pub(crate) fn gather_pending(&self, into: &mut Pending) {
        let live = || self.cx.nodes.with_ids().filter(|(_, n)| n.is_up());
        let restart_after = self.cx.spec.explore.restart_after;
        let latency = self.cx.spec.disk.as_ref().map_or(Duration::ZERO, |d| d.latency);
        into.runs.clear();
        into.runs.extend(live().map(|(i, n)| (i, n.runtime().unwrap().requested())));
        into.host = self.wire.host_due();
        into.net = self.wire.next_time();
        into.disks.clear();
        into.disks.extend(live().filter_map(|(i, n)| {
            let requests = n.data_disk()?.pending_disk();
            let r = requests.first()?;
            Some((i, r.id.0, r.submitted.saturating_add(latency)))
        }));
        into.restarts.clear();
        let crashes = &self.crashes;
        let crashed = self
            .cx
            .nodes
            .with_ids()
            .filter_map(|(i, n)| n.crashed_at().map(|t| (i, crashes.restart_at(i, t, restart_after))));
        into.restarts.extend(crashed);
        into.resumes.clear();
        into.resumes.extend(live().filter_map(|(i, n)| n.paused_until().map(|t| (i, t))));
        into.respawns.clear();
        into.respawns.extend(live().filter_map(|(i, n)| n.killed_until().map(|t| (i, t))));
        into.scheduled = self.next_scheduled_crash().map(|(t, _)| t);
    }

    /// What the faults' enabled checks read of the other parts.
    pub(super) fn fault_gates(&self) -> FaultGates<'_> {
        FaultGates { calm: self.fault_period.is_calm(), wire: &self.wire, roles: &self.roles }
    }

    /// Every action due by `horizon`, in the fixed order the strategy
    /// contract needs: runs by node, the host client's poll, deliveries in
    /// netsim's order, the next partition/heal, disk completions by node,
    /// restarts by node, crashes by node, then resumes, pauses and clock
    /// jumps by node, then killed start commands' restarts and kills by
    /// node (after every older kind, so executions without them keep their
    /// choice indices). A scheduled crash is no choice: `step` applies it
    /// when it is the earliest event.
    pub(crate) fn enabled(&self, pending: &Pending, horizon: VirtualTime, into: &mut Vec<Enabled>) {
        into.clear();
        into.extend(pending.runs.iter().filter(|&&(_, t)| t <= horizon).map(|&(i, t)| Enabled::run(i, t)));
        if let Some((node, due)) = pending.host.filter(|&(_, t)| t <= horizon) {
            into.push(Enabled::run_host(node, due));
        }
        for d in self.wire.deliveries_until(horizon) {
            into.push(Enabled::deliver(&d));
        }
        if let Some((due, heal)) = self.wire.next_fault().filter(|(t, _)| *t <= horizon) {
            into.push(Enabled::network_fault(heal, due));
        }
        if self.cx.spec.disk.is_some() {
            let due = pending.disks.iter().filter(|&&(_, _, t)| t <= horizon);
            into.extend(due.map(|&(i, id, t)| Enabled::complete_disk(i, id, t)));
        }
        let restarts = pending.restarts.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(restarts.map(|&(i, t)| Enabled::restart(i, t)));
        let gates = self.fault_gates();
        self.crashes.enabled(&self.cx, &gates, into);
        let resumes = pending.resumes.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(resumes.map(|&(i, t)| Enabled::resume(i, t)));
        self.node_faults.enabled(&self.cx, &gates, into);
        self.conn_faults.enabled(&self.cx, &gates, into);
        let respawns = pending.respawns.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(respawns.map(|&(i, t)| Enabled::respawn(i, t)));
        self.node_faults.enabled_kills(&self.cx, &gates, into);
        if self.inspection.is_running() {
            into.retain(|e| !super::inspect::is_fault(e.desc.kind));
        }
    }
}
