//! The cluster.toml a compose file stands for: `[cluster] nodes` and
//! `[node]` from the services, everything else from the settings, which
//! come from the file's `x-simcluster:` block or from a cluster.toml beside
//! it (a table in both is refused: one place per table).

use std::collections::BTreeMap;
use std::path::Path;

use serde_yaml_ng::Value;
use simtime::NodeId;
use toml::value::{Table, Value as Toml};

use crate::{shell_quote, ComposeError, Problem, Project};

/// Keys whose values name nodes: service names and aliases there become
/// simcluster's `nK`.
const NODE_KEYS: &[&str] = &["node", "nodes", "history", "clients", "groups", "isolate"];

/// Where a data disk is mounted when the settings give no `[disk]`.
pub(crate) const DEFAULT_DISK_MOUNT: &str = "/volumes";
/// Its size (MiB).
const DEFAULT_DISK_MB: i64 = 256;

/// A shell command of the settings, run in the node's service container.
pub(crate) fn in_service(command: &str) -> String {
    format!("/sim/busybox sh {}/enter --shell {}", crate::GUEST_DIR, shell_quote(command))
}

pub(crate) fn add(project: &mut Project, doc: &Value, beside: Option<(&Path, &str)>) -> Result<(), ComposeError> {
    let file = project.file.clone();
    let invalid = |path: &Path, at: &str, detail: String| ComposeError::Invalid {
        path: path.into(),
        problems: vec![Problem { at: at.into(), detail }],
    };
    let mut settings = Table::new();
    if let Some(x) = doc.get("x-simcluster") {
        match to_toml(x, "x-simcluster") {
            Ok(Toml::Table(t)) => settings = t,
            Ok(_) => return Err(invalid(&file, "x-simcluster", ": a mapping of cluster.toml's tables".into())),
            Err((at, detail)) => return Err(invalid(&file, &at, detail)),
        }
        check_settings(&settings, &file, "x-simcluster.")?;
        for k in settings.keys() {
            project.origins.insert(k.clone(), file.clone());
        }
    }
    if let Some((path, text)) = beside {
        let t: Table = toml::from_str(text).map_err(|e| ComposeError::Syntax {
            path: path.into(),
            message: e.to_string().trim_end().replace("TOML parse error at ", ""),
        })?;
        check_settings(&t, path, "")?;
        for (k, v) in t {
            if settings.contains_key(&k) {
                return Err(invalid(
                    path,
                    &format!("[{k}]"),
                    format!(
                        ": also given in {}'s x-simcluster: give each table in one place (cluster.toml or x-simcluster)",
                        file.display()
                    ),
                ));
            }
            project.origins.insert(k.clone(), path.into());
            settings.insert(k, v);
        }
    }
    let names = name_map(project);
    translate(&mut settings, &names, false);
    wrap_commands(&mut settings);
    let n = project.services.len();
    let cluster = settings.entry("cluster").or_insert_with(|| Toml::Table(Table::new()));
    if let Toml::Table(c) = cluster {
        c.insert("nodes".into(), Toml::Integer(n as i64));
    }
    let mut node = Table::new();
    node.insert("start".into(), Toml::String(format!("/sim/busybox sh {}/start", crate::GUEST_DIR)));
    let checks: Vec<&crate::Healthcheck> = project.services.iter().filter_map(|s| s.healthcheck.as_ref()).collect();
    if !checks.is_empty() {
        let every = checks.iter().map(|h| h.start_interval_ns.unwrap_or(h.interval_ns)).min().unwrap_or(1_000_000_000);
        let within = checks
            .iter()
            .map(|h| h.start_period_ns + (h.retries + 1) * h.interval_ns + h.retries * h.timeout_ns)
            .max()
            .unwrap_or(0)
            .max(every);
        node.insert("ready".into(), Toml::String(format!("/sim/busybox sh {}/health", crate::GUEST_DIR)));
        node.insert("ready_every".into(), Toml::String(format!("{every}ns")));
        node.insert("ready_within".into(), Toml::String(format!("{within}ns")));
    }
    settings.insert("node".into(), Toml::Table(node));
    if !settings.contains_key("workload") {
        let mut w = Table::new();
        w.insert("node".into(), Toml::String("n1".into()));
        w.insert("command".into(), Toml::String("true".into()));
        settings.insert("workload".into(), Toml::Table(w));
    }
    let volumes = project.services.iter().any(|s| s.mounts.iter().any(|m| matches!(m, crate::Mount::Volume { .. })));
    if volumes && !settings.contains_key("disk") {
        let mut d = Table::new();
        d.insert("size_mb".into(), Toml::Integer(DEFAULT_DISK_MB));
        d.insert("mount".into(), Toml::String(DEFAULT_DISK_MOUNT.into()));
        settings.insert("disk".into(), Toml::Table(d));
    }
    project.disk_mount = settings.get("disk").and_then(|d| d.get("mount")).and_then(Toml::as_str).map(String::from);
    project.cluster_toml = toml::to_string(&settings).map_err(|e| invalid(&file, "x-simcluster", format!(": {e}")))?;
    Ok(())
}

