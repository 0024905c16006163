//! The pending events, gathered once per step, and the enabled set.
//!
//! [`Pending`] is the one list of everything due at some virtual time:
//! live nodes' requested runs, the host client's next poll, netsim's next
//! delivery or partition, each live node's oldest pending disk request,
//! restarts and resumes. The virtual clock reads it ([`Pending::earliest`]:
//! what happens next; [`Pending::min_requested`]: the horizon's clamp), and
//! so does the enabled set ([`Execution::enabled`]), so the two can never
//! disagree about what is pending. Deliveries are the exception in form
//! only: netsim enumerates them itself up to the horizon
//! (`NetState::deliveries_until`), and `Pending` holds its earliest.
//!
//! The enabled set is built in a fixed order (see `actions`), so a
//! strategy's index means the same thing every time the same state is
//! reached.

use std::time::Duration;

use crate::actions::Enabled;
use crate::execution::Execution;
use crate::{NodeIdx, VirtualTime};

/// Everything due at some virtual time, as of the start of a step. One
/// value lives as long as its execution and is refilled every step, so
/// the step (the engine's hot path, once per grant) allocates nothing.
#[derive(Default, Clone)]
pub(crate) struct Pending {
    /// (0-based node, requested time) of every live node, by node.
    runs: Vec<(usize, VirtualTime)>,
    /// The host client's next poll: (its node number, due time).
    host: Option<(u16, VirtualTime)>,
    /// netsim's next delivery or partition/heal.
    net: Option<VirtualTime>,
    /// (0-based node, request id, due time) of each live node's oldest
    /// pending disk request (FIFO per disk), by node.
    disks: Vec<(usize, u64, VirtualTime)>,
    /// (0-based node, due time) of each crashed node's restart, by node.
    restarts: Vec<(usize, VirtualTime)>,
    /// (0-based node, due time) of each paused live node's resume, by node.
    resumes: Vec<(usize, VirtualTime)>,
}

impl Pending {
    /// The earliest due time of anything that can happen; `None` when
    /// nothing can (every node gone for good).
    pub fn earliest(&self) -> Option<VirtualTime> {
        self.earliest_but(None)
    }

    /// The earliest due time of anything but node `i`'s own requested run
    /// (lookahead's bound); `None` when nothing else can happen.
    pub fn earliest_except_run(&self, i: usize) -> Option<VirtualTime> {
        self.earliest_but(Some(i))
    }

    /// The earliest due time of everything pending, node `skip`'s run left out.
    fn earliest_but(&self, skip: Option<usize>) -> Option<VirtualTime> {
        let runs = self.runs.iter().filter(|&&(j, _)| Some(j) != skip).map(|&(_, t)| t);
        let restarts = self.restarts.iter().map(|&(_, t)| t);
        let resumes = self.resumes.iter().map(|&(_, t)| t);
        let host = self.host.map(|(_, t)| t);
        let disks = self.disks.iter().map(|&(_, _, t)| t);
        runs.chain(restarts).chain(resumes).chain(self.net).chain(host).chain(disks).min()
    }

    /// Leaves netsim's next event out (lookahead's debug mode,
    /// `Lookahead::IgnoringFrames`).
    pub fn forget_network(&mut self) {
        self.net = None;
    }

    /// The earliest time a live node asked to run at.
    pub fn min_requested(&self) -> Option<VirtualTime> {
        self.runs.iter().map(|&(_, t)| t).min()
    }
}

