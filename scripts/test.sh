#!/usr/bin/env bash
# Runs the tests: the README's test command, and what .ci/run runs.
#
#   scripts/test.sh            the short tier: one of every kind of check (CI;
#                              the aim is 30 minutes from cold on 2 cores, and
#                              README "The two commands" says what it takes)
#   scripts/test.sh --full     everything there is (over two hours): every test,
#                              five runs per cluster in the nested L1, db-cluster
#                              on KVM, the whole gallery table
#   scripts/test.sh --slice K  slice K of the full tier alone (`--list-slices`
#                              lists the slices and their checks)
#   scripts/test.sh --with-slice K
#                              the short tier plus slice K: what .ci/run runs,
#                              K from the commit, so that every check of the full
#                              tier runs at least once every N landings
#   scripts/test.sh --checks "CHECK ..."
#                              the named full-tier checks alone (a slice's words)
#
# The full tier in slices: each slice is a list of checks, each a task of
# the queue below (both lanes take them):
#   full:TARGET      a test target in the full tier (SIMCLUSTER_TEST_TIER=full,
#                    its #[ignore]d tests too); `units`: every crate's unit tests
#   det:MODE         db-cluster five times in userspace mode MODE, the last
#                    run without lookahead, one trace hash
#   bug:CASE:STRATEGY  a gallery bug under one strategy (seed 1, 8 executions),
#                    found with its known kind and replayed
#   safe:CASE        a safe gallery configuration passing
#   nested:NAME      a run of the nested KVM step of its own (`nested_env_of`)
#   fuzz             the coverage-guided fuzz targets, 30 s each (scripts/fuzz.sh;
#                    --full runs them 60 s each)
# In --with-slice, a slice's full:TARGET replaces the short tier's task of
# that target (the full form runs every test the short one does).
#
# Stages, in order (each one's wall and CPU seconds are in the summary):
#   packages   Debian packages the tests use, one apt-get call (scripts/test-deps.sh)
#   fmt        cargo fmt --check
#   cycles     no import circle between a crate's modules, nor between its
#              top-level modules (scripts/module-cycles.py, every crate)
#   features   `cargo build` and `cargo test --workspace` give every shared
#              crate one feature set (so the test build compiles nothing twice)
#   binary     cargo build: the simcluster binary the kernels build with.
#              clippy's lints (clippy.toml's determinism guard, -D warnings)
#              run inside this build and the next: clippy-driver is the
#              workspace's rustc wrapper (RUSTC_WORKSPACE_WRAPPER)
#   uml-kernel, kvm-kernel
#              in the background from here, side by side, each on its own
#              half of the CPUs: the UML kernel with hello-cluster's image,
#              and the KVM guest kernel (cached by the hash of their inputs:
#              minutes cold, seconds warm)
#   build      every target, benches included (beside the kernels), linted
#              as it compiles
#   nested     the KVM runtime inside an L1 Linux under QEMU's emulator
#              (scripts/test-kvm-nested.sh), on its own CPU (QEMU's emulator
#              uses one host thread) as soon as the KVM kernel is built
#   then two lanes, one per CPU (the nested one after its step), take
#   tasks from one queue, longest first, once the UML kernel is built:
#   determinism  db-cluster: one seed, several runs per userspace mode, one hash
#              (short tier: seccomp mode; the full tier: ptrace too, and
#              lookahead off in the last run of each)
#   gallery-bugs, gallery-safe
#              real bugs in Debian software found and replayed, safe
#              configurations passing (scripts/test-gallery.sh --bugs, --safe)
#   fuzz-check the fuzz crate (fuzz/, outside the workspace) type-checked
#              and linted against the workspace's APIs (`cargo check`)
#   rustdoc    the workspace's API docs build without a warning (broken
#              or private intra-doc links: `cargo doc`, -D warnings)
#   cargo-test every test target of the workspace, each a `cargo test` of its
#              own (the short tier leaves out the tests marked
#              #[ignore = "full tier: ..."]; --full runs them too); its
#              seconds in the summary are the sum over both lanes
#
# The summary (scripts/test-summary.sh) lists every skipped test with its
# reason (tests record skips through the testkit crate into
# $SIMCLUSTER_SKIP_LOG), every flake (a nested test that passed only on
# retry), the slowest test binaries, and closes with one line:
# "total: N passed, N failed, N skipped", where a skipped test is not
# counted as passed and every failed stage counts as failed.
# Under CI=true a skip whose cause the project can remove (a package, a
# fixture) fails its test (SIMCLUSTER_STRICT_SKIPS=1).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# The slices of the full tier, each meant to take at most about 10 minutes
# on 2 cores (docs/testing.md "The full tier in slices" has the figures
# they were cut by). Every check of the full tier is in one of them, but
# postgresql-async under dfs and random: a bug:CASE:STRATEGY check passes
# only when the strategy finds the case's bug within 8 executions; dfs does
# not find that one, and random finds it in its 8th (2353 s of wall time,
# guest-images/gallery/README.md): too close to the edge, and too long for
# a slice. The full tier's gallery-bugs still runs both, as two of the five
# strategies of which one must find the bug.
slices=(
  "nested:hello-cluster full:disks full:trace_bound"
  "nested:guest-state bug:redis-async:random bug:redis-async:pct bug:redis-async:delay"
  "nested:reorder bug:redis-async:dfs bug:redis-async:coverage full:root_disk"
  "nested:kvm-kernel bug:etcd-no-fsync:random bug:etcd-no-fsync:pct bug:etcd-no-fsync:delay bug:etcd-no-fsync:dfs bug:etcd-no-fsync:coverage"
  "nested:kvm-warm-start full:packages"
  "nested:db-cluster full:jobs full:disk_faults"
  "fuzz det:ptrace det:seccomp"
  "bug:postgresql-async:pct full:antithesis_example"
  "bug:postgresql-async:delay bug:postgresql-async:coverage nested:power-failure"
  "bug:etcd-lock:random bug:etcd-lock:pct bug:etcd-lock:delay bug:etcd-lock:dfs bug:etcd-lock:coverage"
  "bug:postgresql-txn-rr:random bug:postgresql-txn-rr:pct bug:postgresql-txn-rr:delay bug:postgresql-txn-rr:dfs bug:postgresql-txn-rr:coverage safe:redis-wait safe:etcd-lock-fenced safe:postgresql-sync safe:etcd-fsync safe:postgresql-txn-serializable"
  "full:golden full:strategies full:determinism_modes full:exploration full:datagram_order full:readiness full:units"
  "bug:nats-async:random bug:nats-async:pct bug:nats-async:delay bug:nats-async:dfs bug:nats-async:coverage safe:nats-sync"
)
# `nested_env_of NAME`: the environment of check nested:NAME.
nested_env_of() {
  case $1 in
    hello-cluster) echo "SIMCLUSTER_NESTED_TESTS=^\$ SIMCLUSTER_NESTED_CLUSTERS=hello-cluster:5" ;;
    guest-state) echo "SIMCLUSTER_NESTED_TESTS=^\$ SIMCLUSTER_NESTED_CLUSTERS=probes/guest-state:5" ;;
    reorder) echo "SIMCLUSTER_NESTED_TESTS=^\$ SIMCLUSTER_NESTED_CLUSTERS=examples/reorder:5" ;;
    # tests/kvm_kernel.rs's full tier (hello-cluster on KVM, guest-state
    # three times), less its warm starts (their own slice: about 12 minutes).
    kvm-kernel) echo "SIMCLUSTER_TEST_TIER=full SIMCLUSTER_NESTED_TESTS=^kvm_kernel\$ SIMCLUSTER_NESTED_CLUSTERS= SIMCLUSTER_NESTED_TEST_ARGS=--skip=warm_start_executions_equal_cold_ones_on_kvm" ;;
    kvm-warm-start) echo "SIMCLUSTER_TEST_TIER=full SIMCLUSTER_NESTED_TESTS=^kvm_kernel\$ SIMCLUSTER_NESTED_CLUSTERS= SIMCLUSTER_NESTED_TEST_ARGS=warm_start_executions_equal_cold_ones_on_kvm" ;;
    # db-cluster on KVM under the emulator: one run (its whole workload is
    # 16.5 virtual seconds, 867 s of L1 here), which must pass; the two
    # runs for one trace hash do not fit a slice, and --full runs them.
    db-cluster) echo "SIMCLUSTER_NESTED_TESTS=^\$ SIMCLUSTER_NESTED_CLUSTERS=db-cluster:1" ;;
    # A coordinated power failure on KVM in L1 (probes/power-failure: five
    # stock Linux boots, 1110 s in L1 here with other work beside it): once.
    power-failure) echo "SIMCLUSTER_NESTED_TESTS=^\$ SIMCLUSTER_NESTED_CLUSTERS=probes/power-failure:1" ;;
    *) return 1 ;;
  esac
}
# `check_ok CHECK`: whether CHECK is a word of the slices' language.
check_ok() {
  case $1 in
    full:?* | det:seccomp | det:ptrace | safe:?* | fuzz) ;;
    bug:?*:?*) ;;
    nested:?*) nested_env_of "${1#nested:}" >/dev/null ;;
    *) return 1 ;;
  esac
}
tier=short slice="" checks=""
case "${1:-}" in
  --full) tier=full ;;
  --slice | --with-slice)
    k=${2:-}
    if ! [[ $k =~ ^[0-9]+$ ]] || [ "$k" -ge ${#slices[@]} ]; then
      echo "scripts/test.sh: $1 needs a slice number from 0 to $((${#slices[@]} - 1)), not '${k}'" >&2; exit 2
    fi
    slice=$k checks=${slices[$k]}
    [ "$1" = --with-slice ] || tier=slice ;;
  --checks)
    checks=${2:-} slice=custom tier=slice
    [ -n "${checks// /}" ] || { echo "scripts/test.sh: --checks needs a list of checks" >&2; exit 2; } ;;
  --list-slices)
    for k in "${!slices[@]}"; do echo "slice $k: ${slices[$k]}"; done
    exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "scripts/test.sh: unknown option $1 (--full, --slice K, --with-slice K, --checks LIST, --list-slices or nothing)" >&2; exit 2 ;;
