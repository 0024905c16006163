//! Building an execution's cluster in boot order: each node's
//! configuration, the nodes spawned, the simulated network, the host
//! client.

use std::time::Instant;

use vmm::node::NodeConfig;
use vmm::runtime::RuntimeKind;

use crate::faults::{self, NodeClock, DRIFT_ENV};
use crate::host;
use crate::network;
use crate::node::Node;
use crate::seeds::{entropy_seed, read_fault_seed};
use crate::spec::{EngineError, ExecutionSpec};
use crate::NodeId;
use simtime::VirtualTime;

/// `node`'s configuration for its first boot.
pub(super) fn node_config(spec: &ExecutionSpec, node: NodeId, peers: &str, clock: &NodeClock) -> NodeConfig {
    let name = &spec.node_names[node.index()];
    let mut init_env = vec![
        ("NODE_ID".into(), node.number().to_string()),
        ("NODE_NAME".into(), name.clone()),
        ("PEERS".into(), peers.to_string()),
    ];
    if !spec.clients.is_empty() {
        // Every node, for /etc/hosts and the static neighbours; a cluster
        // without clients boots with the environment it always had.
        init_env.push(("NODES".into(), spec.node_names.join(",")));
    }
    if let Some(ppm) = clock.drift_ppm {
        // `/init` sets it before anything else runs (see `faults`).
        init_env.push((DRIFT_ENV.into(), ppm.to_string()));
    }
    NodeConfig {
        kernel: spec.kernel.clone(),
        initrd: spec.initrd.clone(),
        mem_mb: spec.mem_mb,
        node_id: node,
        run_dir: spec.scratch.join(name),
        init_env,
        extra_args: if spec.runtime == RuntimeKind::Uml { spec.uml_args.clone() } else { vec![] },
        net: spec.network.is_some(),
        // Node::boot sets it for each boot (see `entropy_seed`).
        entropy_seed: entropy_seed(spec.stream_seed(), node, 0),
        read_faults: disksim::ReadFaults {
            corrupt_read: spec.disk.as_ref().map_or(0.0, |d| d.faults.corrupt_read),
            // Node::boot sets it for each boot (see `read_fault_seed`).
            seed: read_fault_seed(spec.stream_seed(), node, 0),
        },
        shared_clock: spec.shared_clock,
        root_disk: spec.root_disk.clone(),
        kernel_faults_cpuid: spec.kernel_faults_cpuid,
    }
}

/// Spawns every node (not yet connected); notes the first spawn's time.
pub(super) fn boot_nodes(spec: &ExecutionSpec, first_spawn: &mut Option<Instant>) -> Result<Vec<Node>, EngineError> {
    // The servers: every node but the client-only ones.
    let servers: Vec<&str> = spec
        .node_names
        .iter()
        .zip(NodeId::first(spec.node_names.len()))
        .filter(|&(_, node)| !spec.clients.contains(&node))
        .map(|(n, _)| n.as_str())
        .collect();
    let peers = servers.join(",");
    // Clock hardware is set at boot: in warm-start mode the boot seed's.
    let clocks = faults::node_clocks(&spec.explore.clock, spec.node_names.len(), spec.stream_seed());
    let mut nodes = Vec::new();
    for (node, name) in NodeId::first(spec.node_names.len()).zip(&spec.node_names) {
        let i = node.index();
        let cfg = node_config(spec, node, &peers, &clocks[i]);
        let disk = spec.disk.as_ref().map(|d| disksim::Disk::new(d.base.clone()));
        let mut n = Node::new(name.clone(), cfg, spec.runtime, spec.scratch.clone(), disk, clocks[i]);
        first_spawn.get_or_insert_with(Instant::now);
        n.boot(spec.stream_seed())?;
        nodes.push(n);
    }
    Ok(nodes)
}

/// The host-side client of `spec`'s host workload, drawing from `seed`, its
/// clock starting at `now`; `None` without one (or without a network).
pub(super) fn host_endpoint(spec: &ExecutionSpec, seed: u64, now: VirtualTime) -> Option<host::HostEndpoint> {
    match (&spec.host_workload, &spec.network) {
        (Some(w), Some(_)) => host::HostEndpoint::new(spec.node_names.len() as u16, w.clone(), seed, now),
        _ => None,
    }
}

/// The simulated network (with the host client's node, if any: in
/// warm-start mode before the client itself exists).
pub(super) fn network(spec: &ExecutionSpec) -> Result<Option<network::NetState>, EngineError> {
    let Some(n) = &spec.network else { return Ok(None) };
    let guests = spec.node_names.len() as u16;
    let host = spec.host_workload.as_ref().and_then(|_| host::client_node(guests));
    network::NetState::new(
        n,
        guests + u16::from(host.is_some()),
        host,
        spec.stream_seed(),
        spec.time_limit,
        // In warm-start mode random partitions start with the execution's
        // own seed, when the boot ends.
        spec.explore.faults_after.is_some() || spec.boot_seed.is_some(),
        spec.explore.roles.partition.clone(),
    )
    .map(|mut ns| {
        // Connection faults need netsim to follow the TCP connections.
        if spec.explore.connection.on() {
            ns.net.track_connections();
        }
        Some(ns)
    })
    .map_err(|source| EngineError::Scratch { path: spec.scratch.clone(), source })
}
