//! Roles in an execution (`[roles]`, see `crate::roles`): starting each
//! node's role probe, keeping and tracing what it says, and turning the
//! faults that target a role onto the node that holds it.

use super::Execution;
use crate::actions::{Action, Enabled};
use crate::agent::AgentCommand;
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;

impl Execution<'_> {
    /// `node`'s agent is ready after a boot: the node holds no role
    /// until its probe says one, and the probe starts (before anything
    /// else is sent: it runs in the background, so nothing waits for it).
    pub(crate) fn start_role_probe(&mut self, node: NodeId) -> Result<(), EngineError> {
        self.roles.remove(&node);
        if !self.cx.spec.explore.roles.probe {
            return Ok(());
        }
        let name = crate::roles::ROLE_PROBE.to_string();
        self.cx.trace.push(self.cx.now, node, EventKind::Command { name: name.clone() });
        self.cx.control(node, &AgentCommand::Run(name))
    }

    /// `node`'s probe printed `role` first: traced when it differs from
    /// what the node said last since it booted.
    pub(crate) fn on_role(&mut self, node: NodeId, role: String) {
        if self.roles.get(&node) == Some(&role) {
            return;
        }
        self.cx.trace.push(self.cx.now, node, EventKind::Role { role: role.clone() });
        self.roles.insert(node, role);
    }

    /// Whether `node` is up and its probe last said `role`.
    pub(crate) fn holds_role(&self, node: NodeId, role: &str) -> bool {
        self.cx.nodes[node].is_up() && self.roles.get(&node).is_some_and(|r| r == role)
    }

    /// Whether a fault that targets `target` (`None`: no role) may hit `node`.
    pub(crate) fn role_allows(&self, target: Option<&str>, node: NodeId) -> bool {
        target.is_none_or(|role| self.holds_role(node, role))
    }

    /// The nodes holding `role` now, ascending.
    pub(crate) fn role_holders(&self, role: &str) -> Vec<NodeId> {
        self.cx.nodes.ids().filter(|&node| self.holds_role(node, role)).collect()
    }

    /// Applies the next fault of the network's timeline; one that targets a
    /// role is turned onto the lowest-numbered node holding it now.
    pub(crate) fn apply_network_fault(&mut self) {
        let now = self.cx.now;
        let holder = self.wire.next_role().and_then(|role| self.role_holders(role).first().copied());
        let skip = &self.cx.spec.explore.skip_partitions;
        self.wire.apply_fault(&mut self.cx.trace, now, holder, skip);
    }

    /// `[faults.crash] target`: the crashes `enabled_crashes` offered
    /// (`into`'s `Crash` entries, by node) become the crashes of the nodes
    /// holding the role: a crashable node that holds it is offered at
    /// every step from the crash time on, within the budget, and weighted
    /// up; no other node's crash is. A coordinated power failure is left
    /// as offered (it takes every node down).
    pub(crate) fn target_crashes(&self, into: &mut Vec<Enabled>) {
        let Some(role) = self.cx.spec.explore.roles.crash.as_deref() else { return };
        let first = into.iter().position(|e| matches!(e.action, Action::Crash(_) | Action::PowerFailure));
        into.retain(|e| !matches!(e.action, Action::Crash(_)));
        if !self.crashes.due(self.cx.now, self.cx.spec.explore.max_crashes) || self.fault_period.is_calm() {
            return;
        }
        let at = first.unwrap_or(into.len()).min(into.len());
        let crashes = self.cx.spec.explore.crashable.iter().copied();
        let targeted: Vec<Enabled> = crashes
            .filter(|&node| self.cx.nodes[node].is_ready() && self.holds_role(node, role))
            .map(|node| Enabled::crash(node, self.cx.now).at_risk(true))
            .collect();
        into.splice(at..at, targeted);
    }
}
