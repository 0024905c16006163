//! Host CPU time of a run.

/// Host CPU time (getrusage), in seconds.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct HostCpu {
    /// simcluster's own threads: the engine, its devices, the controller.
    pub simcluster_user: f64,
    /// The same threads' time in the host kernel on their behalf.
    pub simcluster_system: f64,
    /// The node processes (guest kernels and the host processes behind
    /// guest programs) that have ended and been reaped.
    pub guests_user: f64,
    /// The same processes' time in the host kernel.
    pub guests_system: f64,
    /// simcluster's share of all of it.
    pub simcluster_share: f64,
    /// The CPU the first (or only) job and its nodes ran on (`--pin`);
    /// null: spread.
    pub pinned_cpu: Option<usize>,
    /// The CPU of each job (`--jobs`), in job order; empty: spread.
    #[serde(default)]
    pub pinned_cpus: Vec<usize>,
}

impl HostCpu {
    /// This process's CPU time so far, and that of its reaped children
    /// (`getrusage` of self and of children); not pinned.
    pub fn now() -> HostCpu {
        fn usage(who: libc::c_int) -> (f64, f64) {
            // SAFETY: getrusage fills the zeroed struct we pass.
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::getrusage(who, &mut u) };
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            (secs(u.ru_utime), secs(u.ru_stime))
        }
        let (su, ss) = usage(libc::RUSAGE_SELF);
        let (gu, gs) = usage(libc::RUSAGE_CHILDREN);
        HostCpu {
            simcluster_user: su,
            simcluster_system: ss,
            guests_user: gu,
            guests_system: gs,
            simcluster_share: (su + ss) / (su + ss + gu + gs).max(1e-9),
            pinned_cpu: None,
            pinned_cpus: Vec::new(),
        }
    }

    /// The CPU time of several runs (shards) together; pinning is each
    /// shard's own, so it is not kept.
    pub fn sum<'a>(all: impl Iterator<Item = &'a HostCpu>) -> HostCpu {
        let mut t = HostCpu::default();
        let mut n = 0;
        for h in all {
            n += 1;
            t.simcluster_user += h.simcluster_user;
            t.simcluster_system += h.simcluster_system;
            t.guests_user += h.guests_user;
            t.guests_system += h.guests_system;
            if n == 1 {
                t.pinned_cpu = h.pinned_cpu;
                t.pinned_cpus = h.pinned_cpus.clone();
            } else {
                t.pinned_cpu = None;
                t.pinned_cpus.clear();
            }
        }
        let own = t.simcluster_user + t.simcluster_system;
        t.simcluster_share = own / (own + t.guests_user + t.guests_system).max(1e-9);
        t
    }
}
