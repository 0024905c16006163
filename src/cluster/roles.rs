//! `[roles]`: a role probe on every node, and the faults that target a role
//! (`[faults.crash] target`, `[faults.pause] target`, `[faults.clock]
//! target`, `[faults] partition_target`; `[[faults.partition]] isolate` is
//! checked with the partitions). See `engine::RoleSpec` for what each does.

use engine::RoleSpec;
use serde::Deserialize;

use super::checks::poll_every;
use super::{ClusterFile, Invalid, KeyPath};

/// `[roles]`: what each node says it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolesSection {
    /// Shell command run on every node over and over (from its boot, and
    /// again after each restart); the first word it prints is the node's
    /// role (`leader`, `primary`, `follower`, ...; nothing printed: `none`).
    pub probe: String,
    /// How often (virtual) it runs (default "1s", at least 1ms).
    pub every: Option<String>,
}

/// The role probe's guest script (`/sim/cmd/role-probe`), if `[roles]` is
/// set: it starts the probe's loop in the background and exits. The loop
/// runs the command every `every`, and says `@sim role WORD` on the agent's
/// control line (fd 3, which the agent's runner hands down) when the first
/// word changes. Errors of the command are dropped; its status is ignored
/// (a probe that cannot reach its server prints nothing: `none`).
pub(super) fn role_probe(section: Option<&RolesSection>) -> Result<Option<String>, Invalid> {
    let Some(r) = section else { return Ok(None) };
    let at = KeyPath::table("roles");
    if r.probe.trim().is_empty() {
        return Err(at.key("probe").invalid(" is empty: give the shell command that prints a node's role"));
    }
    let every = poll_every(&at.key("every"), r.every.as_deref())?;
    Ok(Some(format!(
        "set -f\n\
         ( last=\n\
         \x20 while :; do\n\
         \x20   r=$( {{ {command}\n }} 2>/dev/null </dev/null )\n\
         \x20   set -- $r\n\
         \x20   r=${{1:-none}}\n\
         \x20   if [ \"$r\" != \"$last\" ]; then\n\
         \x20     {{ echo \"@sim role $r\" >&3; }} 2>/dev/null || echo \"@sim role $r\" >/dev/hvc0\n\
         \x20     last=$r\n\
         \x20   fi\n\
         \x20   sleep {every_s}\n\
         \x20 done ) </dev/null >/dev/null 2>&1 &\n",
        command = r.probe,
        every_s = every as f64 / 1e9,
    )))
}

/// A role a fault targets, the value at `at`: one word of printable ASCII,
/// and there must be a probe to report it.
fn target(at: KeyPath, value: &Option<String>, probe: bool) -> Result<Option<String>, Invalid> {
    let Some(role) = value else { return Ok(None) };
    if !engine::valid_role(role) {
        return Err(at.invalid(format!(
            " = {role:?}: a role is one word of printable ASCII (at most 64 bytes), as the role probe prints it"
        )));
    }
    if !probe {
        return Err(at.invalid(format!(
            " = {role:?} targets a role, but no node reports one: add a [roles] table with probe = \"...\" (a \
             command that prints the node's role)"
        )));
    }
    Ok(Some(role.clone()))
}

