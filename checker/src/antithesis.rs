//! The Antithesis SDK's assertions as properties of a run (see
//! `engine::sdk` for the lines). The engine fails an execution at a
//! violated assertion (`always` false, `unreachable` reached); here each
//! execution's assertions are counted, and a run adds them up: a property
//! that must be shown at least once (`sometimes` true, `reachable` or
//! `always` reached) and never was in any execution fails the run at its
//! end, as Antithesis reports it.
//!
//! Counts are of the lines the SDKs wrote: the SDKs write an assertion's
//! first pass and first failure in each process, not every evaluation.

use std::collections::BTreeMap;

use engine::sdk::{sdk_line, PropertyKind, SdkLine};
use engine::trace::{Event, EventKind, Trace};
use serde::{Deserialize, Serialize};

/// One property (assertion) of one execution, or of a whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropertyCount {
    /// The SDK's display type (`Always`, `Sometimes`, `Reachable`, ...).
    pub display_type: String,
    /// The assertion's message.
    pub message: String,
    /// Where it is (`file:line`), if the SDK said.
    #[serde(default)]
    pub location: String,
    /// It must be shown at least once (see the module docs).
    pub must_hit: bool,
    /// Lines where the property held (`always`, `sometimes` true;
    /// `reachable` reached).
    pub passes: u64,
    /// Lines where it did not (`always` false, `unreachable` reached;
    /// `sometimes` false, which fails nothing by itself).
    pub fails: u64,
    /// Executions in which it was evaluated (for a run; 0 or 1 for one
    /// execution).
    pub executions: u64,
    /// Nodes that evaluated it, in order of their first line.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// The first failing line's details (compact JSON) and node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
}

impl PropertyCount {
    /// The property's verdict over the executions counted: `None` when it
    /// holds, else why not.
    pub fn failure(&self) -> Option<&'static str> {
        match kind_of(&self.display_type, self.must_hit) {
            PropertyKind::Always if self.fails > 0 => Some("was false"),
            PropertyKind::Unreachable if self.passes + self.fails > 0 => Some("was reached"),
            PropertyKind::Sometimes if self.passes == 0 => Some("was never true"),
            PropertyKind::Reachable | PropertyKind::Always if self.must_hit && self.passes + self.fails == 0 => {
                Some("was never reached")
            }
            _ => None,
        }
    }

    /// `Always "message"`.
    pub fn title(&self) -> String {
        format!("{} {:?}", self.display_type, self.message)
    }
}

fn kind_of(display_type: &str, must_hit: bool) -> PropertyKind {
    match display_type {
        "Always" | "AlwaysOrUnreachable" => PropertyKind::Always,
        "Sometimes" => PropertyKind::Sometimes,
        "Unreachable" => PropertyKind::Unreachable,
        "Reachable" => PropertyKind::Reachable,
        _ if display_type.starts_with("Always") => PropertyKind::Always,
        _ if must_hit => PropertyKind::Sometimes,
        _ => PropertyKind::Unreachable,
    }
}

/// Every property an execution's SDKs declared or evaluated, by id;
/// `node_name` names the node a line came from.
pub fn properties(trace: &Trace, node_name: impl Fn(engine::Actor) -> String) -> BTreeMap<String, PropertyCount> {
    properties_of(trace.events(), node_name)
}

/// [`properties`] of a list of events (a report's).
pub fn properties_of(events: &[Event], node_name: impl Fn(engine::Actor) -> String) -> BTreeMap<String, PropertyCount> {
    let mut props: BTreeMap<String, PropertyCount> = BTreeMap::new();
    for e in events {
        let EventKind::Console { text } = &e.kind else { continue };
        let Some(Ok(SdkLine::Assert(a))) = sdk_line(text) else { continue };
        let display_type = if a.display_type.is_empty() { a.assert_type.clone() } else { a.display_type.clone() };
        let p = props.entry(a.id.clone()).or_insert_with(|| PropertyCount {
            display_type,
            message: a.message.clone(),
            location: a.location.clone(),
            must_hit: a.must_hit,
            passes: 0,
            fails: 0,
            executions: 0,
            nodes: Vec::new(),
            first_failure: None,
        });
        if !a.hit {
            continue;
        }
        p.executions = 1;
        let node = node_name(e.node);
        if !p.nodes.contains(&node) {
            p.nodes.push(node.clone());
        }
        let holds = match a.kind() {
            PropertyKind::Always | PropertyKind::Sometimes => a.condition,
            PropertyKind::Reachable => true,
            PropertyKind::Unreachable => false,
        };
        if holds {
            p.passes += 1;
        } else {
            p.fails += 1;
            if p.first_failure.is_none() && a.violated() {
                p.first_failure = Some(format!("on {node}: {}", a.details));
            }
        }
    }
    props
}

