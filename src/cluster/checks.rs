//! The properties a run checks: `[[invariant]]` (commands that must pass
//! once the workload has finished), `[[liveness]]` (predicates that must
//! eventually hold), `[check]` (host-side checks) and `[[expect]]` (what
//! exploration must reach at least once).

use checker::history_check::HistoryModel;
use serde::Deserialize;

use super::values::no_such_node;
use super::{parse_duration_ns, parse_node_name, Invalid, KeyPath};

/// `[[invariant]]`: a command that must exit 0 once the workload has finished.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvariantSection {
    /// Shown in reports; defaults to `invariant-K`.
    pub name: Option<String>,
    /// Node to run it on (`n1`, ...), or `all`.
    pub node: String,
    /// Shell command that must exit 0 once the workload has finished.
    pub command: String,
}

/// `[[liveness]]`: a predicate that must eventually hold after the workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LivenessSection {
    /// Shown in reports; unique among invariants and liveness checks.
    pub name: String,
    /// Node to evaluate it on (`n1`, ...).
    pub node: String,
    /// Shell command; the property holds once it exits 0.
    pub command: String,
    /// How long (virtual) it may take to hold, e.g. "60s".
    pub within: String,
    /// How often (virtual) it is evaluated; default "1s".
    pub every: Option<String>,
}

/// `[check]`: properties simcluster checks itself, on the host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSection {
    /// Node whose console prints a client history (JSON lines of
    /// invoke/ok/fail/info events between `@history begin` and
    /// `@history end`, or Jepsen EDN for a transactional model); it must
    /// be linearizable (`model = "register"`) or free of the anomalies
    /// `consistency` forbids (a transactional model).
    pub history: Option<String>,
    /// What the history's ops are: `register` (the default; read, write,
    /// cas per key, checked for linearizability), `list-append` or
    /// `rw-register` (transactions, checked with txncheck), `set` (add and
    /// read, checked as Jepsen's set-full) or `queue` (enqueue, dequeue,
    /// drain, checked as Jepsen's total-queue).
    pub model: Option<String>,
    /// The consistency model of a transactional `model` (default
    /// `serializable`): one of txncheck's `Consistency` names; for `set`,
    /// `linearizable` makes stale reads fail too.
    pub consistency: Option<String>,
}

/// `[[expect]] reached = "NAME"`: some execution of the run must print
/// `@reached NAME` (or `@sometimes NAME`) on a guest console; otherwise
/// the run fails (see `checker::reach`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSection {
    /// The name a guest prints after `@reached` (one word of printable
    /// ASCII).
    pub reached: String,
}

/// Names of the agent's own commands (`/sim/cmd/NAME` and the start
/// command): no check may take one.
const RESERVED: [&str; 4] = ["workload", "start", engine::READY_PROBE, engine::ROLE_PROBE];

/// A named check on a node: (name, 0-based node, command or script).
pub(super) type NodeCheck = (String, usize, String);

/// `[[invariant]]`s, checked, `all` expanded to one per node.
pub(super) fn invariants(sections: &[InvariantSection], n: u16) -> Result<Vec<NodeCheck>, Invalid> {
    let mut invariants = Vec::new();
    for (k, inv) in sections.iter().enumerate() {
        let name = inv.name.clone().unwrap_or_else(|| format!("invariant-{}", k + 1));
        let element = KeyPath::array("invariant").nth(k);
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(element.key("name").invalid(format!(" {name:?} may hold only letters, digits, '-' and '_'")));
        }
        let at = KeyPath::array("invariant").named(k, &name);
        if RESERVED.contains(&name.as_str()) {
            return Err(at.key("name").invalid(format!(" is reserved (the agent's own commands: {RESERVED:?})")));
        }
        if invariants.iter().any(|(other, _, _): &NodeCheck| other == &name) {
            return Err(at.key("name").invalid(" is used twice"));
        }
        if inv.node == "all" {
            for i in 0..usize::from(n) {
                invariants.push((name.clone(), i, inv.command.clone()));
            }
        } else {
            let i = parse_node_name(&inv.node, n)
                .ok_or_else(|| at.key("node").invalid(no_such_node(&inv.node, n, ", or \"all\"")))?;
            invariants.push((name, i, inv.command.clone()));
        }
    }
    Ok(invariants)
}

