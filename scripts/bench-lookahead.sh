#!/usr/bin/env bash
# Lookahead off against on, side by side in one run on this machine:
# db-cluster (seed 3, no crash, one execution) and hello-cluster (seed 1),
# each mode once per round, the modes interleaved so that load on the
# machine hits both alike. Prints the host first (figures from different
# kinds of host are not comparable: the same build ran 5x apart on two),
# then per mode the medians of wall seconds, virtual/wall and executions
# per hour per core, with the deterministic counts beside them: grants
# (the same both ways) and round trips (what lookahead saves). The trace
# hashes of the two modes must be equal: the script fails if not.
#
#   scripts/bench-lookahead.sh                 1 round
#   BENCH_ROUNDS=3 scripts/bench-lookahead.sh
#   BENCH_SEED=5 BENCH_CRASHES=1 scripts/bench-lookahead.sh   (another seed, crashes on)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/simcluster
rounds=${BENCH_ROUNDS:-1}
seed=${BENCH_SEED:-3}
crashes=${BENCH_CRASHES:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
guest-images/db-cluster/build.sh >/dev/null
for c in guest-images/hello-cluster guest-images/db-cluster; do
  "$bin" image build --quiet "$c" >/dev/null
done

results=$tmp/results.jsonl
for round in $(seq 1 "$rounds"); do
  for mode in off on; do
    echo "round $round/$rounds: lookahead $mode" >&2
    "$bin" run --quiet --images guest-images/db-cluster --out "$tmp/db-$mode" --seed "$seed" \
      --max-crashes "$crashes" --executions 1 --lookahead "$mode" | tail -n 1 \
      | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); j.update(job="db-cluster", mode=sys.argv[1]); print(json.dumps(j))' "$mode" >>"$results"
    "$bin" run --quiet --images guest-images/hello-cluster --out "$tmp/hello-$mode" --seed 1 \
      --executions 1 --lookahead "$mode" | tail -n 1 \
      | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); j.update(job="hello-cluster", mode=sys.argv[1]); print(json.dumps(j))' "$mode" >>"$results"
  done
done

python3 - "$results" "$seed" "$crashes" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
seed, crashes = sys.argv[2], sys.argv[3]
h = rows[0]["host"]
virt = "yes" if "hypervisor" in open("/proc/cpuinfo").read() else "no"
print(f"host: {h['cpu_vendor']} {h['cpu_model']}, CPUID faulting {'yes' if h['cpuid_faulting'] else 'no'}, "
      f"virtualized {virt}, vmx/svm {'yes' if h['hardware_virt'] else 'no'}, kernel {h['kernel_release']}")
print(f"medians of {len(rows) // 4} round(s); db-cluster seed {seed}, --max-crashes {crashes}; hello-cluster seed 1")
failed = False
for job in ["db-cluster", "hello-cluster"]:
    by = {m: [r for r in rows if r["job"] == job and r["mode"] == m] for m in ["off", "on"]}
    med = lambda m, f: st.median(f(r) for r in by[m])
    table = [
        ("trace hash", lambda m: by[m][0]["trace_hash"][:16]),
        ("failures", lambda m: str(sum(r["failures"] for r in by[m]))),
        ("grants", lambda m: f"{med(m, lambda r: r['grants']):.0f}"),
        ("round trips", lambda m: f"{med(m, lambda r: r['round_trips']):.0f}"),
        ("grants per round trip", lambda m: f"{med(m, lambda r: r['grants'] / r['round_trips']):.2f}"),
        ("wall s", lambda m: f"{med(m, lambda r: r['wall_seconds']):.1f}"),
        ("virtual/wall", lambda m: f"{med(m, lambda r: r['speedup']):.2f}"),
        ("executions/hour/core", lambda m: f"{med(m, lambda r: 3600 / r['wall_seconds']):.0f}"),
        ("simcluster CPU s", lambda m: f"{med(m, lambda r: r['host_cpu']['simcluster_user'] + r['host_cpu']['simcluster_system']):.1f}"),
        ("guests CPU s", lambda m: f"{med(m, lambda r: r['host_cpu']['guests_user'] + r['host_cpu']['guests_system']):.1f}"),
    ]
    print(f"\n{job}".ljust(24) + "lookahead off".rjust(18) + "lookahead on".rjust(18))
    for label, f in table:
        print(label.ljust(23) + f("off").rjust(18) + f("on").rjust(18))
    hashes = {r["trace_hash"] for m in by for r in by[m]}
    trips = med("off", lambda r: r["round_trips"]) / med("on", lambda r: r["round_trips"])
    wall = med("off", lambda r: r["wall_seconds"]) / med("on", lambda r: r["wall_seconds"])
    print(f"{job}: {trips:.1f}x fewer round trips, {wall:.2f}x less wall time")
    if len(hashes) != 1:
        print(f"{job}: DIFFERENT trace hashes: {sorted(hashes)}")
        failed = True
sys.exit(1 if failed else 0)
PY
