//! The engine's side of the nodes' data disks: which request completes
//! next, and which crash state a power loss leaves.
//!
//! Completions are FIFO per disk (the oldest outstanding write or flush is
//! the one enabled), due `latency` after submission. Completion order is
//! not what decides durability: after a power loss every write that was not
//! made durable by a completed flush may or may not have reached the
//! platter, and the crash state (disksim's) says which did. So exploring
//! crash states covers what reordering completions would add for
//! durability; the guest-visible order of completions stays FIFO.
//!
//! Disk faults (`[faults.disk]`, semantics in `disksim::faults`): a flush or
//! write completing may be hit by a lost flush, a write error or a
//! misdirection, drawn here from the engine's streams ([`CompletionFaults`],
//! one per fault) just before the completion; a read may come back
//! corrupted, drawn by the node's device from its own per-boot stream
//! (`crate::read_fault_seed`), because reads are answered inside the
//! guest's kick where the engine makes no choice. The quiet period stops
//! both.

use disksim::faults::{bernoulli, misdirect_target};
use disksim::{BlockStore, CrashModel, CrashState, Disk, DiskFault, RequestKind, StateCount};
use serde::{Deserialize, Serialize};
use simrng::Rng;
use vmm::runtime::DiskRequest;

use simtime::VirtualTime;

/// The data disk every node gets.
#[derive(Debug, Clone)]
pub struct DiskSpec {
    /// The empty filesystem every node starts with (shared, read-only).
    pub base: BlockStore,
    /// Submission to completion of a write or flush, in virtual time.
    pub latency: std::time::Duration,
    /// What a power loss may do to volatile writes (atomic or torn).
    pub model: CrashModel,
    /// Crash points with at most this many states are enumerated across
    /// executions; larger ones are sampled from the seed.
    pub enumerate: u64,
    /// `[faults.disk]`.
    pub faults: DiskFaultRates,
}

/// `[faults.disk]`: each fault's probability, in [0, 1]; 0 (the default)
/// turns it off, and a fault that is off draws nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskFaultRates {
    /// A flush is acknowledged without making anything durable.
    pub lost_flush: f64,
    /// A read returns its data with a few bits flipped (transient).
    pub corrupt_read: f64,
    /// A write completes with an I/O error and does not land.
    pub write_error: f64,
    /// A write is acknowledged but lands at another sector.
    pub misdirect: f64,
}

impl DiskFaultRates {
    /// Whether a fault decided when a write or flush completes is on.
    pub fn any_at_completion(&self) -> bool {
        [self.lost_flush, self.write_error, self.misdirect].iter().any(|&p| p > 0.0)
    }
}

/// Disk faults that hit an execution's requests, by kind (the run's JSON
/// line reports them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskFaultCounts {
    /// Reads returned corrupted.
    pub corrupt_reads: u32,
    /// Flushes that made nothing durable.
    pub lost_flushes: u32,
    /// Writes that failed with EIO.
    pub write_errors: u32,
    /// Writes that landed elsewhere.
    pub misdirected_writes: u32,
}

impl DiskFaultCounts {
    /// Counts one fault.
    pub fn count(&mut self, fault: &DiskFault) {
        let n = match fault {
            DiskFault::CorruptRead { .. } => &mut self.corrupt_reads,
            DiskFault::LostFlush => &mut self.lost_flushes,
            DiskFault::WriteError => &mut self.write_errors,
            DiskFault::Misdirected { .. } => &mut self.misdirected_writes,
        };
        *n += 1;
    }
}

/// The engine's streams for the faults decided when a write or flush
/// completes: one per fault, each seeded from the execution seed with its
/// own constant, so turning one fault on or off shifts no draw of another
/// (nor of anything else in the execution).
pub(super) struct CompletionFaults {
    /// Its constant predates the others ("diskfaul"): traces recorded with
    /// lost flushes keep their draws.
    lost_flush: Rng,
    write_error: Rng,
    misdirect: Rng,
}

impl CompletionFaults {
    pub fn new(seed: u64) -> CompletionFaults {
        CompletionFaults {
            lost_flush: simrng::stream(seed, simrng::streams::DISK_LOST_FLUSH),
            write_error: simrng::stream(seed, simrng::streams::DISK_WRITE_ERROR),
            misdirect: simrng::stream(seed, simrng::streams::DISK_MISDIRECT),
        }
    }

