#!/usr/bin/env bash
# What confining user-mode Linux nodes costs (jail/src/): each
# cluster run once in its jail and once with SIMCLUSTER_DEBUG_UNCONFINED=1,
# one after the other on this machine, with the same seed. Prints, side by
# side: the trace hash (the jail must not change it), wall seconds, CPU
# seconds of simcluster and of its guests (the run's JSON `host_cpu`), and
# memory per node (PSS, MiB). Names the host first.
#
#   scripts/bench-confinement.sh                      # hello-cluster, db-cluster (seccomp, ptrace)
#   CLUSTERS="hello-cluster" EXECUTIONS=4 scripts/bench-confinement.sh
#
# Exit status: 1 when a cluster's trace hash differs between the two.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTERS=${CLUSTERS:-"hello-cluster db-cluster db-cluster:ptrace"}
EXECUTIONS=${EXECUTIONS:-1}
SEED=${SEED:-1}
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/simcluster
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vendor=$(grep -m1 vendor_id /proc/cpuinfo | awk '{print $3}')
model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "host: $vendor $model, $(nproc) cpus, kernel $(uname -r); $EXECUTIONS execution(s) per run, seed $SEED"
printf '%-20s %-10s %-16s %8s %10s %10s %10s\n' cluster nodes trace wall_s sim_cpu_s guest_cpu_s mib/node
status=0
for entry in $CLUSTERS; do
  name=${entry%%:*}
  mode=${entry#*:}
  [ "$mode" = "$entry" ] && mode=
  dir=guest-images/$name
  if [ -f "$dir/build.sh" ]; then "$dir/build.sh" >/dev/null; fi
  if [ -n "$mode" ]; then
    mkdir -p "$tmp/$mode"
    cp -r guest-images/. "$tmp/$mode/"
    dir=$tmp/$mode/$name
    sed -i "0,/^\[cluster\]/s//[cluster]\nuserspace = \"$mode\"/" "$dir/cluster.toml"
  fi
  hashes=()
  for nodes in jail unconfined; do
    unconfined=0
    [ $nodes = unconfined ] && unconfined=1
    SIMCLUSTER_DEBUG_UNCONFINED=$unconfined "$bin" run --quiet --images "$dir" --seed "$SEED" \
      --executions "$EXECUTIONS" --out "$tmp/out" >"$tmp/run.json" 2>"$tmp/run.err" || true
    line=$(python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith("{")]
if not lines:
    print("- - - - -"); sys.exit()
j = json.loads(lines[-1]); c = j["host_cpu"]
print(j["trace_hash"][:16], round(j["wall_seconds"], 1),
      round(c["simcluster_user"] + c["simcluster_system"], 1),
      round(c["guests_user"] + c["guests_system"], 1), round(j.get("memory_per_node_mib", 0), 1))' "$tmp/run.json")
    read -r hash wall sim guest mib <<<"$line"
    [ "$hash" = - ] && { echo "$entry ($nodes): no JSON line"; tail -5 "$tmp/run.err"; status=1; }
    hashes+=("$hash")
    printf '%-20s %-10s %-16s %8s %10s %10s %10s\n' "$entry" "$nodes" "$hash" "$wall" "$sim" "$guest" "$mib"
  done
  if [ "${hashes[0]}" != "${hashes[1]}" ]; then
    echo "$entry: the jail changed the trace hash"
    status=1
  fi
done
exit $status
