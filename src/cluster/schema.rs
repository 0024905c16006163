//! Every table of cluster.toml and the keys each accepts, read from the
//! serde definitions themselves, so that docs/reference.md can be checked
//! against the code (the test below fails on a key it does not document,
//! or documents a key the code does not accept).
//!
//! The field names come from what a derived `Deserialize` passes to
//! `deserialize_struct` (serde-aux's `serde_introspect`), renames applied.

use serde::Deserialize;

/// A table of cluster.toml: its path as a file writes it (`faults.crash`;
/// arrays of tables are `[invariant]`, in brackets; `LINK` stands for a
/// link's name) and the keys its struct accepts.
pub struct Table {
    /// The table's path: `faults.crash`, `[invariant]` for an array of
    /// tables, `faults.network.links.LINK`.
    pub path: &'static str,
    /// The keys its struct accepts, as a file writes them (renames
    /// applied).
    pub keys: &'static [&'static str],
}

impl Table {
    /// How docs/reference.md writes a key of this table: `[faults.crash] max`,
    /// `[[invariant]] name`.
    pub fn doc_key(&self, key: &str) -> String {
        match self.path.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
            Some(array) => format!("[[{array}]] {key}"),
            None => format!("[{}] {key}", self.path),
        }
    }

    /// The path of key `key`'s own table, were it one (`faults.crash`, `[faults.partition]`).
    fn child(&self, key: &str) -> [String; 2] {
        let base = self.path.trim_start_matches('[').trim_end_matches(']');
        let p = if base.is_empty() { key.to_string() } else { format!("{base}.{key}") };
        [p.clone(), format!("[{p}]")]
    }
}

/// Every table, the file's top level first (path "").
pub fn tables() -> Vec<Table> {
    use super::*;
    vec![
        table::<ClusterFile>(""),
        table::<ClusterSection>("cluster"),
        table::<ImageSection>("image"),
        table::<NodeSection>("node"),
        table::<WorkloadSection>("workload"),
        table::<HostWorkloadSection>("workload.host"),
        table::<HostRequestSection>("[workload.host.requests]"),
        table::<InvariantSection>("[invariant]"),
        table::<LivenessSection>("[liveness]"),
        table::<RunSection>("run"),
        table::<ExploreSection>("explore"),
        table::<DiskSection>("disk"),
        table::<CheckSection>("check"),
        table::<FaultsSection>("faults"),
        table::<engine::NetConfig>("faults.network"),
        table::<engine::LinkOverride>("faults.network.links.LINK"),
        table::<PartitionSection>("[faults.partition]"),
        table::<CrashSection>("faults.crash"),
        table::<super::faults::ScheduledCrashSection>("[faults.crash.schedule]"),
        table::<DiskFaultsSection>("faults.disk"),
        table::<PauseSection>("faults.pause"),
        table::<ClockSection>("faults.clock"),
        table::<super::node_faults::KillSection>("faults.kill"),
        table::<super::conn_faults::ConnectionSection>("faults.connection"),
        table::<ExpectSection>("[expect]"),
        table::<RolesSection>("roles"),
        table::<AntithesisSection>("antithesis"),
    ]
}

/// Every key that is not itself a table, as docs/reference.md writes it.
pub fn documented_keys() -> Vec<String> {
    let all = tables();
    let is_table =
        |p: &str| all.iter().any(|t| t.path == p || (p.ends_with(".links") && t.path == format!("{p}.LINK")));
    let mut keys = Vec::new();
    for t in &all {
        for k in t.keys {
            if !t.child(k).iter().any(|p| is_table(p)) {
                keys.push(t.doc_key(k));
            }
        }
    }
    keys
}

fn table<'de, T: Deserialize<'de>>(path: &'static str) -> Table {
    // The field names a derived `Deserialize` passes to `deserialize_struct`
    // (renames applied; empty for a type that is not a struct).
    Table { path, keys: serde_aux::serde_introspection::serde_introspect::<T>() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reference.md's `[table] key` rows.
    fn reference_rows() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        text.lines()
            .filter_map(|l| l.strip_prefix("| `["))
            .filter_map(|l| l.split_once('`').map(|(k, _)| format!("[{k}")))
            .collect()
    }

    #[test]
    fn every_table_has_keys_and_the_top_level_holds_only_tables() {
        let all = tables();
        for t in &all {
            assert!(!t.keys.is_empty(), "{}: no fields recorded (not a derived struct?)", t.path);
        }
        let top = &all[0];
        for k in top.keys {
            assert!(
                top.child(k).iter().any(|p| all.iter().any(|t| t.path == *p)),
                "top-level key {k} is not a table listed in schema::tables()"
            );
        }
        assert!(documented_keys().contains(&"[[invariant]] name".to_string()));
        assert!(documented_keys().contains(&"[faults.network.links.LINK] loss".to_string()));
        assert!(!documented_keys().iter().any(|k| k == "[faults] crash"), "a table is not a key");
    }

    #[test]
    fn the_reference_documents_every_key_and_no_other() {
        let rows = reference_rows();
        let keys = documented_keys();
        let missing: Vec<&String> = keys.iter().filter(|k| !rows.contains(k)).collect();
        assert!(missing.is_empty(), "docs/reference.md does not document: {missing:?}");
        let unknown: Vec<&String> = rows.iter().filter(|r| !keys.contains(r)).collect();
        assert!(unknown.is_empty(), "docs/reference.md documents keys cluster.toml does not accept: {unknown:?}");
    }
}