    /// The fault for pending request `r` of a disk of `capacity` sectors,
    /// completing now. A flush draws for `lost_flush`; a write draws for
    /// `write_error` and for `misdirect` (and, hit, its target), each
    /// whenever it is on, so each stream depends only on the sequence of
    /// completions; a write hit by both fails (it lands nowhere).
    pub fn draw(&mut self, rates: &DiskFaultRates, r: &DiskRequest, capacity: u64) -> Option<DiskFault> {
        let hit = |rng: &mut Rng, p: f64| p > 0.0 && bernoulli(rng, p);
        match r.kind {
            RequestKind::Flush => hit(&mut self.lost_flush, rates.lost_flush).then_some(DiskFault::LostFlush),
            RequestKind::Write { .. } => {
                let failed = hit(&mut self.write_error, rates.write_error);
                let moved = if hit(&mut self.misdirect, rates.misdirect) {
                    misdirect_target(&mut self.misdirect, capacity, r.sector, r.sectors)
                } else {
                    None
                };
                if failed {
                    Some(DiskFault::WriteError)
                } else {
                    moved.map(|to| DiskFault::Misdirected { to })
                }
            }
            RequestKind::Read => None,
        }
    }
}

/// What a fault did, for the trace: `r` is the request it hit.
/// The trace's name of a disk fault.
pub(super) fn fault_kind(fault: &DiskFault) -> crate::trace::DiskFaultKind {
    use crate::trace::DiskFaultKind as K;
    match fault {
        DiskFault::CorruptRead { .. } => K::CorruptRead,
        DiskFault::LostFlush => K::LostFlush,
        DiskFault::WriteError => K::WriteError,
        DiskFault::Misdirected { .. } => K::Misdirect,
    }
}

pub(super) fn describe_fault(fault: &DiskFault, r: &DiskRequest) -> String {
    let range = |s: u64| format!("sectors {s}..{}", s + r.sectors);
    match fault {
        DiskFault::CorruptRead { bits } => {
            format!("read of {} returned {bits} flipped bit(s); the stored data is intact", range(r.sector))
        }
        DiskFault::LostFlush => "flush acknowledged but nothing made durable".into(),
        DiskFault::WriteError => format!("write of {} failed with an I/O error and did not land", range(r.sector)),
        DiskFault::Misdirected { to } => {
            format!("write of {} landed at {} instead, acknowledged as success", range(r.sector), range(*to))
        }
    }
}

/// What one power loss left on a disk: reported in the JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashPoint {
    /// 1-based crash number within the execution.
    pub crash: u32,
    /// The crashed node's name.
    pub node: String,
    /// When it happened.
    pub time: VirtualTime,
    /// Writes a power loss could still lose.
    pub volatile_writes: usize,
    /// Regular files whose data the guest's page cache held dirty, lost
    /// with the power (the disk never saw it); `None`
    /// where the runtime cannot see the guest's page cache (KVM).
    pub dirty_files: Option<u64>,
    /// Distinct crash states (a lower bound when counting gave up).
    pub states: u128,
    /// `states` is exact (counting did not give up).
    pub states_exact: bool,
    /// Index of the state applied when the states are enumerable (small
    /// enough), else `None` (sampled).
    pub chosen: Option<u64>,
}

impl CrashPoint {
    /// Can the run explore every state of this point, one execution each?
    pub fn enumerable(&self, limit: u64) -> bool {
        self.states_exact && self.states <= u128::from(limit)
    }
}

/// The stream crash number `crash` draws its disk state from.
fn crash_rng(seed: u64, crash: u32) -> Rng {
    simrng::streams::crash_state(seed, crash)
}

/// The index of the crash state that crash number `crash` draws among
/// `states` enumerable ones when nothing forces one (its stream's first
/// draw).
pub(super) fn drawn_state(seed: u64, crash: u32, states: u128) -> u64 {
    rand_core::RngCore::next_u64(&mut crash_rng(seed, crash)) % (states.max(1) as u64)
}