esac
for c in $checks; do
  check_ok "$c" || { echo "scripts/test.sh: unknown check '$c' (see the header: full:TARGET, det:MODE, bug:CASE:STRATEGY, safe:CASE, nested:NAME, fuzz)" >&2; exit 2; }
done
has_check() { [[ " $checks " == *" $1"* ]]; }
t_start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/simcluster-test.XXXXXX")
export SIMCLUSTER_SKIP_LOG=$work/skips SIMCLUSTER_FLAKE_LOG=$work/flakes
: >"$SIMCLUSTER_SKIP_LOG"
: >"$SIMCLUSTER_FLAKE_LOG"
stages=$work/stages
: >"$stages"
if [ "${CI:-}" = true ]; then
  export SIMCLUSTER_STRICT_SKIPS=1
  # CI builds from a fresh clone once: incremental compilation's caches are
  # never reused there, only written; and no debug info (a panic still
  # names its file and line; backtraces name functions only), which the
  # cold build does not spend time on.
  export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=0
fi
# Tests that repeat a check repeat it more in the full tier (testkit::by_tier;
# a slice's full:TARGET tasks set it for themselves).
export SIMCLUSTER_TEST_TIER=$tier
[ $tier = slice ] && export SIMCLUSTER_TEST_TIER=short
if [ -n "$slice" ]; then
  {
    if [ "$slice" = custom ]; then
      echo "checks of the full tier: $checks"
    else
      echo "slice $slice of ${#slices[@]} of the full tier${SIMCLUSTER_SLICE_WHY:+ ($SIMCLUSTER_SLICE_WHY)}: $checks"
    fi
  } >"$work/slice"
  echo "== $(cat "$work/slice")"
