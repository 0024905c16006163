//! The compose file's own keys: `services`, `volumes`, `networks`, `name`.
//! Every problem found is collected, so one message lists them all. The
//! readers of a service's keys are grouped by concern in the submodules.

mod network;
mod process;
mod startup;
mod volumes;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};
use simtime::NodeId;

use crate::interpolate::interpolate;
use crate::{Condition, ImageRef, Problem, Project, Service, Warning};
use network::{extra_hosts, networks};
use process::{env_files, environment, image_ref, user, words};
use startup::{depends_on, healthcheck};
use volumes::{mounts, tmpfs};

/// Where reading is: the cluster directory, the file, what was found.
pub(crate) struct Cx {
    dir: PathBuf,
    file: PathBuf,
    pub(crate) problems: Vec<Problem>,
    pub(crate) warnings: Vec<Warning>,
}

impl Cx {
    pub(crate) fn new(dir: &Path, file: &Path) -> Cx {
        Cx { dir: dir.into(), file: file.into(), problems: Vec::new(), warnings: Vec::new() }
    }

    fn bad(&mut self, at: &str, detail: impl Into<String>) {
        self.problems.push(Problem { at: at.into(), detail: detail.into() });
    }

    fn ignore(&mut self, at: &str, why: &str) {
        self.warnings.push(Warning { path: self.file.clone(), at: at.into(), why: why.into() });
    }
}

/// Top-level keys that are refused, and why.
const TOP_REFUSED: &[(&str, &str)] = &[
    ("configs", "configs are not supported: put the file in the image"),
    ("secrets", "secrets are not supported: put the file in the image or give it in environment"),
    ("include", "include is not supported: write one compose file"),
];

/// Service keys ignored with a warning, and why that is safe.
const IGNORED: &[(&str, &str)] = &[
    ("restart", "a node's service is not restarted by policy; crashes and kills restart it as [faults] say"),
    ("labels", "labels are metadata"),
    ("logging", "every node's console is recorded in the run's output"),
    ("ports", "a simulation has no host ports; nodes reach each other at every port"),
    ("expose", "nodes reach each other at every port"),
    ("stop_grace_period", "nodes are not stopped one by one: an execution ends whole"),
    ("stop_signal", "nodes are not stopped one by one: an execution ends whole"),
    ("tty", "the service's output goes to the node's console"),
    ("stdin_open", "the service's input is /dev/null"),
    ("init", "the node's own init reaps processes"),
    ("cap_add", "the service runs as its user with the node's full capabilities"),
    ("cap_drop", "the service runs as its user with the node's full capabilities"),
    ("privileged", "the service runs with the node's full capabilities"),
    ("security_opt", "no seccomp or AppArmor profile is applied in a node"),
    ("ulimits", "limits are the node kernel's defaults"),
    ("mem_limit", "a node's memory is [cluster] memory_mb"),
    ("mem_reservation", "a node's memory is [cluster] memory_mb"),
    ("memswap_limit", "nodes have no swap"),
    ("shm_size", "/dev/shm is the node's"),
    ("cpus", "every node has one virtual CPU"),
    ("cpu_shares", "every node has one virtual CPU"),
    ("cpu_count", "every node has one virtual CPU"),
    ("cpuset", "every node has one virtual CPU"),
    ("pull_policy", "images are never pulled: they come from files"),
    ("deploy", "one service is one node; replicas and resources do not apply"),
    ("oom_score_adj", "the node kernel's default applies"),
    ("read_only", "the container's root is the node's own copy; writes stay in the node"),
];

