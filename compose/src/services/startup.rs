//! When a service counts as started: `healthcheck` and `depends_on`.

use serde_yaml_ng::Value;

use super::{key_str, scalar, Cx};
use crate::{parse_duration, Condition, Healthcheck};

/// `healthcheck:`.
pub(super) fn healthcheck(cx: &mut Cx, at: &str, v: &Value) -> Option<Healthcheck> {
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
pub(super) fn depends_on(cx: &mut Cx, at: &str, v: &Value, me: &str, names: &[String]) -> Vec<(String, Condition)> {
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