/// One Test Composer command over an execution or a run: how often it
/// ended and how often with a non-zero status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandCount {
    /// Runs that ended (`test-composer: NAME exited STATUS`).
    pub runs: u64,
    /// Of those, runs with a non-zero status.
    pub failed: u64,
    /// The first non-zero status, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failed_status: Option<i64>,
}

/// Every Test Composer command that ended in `events` (the runner's
/// `test-composer: NAME exited STATUS` console lines), by name.
pub fn composer_commands(events: &[Event]) -> BTreeMap<String, CommandCount> {
    let mut commands: BTreeMap<String, CommandCount> = BTreeMap::new();
    for e in events {
        let EventKind::Console { text } = &e.kind else { continue };
        let Some(rest) = text.trim().strip_prefix("test-composer: ") else { continue };
        let Some((name, status)) = rest.split_once(" exited ") else { continue };
        let Ok(status) = status.trim().parse::<i64>() else { continue };
        if name.contains(' ') {
            continue;
        }
        let c = commands.entry(name.to_string()).or_default();
        c.runs += 1;
        if status != 0 {
            c.failed += 1;
            c.first_failed_status.get_or_insert(status);
        }
    }
    commands
}

/// Adds one execution's command counts into a run's.
pub fn add_commands(run: &mut BTreeMap<String, CommandCount>, execution: &BTreeMap<String, CommandCount>) {
    for (name, c) in execution {
        let r = run.entry(name.clone()).or_default();
        r.runs += c.runs;
        r.failed += c.failed;
        if r.first_failed_status.is_none() {
            r.first_failed_status = c.first_failed_status;
        }
    }
}

/// Adds one execution's properties into a run's.
pub fn add(run: &mut BTreeMap<String, PropertyCount>, execution: &BTreeMap<String, PropertyCount>) {
    for (id, p) in execution {
        match run.get_mut(id) {
            None => {
                run.insert(id.clone(), p.clone());
            }
            Some(r) => {
                r.passes += p.passes;
                r.fails += p.fails;
                r.executions += p.executions;
                r.must_hit |= p.must_hit;
                for n in &p.nodes {
                    if !r.nodes.contains(n) {
                        r.nodes.push(n.clone());
                    }
                }
                if r.first_failure.is_none() {
                    r.first_failure.clone_from(&p.first_failure);
                }
            }
        }
    }
}

