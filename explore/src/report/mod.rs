//! Reports of one execution, made from its trace.
//!
//! Three views of the same `&[Event]`:
//! - [`render_html`]: one self-contained HTML page (inline CSS and SVG, no
//!   JavaScript, no external resources) with a space-time diagram and the
//!   nodes' console logs interleaved by virtual time;
//! - [`render_text`]: a compact terminal summary;
//! - [`summary_json`]: counts and the failure, for machines.
//!
//! Every view is a pure function of its input: the same meta and events give
//! the same bytes. Guest text (console lines, message summaries, command
//! names, ...) is untrusted: it is escaped for HTML and stripped of control
//! characters (terminal escapes, bidi overrides) in every view.
//!
//! Output size is bounded for long traces: the diagram shows at most
//! [`html::MAX_ROWS`] rows and the console table a bounded number of lines
//! per node, always including the region around the failure, with a note
//! saying what was left out.

use engine::trace::{DiskOp, Event, EventKind};
use engine::{Actor, Failure, FailureKind, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

mod escape;
pub mod html;
mod json;
pub mod roles;
mod story;
#[cfg(test)]
mod tests;
mod text;

pub(crate) use escape::esc_html;
pub use escape::{clip, esc, sanitize, strip_ansi};
pub use html::render_html;
pub use json::summary_json;
pub use story::{is_fault, ClientOp, OpEnd, Story};
pub use text::render_text;

/// What the report says about the execution besides its events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportMeta {
    /// Cluster name (for example the cluster directory's name).
    pub cluster: String,
    /// The run's seed.
    pub seed: u64,
    /// Strategy name, perhaps with its parameters (`"pct(depth=3)"`).
    pub strategy: String,
    /// Which execution of the run (0-based).
    pub execution: u64,
    /// Hash of the execution's trace (a failure file's `trace_hash`).
    pub trace_hash: String,
    /// The engine's verdict (kind, node, virtual time, message); `None`
    /// when the execution passed. The report marks the event it names (see
    /// [`failure_index`]).
    pub failure: Option<Failure>,
    /// `node_names[k]` names node `k + 1` (node 0 is the engine). Nodes
    /// without a name are called `n<number>`.
    pub node_names: Vec<String>,
    /// `[check] history`: the node (1-based) whose console carries the
    /// client history, and its model; a transactional history that fails
    /// its check gets the anomalies panel (its cycles drawn). Not
    /// serialised: the page is rendered where the cluster is known.
    #[serde(skip)]
    pub history: Option<(NodeId, checker::history_check::HistoryModel)>,
}

/// The failure as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureSpot {
    /// Index into the events of the failing event, when one is found.
    pub index: Option<usize>,
    /// The failure's headline: its kind and the first line of its message
    /// (the console lines that follow in the message are in the report's
    /// console log already).
    pub description: String,
}

/// The trace event the engine's `failure` happened at: the last event at
/// or before the failure's time, on the failure's node (when it names one),
/// of the kind that decides such a verdict: a failed `invariant` for an
/// invariant, liveness or history failure, a `command_done` with a non-zero
/// status for a workload or start command, an `exit` (with a panic for a
/// panic) or `hung` for a guest. If there is none, the last event that is
/// not `Run` at or before that time, on that node if it has one, else on
/// any. A time limit has no event of its own: the last one before it.
pub fn failure_index(failure: &Failure, meta: &ReportMeta, events: &[Event]) -> Option<usize> {
    let node = failure.node.as_deref().and_then(|name| node_number(meta, name));
    let decides = |k: &EventKind| match failure.kind {
        FailureKind::Invariant | FailureKind::Liveness | FailureKind::Linearizability | FailureKind::Anomaly => {
            matches!(k, EventKind::Invariant { ok: false, .. })
        }
        FailureKind::Workload | FailureKind::StartCommand | FailureKind::NotReady => {
            matches!(k, EventKind::CommandDone { status, .. } if *status != 0)
        }
        FailureKind::GuestPanic => matches!(k, EventKind::Exit { panic: true, .. }),
        FailureKind::GuestExit => matches!(k, EventKind::Exit { .. }),
        FailureKind::GuestHang => matches!(k, EventKind::Hung),
        FailureKind::TimeLimit => false,
        FailureKind::Assertion => {
            matches!(k, EventKind::Console { text } if engine::sdk::sdk_line(text).is_some_and(|l| {
                matches!(l, Ok(engine::sdk::SdkLine::Assert(a)) if a.violated())
            }))
        }
    };
    let visible = |k: &EventKind| !matches!(k, EventKind::Run { .. });
    let last = |on: Option<NodeId>, f: &dyn Fn(&EventKind) -> bool| {
        events.iter().rposition(|e| e.time <= failure.time && on.is_none_or(|n| e.node == n) && f(&e.kind))
    };
    last(node, &decides).or_else(|| node.and_then(|n| last(Some(n), &visible))).or_else(|| last(None, &visible))
}

