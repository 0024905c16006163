//! The enabled set: what can happen next, gathered from the execution's
//! state into [`Pending`] and offered to the strategy.
//!
//! The enabled set is built in a fixed order (see `actions`), so a
//! strategy's index means the same thing every time the same state is
//! reached.

use std::time::Duration;

use super::Execution;
use crate::actions::Enabled;
use crate::pending::Pending;
use crate::NodeId;
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
        self.enabled_crashes(into);
        self.target_crashes(into);
        let resumes = pending.resumes.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(resumes.map(|&(i, t)| Enabled::resume(i, t)));
        self.enabled_node_faults(into);
        self.enabled_conn_faults(into);
        let respawns = pending.respawns.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(respawns.map(|&(i, t)| Enabled::respawn(i, t)));
        self.enabled_kills(into);
        if !self.offers_faults() {
            into.retain(|e| !super::inspect::is_fault(e.desc.kind));
        }
    }

    /// Kills enabled now, by node (weighted up on a node that just sent).
    pub(crate) fn enabled_kills(&self, into: &mut Vec<Enabled>) {
        for &i in &self.cx.spec.explore.kill.nodes {
            if self.kill_enabled(i) {
                into.push(Enabled::kill(i, self.cx.now).at_risk(self.cx.nodes[i].just_sent));
            }
        }
    }

    /// A crash is enabled while the workload runs, within the budget,
    /// from a virtual time drawn uniformly over the first `crash_span` of
    /// the workload (so crashes spread over the run instead of piling up
    /// at its first opportunities), on a node with something at stake.
    ///
    /// With data disks, that is a node whose guest holds file data a power
    /// loss would take (files with dirty pages in its page cache, as the
    /// guest kernel publishes when it idles), whose disk holds volatile
    /// writes (a crash there has several crash states: which of them
    /// reached the platter), or whose flush just completed (nothing is
    /// volatile, and recovery must show all of it). The page cache is
    /// where a program that acknowledges before it syncs keeps its data
    /// until the file system's next commit (ext4: 5 s later): a crash
    /// offered only with volatile disk writes fell at that commit, after
    /// the window, and such a server lost nothing in 19 executions. A
    /// crash just after the node sent something (an acknowledgement) is
    /// weighted up. A crash of a node that merely sends is not offered: a
    /// store that syncs before it answers (etcd) sends all the time, and
    /// offering a crash after every send left db-cluster's crash points
    /// with nothing volatile and one crash state each (tests/disks.rs,
    /// full tier). Without disks, it is a node with frames in flight (the
    /// rest of the cluster may already believe something the node is
    /// about to lose, such as an acknowledgement sent before a replica has
    /// the write). Offering a crash at every step would spend nearly all
    /// of them on idle nodes.
    pub(crate) fn enabled_crashes(&self, into: &mut Vec<Enabled>) {
        if !self.crashes.due(self.cx.now, self.cx.spec.explore.max_crashes) || self.fault_period.is_calm() {
            return;
        }
        let (mut offered, mut any_at_risk) = (false, false);
        for &i in &self.cx.spec.explore.crashable {
            let n = &self.cx.nodes[i];
            let sending = self.wire.has_in_flight_from(i);
            let disk = n.data_disk();
            let volatile = disk.and_then(|d| d.disk()).is_some_and(|d| d.volatile_writes().next().is_some());
            // The moments around a durability point: just before a
            // flush completes (its writes are still volatile) and just
            // after (nothing is, and recovery must show all of it).
            let flush_pending =
                disk.is_some_and(|d| d.pending_disk().iter().any(|r| r.kind == disksim::RequestKind::Flush));
            // The guest's page cache: what it holds dirty goes with the
            // power (the disk never saw it).
            let dirty = n.runtime().is_some_and(|r| r.dirty_files().is_some_and(|f| f > 0));
            let at_stake = if self.cx.spec.disk.is_some() { dirty || volatile || n.flushed_since_run } else { sending };
            if n.is_ready() && at_stake {
                let at_risk = flush_pending || n.flushed_since_run || n.just_sent;
                into.push(Enabled::crash(i, self.cx.now).at_risk(at_risk));
                any_at_risk |= at_risk;
                offered = true;
            }
        }
        // A coordinated power failure: offered where a single crash is (some
        // node has something at stake), when two or more nodes are up and
        // the budget has a crash for each.
        if !(self.cx.spec.explore.power_failure && offered) {
            return;
        }
        let down = self.power_failure_nodes();
        let budget = self.cx.spec.explore.max_crashes - self.crashes.count();
        if down.len() >= 2 && down.len() as u32 <= budget {
            into.push(Enabled::power_failure(down[0], self.cx.now).at_risk(any_at_risk));
        }
    }

    /// The nodes a power failure now takes down: every crashable node that is up.
    pub(crate) fn power_failure_nodes(&self) -> Vec<NodeId> {
        self.cx.spec.explore.crashable.iter().copied().filter(|&i| self.cx.nodes[i].is_up()).collect()
    }

    /// Pauses, then clock jumps, each by node (after every older kind, so
    /// executions without them keep their choice indices).
    pub(crate) fn enabled_node_faults(&self, into: &mut Vec<Enabled>) {
        for &i in &self.cx.spec.explore.pause.nodes {
            if self.pause_enabled(i) {
                into.push(Enabled::pause(i, self.cx.now).at_risk(self.cx.spec.explore.roles.pause.is_some()));
            }
        }
        for &i in &self.cx.spec.explore.clock.nodes {
            if self.clock_jump_enabled(i) {
                into.push(Enabled::clock_jump(i, self.cx.now).at_risk(self.cx.spec.explore.roles.clock.is_some()));
            }
        }
    }
}
