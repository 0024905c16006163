//! The host-side workload: a smoltcp client ([`netsim::host::HostClient`])
//! on a netsim node of its own that sends HTTP requests to the guests, so a
//! workload can drive the cluster without booting a client VM.
//!
//! # Place in the cluster
//! With `N` guests the client is node `N + 1` (`10.0.0.N+1`, MAC
//! `02:00:0a:00:00:N+1`, called `host` in `/etc/hosts`, reports and pcap
//! file names). The network of the execution is built with `N + 1` nodes,
//! so its frames go through netsim exactly like a guest's: latency, loss,
//! duplication, reordering, bandwidth and partitions apply to its links, and
//! random partitions may cut it off (a client that loses the cluster is a
//! real failure mode; see `network.rs`).
//!
//! # Engine contract
//! * Polling the client is an engine action like running a guest: node
//!   `N + 1`, [`ActionKind::RunNode`](crate::strategy::ActionKind), due at
//!   [`HostEndpoint::due`], which is the earlier of the client's own
//!   `poll_at` and the start of the workload. Unlike a guest's timer it
//!   does not clamp the `[explore] window` (`actions::horizon`): smoltcp
//!   takes a late poll in its stride (a retransmission goes out late), so
//!   the strategy may postpone it like a delivery.
//! * A frame delivered to node `N + 1` is handed to the client at the
//!   delivery's time; the client is then due at once (smoltcp processes it
//!   on the next poll, which the engine schedules at that same instant).
//! * Frames the client emits during a poll are sent into netsim at the
//!   poll's virtual time, with the same trace events as a guest's.
//!
//! # Invariants
//! * `due` is recomputed after every call that can change the client
//!   (`poll`, `receive_frame`, starting requests), because `HostClient::poll_at`
//!   needs `&mut` and the engine's enabled-set builder only has `&`.
//! * Requests start in list order (round after round), at most
//!   `concurrency` at a time; results are taken in request order, so the
//!   first failure reported is the same in every run of a seed.
//! * Nothing here reads host time or host randomness: the client's seed is
//!   derived from the execution seed, its clock is the engine's.

use std::time::Duration;

use netsim::host::{http, HostClient, HostConfig, HttpError, HttpId, HttpResponse};
use netsim::{Delivery, NodeId};

use crate::frames::summarize;
use crate::trace::{EventKind, Trace};
use simrng::streams::HOST_CLIENT as SEED_STREAM;
use simtime::VirtualTime;

/// One HTTP request of a host workload, checked (from cluster.toml).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRequest {
    /// Target guest.
    pub node: NodeId,
    /// TCP port.
    pub port: u16,
    /// `GET`, `POST`, ... (an HTTP token).
    pub method: String,
    /// Request target, starting with `/`.
    pub path: String,
    /// Request body (sent with `Content-Length`); empty: none.
    pub body: Vec<u8>,
    /// The response status the request must get.
    pub expect_status: u16,
    /// The response body must contain this text.
    pub body_contains: Option<String>,
    /// The response body must be exactly these bytes (`body_file`).
    pub body_equals: Option<Vec<u8>>,
}

impl HostRequest {
    /// `GET n2:8080/data`, for traces and failure messages.
    pub fn describe(&self) -> String {
        format!("{} {}:{}{}", self.method, self.node, self.port, self.path)
    }
}

/// A host-side workload (`[workload.host]`): plain data, so a failure file
/// reproduces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostWorkload {
    /// Sent in this order, `repeat` times over.
    pub requests: Vec<HostRequest>,
    /// How many times the list is sent.
    pub repeat: u32,
    /// Requests in flight at once (at least 1).
    pub concurrency: u32,
    /// Virtual time between "every node is ready" and the first request
    /// (servers started in the background may not listen at once).
    pub start_after: Duration,
    /// A request with no complete response after this long fails.
    pub timeout: Duration,
}

impl HostWorkload {
    /// Requests of the whole workload (list length times `repeat`).
    pub fn total(&self) -> usize {
        self.requests.len() * self.repeat as usize
    }
}