/// How many crash states a power loss now would leave `disk` in, when
/// they are few enough to enumerate (`spec.enumerate`); `None` otherwise.
/// A node's disk holds the same write log and requests before the power
/// loss as after it, so this is the count `crash_disk` will find.
pub(super) fn enumerable_states(disk: &Disk, spec: &DiskSpec) -> Option<u128> {
    match disk.crash_state_count(spec.model) {
        StateCount::Exact(n) if n <= u128::from(spec.enumerate) => Some(n),
        _ => None,
    }
}

/// Chooses and applies the crash state of a power loss (the point's
/// `dirty_files` is the caller's: the disk cannot know it). `forced` is the
/// state index to use (an enumeration's sibling execution); otherwise the
/// index (or, for large logs, the state) is drawn from `seed`.
pub(super) fn crash_disk(
    disk: &mut Disk,
    spec: &DiskSpec,
    crash: u32,
    node: &str,
    time: VirtualTime,
    seed: u64,
    forced: Option<u64>,
) -> Result<(CrashPoint, CrashState), disksim::CrashError> {
    let count = disk.crash_state_count(spec.model);
    let (states, exact) = match count {
        StateCount::Exact(n) => (n, true),
        StateCount::AtLeast(n) => (n, false),
    };
    let mut rng = crash_rng(seed, crash);
    let mut point = CrashPoint {
        crash,
        node: node.to_string(),
        time,
        volatile_writes: disk.volatile_writes().count(),
        dirty_files: None,
        states,
        states_exact: exact,
        chosen: None,
    };
    let state = if point.enumerable(spec.enumerate) {
        let k = match forced {
            Some(k) => k.min(states.saturating_sub(1) as u64),
            None => drawn_state(seed, crash, states),
        };
        point.chosen = Some(k);
        disk.crash_states(spec.model).nth(k as usize).unwrap_or_default()
    } else {
        disk.sample_crash_state(spec.model, &mut rng)
    };
    disk.apply_crash(&state)?;
    Ok((point, state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use disksim::RequestId;

    fn request(kind: RequestKind) -> DiskRequest {
        DiskRequest { id: RequestId(1), kind, sector: 64, sectors: 8, submitted: simtime::VirtualTime::ZERO }
    }

    /// The faults drawn for `n` completions alternating write, flush.
    fn draws(rates: DiskFaultRates, n: usize) -> Vec<Option<DiskFault>> {
        let mut f = CompletionFaults::new(42);
        let kinds = [RequestKind::Write { fua: false }, RequestKind::Flush];
        (0..n).map(|i| f.draw(&rates, &request(kinds[i % 2]), 2048)).collect()
    }

    #[test]
    fn each_fault_draws_from_its_own_stream() {
        let n = 400;
        let on = DiskFaultRates { lost_flush: 0.3, corrupt_read: 0.0, write_error: 0.3, misdirect: 0.3 };
        let all = draws(on, n);
        let count = |v: &[Option<DiskFault>], f: fn(&DiskFault) -> bool| v.iter().flatten().filter(|x| f(x)).count();
        assert!(count(&all, |f| *f == DiskFault::LostFlush) > 30);
        assert!(count(&all, |f| *f == DiskFault::WriteError) > 30);
        assert!(count(&all, |f| matches!(f, DiskFault::Misdirected { .. })) > 20);
        for f in all.iter().flatten() {
            if let DiskFault::Misdirected { to } = f {
                assert!(*to != 64 && to + 8 <= 2048);
            }
        }
        // Off: nothing drawn, nothing else moves.
        let no_errors = draws(DiskFaultRates { write_error: 0.0, ..on }, n);
        let no_flushes = draws(DiskFaultRates { lost_flush: 0.0, ..on }, n);
        for i in 0..n {
            match all[i] {
                Some(DiskFault::WriteError) => assert!(!matches!(no_errors[i], Some(DiskFault::WriteError))),
                other => assert_eq!(no_errors[i], other, "completion {i}"),
            }
            match all[i] {
                Some(DiskFault::LostFlush) => assert_eq!(no_flushes[i], None),
                other => assert_eq!(no_flushes[i], other, "completion {i}"),
            }
        }
        assert_eq!(draws(DiskFaultRates::default(), n), vec![None; n]);
        // Reads are the device's business.
        assert_eq!(CompletionFaults::new(1).draw(&on, &request(RequestKind::Read), 2048), None);
    }
}
