//! Reachability assertions (Antithesis's `reachable`/`sometimes`): a guest
//! prints `@reached NAME` or `@sometimes NAME` on its console when it gets
//! somewhere worth getting to. A run counts, over all its executions, how
//! often each name showed; `[[expect]] reached = "NAME"` in cluster.toml
//! fails the run when a name never shows, so a user learns when
//! exploration never reaches the state they care about.

use std::collections::BTreeMap;

use engine::console::reached_name;
use engine::trace::{EventKind, Trace};

/// Every name an execution's guests reported, with how many times.
pub fn reached(trace: &Trace) -> BTreeMap<String, u64> {
    let mut names = BTreeMap::new();
    for e in trace.events() {
        if let EventKind::Console { text } = &e.kind {
            if let Some(name) = reached_name(text) {
                *names.entry(name.to_string()).or_insert(0) += 1;
            }
        }
    }
    names
}

/// Is `name` usable as a reachability name (one word of printable ASCII)?
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_line_of_every_node() {
        let mut t = Trace::new();
        t.push(
            simtime::VirtualTime::from_ns(1),
            engine::NodeId::new(1).unwrap(),
            EventKind::Console { text: "@reached a".into() },
        );
        t.push(
            simtime::VirtualTime::from_ns(2),
            engine::NodeId::new(2).unwrap(),
            EventKind::Console { text: "@sometimes a".into() },
        );
        t.push(
            simtime::VirtualTime::from_ns(3),
            engine::NodeId::new(2).unwrap(),
            EventKind::Console { text: "@reached b".into() },
        );
        t.push(
            simtime::VirtualTime::from_ns(4),
            engine::NodeId::new(2).unwrap(),
            EventKind::Console { text: "unrelated".into() },
        );
        let r = reached(&t);
        assert_eq!(r, BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)]));
        assert!(valid_name("a-b_c.1") && !valid_name("") && !valid_name("two words"));
    }
}