fi
slurm_dir=$work/slurm
export SIMCLUSTER_SLURM_DIR=$slurm_dir
nested_pid="" bg_pids=()
cleanup() {
  [ -z "$nested_pid" ] || kill -- "-$nested_pid" 2>/dev/null || true
  local pid
  for pid in "${bg_pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; done
  scripts/slurm/local.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# `stage NAME CMD...`: runs CMD, records NAME's exit code, wall seconds
# and CPU seconds (user + system of CMD and every process it waited for:
# CMD runs in a subshell whose `times` reports them), e.g. "build 0 346 215".
# A lane that is busy for its wall seconds but uses fewer CPU seconds
# waited (on the network, a timer, another process).
stage() {
  local name=$1 t0 rc secs cpu times_file=$work/times.$BASHPID
  shift
  echo "== $name: $*"
  t0=$(date +%s)
  (
    "$@"
    rc=$?
    times >"$times_file" # (not in a pipe: a forked `times` sees no children)
    exit $rc
  )
  rc=$?
  secs=$(($(date +%s) - t0))
  # `times`' second line: children's user and system time, "1m2.5s 0m3.1s".
  cpu=$(awk 'NR == 2 {s = 0; for (i = 1; i <= 2; i++) {split($i, p, "m"); s += p[1] * 60 + p[2]} printf "%d", s + 0.5}' "$times_file" 2>/dev/null)
  echo "$name $rc $secs ${cpu:-?}" >>"$stages"
  echo "== $name: $([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)") in $secs s (CPU ${cpu:-?} s)"
  return $rc
}
failed() { awk '$2 != 0 {print $1}' "$stages"; }
# A failed packages, fmt, cycles or features check is reported (and counted
# as failed) but stops nothing: without a package the tests that need it say
# why they skip. Any other failed stage stops what comes after it.
blocking() { failed | grep -v -x -e packages -e fmt -e cycles -e features; }