/// Settings describe runs, not nodes: no `[image]`, `[node]` or
/// `[cluster] nodes`.
fn check_settings(t: &Table, path: &Path, prefix: &str) -> Result<(), ComposeError> {
    let mut problems = Vec::new();
    for (k, why) in [
        ("image", ": the services' images are the nodes' root filesystems"),
        ("node", ": each service's command, entrypoint and healthcheck say what its node runs"),
    ] {
        if t.contains_key(k) {
            let at = if prefix.is_empty() { format!("[{k}]") } else { format!("{prefix}{k}") };
            problems.push(Problem { at, detail: format!("{why}; remove it") });
        }
    }
    if t.get("cluster").and_then(|c| c.get("nodes")).is_some() {
        problems.push(Problem {
            at: if prefix.is_empty() { "[cluster] nodes".into() } else { format!("{prefix}cluster.nodes") },
            detail: ": every service is a node: the compose file says how many; remove it".into(),
        });
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ComposeError::Invalid { path: path.into(), problems })
    }
}

/// A YAML value as TOML; `Err((at, detail))` for what TOML cannot hold.
fn to_toml(v: &Value, at: &str) -> Result<Toml, (String, String)> {
    Ok(match v {
        Value::Null => return Err((at.into(), ": has no value (TOML has no null: remove the key)".into())),
        Value::Bool(b) => Toml::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Toml::Integer(i),
            (None, Some(f)) => Toml::Float(f),
            _ => return Err((at.into(), format!(" = {n}: out of range"))),
        },
        Value::String(s) => Toml::String(s.clone()),
        Value::Sequence(seq) => Toml::Array(
            seq.iter().enumerate().map(|(i, x)| to_toml(x, &format!("{at}[{i}]"))).collect::<Result<_, _>>()?,
        ),
        Value::Mapping(m) => {
            let mut t = Table::new();
            for (k, x) in m {
                let Some(k) = k.as_str() else {
                    return Err((at.into(), format!(": key {k:?} is not a string")));
                };
                t.insert(k.into(), to_toml(x, &format!("{at}.{k}"))?);
            }
            Toml::Table(t)
        }
        Value::Tagged(t) => return Err((at.into(), format!(": YAML tag {} is not supported", t.tag))),
    })
}

/// Service names and aliases -> `nK`.
fn name_map(project: &Project) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for (s, node) in project.services.iter().zip(NodeId::first(project.services.len())) {
        for a in std::iter::once(&s.name).chain(&s.aliases) {
            m.insert(a.clone(), node.to_string());
        }
    }
    m
}

/// Replaces node names at [`NODE_KEYS`] (and the keys of
/// `restart_after_by_node`) with `nK`; `inside`: `v` is a node key's value.
fn translate(t: &mut Table, names: &BTreeMap<String, String>, inside: bool) {
    let keys: Vec<String> = t.keys().cloned().collect();
    for k in keys {
        if k == "restart_after_by_node" {
            if let Some(Toml::Table(by)) = t.get_mut(&k) {
                let old = std::mem::take(by);
                for (name, v) in old {
                    by.insert(names.get(&name).cloned().unwrap_or(name), v);
                }
            }
            continue;
        }
        let node_key = inside || NODE_KEYS.contains(&k.as_str());
        if let Some(v) = t.get_mut(&k) {
            translate_value(v, names, node_key);
        }
    }
}

fn translate_value(v: &mut Toml, names: &BTreeMap<String, String>, node_key: bool) {
    match v {
        Toml::String(s) if node_key => {
            if let Some(n) = names.get(s.as_str()) {
                *s = n.clone();
            }
        }
        Toml::Array(a) => a.iter_mut().for_each(|x| translate_value(x, names, node_key)),
        Toml::Table(t) => translate(t, names, false),
        _ => {}
    }
}

/// The settings' guest commands run in the node's service container.
fn wrap_commands(t: &mut Table) {
    let wrap = |v: Option<&mut Toml>| {
        if let Some(Toml::String(s)) = v {
            if !s.trim().is_empty() {
                *s = in_service(s);
            }
        }
    };
    if let Some(Toml::Table(w)) = t.get_mut("workload") {
        wrap(w.get_mut("command"));
        if !w.contains_key("node") && !w.contains_key("host") {
            w.insert("node".into(), Toml::String("n1".into()));
        }
    }
    for array in ["invariant", "liveness"] {
        if let Some(Toml::Array(a)) = t.get_mut(array) {
            for e in a {
                if let Toml::Table(e) = e {
                    wrap(e.get_mut("command"));
                }
            }
        }
    }
    if let Some(Toml::Table(r)) = t.get_mut("roles") {
        wrap(r.get_mut("probe"));
    }
}
