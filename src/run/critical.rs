//! MaceMC's critical-transition search for a liveness failure.

use anyhow::Result;
use engine::{ExecutionResult, ExecutionSpec, FailureKind};
use explore::failure_file::FailureRecord;
use explore::strategy::{find_critical_transition, Guided};
use indicatif::ProgressBar;

use super::execution::execute_one;
use super::CriticalSummary;

/// MaceMC's critical-transition search over the choice points of a failing
/// liveness execution. Probe k replays the first k choice points (the
/// recorded decisions, the same network randomness) and then walks at
/// random `walks` times, fault-free (see `ExploreSpec::calm_from`); the
/// prefix is live if any walk satisfies every liveness check.
pub(super) fn critical_transition(
    spec: &ExecutionSpec,
    failed: &ExecutionResult,
    record: &FailureRecord<engine::strategy::Decision>,
    walks: u32,
    bar: &ProgressBar,
) -> Result<Option<CriticalSummary>> {
    let steps = usize::try_from(failed.chosen.steps()).unwrap_or(usize::MAX);
    let mut host_error = None;
    let mut probe_no = 0u64;
    let found = find_critical_transition(steps, |k| {
        probe_no += 1;
        for w in 0..walks {
            let walk_seed =
                engine::execution_seed(spec.seed ^ simrng::streams::CRITICAL_WALK, (k as u64) << 8 | u64::from(w));
            let mut s = spec.clone();
            s.explore.calm_from = Some((k as u64, walk_seed));
            let mut g = Guided::new(&record.actions);
            bar.set_message(format!("critical transition: probe {probe_no} (prefix of {k} steps), walk {}", w + 1));
            match execute_one(&mut s, &mut g, &format!("probe{k}-{w}")) {
                Ok(e) => {
                    let live = e.result.verdict.failure().is_none_or(|f| f.kind != FailureKind::Liveness);
                    if live {
                        return true;
                    }
                }
                Err(e) => {
                    host_error.get_or_insert(e);
                    return true;
                }
            }
        }
        false
    });
    if let Some(e) = host_error {
        return Err(e.context("a critical-transition probe could not run"));
    }
    let Ok(c) = found else { return Ok(None) };
    let at = failed.chosen.at(c.index as u64);
    Ok(Some(CriticalSummary {
        step: c.index as u64,
        // Inside a folded quiet stretch only its first and last times are
        // kept: the stretch's first time stands for the step's.
        virtual_seconds: at.map_or(0.0, |s| s.time.as_secs_f64()),
        action: at.map(describe_span),
        probes: c.probes,
        walks_per_probe: walks,
    }))
}

/// What a step of the step log did: its action, or for a step inside a
/// folded stretch of quiet node runs, the stretch.
fn describe_span(s: &engine::StepSpan) -> String {
    if s.steps == 1 {
        return describe_action(&s.action);
    }
    let nodes: Vec<String> = s.nodes.iter().map(|n| n.to_string()).collect();
    format!(
        "one of {} quiet runs of {} (steps {}..={}, {:.6}..{:.6} s virtual), none of which showed anything to a guest",
        s.steps,
        nodes.join(", "),
        s.first,
        s.first + s.steps - 1,
        s.time.as_secs_f64(),
        s.until.as_secs_f64()
    )
}

/// "DeliverFrame to n2 from n1", "Crash of n3", "RunNode n1".
pub fn describe_action(a: &engine::strategy::EnabledAction) -> String {
    use engine::strategy::ActionKind::*;
    match (a.kind, a.peer) {
        (DeliverFrame, Some(p)) => format!("frame delivery to {} from {p}", a.node),
        (RunNode, _) => format!("{} runs", a.node),
        (Crash, _) => format!("crash of {}", a.node),
        (Restart, _) => format!("restart of {}", a.node),
        (Partition, _) => "partition starts".into(),
        (Heal, _) => "partition heals".into(),
        (CompleteDisk, _) => format!("disk request of {} completes", a.node),
        (k, _) => format!("{} on {}", k.name(), a.node),
    }
}
