//! `[node]` and `[workload]`: what every node runs, and the workload: a
//! command in a guest, or HTTP requests from the host-side client
//! (`[workload.host]`).

use std::path::Path;
use std::time::Duration;

use engine::{HostRequest, HostWorkload};
use serde::Deserialize;

use super::values::{no_such_node, optional_duration};
use super::{parse_node_name, Invalid, KeyPath};

/// `[node]`: what every node runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// Shell command run on every node at boot, in the background.
    pub start: Option<String>,
    /// Readiness probe: a shell command polled on every node after boot
    /// (and after each restart) until it exits 0; the workload and the
    /// faults begin once every node's has.
    pub ready: Option<String>,
    /// How long the probe may keep failing (default 120 s).
    pub ready_within: Option<String>,
    /// How often it is polled (default 1 s, at least 1 ms).
    pub ready_every: Option<String>,
}

/// `[node] ready_within`'s default.
const READY_WITHIN_NS: u64 = 120_000_000_000;

impl NodeSection {
    /// The readiness probe's guest script (see [`super::checks::poll_script`]),
    /// if `ready` is set.
    pub(super) fn ready_probe(&self) -> Result<Option<String>, Invalid> {
        let at = KeyPath::table("node");
        let Some(command) = &self.ready else {
            for (key, v) in [("ready_within", &self.ready_within), ("ready_every", &self.ready_every)] {
                if v.is_some() {
                    return Err(at.key(key).invalid(" is set without [node] ready (the probe it would time)"));
                }
            }
            return Ok(None);
        };
        if command.trim().is_empty() {
            return Err(at.key("ready").invalid(" is empty: give the shell command that exits 0 once a node is ready"));
        }
        use super::checks::{poll_every, poll_script, poll_within};
        let within = match &self.ready_within {
            None => READY_WITHIN_NS,
            Some(w) => poll_within(&at.key("ready_within"), w)?,
        };
        let every = poll_every(&at.key("ready_every"), self.ready_every.as_deref())?;
        Ok(Some(poll_script(command, within, every)))
    }
}

/// `[workload]`: either a shell command in a guest (`node` + `command`), or
/// HTTP requests from the host-side client (`[workload.host]`), never both.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Node that runs the workload (`n1`, ...); empty with `[workload.host]`.
    #[serde(default)]
    pub node: String,
    /// Shell command; the execution's workload ends when it exits, and a
    /// non-zero status is a failure. Empty with `[workload.host]` (the
    /// image builder then writes an empty, never-run workload script).
    #[serde(default)]
    pub command: String,
    /// The workload runs on simcluster's host-side client instead: node
    /// N+1 (`10.0.0.N+1`, `host` in the guests' /etc/hosts), no client VM.
    pub host: Option<HostWorkloadSection>,
}

/// `[workload.host]`: HTTP requests sent from the host-side client, in list
/// order, `repeat` times over, `concurrency` at a time. The workload passes
/// when every response meets its request's expectations; the first that
/// does not (or gets no response) is the workload's failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWorkloadSection {
    /// The requests, sent in this order (at least one).
    pub requests: Vec<HostRequestSection>,
    /// Run the whole list this many times (default 1).
    #[serde(default = "one")]
    pub repeat: u32,
    /// Requests in flight at once (default 1: strictly one after another).
    #[serde(default = "one")]
    pub concurrency: u32,
    /// Virtual time from "every node is ready" to the first request
    /// (default "0s"); servers started in the background may need a moment.
    pub start_after: Option<String>,
    /// A request without a complete response after this long fails
    /// (default "30s"); its TCP handshake gives up after 5 s, or this if
    /// shorter (Linux retries SYNs for minutes; a workload wants to know).
    pub timeout: Option<String>,
}

/// One request of `[workload.host] requests`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRequestSection {
    /// Target guest (`n1`, ...).
    pub node: String,
    /// TCP port, 1 to 65535.
    pub port: u16,
    /// Default "GET".
    pub method: Option<String>,
    /// Default "/".
    pub path: Option<String>,
    /// Request body (sent with Content-Length).
    pub body: Option<String>,
    /// Default 200.
    pub expect_status: Option<u16>,
    /// The response body must contain this text.
    pub body_contains: Option<String>,
    /// The response body must equal this file (relative to the cluster
    /// directory), byte for byte.
    pub body_file: Option<String>,
}

fn one() -> u32 {
    1
}

/// Checks `[workload]` for a cluster of `n` guests in `dir`: the 0-based
/// index of the workload node (with a host workload, `n`: the host client
/// is node N+1) and the host workload, if any.
pub(super) fn check(w: &WorkloadSection, n: u16, dir: &Path) -> Result<(usize, Option<HostWorkload>), Invalid> {
    let at = KeyPath::table("workload");
    let host_workload = match &w.host {
        Some(h) => Some(host_workload(h, n, dir)?),
        None => None,
    };
    let workload_node = if host_workload.is_some() {
        if !w.node.is_empty() || !w.command.is_empty() {
            return Err(at.invalid(
                ": node + command (a guest runs the workload) and [workload.host] (the host-side client does) \
                 exclude each other; keep one",
            ));
        }
        usize::from(n)
    } else {
        if w.node.is_empty() && w.command.is_empty() {
            return Err(at.invalid(
                ": give node + command (a guest runs the workload) or a [workload.host] table \
                 (simcluster's host-side client sends HTTP requests)",
            ));
        }
        let node = parse_node_name(&w.node, n).ok_or_else(|| at.key("node").invalid(no_such_node(&w.node, n, "")))?;
        if w.command.trim().is_empty() {
            return Err(at.key("command").invalid(" is empty"));
        }
        node
    };
    Ok((workload_node, host_workload))
}