/// The node of a node name as the engine names nodes (the names of
/// `meta.node_names`, else `n<number>` exactly as [`NodeId`] writes it:
/// `n3`, not `n03`, `n+3` nor `n0`).
fn node_number(meta: &ReportMeta, name: &str) -> Option<NodeId> {
    if let Some(k) = meta.node_names.iter().position(|n| n == name) {
        return NodeId::from_index(k);
    }
    NodeId::from_name(name)
}

/// The failure of this execution, if it failed (see [`failure_index`]).
pub fn failure_spot(meta: &ReportMeta, events: &[Event]) -> Option<FailureSpot> {
    let f = meta.failure.as_ref()?;
    Some(FailureSpot { index: failure_index(f, meta, events), description: f.headline() })
}

/// Event counts, shared by the three views.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    pub by_kind: BTreeMap<&'static str, u64>,
    pub sent: u64,
    pub delivered: u64,
    pub duplicates: u64,
    pub dropped: u64,
    pub in_flight: u64,
    pub invariants_failed: u64,
    /// Node runs: `run` events count a folded quiet stretch once, this
    /// counts its grants.
    pub grants: u64,
}

impl Counts {
    pub fn kind(&self, k: &str) -> u64 {
        self.by_kind.get(k).copied().unwrap_or(0)
    }
}

/// Messages paired by id, per-node facts, the failure: what every view needs.
pub(crate) struct Analysis<'a> {
    pub meta: &'a ReportMeta,
    pub events: &'a [Event],
    /// Guest nodes, ascending: named ones and every one that occurs.
    pub nodes: Vec<NodeId>,
    /// For a Deliver or Drop: the Send it belongs to (latest Send with that id).
    pub partner: Vec<Option<usize>>,
    /// For a Deliver: not the first delivery of its Send.
    pub dup: Vec<bool>,
    /// For a Send: how many Delivers and Drops it got.
    pub outcome: Vec<(u32, u32)>,
    pub failure: Option<FailureSpot>,
    pub counts: Counts,
    /// The faults, the client operations, the failing key.
    pub story: Story,
}

impl<'a> Analysis<'a> {
    pub fn new(meta: &'a ReportMeta, events: &'a [Event]) -> Analysis<'a> {
        let n = events.len();
        let mut nodes: BTreeSet<NodeId> = NodeId::first(meta.node_names.len()).collect();
        let mut partner = vec![None; n];
        let mut dup = vec![false; n];
        let mut outcome = vec![(0u32, 0u32); n];
        let mut last_send: BTreeMap<u64, usize> = BTreeMap::new();
        let mut counts = Counts::default();
        for (i, ev) in events.iter().enumerate() {
            nodes.extend(ev.node.node());
            *counts.by_kind.entry(kind_name(&ev.kind)).or_insert(0) += 1;
            counts.grants += ev.kind.grants();
            match &ev.kind {
                EventKind::Send { id, to, .. } => {
                    nodes.insert(*to);
                    last_send.insert(*id, i);
                    counts.sent += 1;
                }
                EventKind::Deliver { id, from, .. } => {
                    nodes.insert(*from);
                    counts.delivered += 1;
                    if let Some(&s) = last_send.get(id) {
                        partner[i] = Some(s);
                        if outcome[s].0 > 0 {
                            dup[i] = true;
                            counts.duplicates += 1;
                        }
                        outcome[s].0 += 1;
                    }
                }
                EventKind::Drop { id, to, .. } => {
                    nodes.insert(*to);
                    counts.dropped += 1;
                    if let Some(&s) = last_send.get(id) {
                        partner[i] = Some(s);
                        outcome[s].1 += 1;
                    }
                }
                EventKind::Invariant { ok: false, .. } => counts.invariants_failed += 1,
                _ => {}
            }
        }
        counts.in_flight = events
            .iter()
            .enumerate()
            .filter(|(i, e)| matches!(e.kind, EventKind::Send { .. }) && outcome[*i] == (0, 0))
            .count() as u64;
        Analysis {
            meta,
            events,
            nodes: nodes.into_iter().collect(),
            partner,
            dup,
            outcome,
            failure: failure_spot(meta, events),
            counts,
            story: Story::new(meta, events),
        }
    }

    pub fn failure_index(&self) -> Option<usize> {
        self.failure.as_ref().and_then(|f| f.index)
    }

    pub fn end_time(&self) -> u64 {
        self.events.iter().map(Event::end_time).max().map_or(0, |t| t.as_ns())
    }
}

