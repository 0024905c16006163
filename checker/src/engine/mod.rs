//! The engine: one execution of a cluster under virtual time.
//!
//! The engine is the only source of time for every node. At each step it
//! runs the node whose next event is earliest (ties broken by the seeded
//! PRNG), lets it run until it waits again, records everything it printed
//! in the trace at the virtual time it printed it, and reacts to what the
//! node's agent reported: all nodes ready -> start the workload; workload
//! done -> run the invariants; all invariants done -> the execution passes.
//!
//! Exactly one node executes at any moment, so nothing a node sees can
//! depend on how the host scheduled the others.

mod agent;
mod frames;
mod network;
mod outcome;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use vmm::uml::{Delivered, GuestOutput, OutputStream, RunOutcome, UmlConfig, UmlError, UmlNode};

use crate::trace::{EventKind, LineSplitter, Trace};
use agent::AgentMsg;
pub use network::{describe as describe_partition, NetworkSpec, ScheduledPartition};
pub use outcome::{ExecutionResult, Failure, FailureKind, Verdict};

/// An enabled engine action at the current instant.
#[derive(Debug, Clone, Copy)]
enum Choice {
    Run(usize),
    Deliver(netsim::DeliveryId),
    Fault,
}

/// The wall-clock date guests believe they booted at (GET_TOD):
/// 2026-01-01T00:00:00Z. Fixed, so that `date` in a guest is deterministic.
pub const GUEST_EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;

/// Everything one execution needs; plain data so a failure file can
/// reproduce it.
#[derive(Debug, Clone)]
pub struct ExecutionSpec {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// n1..nN.
    pub node_names: Vec<String>,
    pub mem_mb: u32,
    /// 0-based index of the workload node.
    pub workload_node: usize,
    /// (command name, 0-based node), in the order they are sent.
    pub invariants: Vec<(String, usize)>,
    /// The execution fails if the workload and invariants are not done by
    /// this virtual time.
    pub time_limit_ns: u64,
    /// Wall-clock time a node may run without yielding before it is
    /// reported as hung.
    pub watchdog: Duration,
    /// Wall-clock time a node may take to connect to the controller.
    pub connect_timeout: Duration,
    /// Seed of this execution (derived from the run seed and index).
    pub seed: u64,
    /// Directory for per-node sockets and scratch; must exist, and be short
    /// (unix socket paths are limited to 107 bytes).
    pub scratch: PathBuf,
    /// The simulated network; `None`: nodes have loopback only.
    pub network: Option<NetworkSpec>,
}

/// The host failed us (not the guest): a node could not be started, or it
/// broke the time-travel protocol.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Node(#[from] UmlError),
    #[error("cannot prepare {path}: {source}")]
    Scratch { path: PathBuf, source: std::io::Error },
    #[error("node {node} asked to run at {requested} ns, before the current time {now} ns")]
    TimeWentBack { node: String, requested: u64, now: u64 },
}

/// Derives the seed of execution `index` of a run, so any execution can be
/// replayed alone (SplitMix64 over seed and index).
pub fn execution_seed(run_seed: u64, index: u64) -> u64 {
    let mut z = run_seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Per-node bookkeeping beside the runtime handle.
struct NodeState {
    name: String,
    console: LineSplitter,
    control: LineSplitter,
    ready: bool,
    saw_panic: bool,
    /// The kernel's "Kernel panic - not syncing: ..." line.
    panic_line: Option<String>,
    /// Last console lines, for failure messages.
    tail: Vec<String>,
}

const TAIL_LINES: usize = 20;

/// Progress of the cluster through its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Booting,
    Workload,
    Invariants { done: usize },
}