/// Polls at one instant after which the client is pushed 1 µs on: a
/// client that keeps asking to be polled "now" would otherwise stop virtual
/// time for good. Never reached by a correct client (each poll at the same
/// instant moves bytes or closes connections); the push is noted in the
/// trace so it cannot go unseen.
const MAX_POLLS_PER_INSTANT: u32 = 10_000;

/// How far such a client is pushed on.
const POLL_PUSH: Duration = Duration::from_micros(1);

/// The client, its workload's progress and its next due time.
pub(super) struct HostEndpoint {
    client: HostClient,
    workload: HostWorkload,
    /// When the workload starts (set once every node is ready).
    start_at: Option<VirtualTime>,
    started: bool,
    /// Next request (index into the expanded list) to start.
    next: usize,
    /// In flight: exchange -> (request index, virtual time it started).
    in_flight: std::collections::BTreeMap<HttpId, (usize, VirtualTime)>,
    completed: usize,
    finished: bool,
    due: Option<VirtualTime>,
    /// (instant, polls at it) for [`MAX_POLLS_PER_INSTANT`].
    polls_at: (VirtualTime, u32),
}

/// What a poll concluded about the workload.
pub(crate) enum HostOutcome {
    Running,
    Passed,
    Failed(String),
}

/// The host client's node in a cluster of `guests` guests: the one after
/// them (see [`HostConfig::after_guests`]).
pub(crate) fn client_node(guests: u16) -> Option<NodeId> {
    HostConfig::after_guests(guests, 0).map(|c| c.node)
}

impl HostEndpoint {
    /// The client of a cluster of `guests` guests, idle until [`start`](Self::start).
    /// Its clock starts at `now`.
    pub fn new(guests: u16, workload: HostWorkload, seed: u64, now: VirtualTime) -> Option<HostEndpoint> {
        let mut cfg = HostConfig::after_guests(guests, seed ^ SEED_STREAM)?;
        cfg.http_timeout = Some(workload.timeout);
        cfg.connect_timeout = cfg.connect_timeout.min(workload.timeout);
        let mut client = HostClient::new(cfg, now);
        let due = client.poll_at(now);
        Some(HostEndpoint {
            client,
            workload,
            start_at: None,
            started: false,
            next: 0,
            in_flight: Default::default(),
            completed: 0,
            finished: false,
            due,
            polls_at: (now, 0),
        })
    }

    pub fn node(&self) -> NodeId {
        self.client.node()
    }

