#!/usr/bin/env bash
# Executions per hour with --jobs 1 and --jobs 2 (and more where the host
# has the cores), side by side in one run, on db-cluster and on an example.
# Also checks that every --jobs gives the same JSON line, wall figures
# aside, and prints the memory one execution holds (what bounds --jobs).
#
#   scripts/bench-jobs.sh                       db-cluster 6, crash-primary 24
#   DB_EXECUTIONS=10 EX_EXECUTIONS=40 JOBS="1 2" scripts/bench-jobs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
guest-images/examples/build.sh 2>/dev/null
guest-images/db-cluster/build.sh 2>/dev/null || true
bin=${CARGO_TARGET_DIR:-target}/release/simcluster
jobs_list=${JOBS:-1 2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cases="guest-images/db-cluster:${DB_EXECUTIONS:-6} guest-images/examples/crash-primary:${EX_EXECUTIONS:-24}"
for c in $cases; do $bin image build "${c%%:*}" --quiet >/dev/null; done
echo "host: $(nproc) CPUs, $(awk '/MemAvailable/ {printf "%.1f GiB available", $2/1048576}' /proc/meminfo)"
printf "%-32s %5s %11s %10s %10s %12s %s\n" cluster jobs --executions "wall s" "exec/hour" "vs --jobs 1" "MiB/execution"
for c in $cases; do
  dir=${c%%:*}; n=${c##*:}
  base=""; ref=""
  for j in $jobs_list; do
    json=$($bin run --quiet --images "$dir" --executions "$n" --seed 1 --jobs "$j" --critical-walks 0 \
           --out "$out/$(basename "$dir")-$j" | tail -1) || true
    read -r wall rate mem same <<<"$(python3 - "$json" "$ref" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
wall_keys = {"wall_seconds", "executions_per_hour", "speedup", "image_build_seconds", "boot_wall_seconds",
             "host_cpu", "memory_per_node_mib", "jobs", "out", "failure_file", "failing_executions"}
mine = {k: v for k, v in j.items() if k not in wall_keys}
same = "-" if not sys.argv[2] else ("same" if json.loads(sys.argv[2]) == mine else "DIFFERENT")
print(f'{j["wall_seconds"]:.1f} {j["executions_per_hour"]:.0f} {j["memory_per_node_mib"] * j["nodes"]:.0f} {same}')
PY
)"
    if [ -z "$ref" ]; then
      ref=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); w={"wall_seconds","executions_per_hour","speedup","image_build_seconds","boot_wall_seconds","host_cpu","memory_per_node_mib","jobs","out","failure_file","failing_executions"}; print(json.dumps({k:v for k,v in j.items() if k not in w}))' "$json")
      base=$rate
    fi
    printf "%-32s %5s %11s %10s %10s %11.2fx %s%s\n" "$dir" "$j" "$n" "$wall" "$rate" \
      "$(python3 -c "print($rate / $base)")" "$mem" "$([ "$same" = DIFFERENT ] && echo '  RESULTS DIFFER' || true)"
  done
done