/// `[roles]` and every target, checked.
pub(super) fn role_spec(spec: &ClusterFile) -> Result<RoleSpec, Invalid> {
    let probe = spec.roles.is_some();
    let f = &spec.faults;
    let partition = target(KeyPath::table("faults").key("partition_target"), &f.partition_target, probe)?;
    if let (Some(role), false) = (&partition, f.network.partitions) {
        return Err(KeyPath::table("faults").key("partition_target").invalid(format!(
            " = {role:?}: there are no random partitions to target (set [faults.network] partitions = true; a \
             partition at a fixed time takes isolate = {role:?})"
        )));
    }
    for (k, p) in f.partition.iter().enumerate() {
        target(KeyPath::array("faults.partition").nth(k).key("isolate"), &p.isolate, probe)?;
    }
    Ok(RoleSpec {
        probe,
        crash: target(KeyPath::table("faults.crash").key("target"), &f.crash.target, probe)?,
        pause: target(KeyPath::table("faults.pause").key("target"), &f.pause.target, probe)?,
        clock: target(KeyPath::table("faults.clock").key("target"), &f.clock.target, probe)?,
        partition,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Cluster, ClusterError};

    /// A three-node cluster with `extra` from line 8 on.
    fn parse(extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[cluster]\nnodes = 3\n[node]\nstart = \"sleep 100\"\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n{extra}"
        );
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    const ROLES: &str = "[roles]\nprobe = \"cat /run/role\"\nevery = \"250ms\"\n";

    #[test]
    fn roles_and_targets_parse() {
        let c = parse("").unwrap();
        assert_eq!(c.explore.roles, engine::RoleSpec::default());
        assert!(c.role_probe.is_none());
        let c = parse(&format!(
            "{ROLES}[faults.crash]\nmax = 1\ntarget = \"leader\"\n[faults.pause]\nmax = 1\ntarget = \"primary\"\n\
             [faults.clock]\nbump = \"1s\"\ntarget = \"leader\"\n[faults.network]\npartitions = true\n\
             [faults]\npartition_target = \"leader\"\n[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\nisolate = \"leader\"\n"
        ))
        .unwrap();
        let r = &c.explore.roles;
        assert!(r.probe && r.targets());
        assert_eq!(
            (r.crash.as_deref(), r.pause.as_deref(), r.clock.as_deref(), r.partition.as_deref()),
            (Some("leader"), Some("primary"), Some("leader"), Some("leader"))
        );
        let script = c.role_probe.as_deref().unwrap();
        assert!(script.contains("cat /run/role") && script.contains("sleep 0.25") && script.contains("@sim role"));
        assert_eq!(c.partitions[0].role.as_deref(), Some("leader"));
        assert_eq!(c.partitions[0].partition, engine::Partition::isolate(engine::NodeId::at(0)));
        // A probe alone: roles in the trace, no fault targeted.
        let c = parse(ROLES).unwrap();
        assert!(c.explore.roles.probe && !c.explore.roles.targets());
    }

    #[test]
    fn bad_roles_name_file_line_and_key() {
        for (extra, line, needles) in [
            ("[roles]\nprobe = \" \"\n", 9, &["[roles] probe is empty"][..]),
            ("[roles]\nprobe = \"x\"\nevery = \"0s\"\n", 10, &["[roles] every = \"0s\"", "at least 1ms"]),
            ("[roles]\nprobe = \"x\"\nlead = 1\n", 10, &["lead"]),
            (
                "[faults.crash]\nmax = 1\ntarget = \"leader\"\n",
                10,
                &["[faults.crash] target = \"leader\" targets a role", "[roles]"],
            ),
            (
                "[roles]\nprobe = \"x\"\n[faults.crash]\nmax = 1\ntarget = \"the leader\"\n",
                12,
                &["[faults.crash] target = \"the leader\": a role is one word"],
            ),
            ("[roles]\nprobe = \"x\"\n[faults.pause]\ntarget = \"\"\n", 11, &["[faults.pause] target = \"\""]),
            ("[faults.clock]\nbump = \"1s\"\ntarget = \"leader\"\n", 10, &["[faults.clock] target", "[roles]"]),
            (
                "[roles]\nprobe = \"x\"\n[faults]\npartition_target = \"leader\"\n",
                11,
                &["[faults] partition_target = \"leader\": there are no random partitions"],
            ),
            (
                "[roles]\nprobe = \"x\"\n[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\nisolate = \"leader\"\ngroups = [[\"n1\"]]\n",
                13,
                &["[[faults.partition]] #1: isolate", "give it alone"],
            ),
            (
                "[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\nisolate = \"leader\"\n",
                11,
                &["isolate = \"leader\" targets a role"],
            ),
        ] {
            let e = parse(extra).unwrap_err();
            let e = e.to_string();
            assert!(e.contains("cluster.toml"), "{extra}: {e}");
            assert!(e.contains(&format!("line {line}")), "{extra}: {e}");
            for n in needles {
                assert!(e.contains(n), "{extra}: {e} lacks {n}");
            }
        }
    }
}
