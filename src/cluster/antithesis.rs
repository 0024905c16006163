//! `[antithesis]`: an Antithesis setup, unchanged. The SDKs' JSON lines
//! become properties (`engine::sdk`, `checker::antithesis`), their
//! `setup_complete` starts the workload, and with `test_composer` the
//! workload is Antithesis's Test Composer over the templates under
//! `/opt/antithesis/test/v1/` in the `[workload] node`'s filesystem.

use serde::Deserialize;

use super::values::parse_duration_ns;
use super::{Invalid, KeyPath};

/// `[antithesis]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AntithesisSection {
    /// The SDKs' output is read (default true): every node gets
    /// `ANTITHESIS_SDK_LOCAL_OUTPUT`, and assertions are properties.
    pub sdk: Option<bool>,
    /// The workload waits for `setup_complete` (default true).
    pub setup_complete: Option<bool>,
    /// The workload is Test Composer on `[workload] node` (default false).
    pub test_composer: Option<bool>,
    /// The test template to run (default: one picked per execution).
    pub template: Option<String>,
    /// How long drivers are started (default 10 s of virtual time).
    pub drive_for: Option<String>,
}

/// `[antithesis] drive_for`'s default.
const DRIVE_FOR_NS: u64 = 10_000_000_000;

/// The invariant that runs the `eventually_` and `finally_` commands
/// after the workload (Test Composer's drivers), faults stopped.
pub const COMPOSER_END: &str = "test-composer-end";

/// The name the runner prints (`@reached`) when its drivers start: faults
/// begin then (`[faults] start_after`), after `first_`.
pub const COMPOSER_DRIVERS: &str = "test-composer-drivers";

/// Test Composer, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composer {
    /// `[antithesis] template`, if given.
    pub template: Option<String>,
    /// The driving phase, ns of virtual time.
    pub drive_for_ns: u64,
}

impl AntithesisSection {
    /// The engine's part.
    pub(super) fn spec(&self) -> engine::AntithesisSpec {
        // Without the SDK's lines there is no setup_complete to wait for.
        let sdk = self.sdk.unwrap_or(true);
        engine::AntithesisSpec { sdk, await_setup: sdk && self.setup_complete.unwrap_or(true) }
    }

    /// Test Composer's settings, if it is on.
    pub(super) fn composer(&self) -> Result<Option<Composer>, Invalid> {
        let at = KeyPath::table("antithesis");
        if !self.test_composer.unwrap_or(false) {
            for (key, set) in [("template", self.template.is_some()), ("drive_for", self.drive_for.is_some())] {
                if set {
                    return Err(at.key(key).invalid(" is set without [antithesis] test_composer = true"));
                }
            }
            return Ok(None);
        }
        if let Some(t) = &self.template {
            if t.is_empty() || t.contains('/') || t.starts_with('.') {
                return Err(at
                    .key("template")
                    .invalid(format!(" = {t:?}: a template is a directory name under /opt/antithesis/test/v1/")));
            }
        }
        let drive_for_ns = match &self.drive_for {
            None => DRIVE_FOR_NS,
            Some(d) => parse_duration_ns(d)
                .filter(|ns| *ns > 0)
                .ok_or_else(|| at.key("drive_for").invalid(format!(" = {d:?}: give a duration above 0 (\"10s\")")))?,
        };
        Ok(Some(Composer { template: self.template.clone(), drive_for_ns }))
    }
}