/// Service keys refused with a reason other than "not supported".
const REFUSED: &[(&str, &str)] = &[
    ("build", ": simcluster builds no Dockerfiles: build and save the image (docker save -o app.tar IMAGE) and write image: docker-archive:app.tar"),
    ("network_mode", ": every node has one interface on the cluster's network (10.0.0.0/24)"),
    ("links", ": service names and aliases resolve from every node already; write networks aliases for other names"),
    ("dns", ": names resolve through every node's /etc/hosts; there is no DNS server"),
    ("dns_search", ": names resolve through every node's /etc/hosts; there is no DNS server"),
    ("domainname", ": nodes have no domain name"),
    ("secrets", ": secrets are not supported: put the file in the image or give it in environment"),
    ("configs", ": configs are not supported: put the file in the image"),
    ("profiles", ": every service is a node; remove the services a cluster does not run"),
    ("extends", ": extends is not supported: write the service whole (YAML anchors and <<: work)"),
    ("scale", ": one service is one node; write a service per node"),
    ("volumes_from", ": volumes are per node: each service names its own"),
    ("devices", ": nodes have no host devices"),
    ("pid", ": a node runs one service; its processes are the node's"),
    ("ipc", ": a node runs one service; its IPC is the node's"),
    ("userns_mode", ": user namespaces are not supported"),
    ("sysctls", ": not supported: the node kernel's defaults apply"),
    ("platform", ": nodes are linux/amd64"),
];

/// Keys each service may have (besides the ignored and refused ones).
const HONOURED: &[&str] = &[
    "image",
    "command",
    "entrypoint",
    "environment",
    "env_file",
    "user",
    "working_dir",
    "hostname",
    "container_name",
    "networks",
    "volumes",
    "tmpfs",
    "healthcheck",
    "depends_on",
    "extra_hosts",
];