/// Runs one execution to its verdict.
pub fn execute(spec: &ExecutionSpec) -> Result<ExecutionResult, EngineError> {
    let began = Instant::now();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut trace = Trace::new();
    let mut nodes = Vec::new();
    let mut states = Vec::new();
    let peers = spec.node_names.join(",");
    for (i, name) in spec.node_names.iter().enumerate() {
        let run_dir = spec.scratch.join(name);
        std::fs::create_dir_all(&run_dir)
            .map_err(|source| EngineError::Scratch { path: run_dir.clone(), source })?;
        let cfg = UmlConfig {
            kernel: spec.kernel.clone(),
            initrd: spec.initrd.clone(),
            mem_mb: spec.mem_mb,
            node_id: (i + 1) as u16,
            run_dir,
            init_env: vec![
                ("NODE_ID".into(), (i + 1).to_string()),
                ("NODE_NAME".into(), name.clone()),
                ("PEERS".into(), peers.clone()),
            ],
            extra_args: vec![],
            net: spec.network.is_some(),
        };
        nodes.push(UmlNode::spawn(&cfg)?);
        states.push(NodeState {
            name: name.clone(),
            console: LineSplitter::default(),
            control: LineSplitter::default(),
            ready: false,
            saw_panic: false,
            panic_line: None,
            tail: Vec::new(),
        });
    }
    let mut net = match &spec.network {
        None => None,
        Some(n) => Some(
            network::NetState::new(n, spec.node_names.len() as u16, spec.seed, spec.time_limit_ns)
                .map_err(|source| EngineError::Scratch { path: spec.scratch.clone(), source })?,
        ),
    };
    let mut out: Vec<GuestOutput> = Vec::new();
    for (i, node) in nodes.iter_mut().enumerate() {
        // Output from before the kernel connected is UML's host-side
        // start-up chatter (checks of the host's ptys, /dev/shm, ...): it
        // describes the host, not the guest, and stays out of the trace.
        let _host_chatter = node.wait_connected(0, spec.connect_timeout)?;
        trace.push(0, (i + 1) as u16, EventKind::Boot);
    }

    let mut now = 0u64;
    let mut phase = Phase::Booting;
    let mut boot_wall = None;
    let mut grants = 0u64;
    let mut verdict = None;
    let mut msgs = Vec::new();
    let mut cands = Vec::new();
    while verdict.is_none() {
        let node_min = nodes.iter().filter(|n| !n.has_exited()).map(|n| n.requested()).min();
        let net_min = net.as_ref().and_then(|n| n.next_time());
        let Some(t) = [node_min, net_min].into_iter().flatten().min() else {
            verdict = Some(Verdict::Fail(Failure::new(
                FailureKind::GuestExit,
                None,
                now,
                "every node has exited".into(),
            )));
            break;
        };
        if t < now {
            let i = nodes.iter().position(|n| n.requested() == t).unwrap_or(0);
            return Err(EngineError::TimeWentBack { node: states[i].name.clone(), requested: t, now });
        }
        if t > spec.time_limit_ns {
            let what = match phase {
                Phase::Booting => "the nodes did not all boot",
                Phase::Workload => "the workload did not finish",
                Phase::Invariants { .. } => "the invariants did not finish",
            };
            verdict = Some(Verdict::Fail(Failure::new(
                FailureKind::TimeLimit,
                None,
                spec.time_limit_ns,
                format!("{what} within the virtual-time limit of {} s", spec.time_limit_ns as f64 / 1e9),
            )));
            now = spec.time_limit_ns;
            break;
        }
        // Every event due at `t` is enabled; the seed picks one.
        cands.clear();
        cands.extend((0..nodes.len()).filter(|&i| !nodes[i].has_exited() && nodes[i].requested() == t).map(Choice::Run));
        if let Some(ns) = &net {
            cands.extend(ns.deliveries_at(t).into_iter().map(Choice::Deliver));
            if ns.fault_at(t) {
                cands.push(Choice::Fault);
            }
        }
        let choice = if cands.len() == 1 { cands[0] } else { cands[(rng.next_u64() % cands.len() as u64) as usize] };
        now = t;
        let i = match choice {
            Choice::Fault => {
                net.as_mut().unwrap().apply_fault(&mut trace, now);
                continue;
            }
            Choice::Deliver(id) => {
                let ns = net.as_mut().unwrap();
                let Some(d) = ns.take(id) else { continue };
                let (to, from) = (d.to.index(), d.from.get());
                let summary = frames::summarize(&d.frame);
                let len = d.frame.len() as u32;
                if nodes[to].has_exited() {
                    trace.push(now, from, EventKind::Drop { id: d.id.0, to: d.to.get(), cause: "node down".into() });
                    continue;
                }
                trace.push(now, d.to.get(), EventKind::Deliver { id: d.id.0, from, len, summary });
                if nodes[to].deliver_frame(now, &d.frame, spec.watchdog)? == Delivered::Dropped {
                    trace.push(now, d.to.get(), EventKind::Note { text: format!("frame {} dropped: no receive buffer", d.id.0) });
                }
                continue;
            }
            Choice::Run(i) => i,
        };
        trace.push(now, (i + 1) as u16, EventKind::Run);
        grants += 1;
        let outcome = nodes[i].grant(GUEST_EPOCH_NS, spec.watchdog, &mut out)?;
        record_output(&mut trace, &mut states[i], i, &mut out, &mut msgs);
        if let Some(ns) = net.as_mut() {
            let node_id = netsim::NodeId::new((i + 1) as u16).expect("node ids fit");
            ns.transmit(node_id, nodes[i].take_tx(), &mut trace);
            if !matches!(outcome, RunOutcome::Waiting { .. }) {
                ns.node_down(node_id);
            }
        }
        if matches!(outcome, RunOutcome::Waiting { .. }) {
            // Interrupts owed for transmitted frames and control output,
            // and input that waited for receive buffers, reach it now.
            nodes[i].settle(now, spec.watchdog)?;
        }
        match outcome {
            RunOutcome::Waiting { .. } => {}
            RunOutcome::Exited { status, signal } => {
                let st = &states[i];
                trace.push(now, (i + 1) as u16, EventKind::Exit { status, signal, panic: st.saw_panic });
                let (kind, what) = if st.saw_panic {
                    (
                        FailureKind::GuestPanic,
                        format!("node {} panicked: {}", st.name, st.panic_line.as_deref().unwrap_or("Kernel panic")),
                    )
                } else {
                    (
                        FailureKind::GuestExit,
                        format!("node {} powered off or died unexpectedly (status {status:?}, signal {signal:?})", st.name),
                    )
                };
                verdict = Some(Verdict::Fail(Failure::new(kind, Some(st.name.clone()), now, with_tail(what, st))));
                break;
            }
            RunOutcome::Hung { wall } => {
                trace.push(now, (i + 1) as u16, EventKind::Hung);
                let st = &states[i];
                let what = format!(
                    "node {} hung: it ran {:.1} s of wall time without letting virtual time advance \
                     (a guest busy loop waiting for time to pass never sees it pass)",
                    st.name,
                    wall.as_secs_f64()
                );
                verdict = Some(Verdict::Fail(Failure::new(FailureKind::GuestHang, Some(st.name.clone()), now, with_tail(what, st))));
                break;
            }
        }
        for (from, msg) in msgs.drain(..) {
            if verdict.is_none() {
                verdict = on_agent_message(spec, &mut nodes, &mut states, &mut trace, &mut phase, now, from, msg)?;
            }
        }
        if verdict.is_some() {
            break;
        }
        if phase == Phase::Booting && states.iter().all(|s| s.ready) {
            boot_wall = Some(began.elapsed());
            phase = Phase::Workload;
            let w = spec.workload_node;
            send(&mut nodes[w], &mut trace, now, w, "workload", spec.watchdog)?;
        }
        if let Phase::Invariants { done } = phase {
            if done == spec.invariants.len() {
                verdict = Some(Verdict::Pass);
            }
        }
    }
    let node_memory_kib = nodes.iter().map(|n| n.memory_kib()).collect();
    for node in nodes.iter_mut() {
        node.kill();
    }
    for (i, st) in states.iter_mut().enumerate() {
        if let Some(line) = st.console.finish() {
            trace.push(now, (i + 1) as u16, EventKind::Console { text: line });
        }
    }
    Ok(ExecutionResult {
        verdict: verdict.unwrap_or(Verdict::Pass),
        trace_hash: trace.hash(),
        trace,
        virtual_ns: now,
        wall: began.elapsed(),
        boot_wall,
        grants,
        node_memory_kib,
        network: net.as_mut().map(|n| n.finish()),
    })
}