/// The runner, `/sim/test-composer drive` (the workload) and `... end`
/// (the check after it). Placeholders: `@TEMPLATE@`, `@DRIVE_CS@`.
///
/// Rules, after Antithesis's Test Composer reference:
/// - one template per execution: `[antithesis] template`, else one picked
///   with the guest's own randomness (the same in every replay);
/// - `first_`: if the template has any, one (picked the same way) runs to
///   completion before anything else, with no fault; non-zero fails;
/// - the drivers, then faults begin: with `singleton_driver_` commands
///   (and, when the template has other drivers too, one time in two), one
///   singleton runs alone; otherwise until `drive_for` has passed, the
///   runner starts `parallel_driver_` commands (in the background, up to
///   four at once, copies of one included) and `serial_driver_` commands
///   (alone: once the running drivers end); `anytime_` commands start
///   alongside; then every command started runs to its end;
/// - faults stop (the quiet period), and every `eventually_` then every
///   `finally_` command runs, one after another, in name order;
/// - every command's output goes to the node's console, and the runner
///   prints `test-composer: NAME exited STATUS`; a command with a
///   non-zero status fails the execution (the workload or
///   `test-composer-end`, with the first such status).
pub const RUNNER: &str = r#"# simcluster Test Composer (generated; do not edit).
BB=/sim/busybox
ROOT=/opt/antithesis/test/v1
TEMPLATE=@TEMPLATE@
DRIVE_CS=@DRIVE_CS@
STATE=/run/test-composer
$BB mkdir -p $STATE
now_cs() { read up _ </proc/uptime; echo $(( ${up%.*} * 100 + 1${up#*.} - 100 )); }
# 0..$1-1, from the guest's randomness (deterministic under simcluster).
rand() { n=$($BB od -An -N4 -tu4 /dev/urandom | $BB tr -d ' '); echo $(( n % $1 )); }
# The $1-th (0-based) of the remaining arguments.
nth() { i=$1; shift; shift "$i"; echo "$1"; }
# The executable commands of template dir $1 with prefix $2, in name order.
commands() { for f in "$1"/"$2"*; do [ -f "$f" ] && [ -x "$f" ] && echo "$f"; done; }
template() {
  if [ -f $STATE/template ]; then cat $STATE/template; return; fi
  if [ -n "$TEMPLATE" ]; then t=$ROOT/$TEMPLATE
  else
    set -- $(for d in $ROOT/*; do [ -d "$d" ] && echo "$d"; done)
    [ $# -gt 0 ] || { echo "test-composer: no template under $ROOT" >&2; exit 2; }
    t=$(nth $(rand $#) "$@")
  fi
  [ -d "$t" ] || { echo "test-composer: no template $t" >&2; exit 2; }
  echo "$t" | tee $STATE/template
}
# Runs $1 in the foreground and notes a failure.
run() {
  name=${1##*/}
  echo "test-composer: start $name"
  "$1" </dev/null; s=$?
  echo "test-composer: $name exited $s"
  [ $s = 0 ] || echo "$s $name" >>$STATE/failed
  return 0
}
# Starts $1 in the background; live counts those still running.
pids=
spawn() { run "$1" & pids="$pids $!"; }
live() { n=0; for p in $pids; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done; echo $n; }
result() {
  [ -s $STATE/failed ] || exit 0
  read -r s name <$STATE/failed
  echo "test-composer: failed: $name exited $s" >&2
  exit "$s"
}
drive() {
  : >$STATE/failed
  t=$(template) || exit 2
  echo "test-composer: template ${t##*/}"
  set -- $(commands "$t" first_)
  [ $# -gt 0 ] && run "$(nth $(rand $#) "$@")"
  [ -s $STATE/failed ] && result
  parallel=$(commands "$t" parallel_driver_); serial=$(commands "$t" serial_driver_)
  singleton=$(commands "$t" singleton_driver_); anytime=$(commands "$t" anytime_)
  echo "@reached test-composer-drivers"
  end=$(( $(now_cs) + DRIVE_CS ))
  if [ -n "$singleton" ] && { [ -z "$parallel$serial" ] || [ "$(rand 2)" = 0 ]; }; then
    for a in $anytime; do spawn "$a"; done
    set -- $singleton; run "$(nth $(rand $#) "$@")"
    wait; result
  fi
  if [ -z "$parallel$serial$anytime" ]; then
    echo "test-composer: template ${t##*/} has no driver or anytime command" >&2; exit 2
  fi
  while [ "$(now_cs)" -lt "$end" ]; do
    set -- $parallel $serial $anytime
    c=$(nth $(rand $#) "$@")
    case "${c##*/}" in
      serial_driver_*) wait; run "$c" ;;
      *) [ "$(live)" -lt 4 ] && spawn "$c" ;;
    esac
    $BB sleep "0.$(( $(rand 9) + 1 ))"
  done
  wait
  result
}
finish() {
  : >$STATE/failed
  t=$(template) || exit 2
  for c in $(commands "$t" eventually_) $(commands "$t" finally_); do run "$c"; done
  result
}
case "$1" in
  drive) drive ;;
  end) finish ;;
  *) echo "usage: test-composer drive|end" >&2; exit 2 ;;
esac
"#;

/// The runner for `composer`.
pub fn runner(composer: &Composer) -> String {
    RUNNER
        .replace("@TEMPLATE@", &compose::shell_quote(composer.template.as_deref().unwrap_or("")))
        .replace("@DRIVE_CS@", &(composer.drive_for_ns / 10_000_000).max(1).to_string())
}

/// The workload with Test Composer.
pub const DRIVE_COMMAND: &str = "/sim/busybox sh /sim/test-composer drive";

/// [`COMPOSER_END`]'s command.
pub const END_COMMAND: &str = "/sim/busybox sh /sim/test-composer end";

/// `[antithesis] test_composer`, checked; when on, the workload's command
/// becomes the runner's (`[workload] command` must be left out).
pub(super) fn composer(spec: &mut super::ClusterFile) -> Result<Option<Composer>, Invalid> {
    let Some(composer) = spec.antithesis.as_ref().map(AntithesisSection::composer).transpose()?.flatten() else {
        return Ok(None);
    };
    let workload = KeyPath::table("workload");
    if spec.workload.host.is_some() {
        return Err(workload.invalid(
            ": [workload.host] and [antithesis] test_composer exclude each other (Test Composer runs its commands \
             on [workload] node)",
        ));
    }
    if !spec.workload.command.is_empty() {
        return Err(workload.key("command").invalid(
            " is set with [antithesis] test_composer = true: the workload is Test Composer on [workload] node; \
             leave command out",
        ));
    }
    if spec.invariants.iter().any(|i| i.name.as_deref() == Some(COMPOSER_END)) {
        return Err(KeyPath::array("invariant").key("name").invalid(format!(
            " {COMPOSER_END:?} is Test Composer's own check ([antithesis] test_composer); pick another name"
        )));
    }
    spec.workload.command = DRIVE_COMMAND.to_string();
    Ok(Some(composer))
}

/// `[antithesis]`'s part of the exploration: SDK lines and setup for the
/// engine; with Test Composer, faults begin with the drivers (unless
/// `[faults] start_after` says otherwise) and stop before `eventually_`
/// (the quiet period, of 0 s unless `[faults] quiet_after` gives one).
pub(super) fn explore(spec: &super::ClusterFile, composer: bool, explore: &mut engine::ExploreSpec) {
    let Some(a) = &spec.antithesis else { return };
    explore.antithesis = a.spec();
    if composer {
        explore.faults_after.get_or_insert_with(|| COMPOSER_DRIVERS.to_string());
        explore.quiet_settle.get_or_insert(std::time::Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Cluster;
    use super::*;

    fn parse(extra: &str, workload: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 2\n[workload]\nnode = \"n2\"\n{workload}{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap()
    }

    #[test]
    fn without_the_table_nothing_changes() {
        let c = parse("", "command = \"true\"\n");
        assert_eq!(c.explore.antithesis, engine::AntithesisSpec::default());
        assert!(c.composer.is_none() && c.explore.faults_after.is_none() && c.explore.quiet_settle.is_none());
    }

    #[test]
    fn an_empty_table_reads_the_sdk_and_waits_for_setup() {
        let c = parse("[antithesis]\n", "command = \"true\"\n");
        assert_eq!(c.explore.antithesis, engine::AntithesisSpec { sdk: true, await_setup: true });
        assert!(c.composer.is_none() && c.invariants.is_empty());
        let c = parse("[antithesis]\nsdk = false\n", "command = \"true\"\n");
        assert_eq!(c.explore.antithesis, engine::AntithesisSpec { sdk: false, await_setup: false });
    }

    #[test]
    fn test_composer_is_the_workload_and_a_check_after_a_quiet_period() {
        let c = parse("[antithesis]\ntest_composer = true\ntemplate = \"it's\"\ndrive_for = \"1500ms\"\n", "");
        assert_eq!(c.spec.workload.command, DRIVE_COMMAND);
        assert_eq!(c.invariants, vec![(COMPOSER_END.to_string(), 1, END_COMMAND.to_string())]);
        assert_eq!(c.explore.faults_after.as_deref(), Some(COMPOSER_DRIVERS));
        assert_eq!(c.explore.quiet_settle, Some(std::time::Duration::ZERO));
        let composer = c.composer.unwrap();
        assert_eq!(composer, Composer { template: Some("it's".into()), drive_for_ns: 1_500_000_000 });
        let script = runner(&composer);
        assert!(script.contains("TEMPLATE='it'\\''s'\nDRIVE_CS=150\n"), "{script}");
        // A start_after of the cluster's own stays.
        let c = parse("[faults]\nstart_after = \"mine\"\n[antithesis]\ntest_composer = true\n", "");
        assert_eq!(c.explore.faults_after.as_deref(), Some("mine"));
    }
}
