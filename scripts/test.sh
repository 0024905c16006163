#!/usr/bin/env bash
# Runs the tests: the README's test command, and what .ci/run runs.
#
#   scripts/test.sh            the short tier: one of every kind of check (CI;
#                              the aim is 30 minutes from cold on 2 cores, and
#                              README "The two commands" says what it takes)
#   scripts/test.sh --full     everything there is (over an hour): every test,
#                              five runs per cluster in the nested L1, db-cluster
#                              on KVM, the whole gallery table
#
# Stages, in order (each one's wall time is in the summary):
#   packages   Debian packages the tests use, one apt-get call (scripts/test-deps.sh)
#   fmt        cargo fmt --check
#   binary     cargo build: the simcluster binary the kernels build with
#   kernels    in the background from here: the UML kernel and hello-cluster's
#              image, and beside them the KVM guest kernel (cached by the hash of
#              their inputs: minutes cold, seconds warm)
#   build      every test binary (beside the kernels)
#   clippy     cargo clippy --workspace --all-targets -D warnings (clippy.toml's
#              determinism guard; beside the kernels)
#   nested     the KVM runtime inside an L1 Linux under QEMU's emulator
#              (scripts/test-kvm-nested.sh). It runs in the background on its own
#              CPU beside cargo-test (QEMU's emulator uses one host thread);
#              determinism and the gallery's two halves run in whichever
#              lane is free first
#   determinism  db-cluster: one seed, several runs per userspace mode, one hash
#              (the full tier: lookahead off in the last run of each)
#   cargo-test cargo test --workspace (the short tier leaves out the tests marked
#              #[ignore = "full tier: ..."]; --full runs them too)
#   gallery-bugs, gallery-safe
#              real bugs in Debian software found and replayed, safe
#              configurations passing (scripts/test-gallery.sh --bugs, --safe)
#
# The summary lists every skipped test with its reason (tests record skips
# through the testkit crate into $SIMCLUSTER_SKIP_LOG), every flake (a
# nested test that passed only on retry), the slowest test binaries, and
# closes with one line: "total: N passed, N failed, N skipped".
# Under CI=true a skip whose cause the project can remove (a package, a
# fixture) fails its test (SIMCLUSTER_STRICT_SKIPS=1).
set -uo pipefail
cd "$(dirname "$0")/.."
tier=short
case "${1:-}" in
  --full) tier=full ;;
  "") ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "scripts/test.sh: unknown option $1 (--full or nothing)" >&2; exit 2 ;;
esac
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
# Tests that repeat a check repeat it more in the full tier (testkit::by_tier).
export SIMCLUSTER_TEST_TIER=$tier
slurm_dir=$work/slurm
export SIMCLUSTER_SLURM_DIR=$slurm_dir
nested_pid= kernels_pid=
cleanup() {
  [ -z "$nested_pid" ] || kill -- "-$nested_pid" 2>/dev/null || true
  [ -z "$kernels_pid" ] || pkill -TERM -P "$kernels_pid" 2>/dev/null || true
  scripts/slurm/local.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# `stage NAME CMD...`: runs CMD, records NAME's exit code and wall seconds.
stage() {
  local name=$1 t0 rc
  shift
  echo "== $name: $*"
  t0=$(date +%s)
  "$@"
  rc=$?
  echo "$name $rc $(($(date +%s) - t0))" >>"$stages"
  echo "== $name: $([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)") in $(($(date +%s) - t0)) s"
  return $rc
}
failed() { awk '$2 != 0 {print $1}' "$stages"; }

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
stage packages scripts/test-deps.sh "${deps_args[@]}"
stage fmt cargo fmt --all -- --check || echo "cargo fmt --check: run cargo fmt --all"
# The binary first: the guest kernels build with it, in the background,
# while the test binaries build and clippy runs (each of the three has
# single-CPU stretches, unpacking and linking, that the others fill).
stage binary cargo build --quiet
# `kernels`: both guest kernels built (or found), their paths left in
# $work/uml-kernel and $work/kvm-kernel.
# The debug binary (cargo honours CARGO_TARGET_DIR; so does this script).
sim=${CARGO_TARGET_DIR:-target}/debug/simcluster
# (`tee -a`: tee opens /dev/stderr by name, and without -a a log file that
# stderr is redirected to would be truncated, losing every stage before.)
kernel_of() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["kernel"])'; }
# The two builds run side by side: each is `make -j<CPUs>`, but unpacking,
# configuring and linking use one CPU, which the other build fills.
kernels() {
  echo "(the KVM guest kernel builds in the background beside the UML one)"
  "$sim" image kernel --runtime kvm --quiet >"$work/kvm-kernel.json" 2>"$work/kvm-kernel.err" &
  local kvm_pid=$! rc=0
  "$sim" image build guest-images/hello-cluster | tee -a /dev/stderr | kernel_of >"$work/uml-kernel" || rc=1
  if wait "$kvm_pid" && kernel_of <"$work/kvm-kernel.json" >"$work/kvm-kernel"; then
    echo "KVM kernel: $(cat "$work/kvm-kernel")"
  else
    echo "the KVM kernel did not build:"; cat "$work/kvm-kernel.err"; rc=1
  fi
  return $rc
}
if [ -z "$(failed)" ]; then
  echo "== kernels: started in the background (its report follows the build and clippy)"
  stage kernels kernels >"$work/kernels.log" 2>&1 &
  kernels_pid=$!