/// The failing command's console: the node, the command's name, and the
/// node's console lines (event indices) from the command's start to the
/// failing event. The agent sends a command's output to the node's
/// console, so these are its output and whatever else (the service, the
/// kernel) printed there meanwhile.
pub(crate) fn command_output(a: &Analysis) -> Option<(Actor, String, Vec<usize>)> {
    let f = a.failure_index()?;
    let ev = &a.events[f];
    let name = match &ev.kind {
        EventKind::CommandDone { name, .. } | EventKind::Invariant { name, .. } => name,
        _ => return None,
    };
    let start = a.events[..f]
        .iter()
        .rposition(|e| e.node == ev.node && matches!(&e.kind, EventKind::Command { name: n } if n == name))?;
    let lines = (start..f)
        .filter(|&i| a.events[i].node == ev.node && matches!(a.events[i].kind, EventKind::Console { .. }))
        .collect();
    Some((ev.node, name.clone(), lines))
}

/// The serde name of an event kind (`"deliver"`, `"command_done"`, ...).
pub fn kind_name(k: &EventKind) -> &'static str {
    match k {
        EventKind::Boot => "boot",
        EventKind::Run { .. } => "run",
        EventKind::Console { .. } => "console",
        EventKind::Command { .. } => "command",
        EventKind::CommandDone { .. } => "command_done",
        EventKind::Ready => "ready",
        EventKind::Exit { .. } => "exit",
        EventKind::Hung => "hung",
        EventKind::Send { .. } => "send",
        EventKind::Deliver { .. } => "deliver",
        EventKind::Drop { .. } => "drop",
        EventKind::Partition { .. } => "partition",
        EventKind::Heal => "heal",
        EventKind::Crash { .. } => "crash",
        EventKind::Restart => "restart",
        EventKind::PowerFailure { .. } => "power_failure",
        EventKind::Invariant { .. } => "invariant",
        EventKind::Note { .. } => "note",
        EventKind::Disk { .. } => "disk",
        EventKind::DiskFault { .. } => "disk_fault",
        EventKind::Pause { .. } => "pause",
        EventKind::Kill { .. } => "kill",
        EventKind::Respawn => "respawn",
        EventKind::Resume => "resume",
        EventKind::ClockOffset { .. } => "clock_offset",
        EventKind::ClockDrift { .. } => "clock_drift",
        EventKind::ClockBump { .. } => "clock_bump",
        EventKind::ClockStrobe { .. } => "clock_strobe",
        EventKind::Role { .. } => "role",
        EventKind::ConnReset { .. } => "conn_reset",
        EventKind::ConnStall { .. } => "conn_stall",
    }
}

/// A node's display name: `engine` for the engine, else its configured
/// name, else `n<number>`. Raw (not sanitised).
pub fn node_name(meta: &ReportMeta, node: impl Into<Actor>) -> String {
    let Actor::Node(n) = node.into() else { return "engine".to_string() };
    match meta.node_names.get(n.index()) {
        Some(name) if !name.is_empty() => name.clone(),
        _ => n.to_string(),
    }
}

/// `n2` or `n2 (db-2)`; raw.
pub(crate) fn node_label(meta: &ReportMeta, node: impl Into<Actor>) -> String {
    let node = node.into();
    if node.is_engine() {
        return "engine".to_string();
    }
    let name = node_name(meta, node);
    let short = node.to_string();
    if name == short {
        short
    } else {
        format!("{short} ({name})")
    }
}

