#!/usr/bin/env bash
# Guest clock reads through the system call against the vDSO, side by side
# in one run on this machine: every clock read of a guest program a trap
# into its user-mode Linux kernel (SIMCLUSTER_DEBUG_SYSCALL_CLOCK=1, the
# kernel's time-travel-vdso-clock=off) against the vDSO answering them
# from the kernel's page of virtual time (the default). Jobs:
#   db-cluster   seed 3, no crash, one execution
#   hello-cluster seed 1
#   run.sh       scripts/run.sh's default run (db-cluster with its crashes,
#                partitions and crash states), BENCH_EXECUTIONS executions
#                (default 2): executions per hour
# The two modes are interleaved round by round so that load on the machine
# hits both alike. Prints the host first (figures from different kinds of
# host are not comparable), then per job and mode the medians of wall
# seconds, virtual/wall, executions per hour per core, guests' CPU seconds,
# and the deterministic counts: grants and round trips. The vDSO's
# db-cluster run is repeated with --lookahead off: its trace hash must be
# the one with lookahead on (the script fails if not).
#
#   scripts/bench-clock.sh                  1 round
#   BENCH_ROUNDS=3 scripts/bench-clock.sh
#   BENCH_EXECUTIONS=4 scripts/bench-clock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/simcluster
rounds=${BENCH_ROUNDS:-1}
executions=${BENCH_EXECUTIONS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
guest-images/db-cluster/build.sh >/dev/null
for c in guest-images/hello-cluster guest-images/db-cluster; do
  "$bin" image build --quiet "$c" >/dev/null
done

results=$tmp/results.jsonl
# run JOB MODE ARGS...: one simcluster run, its summary line tagged.
run() {
  local job=$1 mode=$2
  shift 2
  local env=()
  if [ "$mode" = syscall ]; then env=(SIMCLUSTER_DEBUG_SYSCALL_CLOCK=1); fi
  env "${env[@]}" "$bin" run --quiet --out "$tmp/$job-$mode" "$@" | tail -n 1 \
    | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); j.update(job=sys.argv[1], mode=sys.argv[2]); print(json.dumps(j))' "$job" "$mode" >>"$results"
}
for round in $(seq 1 "$rounds"); do
  for mode in syscall vdso; do
    echo "round $round/$rounds: clock reads by $mode" >&2
    run db-cluster "$mode" --images guest-images/db-cluster --seed 3 --max-crashes 0 --executions 1
    run hello-cluster "$mode" --images guest-images/hello-cluster --seed 1 --executions 1
    run run.sh "$mode" --images guest-images/db-cluster --executions "$executions"
  done
done
echo "db-cluster with the vDSO, lookahead off (the trace hash must not change)" >&2
run db-cluster-lookahead-off vdso --images guest-images/db-cluster --seed 3 --max-crashes 0 --executions 1 --lookahead off

python3 - "$results" "$executions" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
executions = sys.argv[2]
h = rows[0]["host"]
virt = "yes" if "hypervisor" in open("/proc/cpuinfo").read() else "no"
print(f"host: {h['cpu_vendor']} {h['cpu_model']}, CPUID faulting {'yes' if h['cpuid_faulting'] else 'no'}, "
      f"virtualized {virt}, vmx/svm {'yes' if h['hardware_virt'] else 'no'}, kernel {h['kernel_release']}")
rounds = len([r for r in rows if r["job"] == "db-cluster" and r["mode"] == "vdso"])
print(f"medians of {rounds} round(s); db-cluster seed 3 --max-crashes 0; hello-cluster seed 1; "
      f"run.sh: db-cluster's defaults, {executions} executions")
failed = False
cpu = lambda r: r["host_cpu"]["guests_user"] + r["host_cpu"]["guests_system"]
for job in ["db-cluster", "hello-cluster", "run.sh"]:
    by = {m: [r for r in rows if r["job"] == job and r["mode"] == m] for m in ["syscall", "vdso"]}
    med = lambda m, f: st.median(f(r) for r in by[m])
    per_exec = lambda r: r["wall_seconds"] / r["executions"]
    table = [
        ("trace hash", lambda m: by[m][0]["trace_hash"][:16]),
        ("failures", lambda m: str(sum(r["failures"] for r in by[m]))),
        ("virtual s", lambda m: f"{med(m, lambda r: r['virtual_seconds']):.1f}"),
        ("grants", lambda m: f"{med(m, lambda r: r['grants']):.0f}"),
        ("round trips", lambda m: f"{med(m, lambda r: r['round_trips']):.0f}"),
        ("wall s", lambda m: f"{med(m, lambda r: r['wall_seconds']):.1f}"),
        ("virtual/wall", lambda m: f"{med(m, lambda r: r['speedup']):.2f}"),
        ("executions/hour/core", lambda m: f"{med(m, lambda r: 3600 / per_exec(r)):.0f}"),
        ("simcluster CPU s", lambda m: f"{med(m, lambda r: r['host_cpu']['simcluster_user'] + r['host_cpu']['simcluster_system']):.1f}"),
        ("guests CPU s", lambda m: f"{med(m, cpu):.1f}"),
    ]
    print(f"\n{job}".ljust(24) + "clock by syscall".rjust(18) + "clock by vDSO".rjust(18))
    for label, f in table:
        print(label.ljust(23) + f("syscall").rjust(18) + f("vdso").rjust(18))
    wall = med("syscall", per_exec) / med("vdso", per_exec)
    print(f"{job}: {wall:.2f}x less wall time per execution, guests' CPU {med('syscall', cpu) / med('vdso', cpu):.2f}x less")
    for m in by:
        if len({r["trace_hash"] for r in by[m]}) != 1:
            print(f"{job}, clock by {m}: DIFFERENT trace hashes across rounds")
            failed = True
off = [r for r in rows if r["job"] == "db-cluster-lookahead-off"]
on = [r for r in rows if r["job"] == "db-cluster" and r["mode"] == "vdso"]
same = off[0]["trace_hash"] == on[0]["trace_hash"]
print(f"\ndb-cluster with the vDSO, lookahead off: trace hash {off[0]['trace_hash'][:16]} "
      f"({'the same as' if same else 'DIFFERENT from'} lookahead on), {off[0]['round_trips']} round trips, "
      f"{off[0]['wall_seconds']:.1f} s wall")
failed |= not same
sys.exit(1 if failed else 0)
PY