fi
stage build cargo test --quiet --workspace --no-run
stage clippy cargo clippy --quiet --workspace --all-targets -- -D warnings
if [ -n "$kernels_pid" ]; then
  wait "$kernels_pid"
  kernels_pid=
  cat "$work/kernels.log"
fi
# The vmm crate's own UML tests boot the same kernel.
SIMCLUSTER_UML_KERNEL=$(cat "$work/uml-kernel" 2>/dev/null || true)
export SIMCLUSTER_UML_KERNEL
if [ -n "$(failed)" ]; then
  echo "stopping: $(failed | tr '\n' ' ')failed; nothing after them can pass"
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
  # tier's five runs per cluster and db-cluster on KVM ran past 2400 s on a
  # busy 2-core host (11-27), so it gets more.
  nested_timeout=2400
  [ $tier = full ] && nested_timeout=7200
  nested_log=$work/nested.log
  db_runs=2
  [ $tier = full ] && db_runs=5
  gallery_args=()
  [ $tier = full ] && gallery_args=(--full)
  # After their first job (nested on one CPU, cargo-test on the others),
  # both lanes take the next of these tasks that nobody has taken yet
  # (`mkdir` is the claim: it succeeds once), so that neither CPU idles
  # while the other has work queued. Their output goes to
  # $work/NAME.log, printed after the other stages.
  # The gallery is two tasks (its bugs, its safe configurations), so that
  # both lanes can take a part: one task of 220 s left a lane 100 s
  # behind the other in a cold rehearsal (11-27).
  later_tasks=(determinism gallery-bugs gallery-safe)
  off_last=0
  [ $tier = full ] && off_last=1
  task_determinism() {
    env SIMCLUSTER_BIN="$sim" SIMCLUSTER_DETERMINISM_OFF_LAST=$off_last scripts/determinism-db.sh 1 "$db_runs"
  }
  task_gallery-bugs() { env SIMCLUSTER_BIN="$sim" scripts/test-gallery.sh "${gallery_args[@]}" --bugs; }
  task_gallery-safe() { env SIMCLUSTER_BIN="$sim" scripts/test-gallery.sh "${gallery_args[@]}" --safe; }
  # `pinned CPUS CMD...`: CMD (a function too) in a subshell on CPUS.
  pinned() { (taskset -c -p "$1" "$BASHPID" >/dev/null && shift && "$@"); }
  # `take_tasks LANE OTHER CPUS`: runs every task not yet claimed, pinned
  # to CPUS, or on every CPU once lane OTHER has nothing left to run; then
  # says this lane is done.
  take_tasks() {
    local t cpus
    for t in "${later_tasks[@]}"; do
      mkdir "$work/$t.claim" 2>/dev/null || continue
      cpus=$3
      [ ! -e "$work/done.$2" ] || cpus=0-$((ncpu - 1))
      echo "== $t: started on CPU $cpus (its report follows the other stages)"
      stage "$t" pinned "$cpus" "task_$t" >"$work/$t.log" 2>&1
    done
    touch "$work/done.$1"
  }
  # The second lane, on its own CPU: the KVM runtime in L1, then the tasks.
  (
    set -m
    trap - EXIT
    # The KVM guest kernel was built above; the script's own build is a no-op.
    stage nested taskset -c "$nested_cpus" env "${nested_env[@]}" SIMCLUSTER_KVM_KERNEL="$(cat "$work/kvm-kernel")" \
      SIMCLUSTER_NESTED_TIMEOUT=$nested_timeout scripts/test-kvm-nested.sh >"$nested_log" 2>&1
    take_tasks nested main "$nested_cpus"
    # This lane's CPU is free again: the rest of the suite may use it.
    widen_tree "$main_pid" "$main_cpus"
  ) &
  nested_pid=$!
  echo "== nested: started in the background on CPU $nested_cpus (its report follows the other stages)"

  # A private one-machine Slurm (Debian's packages) for tests/slurm.rs.
  if scripts/slurm/local.sh start; then
    # shellcheck disable=SC1091
    . "$slurm_dir/env"
  else
    echo "note: the local Slurm did not start; tests/slurm.rs will say why it skips"
  fi
  # --no-fail-fast: one failing test binary does not hide the others' results.
  # (cargo test, not nextest: the tests of one binary share what they build
  # once, such as the example programs, and binaries run one at a time.)
  cargo_test() {
    local ignored=()
    [ $tier = full ] && ignored=(--include-ignored)
    taskset -c "$main_cpus" cargo test --workspace --no-fail-fast -- "${ignored[@]}" 2>&1 | tee "$work/cargo-test.log"
  }
  stage cargo-test cargo_test
  take_tasks main nested "$main_cpus"
  # This lane is done: a task still running in the other may use every CPU.
  widen_tree "$nested_pid" "$nested_cpus"

  echo "== nested and the tasks of its lane: waiting for them"
  wait "$nested_pid"
  nested_pid=
  cat "$nested_log"
  for t in "${later_tasks[@]}"; do
    [ ! -f "$work/$t.log" ] || cat "$work/$t.log"
  done