/// One-line description of an event (raw text; sanitise before showing).
pub fn describe(meta: &ReportMeta, ev: &Event) -> String {
    match &ev.kind {
        EventKind::Boot => "boot".into(),
        EventKind::Run { grants: 1, .. } => "run".into(),
        EventKind::Run { grants, until } => {
            format!("run x{grants} (quiet stretch, last at {})", fmt_time(until.unwrap_or(ev.time).as_ns()))
        }
        EventKind::Console { text } => format!("console: {text}"),
        EventKind::Command { name } => format!("command {name}"),
        EventKind::CommandDone { name, status } => format!("command {name} done, status {status}"),
        EventKind::Ready => "ready".into(),
        EventKind::Exit { status, signal, panic } => exit_text(*status, *signal, *panic),
        EventKind::Hung => "hung (stopped yielding to the time controller)".into(),
        EventKind::Send { id, to, len, summary } => {
            format!("send #{id} to {} ({len} B) {summary}", node_label(meta, *to))
        }
        EventKind::Deliver { id, from, len, summary } => {
            format!("deliver #{id} from {} ({len} B) {summary}", node_label(meta, *from))
        }
        EventKind::Drop { id, to, cause } => {
            format!("drop #{id} to {}: {cause}", node_label(meta, *to))
        }
        EventKind::Partition { description } => format!("partition {description}"),
        EventKind::Heal => "heal".into(),
        EventKind::Crash { detail } => format!("crash: {detail}"),
        EventKind::Restart => "restart".into(),
        EventKind::PowerFailure { nodes } => format!("power failure: {} lose power together", nodes.join(", ")),
        EventKind::Invariant { name, ok: true } => format!("invariant {name} ok"),
        EventKind::Invariant { name, ok: false } => format!("invariant {name} FAILED"),
        EventKind::Note { text } => format!("note: {text}"),
        EventKind::Disk { id, op: DiskOp::Flush, .. } => format!("disk flush #{id} completed"),
        EventKind::Disk { id, op, sector, sectors } => {
            format!("disk {op} #{id} completed: sectors {sector}..{}", sector + sectors)
        }
        EventKind::DiskFault { id, fault, detail } => format!("disk fault {fault} on #{id}: {detail}"),
        EventKind::Pause { resume_at } => {
            format!("pause: start command stopped (SIGSTOP) until {}", fmt_time(resume_at.as_ns()))
        }
        EventKind::Resume => "resume: start command continued (SIGCONT)".into(),
        EventKind::Kill { restart_at } => {
            format!("kill: start command killed (SIGKILL), runs again at {}", fmt_time(restart_at.as_ns()))
        }
        EventKind::Respawn => "respawn: start command runs again after its kill".into(),
        EventKind::ClockOffset { offset_ns } => format!("clock offset {} (wall clock at boot)", fmt_signed(*offset_ns)),
        EventKind::ClockDrift { ppm } => format!("clock drift {ppm:+} ppm"),
        EventKind::ClockBump { delta_ns } => format!("clock bump {} (wall clock)", fmt_signed(*delta_ns)),
        EventKind::ClockStrobe { delta_ns, period_ns, length_ns } => format!(
            "clock strobe {} and back every {} for {} (wall clock)",
            fmt_signed(*delta_ns),
            fmt_dur(*period_ns),
            fmt_dur(*length_ns)
        ),
        EventKind::ConnReset { a, b, dropped } => {
            format!("connection reset: {a} <-> {b}, an RST to each end ({dropped} frames in flight lost)")
        }
        EventKind::ConnStall { from, to, both, until, held } => format!(
            "connection stall: {from} {} {to} held until {} ({held} frames in flight held)",
            if *both { "<->" } else { "->" },
            fmt_time(until.as_ns())
        ),
        EventKind::Role { role } => format!("role {role} (its role probe's first word)"),
    }
}

/// Offsets, drifts, bumps and strobes of a node's clock.
pub(crate) fn is_clock_fault(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::ClockOffset { .. }
            | EventKind::ClockDrift { .. }
            | EventKind::ClockBump { .. }
            | EventKind::ClockStrobe { .. }
    )
}

/// A signed duration, short: `+1.25s`, `-350ms`.
pub fn fmt_signed(ns: i64) -> String {
    format!("{}{}", if ns < 0 { '-' } else { '+' }, fmt_dur(ns.unsigned_abs()))
}

pub(crate) fn exit_text(status: Option<i32>, signal: Option<i32>, panic: bool) -> String {
    let mut s = String::from(if panic { "kernel panic, exit" } else { "exit" });
    if let Some(st) = status {
        let _ = write!(s, " status {st}");
    }
    if let Some(sig) = signal {
        let _ = write!(s, " signal {sig}");
    }
    s
}

/// Virtual time as seconds with microseconds: `12.345678s`.
pub fn fmt_time(ns: u64) -> String {
    format!("{}.{:06}s", ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000)
}

/// Virtual time with full precision: `12.345678901s`.
pub fn fmt_time_ns(ns: u64) -> String {
    format!("{}.{:09}s", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// A duration, short: `+1.25s`, `+350ms`, `+12µs`, `+80ns`.
pub fn fmt_dur(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{}.{:02}s", ns / 1_000_000_000, (ns % 1_000_000_000) / 10_000_000)
    } else if ns >= 1_000_000 {
        format!("{}ms", ns / 1_000_000)
    } else if ns >= 1_000 {
        format!("{}µs", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}
