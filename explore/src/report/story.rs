//! What a report must show to explain a failure: the faults, the client
//! operations of the history (`[check] history`) on the virtual time axis,
//! and the operations the failure names (the key a linearizability
//! violation is about). The diagram window, the timeline and report.txt
//! all read it.

use super::ReportMeta;
use checker::history_check::{history_lines, HistoryModel};
use checker::register_history::{EventType, History, Op};
use engine::trace::{Event, EventKind};
use engine::{FailureKind, GUEST_EPOCH_NS};

/// How a client operation ended, as the timeline colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpEnd {
    /// Took effect.
    Ok,
    /// Did not take effect.
    Fail,
    /// Indeterminate (`info`), or never completed.
    Info,
}

impl OpEnd {
    /// `ok`, `fail` or `info`.
    pub fn name(self) -> &'static str {
        match self {
            OpEnd::Ok => "ok",
            OpEnd::Fail => "fail",
            OpEnd::Info => "info",
        }
    }
}

/// One client operation of the history, in virtual time.
#[derive(Debug, Clone)]
pub struct ClientOp {
    /// The client process.
    pub process: u64,
    /// The operation as completed (a read carries its value).
    pub op: Op,
    /// How it ended.
    pub end: OpEnd,
    /// Invoke and completion, virtual ns (a pending op ends at its invoke).
    pub call: u64,
    /// Completion, virtual ns.
    pub ret: u64,
    /// No completion line at all.
    pub pending: bool,
    /// On the key the failure names.
    pub failing: bool,
}

/// The story of an execution (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Story {
    /// Indices of the fault events (see [`is_fault`]), in trace order.
    pub faults: Vec<usize>,
    /// The history's operations, in invoke order; empty without a
    /// (readable, register) history.
    pub ops: Vec<ClientOp>,
    /// The key the failure is about (a linearizability violation's), if any.
    pub failing_key: Option<String>,
    /// How history times became virtual times (for the timeline's note).
    pub clock_note: Option<String>,
}

/// Faults: everything done to the cluster from outside (network, power,
/// processes, disks, clocks). Drawn, indexed and listed in every view.
pub fn is_fault(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::Partition { .. }
            | EventKind::Heal
            | EventKind::Crash { .. }
            | EventKind::Restart
            | EventKind::PowerFailure { .. }
            | EventKind::DiskFault { .. }
            | EventKind::Pause { .. }
            | EventKind::Resume
            | EventKind::Kill { .. }
            | EventKind::Respawn
            | EventKind::ClockBump { .. }
            | EventKind::ClockStrobe { .. }
            | EventKind::ConnReset { .. }
            | EventKind::ConnStall { .. }
    )
}

impl Story {
    /// The story of `events`.
    pub fn new(meta: &ReportMeta, events: &[Event]) -> Story {
        let faults = events.iter().enumerate().filter(|(_, e)| is_fault(&e.kind)).map(|(i, _)| i).collect();
        let failing_key = meta.failure.as_ref().and_then(|f| match f.kind {
            FailureKind::Linearizability => quoted_key(&f.message),
            _ => None,
        });
        let mut s = Story { faults, ops: Vec::new(), failing_key, clock_note: None };
        if let Some((node, HistoryModel::Register)) = meta.history {
            s.read_history(events, node);
        }
        s
    }

    /// The register history `node` printed, paired (each invoke with the
    /// process's next completion), its times made virtual.
    fn read_history(&mut self, events: &[Event], node: engine::NodeId) {
        let Some(text) = history_lines(events, node) else { return };
        let Ok(h) = History::from_json_lines(&text) else { return };
        let Some(first) = h.events.iter().map(|e| e.time).min() else { return };
        // A history stamped with the guest's wall clock (`date +%s%N`)
        // starts at the guest epoch plus the node's clock offset; one
        // stamped with a monotonic clock is about virtual time already.
        let offset = node_clock_offset(events, node);
        let base = GUEST_EPOCH_NS.wrapping_add_signed(offset);
        let wall = first >= GUEST_EPOCH_NS / 2;
        if wall {
            self.clock_note = Some(format!(
                "the history's times are {}'s wall clock; shown as virtual time (less the guest epoch{})",
                node,
                if offset != 0 { " and the node's clock offset" } else { "" }
            ));
        }
        let to_virtual = |t: u64| if wall { t.saturating_sub(base) } else { t };
        let mut open: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
        for e in &h.events {
            let t = to_virtual(e.time);
            match e.kind {
                EventType::Invoke => {
                    open.insert(e.process, self.ops.len());
                    self.ops.push(ClientOp {
                        process: e.process,
                        op: e.op.clone(),
                        end: OpEnd::Info,
                        call: t,
                        ret: t,
                        pending: true,
                        failing: false,
                    });
                }
                kind => {
                    let Some(k) = open.remove(&e.process) else { continue };
                    let o = &mut self.ops[k];
                    o.ret = t.max(o.call);
                    o.pending = false;
                    o.op = e.op.clone();
                    o.end = match kind {
                        EventType::Ok => OpEnd::Ok,
                        EventType::Fail => OpEnd::Fail,
                        _ => OpEnd::Info,
                    };
                }
            }
        }
        if let Some(key) = &self.failing_key {
            for o in &mut self.ops {
                o.failing = o.op.key() == key;
            }
        }
    }

    /// The operations on the failing key.
    pub fn failing_ops(&self) -> impl Iterator<Item = &ClientOp> {
        self.ops.iter().filter(|o| o.failing)
    }

    /// Virtual times the diagram window must include besides the faults
    /// and the failure: the failing operations' invokes and completions.
    pub fn focus_times(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self.failing_ops().flat_map(|o| [o.call, o.ret]).collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

/// The node's wall-clock offset at boot (`clock_offset`), 0 without one.
fn node_clock_offset(events: &[Event], node: engine::NodeId) -> i64 {
    events
        .iter()
        .find_map(|e| match e.kind {
            EventKind::ClockOffset { offset_ns } if e.node == node => Some(offset_ns),
            _ => None,
        })
        .unwrap_or(0)
}

/// `k929` out of `... key "k929" is not linearizable ...`.
fn quoted_key(message: &str) -> Option<String> {
    let rest = &message[message.find("key \"")? + 5..];
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_key_is_read_from_the_violation() {
        assert_eq!(
            quoted_key(
                "[check] history on n3: history is not linearizable: key \"k929\" is not linearizable (2 ops on it)."
            ),
            Some("k929".into())
        );
        assert_eq!(quoted_key("no key here"), None);
    }
}
