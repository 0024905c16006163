//! A service's place on the network: `networks` (aliases) and `extra_hosts`.

use serde_yaml_ng::Value;

use super::{key_str, scalar, valid_name, Cx};

/// `networks:` of a service: a list of names, or names mapped to settings
/// (`aliases`, `ipv4_address`).
pub(super) fn networks(cx: &mut Cx, at: &str, v: &Value, index: usize, aliases: &mut Vec<String>) {
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

/// `extra_hosts:` as `NAME:ADDRESS` / `NAME=ADDRESS` strings or a mapping.
pub(super) fn extra_hosts(cx: &mut Cx, at: &str, v: &Value, out: &mut Vec<(String, String)>) {
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