impl Execution<'_> {
    /// Refills `into` with the pending events of the current state.
    pub(crate) fn gather_pending(&self, into: &mut Pending) {
        let live = || self.nodes.iter().enumerate().filter(|(_, n)| n.is_up());
        let restart_after = Duration::from_nanos(self.spec.explore.restart_after_ns);
        let latency = Duration::from_nanos(self.spec.disk.as_ref().map_or(0, |d| d.latency_ns));
        into.runs.clear();
        into.runs.extend(live().map(|(i, n)| (i, n.vm.as_ref().unwrap().requested())));
        // The host client and netsim keep their times as ns.
        into.host = self.host.as_ref().and_then(|h| h.due().map(|t| (h.node().get(), VirtualTime::from_ns(t))));
        into.net = self.net.as_ref().and_then(|n| n.next_time()).map(VirtualTime::from_ns);
        into.disks.clear();
        into.disks.extend(live().filter_map(|(i, n)| {
            let requests = n.vm.as_ref().unwrap().pending_disk();
            let r = requests.first()?;
            Some((i, r.id.0, r.submitted.saturating_add(latency)))
        }));
        into.restarts.clear();
        let crashed = self.nodes.iter().enumerate().filter_map(|(i, n)| n.crashed_at.map(|t| (i, t + restart_after)));
        into.restarts.extend(crashed);
        into.resumes.clear();
        into.resumes.extend(live().filter_map(|(i, n)| n.paused_until.map(|t| (i, t))));
    }

    /// Every action due by `horizon`, in the fixed order the strategy
    /// contract needs: runs by node, the host client's poll, deliveries in
    /// netsim's order, the next partition/heal, disk completions by node,
    /// restarts by node, crashes by node, then resumes, pauses and clock
    /// jumps by node.
    pub(crate) fn enabled(&self, pending: &Pending, horizon: VirtualTime, into: &mut Vec<Enabled>) {
        into.clear();
        into.extend(pending.runs.iter().filter(|&&(_, t)| t <= horizon).map(|&(i, t)| Enabled::run(i, t)));
        if let Some((node, due)) = pending.host.filter(|&(_, t)| t <= horizon) {
            into.push(Enabled::run_host(node, due));
        }
        if let Some(ns) = &self.net {
            for (id, to, from, due, behind) in ns.deliveries_until(horizon.as_ns()) {
                into.push(Enabled::deliver(id, to, from, VirtualTime::from_ns(due), behind));
            }
            if let Some((due, heal)) = ns.next_fault().filter(|(t, _)| *t <= horizon.as_ns()) {
                into.push(Enabled::network_fault(heal, VirtualTime::from_ns(due)));
            }
        }
        if self.spec.disk.is_some() {
            let due = pending.disks.iter().filter(|&&(_, _, t)| t <= horizon);
            into.extend(due.map(|&(i, id, t)| Enabled::complete_disk(i, id, t)));
        }
        let restarts = pending.restarts.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(restarts.map(|&(i, t)| Enabled::restart(i, t)));
        self.enabled_crashes(into);
        let resumes = pending.resumes.iter().filter(|&&(_, t)| t <= horizon);
        into.extend(resumes.map(|&(i, t)| Enabled::resume(i, t)));
        self.enabled_node_faults(into);
    }

    /// A crash is enabled while the workload runs, within the budget,
    /// from a virtual time drawn uniformly over the first `crash_span` of
    /// the workload (so crashes spread over the run instead of piling up
    /// at its first opportunities), on a node with something at stake.
    ///
    /// With data disks, that is a node holding volatile writes (a crash
    /// there has several crash states: which of them reached the
    /// platter), one whose flush just completed, or one whose last run
    /// sent something. The last is where a program that acknowledges
    /// before it syncs is caught: its data sits in the guest's page
    /// cache, which the engine cannot see, and reaches the disk only at
    /// the file system's next commit (ext4: 5 s later); a crash offered
    /// only with volatile disk writes fell at that commit, after the
    /// window (issue 29 measured 19 executions of such a server without
    /// a loss). A crash of a node that merely has frames in flight
    /// (etcd's heartbeats are always in flight) is not offered: those
    /// were most crash points on db-cluster and lost nothing. Without
    /// disks, it is a node with frames in flight (the rest of the
    /// cluster may already believe something the node is about to lose,
    /// such as an acknowledgement sent before a replica has the write).
    /// Offering a crash at every step would spend nearly all of them on
    /// idle nodes.
    pub(crate) fn enabled_crashes(&self, into: &mut Vec<Enabled>) {
        let crash_time = self.crash_not_before.is_some_and(|t| self.now >= t);
        if !crash_time || self.crashes >= self.spec.explore.max_crashes || self.calm {
            return;
        }
        for i in self.spec.explore.crashable.iter().map(|n| n.index()) {
            let n = &self.nodes[i];
            let id = NodeIdx::new(i).net_id();
            let sending = self.net.as_ref().is_some_and(|ns| ns.has_in_flight_from(id));
            let vm = n.vm.as_ref();
            let volatile = vm.and_then(|v| v.disk()).is_some_and(|d| d.volatile_writes().next().is_some());
            // The moments around a durability point: just before a
            // flush completes (its writes are still volatile) and just
            // after (nothing is, and recovery must show all of it).
            let flush_pending =
                vm.is_some_and(|v| v.pending_disk().iter().any(|r| r.kind == disksim::RequestKind::Flush));
            // With disks, a crash is offered only while something on the
            // disk is at stake. Not merely after a send: a store that syncs
            // before it answers (etcd) sends all the time, and offering a
            // crash after every send (tried in 24b49cc) left db-cluster's
            // crash points with nothing volatile and one crash state each
            // (tests/disks.rs, full tier). An acknowledgement sent while its
            // writes are volatile is offered (they are) and weighted up.
            let at_stake = if self.spec.disk.is_some() { volatile || n.flushed_since_run } else { sending };
            if n.is_up() && n.ready && at_stake {
                let at_risk = flush_pending || n.flushed_since_run || n.just_sent;
                into.push(Enabled::crash(i, self.now).at_risk(at_risk));
            }
        }
    }

    /// Pauses, then clock jumps, each by node (after every older kind, so
    /// executions without them keep their choice indices).
    pub(crate) fn enabled_node_faults(&self, into: &mut Vec<Enabled>) {
        for i in self.spec.explore.pause.nodes.iter().map(|n| n.index()) {
            if self.pause_enabled(i) {
                into.push(Enabled::pause(i, self.now));
            }
        }
        for i in self.spec.explore.clock.nodes.iter().map(|n| n.index()) {
            if self.clock_jump_enabled(i) {
                into.push(Enabled::clock_jump(i, self.now));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pending;
    use crate::VirtualTime;

    fn t(ns: u64) -> VirtualTime {
        VirtualTime::from_ns(ns)
    }

    #[test]
    fn lookahead_bound_leaves_out_only_the_nodes_own_run() {
        let p = Pending {
            runs: vec![(0, t(50)), (1, t(30)), (2, t(40))],
            host: Some((4, t(45))),
            net: Some(t(35)),
            disks: vec![(0, 7, t(60))],
            restarts: vec![],
            resumes: vec![(2, t(33))],
        };
        assert_eq!(p.earliest(), Some(t(30)));
        assert_eq!(p.earliest_except_run(1), Some(t(33)), "node 2's own run at 30 does not bound it");
        assert_eq!(p.earliest_except_run(0), Some(t(30)));
        let mut q = p.clone();
        q.forget_network();
        q.resumes.clear();
        assert_eq!(q.earliest_except_run(1), Some(t(40)));
        let alone = Pending { runs: vec![(0, t(5))], ..Pending::default() };
        assert_eq!(alone.earliest_except_run(0), None, "nothing else can happen");
    }
}
