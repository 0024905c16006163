#!/usr/bin/env bash
# Two or more modes of the same build side by side in one run on this
# machine, each mode a label and the environment that selects it:
#   scripts/bench-modes.sh 'LABEL=VAR=VALUE ...' 'LABEL=' ...
# The first mode is the baseline, the last the one measured against it
# (an empty environment: the defaults). scripts/bench-clock.sh and
# scripts/bench-page-faults.sh are two uses. Jobs:
#   db-cluster   seed 3, no crash, one execution
#   hello-cluster seed 1
#   run.sh       scripts/run.sh's default run (db-cluster with its crashes,
#                partitions and crash states), BENCH_EXECUTIONS executions
#                (default 2): executions per hour
# The modes are interleaved round by round so that load on the machine
# hits all alike. Prints the host first (figures from different kinds of
# host are not comparable), then per job and mode the medians of wall
# seconds, virtual/wall, executions per hour per core, guests' CPU seconds,
# and the deterministic counts: grants and round trips. The last mode's
# db-cluster run is repeated with --lookahead off: its trace hash must be
# the one with lookahead on (the script fails if not), as must every
# mode's hash across rounds.
#
#   BENCH_ROUNDS=3 BENCH_EXECUTIONS=4 scripts/bench-modes.sh MODE MODE...
#   BENCH_BIN=path/to/simcluster scripts/bench-modes.sh ...   that binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "scripts/bench-modes.sh: needs at least two modes, each 'LABEL=VAR=VALUE ...' (an empty environment: 'LABEL=')" >&2
  exit 2
fi
if [ -n "${BENCH_BIN:-}" ]; then
  bin=$BENCH_BIN
else
  cargo build --release --quiet
  bin=${CARGO_TARGET_DIR:-$PWD/target}/release/simcluster
fi
rounds=${BENCH_ROUNDS:-1}
executions=${BENCH_EXECUTIONS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
guest-images/db-cluster/build.sh >/dev/null
for c in guest-images/hello-cluster guest-images/db-cluster; do
  "$bin" image build --quiet "$c" >/dev/null
done

results=$tmp/results.jsonl
# run JOB MODE_INDEX ARGS...: one simcluster run in mode MODE_INDEX, its
# summary line tagged.
run() {
  local job=$1 m=$2
  shift 2
  local spec=${modes[$m]}
  local env
  read -r -a env <<<"${spec#*=}"
  env "${env[@]}" "$bin" run --quiet --out "$tmp/$job-$m" "$@" | tail -n 1 \
    | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); j.update(job=sys.argv[1], mode=int(sys.argv[2])); print(json.dumps(j))' "$job" "$m" >>"$results"
}
modes=("$@")
last=$((${#modes[@]} - 1))
for round in $(seq 1 "$rounds"); do
  for m in "${!modes[@]}"; do
    echo "round $round/$rounds: ${modes[$m]%%=*}" >&2
    run db-cluster "$m" --images guest-images/db-cluster --seed 3 --max-crashes 0 --executions 1
    run hello-cluster "$m" --images guest-images/hello-cluster --seed 1 --executions 1
    run run.sh "$m" --images guest-images/db-cluster --executions "$executions"
  done
done
echo "db-cluster, ${modes[$last]%%=*}, lookahead off (the trace hash must not change)" >&2
run db-cluster-lookahead-off "$last" --images guest-images/db-cluster --seed 3 --max-crashes 0 --executions 1 --lookahead off

labels=()
for m in "${modes[@]}"; do labels+=("${m%%=*}"); done
python3 - "$results" "$executions" "${labels[@]}" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
executions, labels = sys.argv[2], sys.argv[3:]
modes = range(len(labels))
h = rows[0]["host"]
virt = "yes" if "hypervisor" in open("/proc/cpuinfo").read() else "no"
print(f"host: {h['cpu_vendor']} {h['cpu_model']}, CPUID faulting {'yes' if h['cpuid_faulting'] else 'no'}, "
      f"virtualized {virt}, vmx/svm {'yes' if h['hardware_virt'] else 'no'}, kernel {h['kernel_release']}")
rounds = len([r for r in rows if r["job"] == "db-cluster" and r["mode"] == 0])
print(f"medians of {rounds} round(s); db-cluster seed 3 --max-crashes 0; hello-cluster seed 1; "
      f"run.sh: db-cluster's defaults, {executions} executions; wall and CPU per execution")
failed = False
cpu = lambda r: (r["host_cpu"]["guests_user"] + r["host_cpu"]["guests_system"]) / r["executions"]
per_exec = lambda r: r["wall_seconds"] / r["executions"]
width = max(18, max(len(l) for l in labels) + 2)
for job in ["db-cluster", "hello-cluster", "run.sh"]:
    by = {m: [r for r in rows if r["job"] == job and r["mode"] == m] for m in modes}
    med = lambda m, f: st.median(f(r) for r in by[m])
    table = [
        ("trace hash", lambda m: by[m][0]["trace_hash"][:16]),
        ("failures", lambda m: str(sum(r["failures"] for r in by[m]))),
        ("virtual s", lambda m: f"{med(m, lambda r: r['virtual_seconds']):.1f}"),
        ("grants", lambda m: f"{med(m, lambda r: r['grants']):.0f}"),
        ("round trips", lambda m: f"{med(m, lambda r: r['round_trips']):.0f}"),
        ("wall s per execution", lambda m: f"{med(m, per_exec):.1f}"),
        ("virtual/wall", lambda m: f"{med(m, lambda r: r['speedup']):.2f}"),
        ("executions/hour/core", lambda m: f"{med(m, lambda r: 3600 / per_exec(r)):.0f}"),
        ("simcluster CPU s", lambda m: f"{med(m, lambda r: (r['host_cpu']['simcluster_user'] + r['host_cpu']['simcluster_system']) / r['executions']):.1f}"),
        ("guests CPU s", lambda m: f"{med(m, cpu):.1f}"),
    ]
    print(f"\n{job}".ljust(24) + "".join(l.rjust(width) for l in labels))
    for label, f in table:
        print(label.ljust(23) + "".join(f(m).rjust(width) for m in modes))
    first, last = 0, len(labels) - 1
    print(f"{job}: {med(first, per_exec) / med(last, per_exec):.2f}x less wall time per execution, "
          f"guests' CPU {med(first, cpu) / med(last, cpu):.2f}x less ({labels[last]} against {labels[first]})")
    for m in modes:
        if len({r["trace_hash"] for r in by[m]}) != 1:
            print(f"{job}, {labels[m]}: DIFFERENT trace hashes across rounds")
            failed = True
off = [r for r in rows if r["job"] == "db-cluster-lookahead-off"]
on = [r for r in rows if r["job"] == "db-cluster" and r["mode"] == len(labels) - 1]
same = off[0]["trace_hash"] == on[0]["trace_hash"]
print(f"\ndb-cluster, {labels[-1]}, lookahead off: trace hash {off[0]['trace_hash'][:16]} "
      f"({'the same as' if same else 'DIFFERENT from'} lookahead on), {off[0]['round_trips']} round trips, "
      f"{off[0]['wall_seconds']:.1f} s wall")
failed |= not same
sys.exit(1 if failed else 0)
PY