    /// The next virtual time the endpoint needs an action, if any.
    pub fn due(&self) -> Option<VirtualTime> {
        let start = self.start_at.filter(|_| !self.started);
        match (self.due, start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Every node is ready: the workload begins `start_after` from `now`.
    pub fn start(&mut self, now: VirtualTime, trace: &mut Trace) {
        trace.push(now, self.node(), EventKind::Command { name: "workload".into() });
        self.start_at = Some(now.saturating_add(self.workload.start_after));
    }

    /// A frame netsim delivered to the client.
    pub fn deliver(&mut self, now: VirtualTime, d: &Delivery, trace: &mut Trace) {
        let (id, from, len) = (d.id.0, d.from, d.frame.len() as u32);
        trace.push(now, self.node(), EventKind::Deliver { id, from, len, summary: summarize(&d.frame) });
        self.client.receive_frame(&d.frame);
        self.due = self.client.poll_at(now);
    }

    /// One engine action: run the stack, check finished exchanges, start
    /// requests in the free slots, and run the stack again so their first
    /// frames leave at this same instant.
    /// Returns the frames to send and what became of the workload.
    pub fn poll(&mut self, now: VirtualTime, trace: &mut Trace) -> (Vec<Vec<u8>>, HostOutcome) {
        let node = self.node();
        trace.push(now, node, EventKind::run());
        if !self.started && self.start_at.is_some_and(|t| t <= now) {
            self.started = true;
        }
        // Poll first: the client stamps API calls (connect and request
        // deadlines) with the time of its latest poll, which may be long
        // ago when the workload starts.
        self.client.poll(now);
        let mut outcome = HostOutcome::Running;
        if self.started && !self.finished {
            outcome = self.collect(now, trace);
            if matches!(outcome, HostOutcome::Running) {
                match self.fill(now, trace) {
                    // The new requests' first frames leave at this instant.
                    Ok(true) => self.client.poll(now),
                    Ok(false) => {}
                    Err(why) => outcome = self.fail(why),
                }
            }
        }
        let tx = self.client.take_tx();
        self.due = self.client.poll_at(now);
        self.polls_at = if self.polls_at.0 == now { (now, self.polls_at.1 + 1) } else { (now, 1) };
        if self.polls_at.1 >= MAX_POLLS_PER_INSTANT && self.due.is_some_and(|t| t <= now) {
            let text = format!("host client asked for {MAX_POLLS_PER_INSTANT} polls at one instant; moved on 1 us");
            trace.push(now, node, EventKind::Note { text });
            self.due = Some(now + POLL_PUSH);
        }
        (tx, outcome)
    }

    /// Starts requests while there are slots; `true` if any started.
    fn fill(&mut self, now: VirtualTime, trace: &mut Trace) -> Result<bool, HostFailure> {
        let mut any = false;
        while self.next < self.workload.total() && self.in_flight.len() < self.workload.concurrency as usize {
            let k = self.next;
            self.next += 1;
            let r = &self.workload.requests[k % self.workload.requests.len()];
            let to = r.node;
            let host = if r.port == 80 { to.ip().to_string() } else { format!("{}:{}", to.ip(), r.port) };
            let bytes = http::request(&r.method, &host, &r.path, &[], &r.body);
            let what = self.label(k);
            // Ports and targets are checked, so only "no free ephemeral
            // port" can fail here: that request fails.
            let id = self
                .client
                .http_request(to, r.port, &bytes)
                .map_err(|why| HostFailure { what: what.clone(), problem: HostProblem::NotStarted(why) })?;
            trace.push(now, self.node(), EventKind::Note { text: format!("{what}: sent") });
            self.in_flight.insert(id, (k, now));
            any = true;
        }
        Ok(any)
    }

    /// The workload ends with a failure: nothing more starts or is checked.
    fn fail(&mut self, why: HostFailure) -> HostOutcome {
        self.finished = true;
        self.in_flight.clear();
        HostOutcome::Failed(format!("the host workload failed: {why}"))
    }

    /// Takes every finished exchange, in request order, and checks it.
    fn collect(&mut self, now: VirtualTime, trace: &mut Trace) -> HostOutcome {
        let node = self.node();
        let ids: Vec<HttpId> = self.in_flight.keys().copied().collect();
        for id in ids {
            let Some(result) = self.client.take_http(id) else { continue };
            let (k, began) = self.in_flight.remove(&id).expect("in flight");
            let what = self.label(k);
            let req = &self.workload.requests[k % self.workload.requests.len()];
            // The same f64 as the `u64` ns gave: the trace's text keeps its digits.
            let took = (now - began).as_nanos() as f64 / 1e6;
            let verdict = check(&what, req, &result);
            let got = match &result {
                Ok(r) => format!("{} {}, {} bytes in {took:.3} ms", r.status, r.reason, r.body.len()),
                Err(e) => format!("no response after {took:.3} ms: {e}"),
            };
            trace.push(now, node, EventKind::Note { text: format!("{what}: {got}") });
            if let Err(why) = verdict {
                return self.fail(why);
            }
            self.completed += 1;
        }
        if self.completed == self.workload.total() {
            self.finished = true;
            return HostOutcome::Passed;
        }
        HostOutcome::Running
    }

    /// `request 2/3 (round 1/2) GET n2:8080/data`.
    fn label(&self, k: usize) -> String {
        let w = &self.workload;
        let per = w.requests.len();
        let r = &w.requests[k % per];
        if w.repeat > 1 {
            format!("request {}/{per} (round {}/{}) {}", k % per + 1, k / per + 1, w.repeat, r.describe())
        } else {
            format!("request {}/{per} {}", k % per + 1, r.describe())
        }
    }
}

/// Why the host workload failed: which request (`what`, as
/// `HostEndpoint::label` names it) and what went wrong with it. Displayed as
/// `{what}: {problem}`; the text ends up in the failure's message and in
/// traces, so it must not change.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{what}: {problem}")]
struct HostFailure {
    /// The request, as `HostEndpoint::label` names it.
    what: String,
    /// What went wrong with it.
    problem: HostProblem,
}

/// What went wrong with a request: it could not start, or its response does
/// not meet its expectations.
#[derive(Debug, PartialEq, thiserror::Error)]
enum HostProblem {
    /// The client could not open a connection (no free ephemeral port).
    #[error("could not start: {0}")]
    NotStarted(netsim::host::HostError),
    /// The node refused the connection.
    #[error(
        "no response: connection refused (nothing listens on {node}:{port}; if the server starts in the \
         background, [workload.host] start_after gives it time)"
    )]
    Refused { node: NodeId, port: u16 },
    /// Any other failed exchange (reset, timeout, a malformed response).
    #[error("no response: {0}")]
    NoResponse(HttpError),
    /// Another status than `expect_status`.
    #[error("expected status {expected}, got {status} {reason} (body: {body})")]
    Status { expected: u16, status: u16, reason: String, body: String },
    /// A body without `body_contains`.
    #[error("the body does not contain {want:?} (status {status}, body: {body})")]
    BodyLacks { want: String, status: u16, body: String },
    /// A body other than `body_file`'s bytes.
    #[error(
        "the body differs from body_file: {len} bytes, expected {expected_len}, first difference at byte {at} \
         (body: {body})"
    )]
    BodyDiffers { len: usize, expected_len: usize, at: usize, body: String },
}

