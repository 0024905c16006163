//! The compose file's own keys: `services`, `volumes`, `networks`, `name`.
//! Every problem found is collected, so one message lists them all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use crate::interpolate::interpolate;
use crate::{parse_duration, split_words, Condition, Healthcheck, ImageRef, Mount, Problem, Project, Service, Warning};

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
    if services.len() > 254 {
        cx.bad("services", format!(": {} services; a cluster has at most 254 nodes", services.len()));
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
        let own = format!("n{}", i + 1);
        if name != own && name.strip_prefix('n').is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        {
            cx.bad(
                &at,
                format!(
                    ": this service is node {} ({own}); a service named like another node (n1, n2, ...) is refused",
                    i + 1
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

/// `image:` in skopeo's transport syntax, paths relative to the cluster directory.
fn image_ref(cx: &mut Cx, at: &str, v: &Value) -> Option<ImageRef> {
    let Some(s) = scalar(v) else {
        cx.bad(at, ": must be a string");
        return None;
    };
    let exists = |cx: &mut Cx, p: &Path, dir: bool| {
        let full = cx.dir.join(p);
        let ok = if dir { full.is_dir() } else { full.is_file() };
        if !ok {
            cx.bad(at, format!(" = {s:?}: {} does not exist", full.display()));
        }
        ok
    };
    if let Some(path) = s.strip_prefix("docker-archive:") {
        // skopeo's docker-archive:PATH[:REFERENCE]: the reference picks an
        // image of a multi-image archive; simcluster reads single-image ones.
        let file = PathBuf::from(path);
        let file = if !cx.dir.join(&file).is_file() && path.contains(':') {
            PathBuf::from(path.split(':').next().unwrap_or(path))
        } else {
            file
        };
        return exists(cx, &file, false).then(|| ImageRef::DockerArchive { file: cx.dir.join(file) });
    }
    if let Some(rest) = s.strip_prefix("oci:") {
        let (dir, tag) = match rest.split_once(':') {
            Some((d, t)) if !t.is_empty() => (d, Some(t.to_string())),
            Some((d, _)) => (d, None),
            None => (rest, None),
        };
        return exists(cx, Path::new(dir), true).then(|| ImageRef::Oci { dir: cx.dir.join(dir), tag });
    }
    let transport = s.split_once(':').map(|(t, _)| t).filter(|t| {
        ["docker", "oci-archive", "dir", "containers-storage", "docker-daemon", "sif", "ostree"].contains(t)
    });
    let detail = match transport {
        Some(t) if t != "docker" => format!(
            " = {s:?}: the {t}: transport is not supported; simcluster reads docker-archive:FILE and oci:DIR[:TAG]"
        ),
        _ => {
            let reference = s.strip_prefix("docker://").unwrap_or(&s);
            format!(
                " = {s:?} names a registry image, and simcluster pulls from no registry (a run's images must be \
                 files that a replay finds unchanged): save it beside the compose file with \
                 `skopeo copy docker://{reference} docker-archive:FILE.tar` (or docker save -o FILE.tar {reference}) \
                 and write image: docker-archive:FILE.tar"
            )
        }
    };
    cx.bad(at, detail);
    None
}

/// `command`/`entrypoint`: a list of strings, or a string split into words.
fn words(cx: &mut Cx, at: &str, v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Null => None,
        Value::Sequence(seq) => {
            let w: Option<Vec<String>> = seq.iter().map(scalar).collect();
            if w.is_none() {
                cx.bad(at, ": a list of strings");
            }
            w
        }
        v => match scalar(v).map(|s| split_words(&s)) {
            Some(Some(w)) => Some(w),
            Some(None) => {
                cx.bad(at, ": a quote is not closed");
                None
            }
            None => {
                cx.bad(at, ": a string or a list of strings");
                None
            }
        },
    }
}

fn env_name_ok(k: &str) -> bool {
    !k.is_empty() && !k.contains('=') && !k.contains('\0')
}

/// `environment:` as a map or a list of `KEY=VALUE`.
fn environment(cx: &mut Cx, at: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    let unset = |cx: &mut Cx, k: &str| {
        cx.bad(
            &format!("{at}.{k}"),
            ": has no value (Docker takes it from the shell that runs docker compose; a simulation has none): write KEY=VALUE",
        )
    };
    match v {
        Value::Mapping(m) => {
            for (k, val) in m {
                let k = key_str(k);
                if !env_name_ok(&k) {
                    cx.bad(&format!("{at}.{k}"), ": not a variable name");
                    continue;
                }
                match val {
                    Value::Null => unset(cx, &k),
                    val => match scalar(val) {
                        Some(s) => {
                            out.insert(k, s);
                        }
                        None => cx.bad(&format!("{at}.{k}"), ": a value is a string, number or boolean"),
                    },
                }
            }
        }
        Value::Sequence(seq) => {
            for (i, item) in seq.iter().enumerate() {
                match scalar(item) {
                    Some(s) => match s.split_once('=') {
                        Some((k, val)) if env_name_ok(k) => {
                            out.insert(k.into(), val.into());
                        }
                        Some(_) => cx.bad(&format!("{at}[{i}]"), format!(" = {s:?}: not a variable name")),
                        None => unset(cx, &s),
                    },
                    None => cx.bad(&format!("{at}[{i}]"), ": KEY=VALUE strings"),
                }
            }
        }
        _ => cx.bad(at, ": a mapping or a list of KEY=VALUE"),
    }
}

/// The largest `env_file` read.
const ENV_FILE_MAX: u64 = 1 << 20;

/// `env_file:` files (relative to the cluster directory), in order.
fn env_files(cx: &mut Cx, at: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    let entries: Vec<(String, bool)> = match v {
        Value::Sequence(seq) => seq
            .iter()
            .filter_map(|e| match e {
                Value::Mapping(m) => {
                    let path = m.get("path").and_then(scalar)?;
                    let required = m.get("required").and_then(Value::as_bool).unwrap_or(true);
                    Some((path, required))
                }
                e => scalar(e).map(|p| (p, true)),
            })
            .collect(),
        v => scalar(v).map(|p| vec![(p, true)]).unwrap_or_default(),
    };
    for (path, required) in entries {
        let p = cx.dir.join(&path);
        // A regular file of sane size: not a device or a FIFO that never ends.
        match std::fs::metadata(&p) {
            Ok(m) if !m.is_file() || m.len() > ENV_FILE_MAX => {
                cx.bad(at, format!(" = {path:?}: {} is not a regular file of at most 1 MiB", p.display()));
                continue;
            }
            _ => {}
        }
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(_) if !required => continue,
            Err(e) => {
                cx.bad(at, format!(" = {path:?}: cannot read {}: {e}", p.display()));
                continue;
            }
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            match line.split_once('=') {
                Some((k, val)) if env_name_ok(k.trim()) => {
                    let val = val.trim();
                    let val = val
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .or_else(|| val.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                        .unwrap_or(val);
                    out.insert(k.trim().into(), val.into());
                }
                _ => cx.bad(at, format!(": {} line {}: not KEY=VALUE", p.display(), n + 1)),
            }
        }
    }
}

/// `user:` a name or uid, optionally `:group`.
fn user(cx: &mut Cx, at: &str, v: &Value) -> Option<String> {
    let u = scalar(v)?;
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let (who, group) = match u.split_once(':') {
        Some((w, g)) => (w, Some(g)),
        None => (u.as_str(), None),
    };
    if !ok(who) || group.is_some_and(|g| !ok(g)) {
        cx.bad(at, format!(" = {u:?}: a user name or uid, optionally :group"));
        return None;
    }
    Some(u)
}

/// `networks:` of a service: a list of names, or names mapped to settings
/// (`aliases`, `ipv4_address`).
fn networks(cx: &mut Cx, at: &str, v: &Value, index: usize, aliases: &mut Vec<String>) {
    let Value::Mapping(m) = v else {
        if !matches!(v, Value::Sequence(_)) {
            cx.bad(at, ": a list of network names or a mapping");
        }
        return;
    };
    let address = format!("10.0.0.{}", index + 1);
    for (k, def) in m {
        let net = key_str(k);
        let Some(d) = def.as_mapping() else { continue };
        for (dk, dv) in d {
            let dk = key_str(dk);
            let at = format!("{at}.{net}.{dk}");
            match dk.as_str() {
                "aliases" => match dv.as_sequence().map(|s| s.iter().map(scalar).collect::<Option<Vec<_>>>()) {
                    Some(Some(names)) if names.iter().all(|n| valid_name(n)) => aliases.extend(names),
                    _ => cx.bad(&at, ": a list of names"),
                },
                "ipv4_address" => {
                    if scalar(dv).as_deref() != Some(address.as_str()) {
                        cx.bad(
                            &at,
                            format!(
                                " = {:?}: node addresses are fixed (node N is 10.0.0.N, in service order); this \
                                 service is node {} at {address}: write that or remove the key",
                                scalar(dv).unwrap_or_default(),
                                index + 1
                            ),
                        );
                    }
                }
                "ipv6_address" | "link_local_ips" | "mac_address" | "driver_opts" | "gw_priority" | "priority" => {
                    cx.bad(&at, ": nodes have one IPv4 address on one network (10.0.0.N)")
                }
                _ => cx.bad(&at, ": not a network setting that simcluster knows"),
            }
        }
    }
}

/// A path in the container: absolute, without `..`.
fn container_path(p: &str) -> bool {
    p.starts_with('/') && !p.split('/').any(|c| c == "..") && !p.contains('\'') && p != "/"
}

/// `volumes:` of a service: named volumes (`NAME:/path[:ro]` or the long
/// form) and tmpfs; binds of host paths are refused.
fn mounts(cx: &mut Cx, at: &str, v: &Value, volumes: &BTreeSet<String>, out: &mut Vec<Mount>) {
    let Some(seq) = v.as_sequence() else {
        cx.bad(at, ": a list of volumes");
        return;
    };
    for (i, item) in seq.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let (kind, source, target, read_only) = match item {
            Value::Mapping(m) => {
                let get = |k: &str| m.get(k).and_then(scalar);
                for (k, _) in m {
                    let k = key_str(k);
                    if !["type", "source", "target", "read_only", "volume"].contains(&k.as_str()) {
                        cx.bad(&format!("{at}.{k}"), ": not a volume setting that simcluster knows");
                    }
                }
                let kind = get("type").unwrap_or_else(|| "volume".into());
                let ro = m.get("read_only").and_then(Value::as_bool).unwrap_or(false);
                (kind, get("source"), get("target").unwrap_or_default(), ro)
            }
            item => {
                let Some(s) = scalar(item) else {
                    cx.bad(&at, ": a string or a mapping");
                    continue;
                };
                let parts: Vec<&str> = s.split(':').collect();
                match parts[..] {
                    [t] => ("volume".into(), None, t.into(), false),
                    [src, t] => ("volume".into(), Some(src.into()), t.into(), false),
                    [src, t, mode] => {
                        let ro = mode.split(',').any(|o| o == "ro");
                        ("volume".into(), Some(src.into()), t.into(), ro)
                    }
                    _ => {
                        cx.bad(&at, format!(" = {s:?}: SOURCE:TARGET[:MODE]"));
                        continue;
                    }
                }
            }
        };
        if !container_path(&target) {
            cx.bad(&at, format!(": target {target:?} must be an absolute path without '..' or quotes"));
            continue;
        }
        let is_path = |s: &str| s.starts_with('/') || s.starts_with('.') || s.starts_with('~');
        match (kind.as_str(), source) {
            ("tmpfs", _) => out.push(Mount::Tmpfs { target }),
            ("volume", None) => {
                cx.ignore(&at, "an anonymous volume is the container's own directory (the node's root is writable)")
            }
            ("volume", Some(src)) if !is_path(&src) => {
                if volumes.contains(&src) {
                    out.push(Mount::Volume { name: src, target, read_only });
                } else {
                    cx.bad(&at, format!(": volume {src:?} is not declared under the top-level volumes:"));
                }
            }
            ("bind", _) | ("volume", Some(_)) => cx.bad(
                &at,
                ": binds of host paths are not supported (a node sees no host files): put the files in the image, \
                 or use a named volume (the node's data disk)",
            ),
            (k, _) => cx.bad(&at, format!(": type {k:?} is not supported (volume or tmpfs)")),
        }
    }
}

/// `tmpfs:` a path or a list of them (options after ':' are ignored).
fn tmpfs(cx: &mut Cx, at: &str, v: &Value, out: &mut Vec<Mount>) {
    let paths: Vec<String> = match v {
        Value::Sequence(seq) => seq.iter().filter_map(scalar).collect(),
        v => scalar(v).into_iter().collect(),
    };
    for p in paths {
        let target = p.split(':').next().unwrap_or(&p).to_string();
        if container_path(&target) {
            out.push(Mount::Tmpfs { target });
        } else {
            cx.bad(at, format!(" = {p:?}: an absolute path without '..' or quotes"));
        }
    }
}

/// `healthcheck:`.
fn healthcheck(cx: &mut Cx, at: &str, v: &Value) -> Option<Healthcheck> {
    let Some(m) = v.as_mapping() else {
        cx.bad(at, ": a mapping (test, interval, timeout, retries, start_period, start_interval, disable)");
        return None;
    };
    let mut h = Healthcheck {
        test: Vec::new(),
        interval_ns: 30_000_000_000,
        timeout_ns: 30_000_000_000,
        retries: 3,
        start_period_ns: 0,
        start_interval_ns: None,
    };
    let mut disabled = false;
    let mut test = None;
    for (k, val) in m {
        let k = key_str(k);
        let at = format!("{at}.{k}");
        let duration = |cx: &mut Cx| match scalar(val).and_then(|s| parse_duration(&s)) {
            Some(ns) => Some(ns),
            None => {
                cx.bad(&at, ": a duration (examples: 10s, 1m30s, 500ms)");
                None
            }
        };
        match k.as_str() {
            "test" => test = Some(val.clone()),
            "interval" => h.interval_ns = duration(cx).unwrap_or(h.interval_ns),
            "timeout" => h.timeout_ns = duration(cx).unwrap_or(h.timeout_ns),
            "start_period" => h.start_period_ns = duration(cx).unwrap_or(0),
            "start_interval" => h.start_interval_ns = duration(cx),
            "retries" => match val.as_u64() {
                Some(r) => h.retries = r,
                None => cx.bad(&at, ": a whole number"),
            },
            "disable" => disabled = val.as_bool().unwrap_or(false),
            _ => cx.bad(&at, ": not a healthcheck key that simcluster knows"),
        }
    }
    if h.interval_ns < 1_000_000 {
        cx.bad(&format!("{at}.interval"), ": at least 1ms");
    }
    if disabled {
        return None;
    }
    let at_test = format!("{at}.test");
    h.test = match test {
        None => {
            cx.bad(&at_test, ": missing (the image's own HEALTHCHECK is not read: write the test here)");
            return None;
        }
        Some(Value::Sequence(seq)) => {
            let Some(w) = seq.iter().map(scalar).collect::<Option<Vec<String>>>() else {
                cx.bad(&at_test, ": a list of strings");
                return None;
            };
            match w.split_first() {
                Some((f, rest)) if f == "CMD" && !rest.is_empty() => rest.to_vec(),
                Some((f, [cmd])) if f == "CMD-SHELL" => vec!["/bin/sh".into(), "-c".into(), cmd.clone()],
                Some((f, [])) if f == "NONE" => return None,
                _ => {
                    cx.bad(&at_test, ": [\"CMD\", PROGRAM, ARGS...], [\"CMD-SHELL\", COMMAND] or [\"NONE\"]");
                    return None;
                }
            }
        }
        Some(v) => match scalar(&v) {
            Some(s) if !s.trim().is_empty() => vec!["/bin/sh".into(), "-c".into(), s],
            _ => {
                cx.bad(&at_test, ": a command string or a list");
                return None;
            }
        },
    };
    Some(h)
}

/// `depends_on:` a list of services (started), or services mapped to `condition`.
fn depends_on(cx: &mut Cx, at: &str, v: &Value, me: &str, names: &[String]) -> Vec<(String, Condition)> {
    let mut out = Vec::new();
    let mut add = |cx: &mut Cx, dep: String, c: Condition| {
        if dep == me {
            cx.bad(at, format!(": {me} depends on itself"));
        } else if !names.contains(&dep) {
            cx.bad(at, format!(": {dep:?} is not a service of this file"));
        } else {
            out.push((dep, c));
        }
    };
    match v {
        Value::Sequence(seq) => {
            for d in seq {
                match scalar(d) {
                    Some(d) => add(cx, d, Condition::Started),
                    None => cx.bad(at, ": a list of service names"),
                }
            }
        }
        Value::Mapping(m) => {
            for (k, def) in m {
                let dep = key_str(k);
                let mut cond = Condition::Started;
                if let Some(d) = def.as_mapping() {
                    for (dk, dv) in d {
                        let dk = key_str(dk);
                        let at = format!("{at}.{dep}.{dk}");
                        match dk.as_str() {
                            "condition" => match scalar(dv).as_deref() {
                                Some("service_started") => cond = Condition::Started,
                                Some("service_healthy") => cond = Condition::Healthy,
                                Some("service_completed_successfully") => cond = Condition::Completed,
                                _ => {
                                    cx.bad(&at, ": service_started, service_healthy or service_completed_successfully")
                                }
                            },
                            "restart" => cx.ignore(&at, "a dependency is not restarted by compose in a simulation"),
                            "required" => {}
                            _ => cx.bad(&at, ": not a depends_on key that simcluster knows"),
                        }
                    }
                }
                add(cx, dep, cond);
            }
        }
        _ => cx.bad(at, ": a list of services or a mapping"),
    }
    out
}

/// `extra_hosts:` as `NAME:ADDRESS` / `NAME=ADDRESS` strings or a mapping.
fn extra_hosts(cx: &mut Cx, at: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let pairs: Vec<Option<(String, String)>> = match v {
        Value::Mapping(m) => m.iter().map(|(k, a)| scalar(a).map(|a| (key_str(k), a))).collect(),
        Value::Sequence(seq) => seq
            .iter()
            .map(|e| {
                let s = scalar(e)?;
                let (n, a) = s.split_once('=').or_else(|| s.split_once(':'))?;
                Some((n.to_string(), a.to_string()))
            })
            .collect(),
        _ => vec![None],
    };
    for p in pairs {
        match p {
            Some((n, a)) if valid_name(&n) && a.parse::<std::net::Ipv4Addr>().is_ok() => out.push((n, a)),
            _ => cx.bad(at, ": NAME:IPV4 entries"),
        }
    }
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