/// Coverage features of one SDK line (`--strategy coverage`): each
/// assertion's outcome, and each guidance value in power-of-two buckets
/// of its distance from zero in the direction it wants to go.
pub fn features(text: &str) -> Vec<String> {
    match sdk_line(text) {
        Some(Ok(SdkLine::Assert(a))) if a.hit => {
            vec![format!("sdk {} {} {}", a.display_type, a.id, if a.condition { "true" } else { "false" })]
        }
        Some(Ok(SdkLine::Guidance(g))) if g.hit => {
            let Some(v) = g.value else { return Vec::new() };
            let v = if g.maximize { v } else { -v };
            let bucket = if v <= 0.0 {
                format!("<={}", -(v.abs().log2().ceil().max(0.0) as i64))
            } else {
                format!(">={}", v.log2().floor() as i64)
            };
            vec![format!("guidance {} {bucket}", g.id)]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, display: &str, cond: bool, hit: bool, must_hit: bool, msg: &str) -> EventKind {
        EventKind::Console {
            text: format!(
                r#"@antithesis {{"antithesis_assert": {{"hit": {hit}, "must_hit": {must_hit}, "assert_type": "{kind}", "display_type": "{display}", "message": "{msg}", "condition": {cond}, "id": "{msg}", "details": {{"k": 1}}}}}}"#
            ),
        }
    }

    #[test]
    fn counts_and_verdicts() {
        let mut t = Trace::new();
        let at = simtime::VirtualTime::from_ns;
        t.push(at(1), engine::NodeId::new(1).unwrap(), line("sometimes", "Sometimes", false, false, true, "s"));
        t.push(at(1), engine::NodeId::new(1).unwrap(), line("reachability", "Reachable", false, false, true, "r"));
        t.push(at(2), engine::NodeId::new(2).unwrap(), line("always", "Always", true, true, true, "a"));
        t.push(at(3), engine::NodeId::new(1).unwrap(), line("sometimes", "Sometimes", false, true, true, "s"));
        t.push(at(4), engine::NodeId::new(1).unwrap(), line("reachability", "Unreachable", true, false, false, "u"));
        let p = properties(&t, |n| n.to_string());
        assert_eq!(p.len(), 4);
        assert_eq!(p["a"].failure(), None);
        assert_eq!((p["a"].passes, p["a"].nodes.clone()), (1, vec!["n2".to_string()]));
        assert_eq!(p["s"].failure(), Some("was never true"));
        assert_eq!(p["r"].failure(), Some("was never reached"));
        assert_eq!(p["u"].failure(), None, "declared, never reached");
        // A second execution where s holds and a fails.
        let mut t2 = Trace::new();
        t2.push(at(1), engine::NodeId::new(3).unwrap(), line("sometimes", "Sometimes", true, true, true, "s"));
        t2.push(at(2), engine::NodeId::new(3).unwrap(), line("always", "Always", false, true, true, "a"));
        let mut run = p.clone();
        add(&mut run, &properties(&t2, |n| n.to_string()));
        assert_eq!(run["s"].failure(), None);
        assert_eq!(run["s"].executions, 2);
        assert_eq!(run["a"].failure(), Some("was false"));
        assert_eq!(run["a"].first_failure.as_deref(), Some(r#"on n3: {"k":1}"#));
    }

    #[test]
    fn composer_commands_are_counted() {
        let mut t = Trace::new();
        let at = simtime::VirtualTime::from_ns;
        for (i, text) in [
            "test-composer: start parallel_driver_a",
            "test-composer: parallel_driver_a exited 0",
            "test-composer: parallel_driver_a exited 3",
            "test-composer: failed: parallel_driver_a exited 3",
            "test-composer: finally_b exited 0",
            "parallel_driver_a exited 9",
        ]
        .into_iter()
        .enumerate()
        {
            t.push(at(i as u64), engine::NodeId::new(2).unwrap(), EventKind::Console { text: text.into() });
        }
        let c = composer_commands(t.events());
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c["parallel_driver_a"], CommandCount { runs: 2, failed: 1, first_failed_status: Some(3) });
        let mut run = c.clone();
        add_commands(&mut run, &c);
        assert_eq!(run["finally_b"], CommandCount { runs: 2, failed: 0, first_failed_status: None });
    }

    #[test]
    fn features_of_lines() {
        let EventKind::Console { text } = line("always", "Always", true, true, true, "a") else { unreachable!() };
        assert_eq!(features(&text), vec!["sdk Always a true".to_string()]);
        let g = |l: f64, max: bool| {
            format!(
                r#"@antithesis {{"antithesis_guidance": {{"guidance_type": "numeric", "message": "g", "id": "g", "maximize": {max}, "guidance_data": {{"left": {l}, "right": 0}}, "hit": true}}}}"#
            )
        };
        assert_eq!(features(&g(9.0, true)), vec!["guidance g >=3".to_string()]);
        assert_eq!(features(&g(9.0, false)), vec!["guidance g <=-4".to_string()]);
        assert_ne!(features(&g(2.0, true)), features(&g(9.0, true)));
        assert!(features("hello").is_empty());
    }
}
