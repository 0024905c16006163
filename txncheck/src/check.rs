//! The check: model analysis, then the graph, then the cycle search, then the
//! verdict.

use crate::analysis::Analysis;
use crate::cycles;
use crate::graph::{GEdge, Graph};
use crate::model::{Consistency, Model};
use crate::report::{explain, Anomaly, CheckReport, Cycle, EdgeKind, TxnCounts, TxnRef};
use crate::txn_history::{History, Mop, Outcome, ReadValue};
use crate::{list_append, order, rw_register};
use std::collections::BTreeMap;

/// Checks `history`, a `model` workload, against `consistency`.
///
/// The graph holds every committed transaction and every `info` transaction
/// one of whose writes a committed read observed (Elle's rule: an unobserved
/// `info` write may never have happened, so it constrains nothing). Failed
/// transactions are never in it; a read of their writes is G1a.
///
/// All anomalies are searched for whatever `consistency` is; those it allows
/// are only named in `also_found`. Never panics on any parsed history; the
/// work is linear in the history's size plus its reads' lengths (see the
/// model modules for the one quadratic corner of rw-register).
pub fn check(history: &History, model: Model, consistency: Consistency) -> CheckReport {
    let analysis: Analysis = match model {
        Model::ListAppend => list_append::analyze(history),
        Model::RwRegister => rw_register::analyze(history),
    };
    let included: Vec<bool> = history
        .txns
        .iter()
        .zip(&analysis.observed)
        .map(|(t, &seen)| t.outcome == Outcome::Ok || (t.outcome == Outcome::Info && seen))
        .collect();
    let mut edges: Vec<GEdge> =
        analysis.edges.into_iter().filter(|e| included[e.from as usize] && included[e.to as usize]).collect();
    order::process_edges(history, &included, &mut edges);
    order::realtime_edges(history, &included, &mut edges);
    let graph = Graph::build(history.txns.len(), edges);
    let search = cycles::search(&graph);

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut evidence: BTreeMap<String, Vec<Anomaly>> = BTreeMap::new();
    for (name, (count, kept)) in analysis.findings.by_name {
        counts.insert(name.to_string(), count);
        evidence.insert(name.to_string(), kept.into_iter().map(Anomaly::Finding).collect());
    }
    for (name, found) in search.found {
        counts.insert(name.to_string(), found.count);
        let cycles = found.cycles.iter().map(|c| Anomaly::Cycle(cycle(history, &graph, c))).collect();
        evidence.insert(name.to_string(), cycles);
    }

    let (mut anomaly_types, mut also_found) = (Vec::new(), Vec::new());
    let mut anomalies = BTreeMap::new();
    for (name, list) in evidence {
        if consistency.forbids(&name) {
            anomaly_types.push(name.clone());
            anomalies.insert(name, list);
        } else {
            also_found.push(name);
        }
    }
    let ruled_out = Consistency::ALL.into_iter().filter(|c| counts.keys().any(|n| c.forbids(n))).collect();
    let by_kind = graph.count_by_kind();
    let edge_counts = [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rw, EdgeKind::Process, EdgeKind::Realtime]
        .iter()
        .zip(by_kind)
        .map(|(k, n)| (k.name().to_string(), n))
        .collect();
    let count = |o: Outcome| history.txns.iter().filter(|t| t.outcome == o).count();
    let txns = TxnCounts {
        total: history.txns.len(),
        ok: count(Outcome::Ok),
        fail: count(Outcome::Fail),
        info: count(Outcome::Info),
        info_included: history.txns.iter().zip(&included).filter(|(t, &inc)| inc && t.outcome == Outcome::Info).count(),
    };
    CheckReport {
        valid: anomaly_types.is_empty(),
        model,
        consistency,
        anomaly_types,
        anomalies,
        also_found,
        counts,
        ruled_out,
        txns,
        edges: edge_counts,
        cycle_search_truncated: search.truncated,
    }
}

/// An op of a history that does not belong to the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: op [{op}] is not {model} ({expected}); is the history of the other model?")]
pub struct ModelMismatch {
    /// The 1-based line of the transaction's invoke (or lone completion).
    pub line: usize,
    /// The op, as written.
    pub op: String,
    /// The model asked for.
    pub model: Model,
    /// What that model's ops are.
    pub expected: &'static str,
}

/// Whether every op of `history` belongs to `model`: `append` and list reads
/// for list-append, `w` and single-value reads for rw-register (a read of nil
/// fits both). Elle refuses a history that does not; `simcluster check` calls
/// it bad input, and a cluster run's `[check]` a history it cannot read.
pub fn check_model(history: &History, model: Model) -> Result<(), ModelMismatch> {
    let fits = |m: &Mop| {
        matches!(
            (model, m),
            (Model::ListAppend, Mop::Append { .. } | Mop::Read { value: None | Some(ReadValue::List(_)), .. })
                | (Model::RwRegister, Mop::Write { .. } | Mop::Read { value: None | Some(ReadValue::Int(_)), .. })
        )
    };
    let expected = match model {
        Model::ListAppend => "append, and r of a list",
        Model::RwRegister => "w, and r of one value",
    };
    for t in &history.txns {
        if let Some(m) = t.mops.iter().find(|m| !fits(m)) {
            return Err(ModelMismatch { line: t.line, op: m.to_string(), model, expected });
        }
    }
    Ok(())
}

fn cycle(h: &History, g: &Graph, edges: &[usize]) -> Cycle {
    Cycle {
        txns: edges.iter().map(|&i| TxnRef::new(h, g.edge(i).from)).collect(),
        edges: edges.iter().map(|&i| explain(h, g.edge(i))).collect(),
    }
}
