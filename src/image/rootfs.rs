//! The node root filesystem: Debian packages, the user's files, and
//! simcluster's own init and agent, packed as one initramfs shared by every
//! node (a node learns who it is from its kernel command line).

use std::path::Path;

use anyhow::{Context, Result};

use super::oci::RunConfig;
use crate::cluster::Cluster;
use compose::shell_quote;

/// The boot init, PID 1 of the initramfs: mounts the node's root
/// filesystem, a read-only squashfs image on simcluster's root disk (a
/// virtio-blk device whose serial says so), under an overlay whose upper
/// layer is a tmpfs that takes the node's writes, and hands over to the
/// image's own /init ([`INIT`]). Every node of a run reads the same image
/// and its guest holds only the pages it reads (an initramfs holds all of
/// it, twice while unpacking).
pub const BOOT_INIT: &str = r#"#!/sim/busybox sh
# simcluster boot init (generated; do not edit).
BB=/sim/busybox
$BB mount -t devtmpfs devtmpfs /dev
$BB mount -t sysfs sysfs /sys
root=
for d in /sys/block/vd*; do
  [ "$($BB cat "$d/serial" 2>/dev/null)" = simcluster-root ] && root=/dev/${d##*/}
done
fail() { echo "simcluster boot: $*"; $BB poweroff -f; }
[ -n "$root" ] || fail "no root disk (no virtio-blk device with serial simcluster-root)"
$BB mount -t squashfs -o ro "$root" /lower || fail "cannot mount the root disk $root"
$BB mount -t tmpfs -o mode=0755,size=100% tmpfs /upper || fail "cannot mount the overlay's tmpfs"
$BB mkdir /upper/data /upper/work
$BB mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot \
  || fail "cannot mount the root overlay"
$BB umount /sys
$BB umount /dev
exec $BB switch_root /newroot /init
"#;

/// PID 1 of the root filesystem: mounts the pseudo file systems, sets the node's identity and
/// address, and hands over to the agent. NODE_ID, NODE_NAME and PEERS arrive in the
/// environment from the kernel command line.
pub const INIT: &str = r#"#!/sim/busybox sh
# simcluster node init (generated; do not edit). Every tool it uses is
# simcluster's own static busybox, so a container image needs none.
BB=/sim/busybox
$BB mkdir -p /proc /sys /dev /tmp /run /var/tmp /root /etc
$BB mount -t proc proc /proc
$BB mount -t sysfs sysfs /sys
$BB mount -t devtmpfs devtmpfs /dev
$BB mount -t tmpfs tmpfs /tmp
$BB mount -t tmpfs tmpfs /run
# [faults.clock] drift_ppm: this node's clocks run fast or slow from here on
# (its kernel's NTP tick and frequency; the engine passes the value on the
# kernel command line).
if [ -n "$SIM_CLOCK_DRIFT_PPM" ]; then
  /sim/clock drift "$SIM_CLOCK_DRIFT_PPM" || echo "simcluster: cannot set the clock drift"
fi
unset SIM_CLOCK_DRIFT_PPM
# busybox's applets: always in /sim/bin (last on PATH); in a Debian image
# also in the standard directories, wherever no real program is.
$BB mkdir -p /sim/bin
$BB --install -s /sim/bin 2>/dev/null
if [ ! -f /sim/oci ]; then
  $BB mkdir -p /bin /sbin /usr/bin /usr/sbin
  $BB --install -s 2>/dev/null
fi
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
# A container image's Env (it may set PATH).
[ -f /sim/env ] && . /sim/env
export PATH="$PATH:/sim/bin"
export NODE_ID NODE_NAME PEERS
$BB hostname "$NODE_NAME"
$BB ip link set lo up
# Node N is 10.0.0.N on eth0 (simcluster's virtio-net, MAC 02:00:0a:00:00:N).
echo "127.0.0.1 localhost" > /etc/hosts
i=1
for peer in $(echo "${NODES:-$PEERS}" | $BB tr , ' '); do echo "10.0.0.$i $peer" >> /etc/hosts; i=$((i + 1)); done
# The node after the guests is simcluster's host-side client ([workload.host]).
[ "$i" -le 254 ] && echo "10.0.0.$i host" >> /etc/hosts
if [ -e /sys/class/net/eth0 ]; then
  $BB ip addr add "10.0.0.$NODE_ID/24" dev eth0
  $BB ip link set eth0 up
  # Static neighbours: addresses are fixed, and ARP would make a one-way
  # partition two-way (the reply could not come back).
  i=1
  for peer in $(echo "${NODES:-$PEERS}" | $BB tr , ' '); do
    [ "$i" = "$NODE_ID" ] || $BB arp -i eth0 -s "10.0.0.$i" "02:00:0a:00:00:$($BB printf %02x $i)"
    i=$((i + 1))
  done
  # ... and the host-side client, node N+1 (harmless without one).
  [ "$i" -le 254 ] && $BB arp -i eth0 -s "10.0.0.$i" "02:00:0a:00:00:$($BB printf %02x $i)"
fi
# The data disk ([disk] in cluster.toml), ext4 on simcluster's virtio-blk.
# After a crash ext4 replays its journal here.
# It is the virtio-blk device with serial "simcluster" (/dev/vda: it comes
# before the root disk).
if [ -f /sim/disk-mount ]; then
  m=$($BB cat /sim/disk-mount)
  $BB mkdir -p "$m"
  $BB mount -t ext4 /dev/vda "$m" || echo "simcluster: cannot mount the data disk /dev/vda at $m"
fi
exec $BB sh /sim/agent
"#;

/// The in-guest agent. It talks to the engine over the control line
/// (`/dev/hvc0`, a virtio console whose input arrives as an interrupt at a
/// virtual time the engine picks): `@sim ready`, then for each `run NAME` it
/// runs /sim/cmd/NAME to completion and answers `@sim done NAME STATUS`. If
/// the node's start command ends, it says `@sim done start STATUS`.
///
/// Commands run one after another in the order sent, in a runner of their
/// own (fed through a FIFO), so the read loop stays free while they run:
/// `settle SECONDS` delays the next command only, `pause` and `resume` stop
/// and continue the start command's process group (SIGSTOP, SIGCONT; the
/// start command leads a group of its own, whose id /run/sim-start.pid
/// holds, so neither the agent nor its commands are stopped), and `clock
/// ...` runs the clock helper (`/sim/clock`; a strobe in the background).
///
/// `exec BASE64` (`simcluster replay --exec`, `--shell`) runs a shell
/// command given in base64 at once, beside the runner (whose current
/// command may be the workload), in `/` with no input; it answers its
/// output, stdout and stderr together, in base64 lines (`@sim out ...`,
/// on the control line so the console's own traffic cannot mix in), then
/// `@sim done exec STATUS`.
pub const AGENT: &str = r#"# simcluster agent (generated; do not edit).
BB=/sim/busybox
# Commands run with the image's /bin/sh, or busybox's where it has none.
SH=/bin/sh
[ -x /bin/sh ] || SH=/sim/bin/sh
exec </dev/null >/dev/console 2>&1
while [ ! -e /dev/hvc0 ]; do $BB sleep 0.01; done
exec 3<>/dev/hvc0
$BB stty -F /dev/hvc0 raw -echo
say() { echo "@sim $*" >&3; }
if [ -f /sim/start ]; then
  # setsid execs in place (its caller leads no group): the pid written is
  # the new group's id.
  ( $SH -c 'echo $$ >/run/sim-start.pid; exec /sim/busybox setsid "$0" /sim/start' "$SH" </dev/null >/dev/console 2>&1
    say done start $? ) &
fi
$BB mkfifo /run/sim-cmds
( while read -r delay name; do
    [ "$delay" = 0 ] || $BB sleep "$delay"
    $SH "/sim/cmd/$name" </dev/null; say done "$name" $?
  done </run/sim-cmds ) &
exec 4>/run/sim-cmds
start_group() {
  if read -r pgid 2>/dev/null </run/sim-start.pid && kill -"$1" -"$pgid" 2>/dev/null; then :; else
    echo "simcluster agent: no start command to $2"
  fi
}
settle=0
say ready
while read -r verb arg <&3; do
  case "$verb" in
    run) echo "$settle $arg" >&4; settle=0 ;;
    settle) settle="$arg" ;;
    pause) start_group STOP pause ;;
    resume) start_group CONT resume ;;
    clock) case "$arg" in
        strobe*) /sim/clock $arg & ;;
        *) /sim/clock $arg ;;
      esac ;;
    exec) echo "$arg" | $BB base64 -d >/run/sim-exec
      ( cd / && $SH /run/sim-exec </dev/null >/run/sim-exec.out 2>&1; s=$?
        $BB base64 /run/sim-exec.out | while read -r l; do say out "$l"; done
        say done exec "$s" ) & ;;
    halt) $BB poweroff -f ;;
    *) echo "simcluster agent: unknown command: $verb $arg" ;;
  esac
