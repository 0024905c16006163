//! Roles at faults (`[roles]`): which node held which role when each fault
//! hit, from the trace's `role` events (a node holds none from its crash
//! until its probe reports again).

use super::{describe, fmt_time, node_label, ReportMeta};
use engine::trace::{Event, EventKind};
use engine::Actor;
use std::collections::BTreeMap;

/// One fault and the roles at its moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRoles {
    /// Index of the fault's event in the trace.
    pub index: usize,
    /// The node it hit (the engine for its own: partitions, power failures).
    pub node: Actor,
    /// The role that node held when it hit, if any.
    pub role: Option<String>,
    /// Every node's role at that moment: (node, role), by node.
    pub roles: Vec<(Actor, String)>,
}

/// Whether `k` is a fault the roles are reported for.
fn is_fault(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::Crash { .. }
            | EventKind::PowerFailure { .. }
            | EventKind::Partition { .. }
            | EventKind::Pause { .. }
            | EventKind::ClockBump { .. }
            | EventKind::ClockStrobe { .. }
    )
}

/// Every fault of `events` with the roles at its moment; empty when no
/// node ever reported a role.
pub fn faults_with_roles(events: &[Event]) -> Vec<FaultRoles> {
    if !events.iter().any(|e| matches!(e.kind, EventKind::Role { .. })) {
        return Vec::new();
    }
    let mut roles: BTreeMap<Actor, String> = BTreeMap::new();
    let mut out = Vec::new();
    for (index, e) in events.iter().enumerate() {
        if let EventKind::Role { role } = &e.kind {
            roles.insert(e.node, role.clone());
        }
        if is_fault(&e.kind) {
            let role = (!e.node.is_engine()).then(|| roles.get(&e.node).cloned()).flatten();
            let all = roles.iter().map(|(n, r)| (*n, r.clone())).collect();
            out.push(FaultRoles { index, node: e.node, role, roles: all });
        }
        if matches!(e.kind, EventKind::Crash { .. }) {
            roles.remove(&e.node);
        }
    }
    out
}

/// `t=3.2s n2 crash: power loss (n2 was leader; roles: n1 follower, n2 leader, n3 follower)`.
pub fn describe_fault(meta: &ReportMeta, events: &[Event], f: &FaultRoles) -> String {
    let e = &events[f.index];
    let held = match (&f.role, e.node) {
        (_, Actor::Engine) => String::new(),
        (Some(r), n) => format!("{} was {r}; ", node_label(meta, n)),
        (None, n) => format!("{} held no role; ", node_label(meta, n)),
    };
    let all: Vec<String> = f.roles.iter().map(|(n, r)| format!("{} {r}", node_label(meta, *n))).collect();
    let all = if all.is_empty() { "none".to_string() } else { all.join(", ") };
    format!("t={} {}: {} ({held}roles: {all})", fmt_time(e.time.as_ns()), node_label(meta, e.node), describe(meta, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use simtime::VirtualTime;

    /// An event of node number `node`, or of the engine for 0.
    fn ev(s: u64, node: u16, kind: EventKind) -> Event {
        Event { time: VirtualTime::from_ns(s * 1_000_000_000), node: Actor::from_number(node).unwrap(), kind }
    }

    #[test]
    fn each_fault_gets_the_roles_of_its_moment() {
        let role = |r: &str| EventKind::Role { role: r.into() };
        let crash = || EventKind::Crash { detail: "power loss".into() };
        let events = vec![
            ev(1, 1, role("follower")),
            ev(1, 2, role("leader")),
            ev(2, 2, crash()),
            ev(3, 0, EventKind::Partition { description: "{n1}".into() }),
            ev(4, 1, role("leader")),
            ev(5, 1, crash()),
        ];
        let f = faults_with_roles(&events);
        assert_eq!(f.len(), 3);
        let n = |k| Actor::from_number(k).unwrap();
        assert_eq!((f[0].index, f[0].node, f[0].role.as_deref()), (2, n(2), Some("leader")));
        assert_eq!(f[0].roles, vec![(n(1), "follower".to_string()), (n(2), "leader".to_string())]);
        // The crashed node holds no role until it reports again.
        assert_eq!((f[1].node, f[1].role.as_deref()), (Actor::Engine, None));
        assert_eq!(f[1].roles, vec![(n(1), "follower".to_string())]);
        assert_eq!((f[2].node, f[2].role.as_deref()), (n(1), Some("leader")));
        let meta = ReportMeta::default();
        let line = describe_fault(&meta, &events, &f[0]);
        assert!(line.contains("n2 was leader; roles: n1 follower, n2 leader"), "{line}");
        assert!(faults_with_roles(&events[2..4]).is_empty(), "no roles: nothing to say");
    }
}