/// `[[liveness]]` checks, each with its polling script; their names are
/// unique among themselves and `invariants`.
pub(super) fn liveness(
    sections: &[LivenessSection],
    n: u16,
    invariants: &[NodeCheck],
) -> Result<Vec<NodeCheck>, Invalid> {
    let mut liveness = Vec::new();
    for (k, l) in sections.iter().enumerate() {
        let at = KeyPath::array("liveness").named(k, &l.name);
        if l.name.is_empty() || !l.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(at.key("name").invalid(" may hold only letters, digits, '-' and '_'"));
        }
        if RESERVED.contains(&l.name.as_str()) {
            return Err(at.key("name").invalid(format!(" is reserved (the agent's own commands: {RESERVED:?})")));
        }
        if invariants.iter().any(|(o, _, _)| o == &l.name) || liveness.iter().any(|(o, _, _): &NodeCheck| o == &l.name)
        {
            return Err(at.key("name").invalid(" is used twice"));
        }
        let i = parse_node_name(&l.node, n).ok_or_else(|| at.key("node").invalid(no_such_node(&l.node, n, "")))?;
        let within = poll_within(&at.key("within"), &l.within)?;
        let every = poll_every(&at.key("every"), l.every.as_deref())?;
        liveness.push((l.name.clone(), i, poll_script(&l.command, within, every)));
    }
    Ok(liveness)
}

/// A polling script's deadline (liveness `within`, `[node] ready_within`),
/// the value at `key`: a positive duration.
pub(super) fn poll_within(key: &KeyPath, value: &str) -> Result<u64, Invalid> {
    parse_duration_ns(value)
        .filter(|&w| w > 0)
        .ok_or_else(|| key.invalid(format!(" = {value:?} is not a positive duration")))
}

/// A polling script's period (liveness `every`, `[node] ready_every`), the
/// value at `key`: at least 1 ms, 1 s unless set.
pub(super) fn poll_every(key: &KeyPath, value: Option<&str>) -> Result<u64, Invalid> {
    let Some(e) = value else { return Ok(1_000_000_000) };
    parse_duration_ns(e)
        .filter(|&v| v >= 1_000_000)
        .ok_or_else(|| key.invalid(format!(" = {e:?} is not a duration of at least 1ms")))
}

/// The guest script of a liveness check or a readiness probe: evaluate the
/// predicate every `every` ns of virtual time until it holds (exit 0) or
/// `within` ns have passed (exit 1). Guest time is virtual, so the deadline
/// is exact.
pub(super) fn poll_script(command: &str, within: u64, every: u64) -> String {
    // Shell built-ins only around the predicate: every fork costs a guest
    // process creation, and this loop may run for minutes of virtual time.
    format!(
        "read up _ < /proc/uptime; deadline=$(( ${{up%.*}} * 100 + 1${{up#*.}} - 100 + {within_cs} ))\n\
         while :; do\n\
         \t{{ {command}\n }} && exit 0\n\
         \tread up _ < /proc/uptime; [ $(( ${{up%.*}} * 100 + 1${{up#*.}} - 100 )) -ge $deadline ] && exit 1\n\
         \tsleep {every_s}\n\
         done\n",
        within_cs = within / 10_000_000,
        every_s = every as f64 / 1e9,
    )
}

impl CheckSection {
    /// `history`, 0-based.
    pub(super) fn history_node(&self, n: u16) -> Result<Option<usize>, Invalid> {
        match &self.history {
            None => Ok(None),
            Some(name) => parse_node_name(name, n)
                .map(Some)
                .ok_or_else(|| KeyPath::table("check").key("history").invalid(no_such_node(name, n, ""))),
        }
    }

    /// `model` and `consistency`: what the history is checked against.
    pub(super) fn history_model(&self) -> Result<HistoryModel, Invalid> {
        let at = KeyPath::table("check");
        let set = [("model", &self.model), ("consistency", &self.consistency)];
        if let (None, Some((key, _))) = (&self.history, set.iter().find(|(_, v)| v.is_some())) {
            return Err(at.key(*key).invalid(": there is no history to check (set [check] history = \"nN\")"));
        }
        let model = self.model.as_deref().unwrap_or("register");
        if !HistoryModel::NAMES.contains(&model) {
            let expected = HistoryModel::NAMES.join(", ");
            return Err(at.key("model").invalid(format!(" = {model:?}: unknown model (expected one of: {expected})")));
        }
        // The model is known: only the consistency can be wrong.
        HistoryModel::from_names(model, self.consistency.as_deref()).map_err(|e| {
            at.key("consistency").invalid(format!(" = {:?}: {e}", self.consistency.as_deref().unwrap_or_default()))
        })
    }
}

/// `[[expect]] reached` names, checked, in file order.
pub(super) fn expect_reached(sections: &[ExpectSection]) -> Result<Vec<String>, Invalid> {
    let mut expect_reached = Vec::new();
    for (i, e) in sections.iter().enumerate() {
        if !checker::reach::valid_name(&e.reached) {
            return Err(KeyPath::array("expect").nth(i).key("reached").invalid(format!(
                " = {:?}: a name is one word of printable ASCII, as a guest prints it after @reached",
                e.reached
            )));
        }
        expect_reached.push(e.reached.clone());
    }
    Ok(expect_reached)
}