# CPUs: QEMU's emulator (one host thread) gets the last one, the rest of
# the suite the others, so neither waits for the other; on one CPU both share it.
# When the nested step ends first, `widen_tree` gives the rest every CPU.
main_pid=$$
# `widen_tree PID CPUS`: every thread of PID and its descendants whose
# CPUs are CPUS may run on all CPUs from now on (processes pinned to one CPU
# by simcluster's --pin keep their pin; children inherit the wider mask).
widen_tree() {
  local pid=$1 mask=$2 child
  if [ "$(taskset -c -p "$pid" 2>/dev/null | sed 's/.*: //')" = "$mask" ]; then
    taskset -a -c -p "0-$((ncpu - 1))" "$pid" >/dev/null 2>&1 || true
  fi
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do widen_tree "$child" "$mask"; done
}
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ]; then
  nested_cpus=$((ncpu - 1)) main_cpus=0
  [ "$ncpu" = 2 ] || main_cpus=0-$((ncpu - 2))
else
  nested_cpus=0 main_cpus=0
fi

deps_args=()
[ $tier = full ] && deps_args=(--full)
# chromium, for the report's screenshot test (a unit test of the full tier).
! has_check full:units || deps_args=(--full)
stage packages scripts/test-deps.sh "${deps_args[@]}"
stage fmt cargo fmt --all -- --check || echo "cargo fmt --check: run cargo fmt --all"
stage cycles python3 scripts/module-cycles.py || echo "scripts/module-cycles.py: an import circle (above); cut it"
# `features_unified`: the root package's build (`cargo build`, the binary
# stage) and the workspace's test build (`cargo test --workspace`) give
# every crate they share one feature set, so that the test build reuses
# what the binary stage compiled instead of compiling memchr, clap, regex,
# serde_json and the workspace's crates again with other features (see
# the comment at the end of Cargo.toml's [dependencies]).
features_unified() {
  local fmt='{p} [{f}]'
  cargo tree -e normal,build -f "$fmt" --prefix none >"$work/tree-build" || return 1
  cargo tree --workspace -e normal,build,dev -f "$fmt" --prefix none >"$work/tree-test" || return 1
  python3 - "$work/tree-build" "$work/tree-test" <<'PY'
import re, sys
def read(path):
    seen = {}
    for line in open(path):
        m = re.match(r"^(\S+ v\S+)(?: \([^)]*\))? \[(.*)\]", line.strip())
        if m:
            seen.setdefault(m.group(1), set()).add(m.group(2))
    return seen
build, test = read(sys.argv[1]), read(sys.argv[2])
if not build or not test:
    sys.exit("cargo tree printed nothing to compare")
bad = [k for k in sorted(build) if k in test and build[k] != test[k]]
for k in bad:
    print(f"{k}: features [{' | '.join(sorted(build[k]))}] in `cargo build`, [{' | '.join(sorted(test[k]))}] in `cargo test --workspace`")
if bad:
    print("ask for the test build's features in Cargo.toml's [dependencies] too")
print(f"{len(build)} crates in the build, {len(test)} in the test build; {len(bad)} with other features")
sys.exit(1 if bad else 0)
PY
}
stage features features_unified
# clippy's lints run inside the builds, not in a check of their own:
# clippy-driver is the workspace's rustc wrapper (as under `cargo clippy`),
# so each workspace crate is linted as it compiles (clippy.toml's
# determinism guard, -D warnings) in the binary stage and in the test
# build, which builds every target `cargo clippy --all-targets` checks
# (`--all-targets`: the seven [[bench]] targets too, which the test tasks
# do not run; they add about 34 CPU-s, measured 2026-11-27 on this 2-core
# AMD EPYC host). `cargo clippy` would check every
# dependency once more (106 CPU-s of a cold build, 2026-11-27). The
# wrapper is part of cargo's fingerprint: every cargo call below and in
# the scripts this one runs inherits it, so none of them rebuilds.
clippy_driver=$(rustc --print sysroot 2>/dev/null)/bin/clippy-driver
export RUSTC_WORKSPACE_WRAPPER=$clippy_driver CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
binary() {
  if [ ! -x "$clippy_driver" ]; then
    echo "no clippy-driver in this toolchain ($clippy_driver): rustup component add clippy"
    return 1
  fi
  cargo build --quiet
}
# The binary first: the guest kernels build with it, in the background,
# while the test binaries build.
[ -n "$(blocking)" ] || stage binary binary
# The debug binary (cargo honours CARGO_TARGET_DIR; so does this script).
sim=${CARGO_TARGET_DIR:-target}/debug/simcluster
# (`tee -a`: tee opens /dev/stderr by name, and without -a a log file that
# stderr is redirected to would be truncated, losing every stage before.)
kernel_of() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["kernel"])'; }
# The two guest kernels, side by side and beside the test build, each on
# its own half of the CPUs (`make -j<CPUs it may use>`: on 2 CPUs, two
# `make -j1`, not two `make -j2` that would share both CPUs with the test
# build's jobs too). Each leaves its path in $work/NAME, its log in
# $work/NAME.log and its exit code in $work/NAME.done; each lane below
# waits for the one it needs (`wait_for`), not for both.
uml-kernel() { "$sim" image build guest-images/hello-cluster | tee -a /dev/stderr | kernel_of >"$work/uml-kernel"; }
kvm-kernel() { "$sim" image kernel --runtime kvm --quiet | tee -a /dev/stderr | kernel_of >"$work/kvm-kernel"; }
# `background NAME CPUS`: NAME as a stage in the background, on CPUS.
background() {
  (
    taskset -c -p "$2" "$BASHPID" >/dev/null
    stage "$1" "$1" >"$work/$1.log" 2>&1
    rc=$?
    echo $rc >"$work/$1.done"
    echo "== $1: $([ $rc = 0 ] && echo "ready: $(cat "$work/$1")" || echo "FAILED (exit $rc; its log follows the other stages)")"
  ) &
  bg_pids+=($!)
}
wait_for() {
  until [ -e "$work/$1.done" ]; do sleep 2; done
  [ "$(cat "$work/$1.done")" = 0 ]
}
if [ -z "$(blocking)" ]; then
  echo "== uml-kernel, kvm-kernel: started in the background"
  half=$(((ncpu + 1) / 2))
  background uml-kernel "0-$((half - 1))"
  # A slice alone needs the KVM kernel only for its nested checks.
  if [ $tier != slice ] || has_check nested:; then
    background kvm-kernel "$((ncpu - half))-$((ncpu - 1))"
  else
    echo "no nested check in this slice: the KVM kernel is not needed" >"$work/kvm-kernel.log"
    echo 0 >"$work/kvm-kernel.done"
  fi
  stage build cargo test --quiet --workspace --no-run --all-targets