done
echo "simcluster agent: control line closed"
"#;

/// The agent's verbs for `[faults.kill]`, added before `halt)` only in the
/// agent of a cluster with kills (every other image keeps the agent's bytes
/// as they were): `kill` SIGKILLs the start command's process group, and
/// `start` runs the start command again as at boot.
pub const AGENT_KILL: &str = r#"    kill) start_group KILL kill ;;
    start) if [ -f /sim/start ]; then
        ( $SH -c 'echo $$ >/run/sim-start.pid; exec /sim/busybox setsid "$0" /sim/start' "$SH" </dev/null >/dev/console 2>&1
          say done start $? ) &
      fi ;;
"#;

/// The agent's part for `[antithesis]`, added before the start command
/// only in the agent of such a cluster: every program the agent starts
/// gets `ANTITHESIS_SDK_LOCAL_OUTPUT` (and `ANTITHESIS_OUTPUT_DIR`, its
/// directory), a FIFO the agent reads; each JSON line an SDK writes there
/// goes to the console as `@antithesis LINE` (see `engine::sdk`). Lines
/// up to PIPE_BUF (4096 bytes) from several writers never interleave. awk
/// reads the FIFO in blocks (a shell's `read` takes a system call per
/// byte, about 10 ms of wall time per line on user-mode Linux) and
/// flushes each line; opened read-write, the FIFO never reports its end.
pub const AGENT_SDK: &str = r#"export ANTITHESIS_OUTPUT_DIR=/run/antithesis ANTITHESIS_SDK_LOCAL_OUTPUT=/run/antithesis/sdk.jsonl
$BB mkdir -p /run/antithesis
$BB mkfifo -m 666 /run/antithesis/sdk.jsonl
$BB awk '{ print "@antithesis " $0; fflush() }' 0<>/run/antithesis/sdk.jsonl &
"#;

