//! The nodes' data disks: completing a request the engine chose, tracing
//! completions, and the disk faults (`[faults.disk]`) drawn at completion
//! and counted when a completion reports them.
//!
//! Invariant: the completion-fault streams draw only where a fault can
//! happen (a flush or write completes, its fault's probability is > 0,
//! and faults are not calm), so turning one on or off shifts no other draw.

use vmm::node::DiskCompletion;

use super::Execution;
use crate::disk::{self, CompletionFaults, DiskFaultCounts, DiskFaultRates};
use crate::spec::EngineError;
use crate::trace::{DiskOp, EventKind};
use crate::NodeId;

/// The disk faults of one execution: the streams of those decided at
/// completion (lost flush, write error, misdirect) and every fault that
/// hit a request, by kind.
pub(super) struct DiskFaults {
    draws: CompletionFaults,
    counts: DiskFaultCounts,
}

impl DiskFaults {
    /// No fault yet; the streams drawn from `seed`.
    pub fn new(seed: u64) -> DiskFaults {
        DiskFaults { draws: CompletionFaults::new(seed), counts: DiskFaultCounts::default() }
    }

    /// The streams start again from `seed` (a warm start's boot ends,
    /// before any disk fault).
    pub fn reseed(&mut self, seed: u64) {
        self.draws = CompletionFaults::new(seed);
    }

    /// The completion-time fault for pending request `r` of a disk of
    /// `capacity` sectors, if one is drawn.
    fn draw(
        &mut self,
        rates: &DiskFaultRates,
        r: &vmm::runtime::DiskRequest,
        capacity: u64,
    ) -> Option<disksim::DiskFault> {
        self.draws.draw(rates, r, capacity)
    }

    /// Disk faults that hit requests so far, by kind.
    pub fn counts(&self) -> DiskFaultCounts {
        self.counts
    }
}

impl Execution<'_> {
    /// Completes pending request `request` of `node`'s data disk now (a
    /// completion-time fault drawn first), and traces it.
    pub(super) fn complete_disk(&mut self, node: NodeId, request: u64) -> Result<(), EngineError> {
        let (now, watchdog) = (self.cx.now, self.cx.spec.watchdog);
        self.maybe_disk_fault(node, disksim::RequestId(request));
        // Enabled only for a node whose disk holds the request.
        let disk = self.cx.nodes[node].data_disk_mut().ok_or(vmm::node::NodeError::NoDisk { node })?;
        let done = disk.complete_disk(now, disksim::RequestId(request), watchdog)?;
        if done.request.kind == disksim::RequestKind::Flush {
            self.cx.nodes[node].flushed_since_run = true;
        }
        self.record_disk(node, &[done]);
        Ok(())
    }

    /// Moves a node's disk completions (reads done at submission, reported
    /// by its grant; a write or flush the engine completed) into the trace.
    pub(crate) fn record_disk(&mut self, node: NodeId, completions: &[DiskCompletion]) {
        for c in completions {
            let op = match c.request.kind {
                disksim::RequestKind::Read => DiskOp::Read,
                disksim::RequestKind::Write { .. } => DiskOp::Write,
                disksim::RequestKind::Flush => DiskOp::Flush,
            };
            let (id, sector, sectors) = (c.request.id.0, c.request.sector, c.request.sectors);
            self.cx.trace.push(c.completed, node, EventKind::Disk { id, op, sector, sectors });
            if let Some(f) = c.fault {
                self.disk_faults.counts.count(&f);
                let detail = disk::describe_fault(&f, &c.request);
                let fault = disk::fault_kind(&f);
                self.cx.trace.push(c.completed, node, EventKind::DiskFault { id, fault, detail });
            }
        }
    }

    /// `[faults.disk]` lost_flush, write_error, misdirect: drawn for
    /// pending request `id` of `node` just before it completes (nothing
    /// while calm, nothing for a fault that is off) and injected into its
    /// disk. The completion reports it, and `record_disk` traces and counts
    /// it there, like a read's corruption.
    fn maybe_disk_fault(&mut self, node: NodeId, id: disksim::RequestId) {
        let Some(rates) = self.cx.spec.disk.as_ref().map(|d| d.faults) else { return };
        if self.fault_period.is_calm() || !rates.any_at_completion() {
            return;
        }
        let Some(vm) = self.cx.nodes[node].data_disk_mut() else { return };
        let Some(r) = vm.pending_disk().into_iter().find(|r| r.id == id) else { return };
        let capacity = vm.disk().map_or(0, |d| d.capacity_sectors());
        if let Some(fault) = self.disk_faults.draw(&rates, &r, capacity) {
            // Always fits: a pending request of the kind the fault is for.
            vm.disk_fault(id, fault);
        }
    }

    /// Disk faults stop (the quiet period, a calm probe): the engine draws
    /// none at completions (the fault period is calm), and the devices no
    /// longer corrupt reads, now or after a restart.
    pub(crate) fn calm_disks(&mut self) {
        for n in self.cx.nodes.iter_mut() {
            n.stop_read_faults();
        }
    }
}
