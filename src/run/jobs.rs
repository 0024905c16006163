//! How many executions a run keeps side by side by default (`--jobs`).
//!
//! An execution is one busy host CPU at a time (the engine lets one node
//! run, and waits while it runs), so a run scales with cores until memory
//! runs out: each execution's nodes hold their guest memory. The default
//! is the number of CPUs this process may use, capped so that every job's
//! nodes fit in the memory the host has available.

use crate::cluster::Cluster;

/// Host memory one node of `cluster` may use: its guest memory, plus
/// what the host keeps per node beside it (page tables, the node's
/// kernel and helper processes; measured at 20-40 MiB here).
pub fn node_mib(cluster: &Cluster) -> u64 {
    u64::from(cluster.spec.cluster.memory_mb) + 48
}

/// `--jobs` by default: one per CPU this process may use, at most as many
/// as fit in MemAvailable (each job: every node at [`node_mib`]), at
/// least one.
pub fn default_jobs(cluster: &Cluster) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_job = node_mib(cluster) * cluster.node_count() as u64;
    match mem_available_mib() {
        Some(m) => cpus.min(usize::try_from(m / per_job.max(1)).unwrap_or(usize::MAX)).max(1),
        None => cpus,
    }
}

/// MemAvailable from /proc/meminfo, in MiB.
fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_host_reports_its_available_memory() {
        let m = super::mem_available_mib().expect("/proc/meminfo has MemAvailable");
        assert!(m > 0);
    }
}