fn key_str(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// A scalar as a string (numbers and booleans as YAML writes them).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A valid service, host or alias name: letters, digits, `.`, `_`, `-`,
/// starting with a letter or digit, at most 63 bytes.
pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Reads the whole file; `None` when it is too wrong to go on (problems say why).
pub(crate) fn read(cx: &mut Cx, doc: &Value) -> Option<Project> {
    let Some(top) = doc.as_mapping() else {
        cx.bad("(top level)", ": a compose file is a mapping with a services key");
        return None;
    };
    let mut volumes = BTreeSet::new();
    let mut services = None;
    for (k, v) in top {
        let key = key_str(k);
        match key.as_str() {
            "services" => services = Some(v),
            "version" => {}
            "name" => {
                if scalar(v).is_none() {
                    cx.bad("name", ": must be a string");
                }
            }
            "volumes" => volumes = top_volumes(cx, v),
            "networks" => top_networks(cx, v),
            "x-simcluster" => {}
            k if k.starts_with("x-") => {}
            k => match TOP_REFUSED.iter().find(|(r, _)| *r == k) {
                Some((_, why)) => cx.bad(k, format!(": {why}")),
                None => cx.bad(k, ": not a key of a compose file that simcluster knows"),
            },
        }
    }
    let Some(services) = services.and_then(Value::as_mapping).filter(|m| !m.is_empty()) else {
        cx.bad("services", ": missing or empty: a compose cluster needs at least one service");
        return None;
    };
    if services.len() > usize::from(NodeId::MAX) {
        cx.bad("services", format!(": {} services; a cluster has at most {} nodes", services.len(), NodeId::MAX));
        return None;
    }
    let names: Vec<String> = services.keys().map(key_str).collect();
    let mut out = Vec::new();
    let mut images: Vec<ImageRef> = Vec::new();
    for (i, (k, v)) in services.iter().enumerate() {
        let name = key_str(k);
        let at = format!("services.{name}");
        if !valid_name(&name) || name == "host" || name == "localhost" {
            cx.bad(
                &at,
                ": a service name is letters, digits, '.', '_' and '-' (at most 63, not \"host\" or \"localhost\", which every node's /etc/hosts names already)",
            );
            continue;
        }
        // nK names node K wherever the settings name a node.
        // (At most NodeId::MAX services get here: more were refused above.)
        let own = NodeId::at(i);
        if name != own.to_string()
            && name.strip_prefix('n').is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        {
            cx.bad(
                &at,
                format!(
                    ": this service is node {} ({own}); a service named like another node (n1, n2, ...) is refused",
                    own.number()
                ),
            );
            continue;
        }
        let Some(m) = v.as_mapping() else {
            cx.bad(&at, ": a service is a mapping of keys");
            continue;
        };
        if let Some(mut s) = service(cx, &at, &name, i, m, &names, &volumes) {
            s.image_index = match images.iter().position(|x| *x == s.image) {
                Some(k) => k,
                None => {
                    images.push(s.image.clone());
                    images.len() - 1
                }
            };
            out.push(s);
        }
    }
    check_names(cx, &out);
    check_depends(cx, &out);
    if !cx.problems.is_empty() {
        return None;
    }
    Some(Project {
        file: cx.file.clone(),
        services: out,
        images,
        cluster_toml: String::new(),
        origins: BTreeMap::new(),
        disk_mount: None,
        warnings: Vec::new(),
    })
}

/// Top-level `volumes:`: the names services may mount.
fn top_volumes(cx: &mut Cx, v: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let Some(m) = v.as_mapping() else {
        if !v.is_null() {
            cx.bad("volumes", ": must map volume names to their settings");
        }
        return names;
    };
    for (k, def) in m {
        let name = key_str(k);
        let at = format!("volumes.{name}");
        if let Some(d) = def.as_mapping() {
            for (dk, _) in d {
                let dk = key_str(dk);
                match dk.as_str() {
                    "labels" | "name" => cx.ignore(&format!("{at}.{dk}"), "a volume is a directory of the node's data disk"),
                    "driver" | "driver_opts" | "external" => cx.bad(
                        &format!("{at}.{dk}"),
                        ": a named volume is a directory of each node's own data disk ([disk]); drivers and external volumes do not apply",
                    ),
                    _ => cx.bad(&format!("{at}.{dk}"), ": not a key of a volume that simcluster knows"),
                }
            }
        } else if !def.is_null() {
            cx.bad(&at, ": must be empty or a mapping");
        }
        names.insert(name);
    }
    names
}

/// Top-level `networks:`: all nodes share one network; definitions are read
/// for their names only.
fn top_networks(cx: &mut Cx, v: &Value) {
    let Some(m) = v.as_mapping() else {
        if !v.is_null() {
            cx.bad("networks", ": must map network names to their settings");
        }
        return;
    };
    for (k, def) in m {
        if def.as_mapping().is_some_and(|d| !d.is_empty()) {
            cx.ignore(
                &format!("networks.{}", key_str(k)),
                "every node has one interface on one network, 10.0.0.0/24 (node N is 10.0.0.N)",
            );
        }
    }
}

/// One service.
#[allow(clippy::too_many_arguments)]
fn service(
    cx: &mut Cx,
    at: &str,
    name: &str,
    index: usize,
    m: &Mapping,
    names: &[String],
    volumes: &BTreeSet<String>,
) -> Option<Service> {
    let mut s = Service {
        name: name.into(),
        aliases: Vec::new(),
        image: ImageRef::DockerArchive { file: PathBuf::new() },
        image_index: 0,
        entrypoint: None,
        command: None,
        environment: BTreeMap::new(),
        user: None,
        working_dir: None,
        hostname: None,
        extra_hosts: Vec::new(),
        mounts: Vec::new(),
        healthcheck: None,
        depends_on: Vec::new(),
    };
    let mut image = None;
    let mut env_file = BTreeMap::new();
    for (k, v) in m {
        let key = key_str(k);
        let at = format!("{at}.{key}");
        if HONOURED.contains(&key.as_str()) {
            // Interpolation applies to the service's own values.
            let v = match interpolated(v) {
                Ok(v) => v,
                Err(var) => {
                    cx.bad(
                        &at,
                        format!(
                            ": {var} takes its value from the shell that runs docker compose; a simulation has none \
                             (write the value, or ${{VAR:-value}}; $$ is a literal $)"
                        ),
                    );
                    continue;
                }
            };
            let v = &v;
            match key.as_str() {
                "image" => image = image_ref(cx, &at, v),
                "command" => s.command = words(cx, &at, v),
                "entrypoint" => s.entrypoint = words(cx, &at, v),
                "environment" => environment(cx, &at, v, &mut s.environment),
                "env_file" => env_files(cx, &at, v, &mut env_file),
                "user" => s.user = user(cx, &at, v),
                "working_dir" => match scalar(v) {
                    Some(d) if d.starts_with('/') => s.working_dir = Some(d),
                    _ => cx.bad(&at, ": must be an absolute path"),
                },
                "hostname" | "container_name" => match scalar(v) {
                    Some(h) if valid_name(&h) => {
                        if key == "hostname" {
                            s.hostname = Some(h.clone());
                        }
                        s.aliases.push(h);
                    }
                    _ => cx.bad(&at, ": must be a name of letters, digits, '.', '_' and '-'"),
                },
                "networks" => networks(cx, &at, v, index, &mut s.aliases),
                "volumes" => mounts(cx, &at, v, volumes, &mut s.mounts),
                "tmpfs" => tmpfs(cx, &at, v, &mut s.mounts),
                "healthcheck" => s.healthcheck = healthcheck(cx, &at, v),
                "depends_on" => s.depends_on = depends_on(cx, &at, v, name, names),
                "extra_hosts" => extra_hosts(cx, &at, v, &mut s.extra_hosts),
                _ => unreachable!("every honoured key has a reader"),
            }
        } else if key.starts_with("x-") {
        } else if let Some((_, why)) = IGNORED.iter().find(|(k, _)| *k == key) {
            cx.ignore(&at, why);
        } else if let Some((_, why)) = REFUSED.iter().find(|(k, _)| *k == key) {
            cx.bad(&at, *why);
        } else {
            cx.bad(&at, ": not a service key that simcluster knows");
        }
    }
    s.aliases.retain(|a| a != name);
    s.aliases.dedup();
    let mut env = env_file;
    env.append(&mut s.environment);
    s.environment = env;
    match image {
        Some(i) => s.image = i,
        None => {
            if !m.contains_key("image") {
                cx.bad(
                    &format!("{at}.image"),
                    ": missing: every service names its image (docker-archive:FILE or oci:DIR[:TAG])",
                );
            }
            return None;
        }
    }
    Some(s)
}

/// `v` with every string interpolated.
fn interpolated(v: &Value) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => Value::String(interpolate(s)?),
        Value::Sequence(seq) => Value::Sequence(seq.iter().map(interpolated).collect::<Result<_, _>>()?),
        Value::Mapping(m) => {
            let mut out = Mapping::new();
            for (k, v) in m {
                out.insert(k.clone(), interpolated(v)?);
            }
            Value::Mapping(out)
        }
        other => other.clone(),
    })
}