fi
if [ -n "$(blocking)" ]; then
  echo "stopping: $(blocking | tr '\n' ' ')failed; nothing after them can pass"
else
  # The KVM runtime in L1, in the background on its own CPU. The short
  # tier runs the KVM test binaries only: their stock-Linux clusters
  # (tests/kvm_kernel.rs: hello-cluster once, probes/guest-state twice for
  # one trace hash) are the "one cluster twice" check.
  if [ $tier = full ]; then
    nested_env=(SIMCLUSTER_NESTED_RUNS=5 "SIMCLUSTER_NESTED_CLUSTERS=hello-cluster probes/guest-state examples/reorder db-cluster:2")
  else
    nested_env=(SIMCLUSTER_NESTED_CLUSTERS=)
  fi
  # L1's wall-clock limit: the short tier's step took 137 s cold; the full
  # tier's (every KVM test binary, five runs of three clusters, two of
  # db-cluster) took 5172 s on a busy 2-core host (11-27) and was cut short
  # in db-cluster's second run, so it gets more.
  nested_timeout=2400
  [ $tier = full ] && nested_timeout=9000
  nested_log=$work/nested.log
  db_runs=2
  [ $tier = full ] && db_runs=5
  gallery_args=()
  [ $tier = full ] && gallery_args=(--full)
  off_last=0
  [ $tier = full ] && off_last=1
  # db-cluster's ptrace mode only in the full tier (see determinism-db.sh).
  db_modes=seccomp
  [ $tier = full ] && db_modes="seccomp ptrace"
  ignored=()
  [ $tier = full ] && ignored=(--include-ignored)
  fuzz_seconds=30
  [ $tier = full ] && fuzz_seconds=60

  # The tasks after the kernels, in one queue that both lanes take from
  # (`mkdir` is the claim: it succeeds once), the longest first, so that
  # neither CPU idles while the other has work queued: the db-cluster
  # determinism check, the gallery's two halves, then every test target
  # of the workspace as a `cargo test` of its own (unit tests of each
  # library and of the binary, each integration test, the doc tests).
  # Each task's output goes to $work/tasks/N.log, printed after the
  # stages. The longest test targets of the cold rehearsal of 11-27 go
  # first (`longest`); any other target follows in cargo's order.
  longest=(strategies packages exploration jobs golden node_faults slurm datagram_order disks
    hello_cluster start_after failures determinism_host determinism_modes readiness quiet)
  mkdir -p "$work/tasks"
  queue=$work/queue
  # A slice's checks first (its nested runs and gallery cells are the
  # longest tasks), in its order.
  for c in $checks; do
    case $c in full:units) echo cargo:full-units ;; full:*) echo "cargo:full:${c#full:}" ;; *) echo "$c" ;; esac
  done >"$queue.slice"
  {
    cat "$queue.slice"
    if [ $tier = slice ]; then
      : # the slice alone
    else
    printf '%s\n' determinism gallery-safe gallery-bugs fuzz-check rustdoc
    [ $tier = full ] && echo fuzz
    cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
longest = sys.argv[1:]
tests = []
for line in sys.stdin:
    m = json.loads(line)
    kind = m.get("target", {}).get("kind", [""])[0]
    if m.get("reason") == "compiler-artifact" and m.get("executable") and kind == "test":
        if m["target"]["name"] not in tests:
            tests.append(m["target"]["name"])
tests.sort(key=lambda n: longest.index(n) if n in longest else len(longest))
for n in tests[: len(longest)]:
    print(f"cargo:test:{n}")
print("cargo:units")
for n in tests[len(longest):]:
    print(f"cargo:test:{n}")
print("cargo:doc")' "${longest[@]}" | {
      # A target the slice runs in full is not run a second time short.
      if [ -s "$queue.slice" ]; then
        grep -v -x -F -f <(sed -n 's/^cargo:full:/cargo:test:/p; s/^cargo:full-units$/cargo:units/p' "$queue.slice") || true
      else
        cat
      fi
    }
    fi
  } >"$queue"
  echo "== tasks: $(wc -l <"$queue") in the queue ($(grep -c '^cargo:' "$queue") test targets)"
  # An empty list of test targets must not pass as "no test failed".
  if [ $tier != slice ] && { ! grep -q '^cargo:test:\|^cargo:full:' "$queue" || ! grep -q '^cargo:units$\|^cargo:full-units$' "$queue"; }; then
    echo "the list of test targets is empty or cut short (cargo test --no-run --message-format=json)"
    echo "test-targets 1 0 0" >>"$stages"
  fi

  # `run_task NAME`: one task of the queue.
  run_task() {
    SIMCLUSTER_UML_KERNEL=$(cat "$work/uml-kernel")
    export SIMCLUSTER_UML_KERNEL
    case $1 in
      determinism)
        env SIMCLUSTER_BIN="$sim" SIMCLUSTER_DETERMINISM_OFF_LAST="$off_last" SIMCLUSTER_DETERMINISM_MODES="$db_modes" \
          scripts/determinism-db.sh 1 "$db_runs" ;;
      gallery-bugs) env SIMCLUSTER_BIN="$sim" scripts/test-gallery.sh "${gallery_args[@]}" --bugs ;;
      gallery-safe) env SIMCLUSTER_BIN="$sim" scripts/test-gallery.sh "${gallery_args[@]}" --safe ;;
      # A slice's checks (the header says what each is).
      det:*)
        env SIMCLUSTER_BIN="$sim" SIMCLUSTER_DETERMINISM_OFF_LAST=1 SIMCLUSTER_DETERMINISM_MODES="${1#det:}" \
          scripts/determinism-db.sh 1 5 ;;
      bug:*)
        local rest=${1#bug:}
        env SIMCLUSTER_BIN="$sim" CASES="${rest%%:*}" STRATEGIES="${rest#*:}" SEEDS=1 MAX=8 scripts/bench-bugs.sh ;;
      safe:*) env SIMCLUSTER_BIN="$sim" SAFE="${1#safe:}" scripts/test-gallery.sh --full --safe ;;
      fuzz) scripts/fuzz.sh --seconds "$fuzz_seconds" ;;
      fuzz-check) fuzz_check ;;
      rustdoc) RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --workspace --no-deps ;;
      nested:*)
        wait_for kvm-kernel || { echo "the KVM kernel did not build: $1 cannot run"; return 1; }
        # shellcheck disable=SC2046
        env $(nested_env_of "${1#nested:}") SIMCLUSTER_NESTED_RUNS=5 SIMCLUSTER_KVM_KERNEL="$(cat "$work/kvm-kernel")" \
          SIMCLUSTER_NESTED_TIMEOUT=3000 scripts/test-kvm-nested.sh ;;
      cargo:*)
        # Always --workspace: a `cargo test -p PACKAGE` resolves features
        # for that package alone and compiles its dependencies again (the
        # rehearsal of 11-27 spent 400 s so); with --workspace and a target
        # filter every executable is the one the build stage made.
        local select task_ignored=("${ignored[@]}") task_tier=$SIMCLUSTER_TEST_TIER
        case $1 in
          cargo:units) select=(--lib --bins) ;;
          cargo:doc) select=(--doc) ;;
          cargo:full-units) select=(--lib --bins) task_ignored=(--include-ignored) task_tier=full ;;
          cargo:full:*) select=(--test "${1#cargo:full:}") task_ignored=(--include-ignored) task_tier=full ;;
          *) select=(--test "${1#cargo:test:}") ;;
        esac
        # --no-fail-fast: a failing test does not hide the others' results.
        if [ "$1" = cargo:doc ]; then
          doc_tests
        else
          SIMCLUSTER_TEST_TIER=$task_tier cargo test --workspace --no-fail-fast "${select[@]}" -- "${task_ignored[@]}"
        fi ;;
    esac
  }
  # `fuzz_check`: the fuzz crate is outside the workspace, so no build
  # above compiles it, and only the full tier's `fuzz` check (one slice)
  # would see an API change break it. A `cargo check` (stable
  # Rust, its own lock file, --locked) type-checks every target and lints
  # it (the clippy wrapper above). Nothing links, so libfuzzer-sys is
  # pointed at an empty archive instead of compiling libFuzzer's C++
  # (CUSTOM_LIBFUZZER_PATH; a file that stays, so that a warm check does
  # not run its build script again).
  fuzz_check() {
    local stub
    stub=$(realpath -m "${CARGO_TARGET_DIR:-fuzz/target}")/libfuzzer-stub/libfuzzer.a
    if [ ! -f "$stub" ]; then
      mkdir -p "${stub%/*}" && ar rcs "$stub" || return 1
    fi
    CUSTOM_LIBFUZZER_PATH=$stub cargo check --manifest-path fuzz/Cargo.toml --locked
  }
  # `doc_tests`: the doc tests, the one task that links at test time.
  # rust-lld crashed once linking one (SIGSEGV in its parallel relocation
  # scan, a cold rehearsal of 2026-11-28), so they link on one thread; a run
  # whose linker still died by a signal runs once more, and that retry is a
  # flake in the summary, never a silent pass.
  doc_tests() {
    local out=$work/doc-tests.$BASHPID rc
    RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -C link-arg=-Wl,--threads=1" cargo test --workspace --no-fail-fast --doc >"$out" 2>&1
    rc=$?
    cat "$out"
    if [ $rc != 0 ] && grep -q 'ld terminated with signal' "$out"; then
      echo "doc tests: the linker died by a signal; once more"
      RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -C link-arg=-Wl,--threads=1" cargo test --workspace --no-fail-fast --doc
      rc=$?
      [ $rc != 0 ] || printf '%s\n' "cargo:doc: the linker died by a signal; passed on retry" >>"$SIMCLUSTER_FLAKE_LOG"
    fi
    return $rc
  }
  # `pinned CPUS CMD...`: CMD (a function too) in a subshell on CPUS.
  pinned() { (taskset -c -p "$1" "$BASHPID" >/dev/null && shift && "$@"); }
  # `take_tasks LANE OTHER CPUS`: runs every task not yet claimed, pinned
  # to CPUS, or on every CPU once lane OTHER has nothing left to run; then
  # says this lane is done. Each task is a `stage`: a test target's exit
  # code and seconds go to $work/cargo-results ("cargo-test" in the
  # summary), any other task's to the stages.
  take_tasks() {
    local t n=0 cpus record rc secs cpu
    while read -r t; do
      n=$((n + 1))
      mkdir "$work/tasks/$n.claim" 2>/dev/null || continue
      cpus=$3
      [ ! -e "$work/done.$2" ] || cpus=0-$((ncpu - 1))
      record=$stages
      if [[ $t == cargo:* ]]; then
        record=$work/cargo-results
      else
        echo "== $t: started on CPU $cpus (its report follows the other stages)"
      fi
      stages=$record stage "$t" pinned "$cpus" run_task "$t" >"$work/tasks/$n.log" 2>&1
      read -r _ rc secs cpu < <(awk -v t="$t" '$1 == t' "$record")
      echo "== $t: $([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)") in $secs s, CPU $cpu s (lane $1)"
    done <"$queue"
    touch "$work/done.$1"
  }

  # A private one-machine Slurm (Debian's packages) for tests/slurm.rs.
  if scripts/slurm/local.sh start; then
    # shellcheck disable=SC1091
    . "$slurm_dir/env"
  else
    echo "note: the local Slurm did not start; tests/slurm.rs will say why it skips"
  fi

  # The second lane, on its own CPU: the KVM runtime in L1 as soon as the
  # KVM kernel is there (the UML kernel may still be building), then the
  # tasks once the UML kernel is.
  (
    set -m
    trap - EXIT
    if [ $tier = slice ]; then
      : # a slice alone: its nested checks are tasks of the queue
    elif wait_for kvm-kernel; then
      echo "== nested: started in the background on CPU $nested_cpus (its report follows the other stages)"
      stage nested taskset -c "$nested_cpus" env "${nested_env[@]}" SIMCLUSTER_KVM_KERNEL="$(cat "$work/kvm-kernel")" \
        SIMCLUSTER_NESTED_TIMEOUT=$nested_timeout scripts/test-kvm-nested.sh >"$nested_log" 2>&1
      echo "== nested: done, exit $?"
    else
      echo "the KVM kernel did not build: the nested step cannot run" >"$nested_log"
      echo "nested 1 0 0" >>"$stages"
    fi
    wait_for uml-kernel && take_tasks nested main "$nested_cpus"
    touch "$work/done.nested"
    # This lane's CPU is free again: the rest of the suite may use it.
    widen_tree "$main_pid" "$main_cpus"
  ) &
  nested_pid=$!

  # The first lane: the tasks, once the UML kernel is there.
  if wait_for uml-kernel; then
    take_tasks main nested "$main_cpus"
  fi
  touch "$work/done.main"
  # This lane is done: a task still running in the other may use every CPU.
  widen_tree "$nested_pid" "$nested_cpus"
  echo "== the nested lane: waiting for it"
  wait "$nested_pid"
  nested_pid=
  wait "${bg_pids[@]}" 2>/dev/null
  bg_pids=()
  # Every test target in one line of the stages: failed if any failed,
  # its seconds the sum over both lanes.
  if [ -f "$work/cargo-results" ]; then
    awk '$2 != 0 {rc = 1} {s += $3; c += $4} END {print "cargo-test", rc + 0, s, c}' "$work/cargo-results" >>"$stages"
  fi
fi
for log in uml-kernel kvm-kernel; do
  [ ! -f "$work/$log.log" ] || cat "$work/$log.log"
done
[ -z "${nested_log:-}" ] || [ ! -f "$nested_log" ] || cat "$nested_log"
if [ -f "${queue:-}" ]; then
  n=0
  while read -r t; do
    n=$((n + 1))
    [ -f "$work/tasks/$n.log" ] || continue
    cat "$work/tasks/$n.log"
  done <"$queue"
fi

# --- Summary -------------------------------------------------------------
# What counts as passed, failed and skipped: scripts/test-summary.sh's header.
scripts/test-summary.sh "$work" "$tier" "$(($(date +%s) - t_start))"
