//! The pending events, gathered once per step.
//!
//! [`Pending`] is the one list of everything due at some virtual time:
//! live nodes' requested runs, the host client's next poll, netsim's next
//! delivery or partition, each live node's oldest pending disk request,
//! restarts, resumes, killed start commands' restarts and the next
//! scheduled crash. The virtual clock reads it ([`Pending::earliest`]:
//! what happens next; [`Pending::min_requested`]: the horizon's clamp), and
//! so does the enabled set (`execution::enabled`, which also fills it), so
//! the two can never disagree about what is pending. Deliveries are the exception in form
//! only: netsim enumerates them itself up to the horizon
//! (`NetState::deliveries_until`), and `Pending` holds its earliest.

use crate::NodeId;
use simtime::VirtualTime;

/// Everything due at some virtual time, as of the start of a step. One
/// value lives as long as its execution and is refilled every step, so
/// the step (the engine's hot path, once per grant) allocates nothing.
#[derive(Default, Clone)]
pub(crate) struct Pending {
    /// (node, requested time) of every live node, by node.
    pub(crate) runs: Vec<(NodeId, VirtualTime)>,
    /// The host client's next poll: (its node, due time).
    pub(crate) host: Option<(NodeId, VirtualTime)>,
    /// netsim's next delivery or partition/heal.
    pub(crate) net: Option<VirtualTime>,
    /// (node, request id, due time) of each live node's oldest pending
    /// disk request (FIFO per disk), by node.
    pub(crate) disks: Vec<(NodeId, u64, VirtualTime)>,
    /// (node, due time) of each crashed node's restart, by node.
    pub(crate) restarts: Vec<(NodeId, VirtualTime)>,
    /// (node, due time) of each paused live node's resume, by node.
    pub(crate) resumes: Vec<(NodeId, VirtualTime)>,
    /// (node, due time) of each live node's killed start command's
    /// restart, by node.
    pub(crate) respawns: Vec<(NodeId, VirtualTime)>,
    /// The next scheduled crash (`[[faults.crash.schedule]]`).
    pub(crate) scheduled: Option<VirtualTime>,
}

impl Pending {
    /// The earliest due time of anything that can happen; `None` when
    /// nothing can (every node gone for good).
    pub fn earliest(&self) -> Option<VirtualTime> {
        self.earliest_but(None)
    }

    /// The earliest due time of anything but `node`'s own requested run
    /// (lookahead's bound); `None` when nothing else can happen.
    pub fn earliest_except_run(&self, node: NodeId) -> Option<VirtualTime> {
        self.earliest_but(Some(node))
    }

    /// The earliest due time of everything pending, node `skip`'s run left out.
    fn earliest_but(&self, skip: Option<NodeId>) -> Option<VirtualTime> {
        let runs = self.runs.iter().filter(|&&(j, _)| Some(j) != skip).map(|&(_, t)| t);
        let restarts = self.restarts.iter().map(|&(_, t)| t);
        let resumes = self.resumes.iter().map(|&(_, t)| t);
        let respawns = self.respawns.iter().map(|&(_, t)| t);
        let host = self.host.map(|(_, t)| t);
        let disks = self.disks.iter().map(|&(_, _, t)| t);
        let timed = runs.chain(restarts).chain(resumes).chain(respawns).chain(self.scheduled);
        timed.chain(self.net).chain(host).chain(disks).min()
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

#[cfg(test)]
mod tests {
    use super::Pending;
    use crate::NodeId;
    use simtime::VirtualTime;

    fn t(ns: u64) -> VirtualTime {
        VirtualTime::from_ns(ns)
    }

    fn n(i: usize) -> NodeId {
        NodeId::at(i)
    }

    #[test]
    fn lookahead_bound_leaves_out_only_the_nodes_own_run() {
        let p = Pending {
            runs: vec![(n(0), t(50)), (n(1), t(30)), (n(2), t(40))],
            host: Some((NodeId::new(4).unwrap(), t(45))),
            net: Some(t(35)),
            disks: vec![(n(0), 7, t(60))],
            restarts: vec![],
            resumes: vec![(n(2), t(33))],
            respawns: vec![],
            scheduled: None,
        };
        assert_eq!(p.earliest(), Some(t(30)));
        assert_eq!(p.earliest_except_run(n(1)), Some(t(33)), "node 2's own run at 30 does not bound it");
        assert_eq!(p.earliest_except_run(n(0)), Some(t(30)));
        let mut q = p.clone();
        q.forget_network();
        q.resumes.clear();
        assert_eq!(q.earliest_except_run(n(1)), Some(t(40)));
        let alone = Pending { runs: vec![(n(0), t(5))], ..Pending::default() };
        assert_eq!(alone.earliest_except_run(n(0)), None, "nothing else can happen");
    }
}
