//! A service's process: `image`, `command`, `entrypoint`, `environment`,
//! `env_file`, `user`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use super::{key_str, scalar, Cx};
use crate::{split_words, ImageRef};

/// `image:` in skopeo's transport syntax, paths relative to the cluster directory.
pub(super) fn image_ref(cx: &mut Cx, at: &str, v: &Value) -> Option<ImageRef> {
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
pub(super) fn words(cx: &mut Cx, at: &str, v: &Value) -> Option<Vec<String>> {
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

pub(super) fn env_name_ok(k: &str) -> bool {
    !k.is_empty() && !k.contains('=') && !k.contains('\0')
}

/// `environment:` as a map or a list of `KEY=VALUE`.
pub(super) fn environment(cx: &mut Cx, at: &str, v: &Value, out: &mut BTreeMap<String, String>) {
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
pub(super) fn env_files(cx: &mut Cx, at: &str, v: &Value, out: &mut BTreeMap<String, String>) {
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
pub(super) fn user(cx: &mut Cx, at: &str, v: &Value) -> Option<String> {
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