/// Whether `cluster`'s agent has the [`AGENT_KILL`] verbs.
pub fn agent_kills(cluster: &Cluster) -> bool {
    cluster.spec.faults.kill.max.is_some_and(|m| m > 0)
}

/// The agent script of `cluster`: [`AGENT`], with [`AGENT_KILL`] when it
/// has kills and [`AGENT_SDK`] with `[antithesis]` (its `sdk`).
pub fn agent_script(cluster: &Cluster) -> String {
    let mut agent = AGENT.to_string();
    if agent_kills(cluster) {
        let at = agent.find("    halt)").expect("the agent has a halt verb");
        agent.insert_str(at, AGENT_KILL);
    }
    if cluster.explore.antithesis.sdk {
        let at = agent.find("if [ -f /sim/start ]").expect("the agent starts the start command");
        agent.insert_str(at, AGENT_SDK);
    }
    agent
}

/// Writes init, the agent and the cluster's commands into `root`; `image`
/// is a container image's configuration (its start command, environment
/// and user), if the node is one; `clock_helper` the built `/sim/clock`,
/// if the cluster has clock faults.
pub fn write_agent_files(
    root: &Path,
    cluster: &Cluster,
    image: Option<&RunConfig>,
    clock_helper: Option<&Path>,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let write = |rel: &str, body: &str, mode: u32| -> Result<()> {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap())?;
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    write("init", INIT, 0o755)?;
    write("sim/agent", &agent_script(cluster), 0o644)?;
    if let Some(helper) = clock_helper {
        let dst = root.join("sim/clock");
        std::fs::copy(helper, &dst).with_context(|| format!("copying {} into the image", helper.display()))?;
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755))?;
    }
    let start = match (&cluster.spec.node.start, image) {
        (Some(start), _) => Some(start.clone()),
        (None, Some(config)) => container_start(root, cluster, config)?,
        (None, None) => None,
    };
    if let Some(start) = start {
        write("sim/start", &format!("{start}\n"), 0o644)?;
    }
    if let Some(config) = image {
        write("sim/oci", "", 0o644)?;
        write("sim/env", &config.env_script(), 0o644)?;
    }
    if let Some(d) = &cluster.disk {
        write("sim/disk-mount", &format!("{}\n", d.mount), 0o644)?;
    }
    write("sim/cmd/workload", &format!("{}\n", cluster.spec.workload.command), 0o644)?;
    if let Some(composer) = &cluster.composer {
        write("sim/test-composer", &crate::cluster::test_composer_runner(composer), 0o644)?;
    }
    for (name, _, command) in &cluster.invariants {
        write(&format!("sim/cmd/{name}"), &format!("{command}\n"), 0o644)?;
    }
    for (name, _, script) in &cluster.liveness {
        write(&format!("sim/cmd/{name}"), script, 0o644)?;
    }
    if let Some(script) = &cluster.ready_probe {
        write(&format!("sim/cmd/{}", engine::READY_PROBE), script, 0o644)?;
    }
    if let Some(script) = &cluster.role_probe {
        write(&format!("sim/cmd/{}", engine::ROLE_PROBE), script, 0o644)?;
    }
    for dir in ["proc", "sys", "dev", "tmp", "run", "root", "etc"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    Ok(())
}

