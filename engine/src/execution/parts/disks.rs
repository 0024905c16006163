//! The nodes' data disks: completing a request the engine chose, tracing
//! completions, and the disk faults (`[faults.disk]`) drawn at completion
//! and counted when a completion reports them.
//!
//! Invariant: the completion-fault streams draw only where a fault can
//! happen (a flush or write completes, its fault's probability is > 0,
//! and faults are not calm), so turning one on or off shifts no other draw.

use vmm::node::DiskCompletion;

use super::ctx::Ctx;
use super::small::FaultPeriod;
use crate::disk::{self, CompletionFaults, DiskFaultCounts};
use crate::spec::EngineError;
use crate::trace::{DiskOp, EventKind};
use crate::NodeId;

/// The disk faults of one execution: the streams of those decided at
/// completion (lost flush, write error, misdirect) and every fault that
/// hit a request, by kind.
pub(in crate::execution) struct DiskFaults {
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

    /// Disk faults that hit requests so far, by kind.
    pub fn counts(&self) -> DiskFaultCounts {
        self.counts
    }
}

/// The actions: each acts at `cx.now`.
impl DiskFaults {
    /// Completes pending request `request` of `node`'s data disk now (a
    /// completion-time fault drawn first, unless faults have stopped), and
    /// traces it.
    pub fn complete(
        &mut self,
        cx: &mut Ctx,
        period: &FaultPeriod,
        node: NodeId,
        request: u64,
    ) -> Result<(), EngineError> {
        let (now, watchdog) = (cx.now, cx.spec.watchdog);
        if !period.is_calm() {
            self.maybe_fault(cx, node, disksim::RequestId(request));
        }
        // Enabled only for a node whose disk holds the request.
        let disk = cx.nodes[node].data_disk_mut().ok_or(vmm::node::NodeError::NoDisk { node })?;
        let done = disk.complete_disk(now, disksim::RequestId(request), watchdog)?;
        if done.request.kind == disksim::RequestKind::Flush {
            cx.nodes[node].flushed_since_run = true;
        }
        self.record(cx, node, &[done]);
        Ok(())
    }

    /// Moves a node's disk completions (reads done at submission, reported
    /// by its grant; a write or flush the engine completed) into the trace,
    /// counting the faults they report.
    pub fn record(&mut self, cx: &mut Ctx, node: NodeId, completions: &[DiskCompletion]) {
        for c in completions {
            let op = match c.request.kind {
                disksim::RequestKind::Read => DiskOp::Read,
                disksim::RequestKind::Write { .. } => DiskOp::Write,
                disksim::RequestKind::Flush => DiskOp::Flush,
            };
            let (id, sector, sectors) = (c.request.id.0, c.request.sector, c.request.sectors);
            cx.trace.push(c.completed, node, EventKind::Disk { id, op, sector, sectors });
            if let Some(f) = c.fault {
                self.counts.count(&f);
                let detail = disk::describe_fault(&f, &c.request);
                let fault = disk::fault_kind(&f);
                cx.trace.push(c.completed, node, EventKind::DiskFault { id, fault, detail });
            }
        }
    }

    /// `[faults.disk]` lost_flush, write_error, misdirect: drawn for
    /// pending request `id` of `node` just before it completes (the caller
    /// draws nothing while calm; nothing for a fault that is off) and
    /// injected into its disk. The completion reports it, and
    /// [`Self::record`] traces and counts it there, like a read's
    /// corruption.
    fn maybe_fault(&mut self, cx: &mut Ctx, node: NodeId, id: disksim::RequestId) {
        let Some(rates) = cx.spec.disk.as_ref().map(|d| d.faults) else { return };
        if !rates.any_at_completion() {
            return;
        }
        let Some(vm) = cx.nodes[node].data_disk_mut() else { return };
        let Some(r) = vm.pending_disk().into_iter().find(|r| r.id == id) else { return };
        let capacity = vm.disk().map_or(0, |d| d.capacity_sectors());
        if let Some(fault) = self.draws.draw(&rates, &r, capacity) {
            // Always fits: a pending request of the kind the fault is for.
            vm.disk_fault(id, fault);
        }
    }

    /// Disk faults stop (the quiet period, a calm probe): the devices no
    /// longer corrupt reads, now or after a restart. (The completion-time
    /// draws stop with the fault period: see [`Self::complete`].)
    pub fn calm(&self, cx: &mut Ctx) {
        for n in cx.nodes.iter_mut() {
            n.stop_read_faults();
        }
    }
}