/// Checks an exchange of request `what` against its request's expectations.
fn check(what: &str, req: &HostRequest, result: &Result<HttpResponse, HttpError>) -> Result<(), HostFailure> {
    let fail = |problem| Err(HostFailure { what: what.to_string(), problem });
    let r = match result {
        Ok(r) => r,
        Err(HttpError::Conn(netsim::host::ConnError::Refused)) => {
            return fail(HostProblem::Refused { node: req.node, port: req.port })
        }
        Err(e) => return fail(HostProblem::NoResponse(e.clone())),
    };
    let body = excerpt(&r.body);
    if r.status != req.expect_status {
        return fail(HostProblem::Status {
            expected: req.expect_status,
            status: r.status,
            reason: r.reason.clone(),
            body,
        });
    }
    if let Some(want) = &req.body_contains {
        if !r.text().contains(want.as_str()) {
            return fail(HostProblem::BodyLacks { want: want.clone(), status: r.status, body });
        }
    }
    if let Some(want) = &req.body_equals {
        if r.body != *want {
            let at = r.body.iter().zip(want).position(|(a, b)| a != b).unwrap_or(r.body.len().min(want.len()));
            return fail(HostProblem::BodyDiffers { len: r.body.len(), expected_len: want.len(), at, body });
        }
    }
    Ok(())
}

