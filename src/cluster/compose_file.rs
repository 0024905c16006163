//! A compose cluster: a directory with a compose file. The `compose` crate
//! reads and checks the file and writes the cluster.toml it stands for;
//! this module checks that text as any cluster.toml, and names the file
//! the user wrote (the compose file's `x-simcluster:` block, or the
//! cluster.toml beside it) in every message.

use std::path::Path;
use std::sync::Once;

use super::{Cluster, ClusterError, ClusterFile};

/// The cluster of `dir`, whose compose file is `file`; `beside` is where a
/// cluster.toml of settings would be.
pub(super) fn load(dir: &Path, file: &Path, beside: &Path) -> Result<Cluster, ClusterError> {
    let beside_text = match beside.is_file() {
        true => Some(
            std::fs::read_to_string(beside)
                .map_err(|source| ClusterError::Read { path: beside.to_path_buf(), source })?,
        ),
        false => None,
    };
    let project = compose::load(dir, file, beside_text.as_deref().map(|t| (beside, t)))?;
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        for w in &project.warnings {
            eprintln!("simcluster: warning: {w}");
        }
    });
    let text = &project.cluster_toml;
    // Where a table came from: the compose file's block or cluster.toml.
    let origin = |table: &str| match project.origins.get(table) {
        Some(p) if p != file => (p.clone(), ""),
        Some(_) => (file.to_path_buf(), "x-simcluster: "),
        None => (file.to_path_buf(), ""),
    };
    if let Err(e) = toml::from_str::<ClusterFile>(text) {
        let (table, line) = e.span().map(|s| table_at(text, s.start)).unwrap_or_default();
        let (path, within) = origin(table.split('.').next().unwrap_or_default());
        let at = match (table.is_empty(), line.split_once(" = ")) {
            (true, _) => String::new(),
            (false, Some((key, value))) => format!("[{table}] {key} = {value}: "),
            (false, None) => format!("[{table}]: "),
        };
        return Err(ClusterError::Settings { path, within, problem: format!("{at}{}", e.message().trim_end()) });
    }
    // Messages about node names speak of nK: say which service each is.
    let names: Vec<String> = project
        .services
        .iter()
        .zip(engine::NodeId::first(project.services.len()))
        .map(|(s, n)| format!("{} = {n}", s.name))
        .collect();
    let mut cluster = Cluster::parse(dir, file, text).map_err(|e| match e {
        ClusterError::Invalid { problem, .. } => {
            let table = problem.at.walk().0.first().copied().unwrap_or_default();
            let (path, within) = origin(table);
            let mut problem = problem.to_string();
            if problem.contains("n1..n") || problem.contains(" node") {
                problem.push_str(&format!(" (services: {})", names.join(", ")));
            }
            ClusterError::Settings { path, within, problem }
        }
        other => other,
    })?;
    cluster.compose = Some(project);
    Ok(cluster)
}

/// The table (dotted) of the TOML `text` that offset `at` is in, and the
/// text of the line there.
fn table_at(text: &str, at: usize) -> (String, String) {
    let at = at.min(text.len());
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default().trim().to_string();
    let table = text[..at]
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix('['))
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
        .unwrap_or_default();
    (table, line)
}
