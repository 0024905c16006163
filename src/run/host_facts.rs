//! The host a run or replay runs on: its facts for the records (the JSON
//! line's `host`, shard.json, failure files), and what guest programs see
//! of its CPUID, said once at the start or refused (`[cluster] cpuid =
//! "strict"`).

use std::path::PathBuf;

use engine::{HostFacts, RuntimeKind};

use crate::cluster::{Cluster, CpuidMode};

/// The host cannot give guests what the cluster asks for. Not bad input:
/// the same cluster runs on another host (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `[cluster] cpuid = "strict"` on a host that cannot fault CPUID.
    #[error(
        "{}: [cluster] cpuid = \"strict\": this host has no CPUID faulting ({what}), so guest programs would see \
         the host's CPUID; run it on a host whose cpu (and hypervisor) lets a process fault CPUID \
         (arch_prctl ARCH_SET_CPUID), or set cpuid = \"virtual\" to run here with native CPUID",
        cluster.display()
    )]
    NoCpuidFaulting {
        /// The file the cluster was read from (its cluster.toml, or its
        /// compose file), where `cpuid = "strict"` is written.
        cluster: PathBuf,
        /// The host: cpu vendor and model, and whether faulting was forced
        /// off by the environment.
        what: String,
    },
}

/// The file `[cluster] cpuid` came from: a compose cluster's settings are
/// in a cluster.toml beside its compose file when there is one, else in
/// the compose file's `x-simcluster` block; a plain cluster's in its
/// cluster.toml.
fn cpuid_source(cluster: &Cluster) -> std::path::PathBuf {
    let beside = cluster.dir.join("cluster.toml");
    if beside.is_file() {
        beside
    } else {
        cluster.file.clone()
    }
}

/// This host's facts for `cluster`'s nodes under `runtime`. Where the
/// cluster asks for virtual CPUID under user-mode Linux and the host
/// cannot fault CPUID, guest programs see the host's: a strict cluster is
/// refused, any other is told so once on stderr (even with --quiet: it
/// bears on what the trace means, not on progress).
pub fn host_facts(cluster: &Cluster, runtime: RuntimeKind) -> Result<HostFacts, HostError> {
    let mode = cluster.spec.cluster.cpuid;
    let facts = HostFacts::probe(runtime, mode.virtualised());
    if runtime != RuntimeKind::Uml || !mode.virtualised() || facts.cpuid_faulting {
        return Ok(facts);
    }
    let what = describe(&facts);
    if mode == CpuidMode::Strict {
        return Err(HostError::NoCpuidFaulting { cluster: cpuid_source(cluster), what });
    }
    eprintln!(
        "note: this host cannot fault CPUID ({what}): guest programs see the host's CPUID; a program that reads it \
         may run differently on another kind of host ([cluster] cpuid = \"strict\" refuses to run here)"
    );
    Ok(facts)
}

/// "AuthenticAMD, AMD EPYC", and why faulting is off where it was forced.
fn describe(facts: &HostFacts) -> String {
    let mut s = facts.cpu_vendor.clone();
    if !facts.cpu_model.is_empty() {
        s.push_str(", ");
        s.push_str(&facts.cpu_model);
    }
    if facts.cpuid_faulting_forced_off {
        s.push_str(&format!("; forced off by {}=1", engine::NO_CPUID_FAULTING_ENV));
    }
    s
}