/// A container image's start command: Entrypoint and Cmd in WorkingDir, as
/// its User (through busybox's su) when that is not root.
fn container_start(root: &Path, cluster: &Cluster, config: &RunConfig) -> Result<Option<String>> {
    let Some(command) = config.start_command() else { return Ok(None) };
    let Some(user) = config.non_root_user() else { return Ok(Some(command)) };
    let Some(name) = super::oci::account(root, user) else {
        return Err(crate::BadInput(format!(
            "{}: the container image runs as User {user:?}, which its /etc/passwd does not list",
            cluster.file.display()
        ))
        .into());
    };
    let inner = format!("[ -f /sim/env ] && . /sim/env; {command}");
    Ok(Some(format!("exec /sim/busybox su -s /sim/bin/sh {} -c {}", shell_quote(&name), shell_quote(&inner))))
}

/// The program a shell command line starts, if it names one by absolute
/// path (leading `VAR=value` assignments skipped).
fn program_of(command: &str) -> Option<&str> {
    command
        .split_whitespace()
        .find(|w| !w.contains('=') || w.starts_with('/'))
        .filter(|w| w.starts_with('/'))
        .map(|w| w.trim_end_matches(';'))
}

/// Writes the initramfs tree into `boot`: [`BOOT_INIT`], the busybox it
/// runs (a copy of `busybox`) and the mount points it uses.
pub fn write_boot_files(boot: &Path, busybox: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for dir in ["dev", "sys", "lower", "upper", "newroot", "sim"] {
        std::fs::create_dir_all(boot.join(dir))?;
    }
    let init = boot.join("init");
    std::fs::write(&init, BOOT_INIT).with_context(|| format!("writing {}", init.display()))?;
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))?;
    std::fs::copy(busybox, boot.join("sim/busybox")).with_context(|| format!("copying {}", busybox.display()))?;
    Ok(())
}

/// Every command that starts a program by absolute path must find it in the
/// image (or among busybox's applets, linked at boot): a typo there would
/// otherwise only show at run time as "not found" on a guest console.
pub fn check_commands(root: &Path, cluster: &Cluster) -> Result<()> {
    let oci = root.join("sim/oci").exists();
    let applets = std::process::Command::new(root.join("sim/busybox"))
        .arg("--list")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut commands: Vec<(String, &str)> = Vec::new();
    if let Some(s) = &cluster.spec.node.start {
        commands.push(("[node] start".into(), s));
    }
    commands.push(("[workload] command".into(), &cluster.spec.workload.command));
    for (name, _, c) in &cluster.invariants {
        commands.push((format!("[[invariant]] {name}"), c));
    }
    for l in &cluster.spec.liveness {
        commands.push((format!("[[liveness]] {}", l.name), &l.command));
    }
    if let Some(r) = &cluster.spec.node.ready {
        commands.push(("[node] ready".into(), r));
    }
    if let Some(r) = &cluster.spec.roles {
        commands.push(("[roles] probe".into(), &r.probe));
    }
    for (what, command) in commands {
        let Some(prog) = program_of(command) else { continue };
        let in_image = root.join(prog.trim_start_matches('/'));
        let exists = std::fs::symlink_metadata(&in_image).is_ok();
        let base = prog.rsplit('/').next().unwrap_or(prog);
        let dirs: &[&str] =
            if oci { &["/sim/bin/"] } else { &["/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/sim/bin/"] };
        let applet = dirs.iter().any(|d| prog == format!("{d}{base}")) && applets.lines().any(|a| a.trim() == base);
        if !exists && !applet {
            return Err(crate::BadInput(format!(
                "{}: {what}: {prog} does not exist in the image (add it under [image] files, or the Debian package that ships it under [image] packages)",
                cluster.file.display()
            ))
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::program_of;

    #[test]
    fn finds_the_program_of_a_command() {
        assert_eq!(program_of("/usr/local/bin/app --flag"), Some("/usr/local/bin/app"));
        assert_eq!(program_of("FOO=1 /bin/app"), Some("/bin/app"));
        assert_eq!(program_of("sleep 60; echo done"), None);
        assert_eq!(program_of("/bin/true;"), Some("/bin/true"));
    }
}