/// Reacts to one agent message; returns the verdict if it decides one.
#[allow(clippy::too_many_arguments)]
fn on_agent_message(
    spec: &ExecutionSpec,
    nodes: &mut [UmlNode],
    states: &mut [NodeState],
    trace: &mut Trace,
    phase: &mut Phase,
    now: u64,
    from: usize,
    msg: AgentMsg,
) -> Result<Option<Verdict>, EngineError> {
    let name = states[from].name.clone();
    let node = (from + 1) as u16;
    let fail = |kind, what: String, st: &NodeState| {
        Some(Verdict::Fail(Failure::new(kind, Some(st.name.clone()), now, with_tail(what, st))))
    };
    match msg {
        AgentMsg::Ready => {
            states[from].ready = true;
            trace.push(now, node, EventKind::Ready);
        }
        AgentMsg::Done { command, status } => {
            trace.push(now, node, EventKind::CommandDone { name: command.clone(), status });
            let hint = agent::status_hint(status);
            if command == "start" {
                if status != 0 {
                    let what = format!("node {name}: its start command exited with status {status}{hint}");
                    return Ok(fail(FailureKind::StartCommand, what, &states[from]));
                }
            } else if command == "workload" && *phase == Phase::Workload {
                if status != 0 {
                    let what = format!("the workload on {name} exited with status {status}{hint}");
                    return Ok(fail(FailureKind::Workload, what, &states[from]));
                }
                *phase = Phase::Invariants { done: 0 };
                for (cmd, n) in &spec.invariants {
                    send(&mut nodes[*n], trace, now, *n, cmd, spec.watchdog)?;
                }
            } else if let Phase::Invariants { done } = *phase {
                let ok = status == 0;
                trace.push(now, node, EventKind::Invariant { name: command.clone(), ok });
                *phase = Phase::Invariants { done: done + 1 };
                if !ok {
                    let what = format!("invariant {command} failed on {name} (exit status {status}{hint})");
                    return Ok(fail(FailureKind::Invariant, what, &states[from]));
                }
            }
        }
        AgentMsg::Unknown(line) => {
            trace.push(now, node, EventKind::Note { text: format!("agent: {line}") });
        }
    }
    Ok(None)
}