/// Checks `[workload.host]` for a cluster of `n` guests in `dir`.
fn host_workload(h: &HostWorkloadSection, n: u16, dir: &Path) -> Result<HostWorkload, Invalid> {
    let at = KeyPath::table("workload.host");
    if n >= engine::NodeId::MAX {
        return Err(at.invalid(format!(
            ": the host client is node N+1, so a cluster with it has at most {} nodes",
            engine::NodeId::MAX - 1
        )));
    }
    if h.requests.is_empty() {
        return Err(at.key("requests").invalid(" is empty (give at least one { node = \"n1\", port = 80 })"));
    }
    if h.repeat == 0 {
        return Err(at.key("repeat").invalid(" = 0: must be at least 1"));
    }
    if !(1..=1024).contains(&h.concurrency) {
        return Err(at.key("concurrency").invalid(format!(" = {}: must be between 1 and 1024", h.concurrency)));
    }
    let start_after_ns = optional_duration(&at.key("start_after"), &h.start_after, 0)?;
    let timeout_ns = optional_duration(&at.key("timeout"), &h.timeout, 30_000_000_000)?;
    if timeout_ns < 1_000_000 {
        return Err(at
            .key("timeout")
            .invalid(format!(" = {:?}: must be at least 1ms", h.timeout.as_deref().unwrap_or(""))));
    }
    let requests = h
        .requests
        .iter()
        .enumerate()
        .map(|(k, r)| host_request(&at.key("requests").nth(k), r, n, dir))
        .collect::<Result<Vec<_>, Invalid>>()?;
    Ok(HostWorkload {
        requests,
        repeat: h.repeat,
        concurrency: h.concurrency,
        start_after: Duration::from_nanos(start_after_ns),
        timeout: Duration::from_nanos(timeout_ns),
    })
}

/// One request of `[workload.host] requests`, the one at `at`.
fn host_request(at: &KeyPath, r: &HostRequestSection, n: u16, dir: &Path) -> Result<HostRequest, Invalid> {
    let i = parse_node_name(&r.node, n).ok_or_else(|| at.key("node").invalid(no_such_node(&r.node, n, "")))?;
    if r.port == 0 {
        return Err(at.key("port").invalid(" = 0 is not a port (1..65535)"));
    }
    let method = r.method.clone().unwrap_or_else(|| "GET".into());
    if method.is_empty() || !method.chars().all(|c| c.is_ascii_uppercase()) {
        return Err(at
            .key("method")
            .invalid(format!(" = {method:?}: must be an upper-case HTTP method such as GET or POST")));
    }
    let path = r.path.clone().unwrap_or_else(|| "/".into());
    if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(at
            .key("path")
            .invalid(format!(" = {path:?}: must start with '/' and hold no spaces or control characters")));
    }
    let expect_status = r.expect_status.unwrap_or(200);
    if !(100..=599).contains(&expect_status) {
        return Err(at.key("expect_status").invalid(format!(" = {expect_status}: not an HTTP status (100..599)")));
    }
    let body_equals = match &r.body_file {
        None => None,
        Some(f) => Some(read_body_file(&at.key("body_file"), dir, f)?),
    };
    Ok(HostRequest {
        node: engine::NodeId::at(i),
        port: r.port,
        method,
        path,
        body: r.body.clone().unwrap_or_default().into_bytes(),
        expect_status,
        body_contains: r.body_contains.clone(),
        body_equals,
    })
}

/// The most bytes a `body_file` may hold (the body a response must equal).
const MAX_BODY_FILE: u64 = 16 << 20;

/// `body_file` `f` (relative to the cluster directory `dir`), at `at`: a
/// regular file of at most [`MAX_BODY_FILE`] bytes. Not a device or a pipe:
/// `/dev/zero` would never end.
fn read_body_file(at: &KeyPath, dir: &Path, f: &str) -> Result<Vec<u8>, Invalid> {
    let p = dir.join(f);
    let bad = |why: String| at.invalid(format!(" = {f:?}: {why}"));
    let meta = std::fs::metadata(&p).map_err(|e| bad(format!("cannot read {}: {e}", p.display())))?;
    if !meta.is_file() {
        return Err(bad(format!("{} is not a regular file", p.display())));
    }
    if meta.len() > MAX_BODY_FILE {
        return Err(bad(format!(
            "{} holds {} bytes; a body file holds at most {MAX_BODY_FILE}",
            p.display(),
            meta.len()
        )));
    }
    std::fs::read(&p).map_err(|e| bad(format!("cannot read {}: {e}", p.display())))
}