/// The start of a body for a message: at most 200 characters, escaped.
fn excerpt(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX)]).into_owned();
    if body.len() > MAX {
        format!("{text:?}... ({} bytes)", body.len())
    } else {
        format!("{text:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> HostRequest {
        HostRequest {
            node: NodeId::new(2).unwrap(),
            port: 8080,
            method: "GET".into(),
            path: "/data".into(),
            body: vec![],
            expect_status: 200,
            body_contains: Some("hello".into()),
            body_equals: None,
        }
    }

    fn resp(status: u16, body: &str) -> Result<HttpResponse, HttpError> {
        Ok(HttpResponse { status, reason: "R".into(), headers: vec![], body: body.as_bytes().to_vec() })
    }

    #[test]
    fn responses_are_checked_against_the_expectations() {
        let check = |req: &HostRequest, result: &Result<HttpResponse, HttpError>| {
            check("request 1/1", req, result).map_err(|e| e.to_string())
        };
        assert_eq!(check(&req(), &resp(200, "say hello")), Ok(()));
        let e = check(&req(), &resp(404, "missing")).unwrap_err();
        assert!(e.starts_with("request 1/1: expected status 200, got 404") && e.contains("missing"), "{e}");
        let e = check(&req(), &resp(200, "bye")).unwrap_err();
        assert!(e.contains("does not contain \"hello\""), "{e}");
        let mut r = req();
        r.body_equals = Some(b"say hello!".to_vec());
        let e = check(&r, &resp(200, "say hello")).unwrap_err();
        assert!(e.contains("9 bytes, expected 10, first difference at byte 9"), "{e}");
        let e = check(&req(), &Err(HttpError::Conn(netsim::host::ConnError::Refused))).unwrap_err();
        assert!(e.contains("connection refused") && e.contains("start_after"), "{e}");
        assert!(excerpt(&[b'x'; 300]).ends_with("... (300 bytes)"));
    }

    /// Every failure's text, as it was when each variant repeated `what`:
    /// it reaches failure messages and so trace hashes.
    #[test]
    fn failure_messages_are_unchanged() {
        let what = "request 1/2 (round 1/3) GET n2:8080/data";
        let text = |problem| HostFailure { what: what.to_string(), problem }.to_string();
        let cases = [
            (HostProblem::NotStarted(netsim::host::HostError::NoFreePort), "could not start: no free ephemeral port"),
            (
                HostProblem::Refused { node: NodeId::new(2).unwrap(), port: 8080 },
                "no response: connection refused (nothing listens on n2:8080; if the server starts in the \
                 background, [workload.host] start_after gives it time)",
            ),
            (
                HostProblem::NoResponse(HttpError::Conn(netsim::host::ConnError::TimedOut)),
                "no response: connection timed out",
            ),
            (
                HostProblem::NoResponse(HttpError::TimedOut),
                "no response: no complete response before the request timeout",
            ),
            (
                HostProblem::Status { expected: 200, status: 503, reason: "Busy".into(), body: "\"wait\"".into() },
                "expected status 200, got 503 Busy (body: \"wait\")",
            ),
            (
                HostProblem::BodyLacks { want: "hello".into(), status: 200, body: "\"bye\"".into() },
                "the body does not contain \"hello\" (status 200, body: \"bye\")",
            ),
            (
                HostProblem::BodyDiffers { len: 9, expected_len: 10, at: 9, body: "\"say hello\"".into() },
                "the body differs from body_file: 9 bytes, expected 10, first difference at byte 9 (body: \"say \
                 hello\")",
            ),
        ];
        for (problem, want) in cases {
            assert_eq!(text(problem), format!("{what}: {want}"));
        }
    }

    #[test]
    fn labels_name_request_and_round() {
        let w = HostWorkload {
            requests: vec![req(), req()],
            repeat: 3,
            concurrency: 1,
            start_after: Duration::ZERO,
            timeout: Duration::from_nanos(1),
        };
        let h = HostEndpoint::new(2, w, 7, VirtualTime::ZERO).unwrap();
        assert_eq!(h.node().number(), 3);
        assert_eq!(h.label(3), "request 2/2 (round 2/3) GET n2:8080/data");
        // Idle until started: nothing is due.
        assert_eq!(h.due(), None);
    }

    /// A workload that starts long after the client's last poll gets its
    /// full connect timeout from the start, not from that poll.
    #[test]
    fn deadlines_count_from_the_start_of_the_workload() {
        const SEC: Duration = Duration::from_secs(1);
        let at = |d: Duration| VirtualTime::ZERO + d;
        let w =
            HostWorkload { requests: vec![req()], repeat: 1, concurrency: 1, start_after: 20 * SEC, timeout: 30 * SEC };
        let mut h = HostEndpoint::new(2, w, 7, VirtualTime::ZERO).unwrap();
        let mut trace = Trace::new();
        h.start(at(SEC), &mut trace);
        assert_eq!(h.due(), Some(at(21 * SEC)));
        let (tx, outcome) = h.poll(at(21 * SEC), &mut trace);
        assert!(matches!(outcome, HostOutcome::Running), "failed at once");
        assert!(!tx.is_empty(), "the first request's frames (ARP) leave at the start");
        // Nobody answers: the handshake times out 5 s after the start.
        let mut last = HostOutcome::Running;
        while let (Some(t), HostOutcome::Running) = (h.due(), &last) {
            assert!(t <= at(27 * SEC), "still waiting at {t:?}");
            last = h.poll(t, &mut trace).1;
        }
        match last {
            HostOutcome::Failed(m) => {
                assert!(m.contains("request 1/1 GET n2:8080/data: no response: connection timed out"), "{m}")
            }
            _ => panic!("the request did not fail"),
        }
        assert!(trace.events().iter().any(|e| e.time == at(26 * SEC) && matches!(&e.kind, EventKind::Note { .. })));
    }
}