fi

# --- Summary -------------------------------------------------------------
echo
echo "==== summary ($tier tier, $(($(date +%s) - t_start)) s in all)"
printf '  %-13s %-8s %7s\n' stage result "wall s"
while read -r name rc secs; do
  printf '  %-13s %-8s %7s\n' "$name" "$([ "$rc" = 0 ] && echo ok || echo "exit $rc")" "$secs"
done <"$stages"
passed=0 failed_n=0 ignored_n=0
if [ -f "$work/cargo-test.log" ]; then
  echo "  slowest test binaries (cargo test):"
  # "Running tests/x.rs (target/debug/deps/x-hash)" ... "test result: ... finished in 12.34s"
  awk '/^ *Running /{bin=$2} /^ *Doc-tests /{bin="doc:" $2}
       /^test result:/{s=$NF; sub(/s$/, "", s); printf "%10.1f s  %s\n", s, bin}' "$work/cargo-test.log" \
    | sort -rn | head -n 8 | sed 's/^/  /'
  read -r passed failed_n ignored_n < <(awk '/^test result:/{for(i=1;i<=NF;i++){if($(i)~/^passed;?$/)p+=$(i-1); if($(i)~/^failed;?$/)f+=$(i-1); if($(i)~/^ignored;?$/)g+=$(i-1)}} END{print p+0, f+0, g+0}' "$work/cargo-test.log")
fi
if [ -n "${nested_log:-}" ] && [ -f "$nested_log" ]; then
  read -r np nf < <(grep -o 'NESTED-COUNTS [0-9]* [0-9]*' "$nested_log" | tail -n 1 | awk '{print $2+0, $3+0}')
  passed=$((passed + ${np:-0})) failed_n=$((failed_n + ${nf:-0}))
fi
skipped=$(sort -u "$SIMCLUSTER_SKIP_LOG" | wc -l)
echo "  skipped tests: $skipped"
sort -u "$SIMCLUSTER_SKIP_LOG" | awk -F'\t' '{printf "    SKIP %s (%s): %s\n", $1, $2, $3}'
flakes=$(wc -l <"$SIMCLUSTER_FLAKE_LOG")
echo "  flakes (passed only on retry): $flakes"
sed 's/^/    FLAKE /' "$SIMCLUSTER_FLAKE_LOG"
[ "$ignored_n" = 0 ] || echo "  left to the full tier (#[ignore]): $ignored_n tests (scripts/test.sh --full runs them)"
if [ -n "$(failed)" ]; then
  echo "  FAILED stages: $(failed | tr '\n' ' ')"
fi
echo "total: $passed passed, $failed_n failed, $skipped skipped"
[ -z "$(failed)" ]
