//! A service's mounts: `volumes` (named volumes) and `tmpfs`.

use std::collections::BTreeSet;

use serde_yaml_ng::Value;

use super::{key_str, scalar, Cx};
use crate::Mount;

/// A path in the container: absolute, without `..`.
pub(super) fn container_path(p: &str) -> bool {
    p.starts_with('/') && !p.split('/').any(|c| c == "..") && !p.contains('\'') && p != "/"
}

/// `volumes:` of a service: named volumes (`NAME:/path[:ro]` or the long
/// form) and tmpfs; binds of host paths are refused.
pub(super) fn mounts(cx: &mut Cx, at: &str, v: &Value, volumes: &BTreeSet<String>, out: &mut Vec<Mount>) {
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
pub(super) fn tmpfs(cx: &mut Cx, at: &str, v: &Value, out: &mut Vec<Mount>) {
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