/// Names and aliases name one node each.
fn check_names(cx: &mut Cx, services: &[Service]) {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for s in services {
        seen.insert(&s.name, &s.name);
    }
    for s in services {
        for a in &s.aliases {
            match seen.get(a.as_str()) {
                Some(owner) if *owner != s.name => cx.bad(
                    &format!("services.{}", s.name),
                    format!(": the name {a:?} is already service {owner}'s: a name resolves to one node"),
                ),
                _ => {
                    seen.insert(a, &s.name);
                }
            }
        }
    }
}

/// `depends_on` has no cycle, and `service_healthy` names a service with a healthcheck.
fn check_depends(cx: &mut Cx, services: &[Service]) {
    let by_name: BTreeMap<&str, &Service> = services.iter().map(|s| (s.name.as_str(), s)).collect();
    for s in services {
        for (dep, c) in &s.depends_on {
            if *c == Condition::Healthy && by_name.get(dep.as_str()).is_some_and(|d| d.healthcheck.is_none()) {
                cx.bad(
                    &format!("services.{}.depends_on.{dep}", s.name),
                    ": condition service_healthy, but that service has no healthcheck",
                );
            }
        }
    }
    // A cycle: some service reaches itself.
    for s in services {
        let mut stack: Vec<&str> = s.depends_on.iter().map(|(d, _)| d.as_str()).collect();
        let mut visited = BTreeSet::new();
        while let Some(d) = stack.pop() {
            if d == s.name {
                cx.bad(&format!("services.{}.depends_on", s.name), ": a cycle: it depends on itself through others");
                return;
            }
            if visited.insert(d) {
                if let Some(ds) = by_name.get(d) {
                    stack.extend(ds.depends_on.iter().map(|(x, _)| x.as_str()));
                }
            }
        }
    }
}