fn send(
    node: &mut UmlNode,
    trace: &mut Trace,
    now: u64,
    index: usize,
    command: &str,
    watchdog: Duration,
) -> Result<(), EngineError> {
    trace.push(now, (index + 1) as u16, EventKind::Command { name: command.to_string() });
    node.send_control(now, format!("run {command}\n").as_bytes(), watchdog)?;
    Ok(())
}

/// Moves a node's stamped output into the trace: console lines as events,
/// control lines parsed into agent messages.
fn record_output(
    trace: &mut Trace,
    st: &mut NodeState,
    index: usize,
    out: &mut Vec<GuestOutput>,
    msgs: &mut Vec<(usize, AgentMsg)>,
) {
    for o in out.drain(..) {
        match o.stream {
            OutputStream::Console => {
                for line in st.console.feed(&o.bytes) {
                    if line.contains("Kernel panic") {
                        st.saw_panic = true;
                        st.panic_line.get_or_insert_with(|| line.trim().to_string());
                    }
                    st.tail.push(line.clone());
                    if st.tail.len() > TAIL_LINES {
                        st.tail.remove(0);
                    }
                    trace.push(o.time, (index + 1) as u16, EventKind::Console { text: line });
                }
            }
            OutputStream::Control => {
                for line in st.control.feed(&o.bytes) {
                    if let Some(m) = agent::parse(&line) {
                        msgs.push((index, m));
                    }
                }
            }
        }
    }
}

fn with_tail(what: String, st: &NodeState) -> String {
    if st.tail.is_empty() {
        return what;
    }
    let mut s = what;
    s.push_str(&format!("\nlast console lines of {}:\n", st.name));
    for l in &st.tail {
        s.push_str("  | ");
        s.push_str(l);
        s.push('\n');
    }
    s
}
