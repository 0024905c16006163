//! `simcluster check`: one recorded history's verdict (registers for
//! linearizability, transactions for a consistency model, a set or a
//! queue) as one JSON line, the explanation on stderr.

use std::path::Path;
use std::process::ExitCode;

use simcluster::BadInput;

use crate::cli::{CheckModel, ConsistencyArg};

/// `simcluster check`: one history file's verdict as one JSON line.
pub(crate) fn check_history(
    path: &Path,
    model: CheckModel,
    consistency: Option<ConsistencyArg>,
    max_steps: u64,
) -> anyhow::Result<ExitCode> {
    use checker::linearizability::{check, CheckOptions, CheckResult};
    use checker::register_history::History;
    let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{}: cannot read: {e}", path.display())))?;
    let edn = path.extension().is_some_and(|e| e == "edn") || txncheck::looks_like_edn(&text);
    if matches!(model, CheckModel::Set | CheckModel::Queue) {
        return check_collection_history(path, &text, model, consistency);
    }
    let consistency = match consistency {
        Some(ConsistencyArg::Linearizable) => {
            let e = "linearizable".parse::<txncheck::Consistency>().expect_err("not a transactional model");
            return Err(BadInput(format!(
                "--consistency: {e}; linearizable applies to --model set (stale reads fail)"
            ))
            .into());
        }
        Some(ConsistencyArg::Txn(c)) => Some(c),
        None => None,
    };
    let txn_model = match model {
        CheckModel::Register | CheckModel::Set | CheckModel::Queue => None,
        CheckModel::ListAppend => Some(txncheck::Model::ListAppend),
        CheckModel::RwRegister => Some(txncheck::Model::RwRegister),
    };
    if let Some(m) = txn_model {
        let c = consistency.unwrap_or(checker::history_check::HistoryModel::DEFAULT_CONSISTENCY);
        return check_txn_history(path, &text, edn, m, c);
    }
    if consistency.is_some() {
        return Err(BadInput(
            "--consistency applies to --model list-append and rw-register; the register model is checked for \
             linearizability"
                .into(),
        )
        .into());
    }
    if edn {
        return Err(BadInput(format!(
            "{}: an EDN history (Jepsen's history.edn) is read with --model list-append or rw-register; the \
             register model reads JSON lines",
            path.display()
        ))
        .into());
    }
    let hint = if text.contains("\"txn\"") {
        " (a transactional history? add --model list-append or rw-register)"
    } else if text.contains("\"add\"") {
        " (a set history? add --model set)"
    } else if text.contains("\"enqueue\"") || text.contains("\"dequeue\"") {
        " (a queue history? add --model queue)"
    } else {
        ""
    };
    let bad = |e: checker::register_history::HistoryError| BadInput(format!("{}: {e}{hint}", path.display()));
    let history = History::from_json_lines(&text).map_err(bad)?;
    let verdict = check(&history, &CheckOptions { max_steps_per_key: max_steps }).map_err(bad)?;
    let (line, code) = match &verdict {
        CheckResult::Ok { keys, ops } => {
            (serde_json::json!({"history": path, "linearizable": true, "keys": keys, "ops": ops}), 0)
        }
        CheckResult::Violation(v) => {
            eprint!("{v}");
            let line = serde_json::json!({
                "history": path, "linearizable": false, "key": v.key, "key_ops": v.key_ops,
                "prefix": v.linearized.len(), "stuck": v.stuck.len(),
            });
            (line, 1)
        }
        CheckResult::Unknown { key, steps } => {
            eprintln!("key {key:?}: no verdict after {steps} search steps (raise --max-steps)");
            (
                serde_json::json!({"history": path, "linearizable": null, "key": key, "steps": steps}),
                simcluster::exit_codes::NO_VERDICT,
            )
        }
    };
    println!("{line}");
    Ok(ExitCode::from(code))
}

/// `simcluster check --model set|queue`: the verdict as one JSON line, the
/// elements found with their operations on stderr.
pub(crate) fn check_collection_history(
    path: &Path,
    text: &str,
    model: CheckModel,
    consistency: Option<ConsistencyArg>,
) -> anyhow::Result<ExitCode> {
    let name = if model == CheckModel::Set { "set" } else { "queue" };
    let linearizable = match (model, consistency) {
        (_, None) => false,
        (CheckModel::Set, Some(ConsistencyArg::Linearizable)) => true,
        _ => {
            return Err(BadInput(format!(
                "--model {name} takes {}",
                if model == CheckModel::Set {
                    "--consistency linearizable (stale reads fail) or none"
                } else {
                    "no --consistency"
                }
            ))
            .into())
        }
    };
    let bad = |e: checker::collection_history::CollectionHistoryError| BadInput(format!("{}: {e}", path.display()));
    let (mut line, explanation, code) = if model == CheckModel::Set {
        let options = checker::set_full::SetOptions { linearizable };
        let r = checker::set_full::check_text(text, options).map_err(bad)?;
        let code = match r.valid {
            Some(true) => 0,
            Some(false) => 1,
            None => simcluster::exit_codes::NO_VERDICT,
        };
        (r.to_json(), r.to_string(), code)
    } else {
        let r = checker::total_queue::check_text(text).map_err(bad)?;
        (r.to_json(), r.to_string(), if r.valid { 0 } else { 1 })
    };
    line["history"] = serde_json::json!(path);
    line["model"] = serde_json::json!(name);
    eprint!("{explanation}");
    println!("{line}");
    Ok(ExitCode::from(code))
}

/// `simcluster check --model list-append|rw-register`: the verdict as one
/// JSON line, txncheck's explanation on stderr.
pub(crate) fn check_txn_history(
    path: &Path,
    text: &str,
    edn: bool,
    model: txncheck::Model,
    consistency: txncheck::Consistency,
) -> anyhow::Result<ExitCode> {
    let parsed = if edn { txncheck::parse_edn(text) } else { txncheck::parse_history(text) };
    let history = parsed.map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    txncheck::check_model(&history, model).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let report = txncheck::check(&history, model, consistency);
    let line = serde_json::json!({
        "history": path,
        "model": model,
        "consistency": consistency,
        "valid": report.valid,
        "anomalies": report.counts_of(&report.anomaly_types),
        "also_found": report.counts_of(&report.also_found),
        "ruled_out": report.ruled_out,
        "txns": report.txns,
    });
    eprint!("{report}");
    println!("{line}");
    Ok(ExitCode::from(if report.valid { 0 } else { 1 }))
}
