//! Roles in an execution (`[roles]`, see `crate::roles`): starting each
//! node's role probe, keeping and tracing what it says, and which node a
//! fault that targets a role may hit.
//!
//! Invariant: a node holds a role only while it is up and only from what
//! its probe printed since its last boot (a boot forgets the role).

use std::collections::BTreeMap;

use super::ctx::Ctx;
use crate::agent::AgentCommand;
use crate::spec::EngineError;
use crate::trace::EventKind;
use crate::NodeId;

/// Each node's role: the last word its role probe printed since it booted.
#[derive(Default)]
pub(in crate::execution) struct Roles {
    by_node: BTreeMap<NodeId, String>,
}

impl Roles {
    /// `node`'s agent is ready after a boot: the node holds no role
    /// until its probe says one, and the probe starts (before anything
    /// else is sent: it runs in the background, so nothing waits for it).
    pub fn node_ready(&mut self, cx: &mut Ctx, node: NodeId) -> Result<(), EngineError> {
        self.by_node.remove(&node);
        if !cx.spec.explore.roles.probe {
            return Ok(());
        }
        let name = crate::roles::ROLE_PROBE.to_string();
        cx.trace.push(cx.now, node, EventKind::Command { name: name.clone() });
        cx.control(node, &AgentCommand::Run(name))
    }

    /// `node`'s probe printed `role` first: traced when it differs from
    /// what the node said last since it booted.
    pub fn on_role(&mut self, cx: &mut Ctx, node: NodeId, role: String) {
        if self.by_node.get(&node) == Some(&role) {
            return;
        }
        cx.trace.push(cx.now, node, EventKind::Role { role: role.clone() });
        self.by_node.insert(node, role);
    }

    /// Whether `node` is up and its probe last said `role`.
    pub fn holds(&self, cx: &Ctx, node: NodeId, role: &str) -> bool {
        cx.nodes[node].is_up() && self.by_node.get(&node).is_some_and(|r| r == role)
    }

    /// Whether a fault that targets `target` (`None`: no role) may hit `node`.
    pub fn allows(&self, cx: &Ctx, target: Option<&str>, node: NodeId) -> bool {
        target.is_none_or(|role| self.holds(cx, node, role))
    }

    /// The nodes holding `role` now, ascending.
    pub fn holders(&self, cx: &Ctx, role: &str) -> Vec<NodeId> {
        cx.nodes.ids().filter(|&node| self.holds(cx, node, role)).collect()
    }
}
