#!/usr/bin/env bash
# Prints simcluster's figures for the UML runtime on this machine:
# image build time (cold and cached), node boot time, virtual/wall speedup
# and memory per node on hello-cluster. The component benchmarks are
# `cargo bench` (netsim, disksim, checker, explore, vmm).
#
#   scripts/bench.sh            rootfs cold (kernel taken from the cache)
#   BENCH_COLD_KERNEL=1 scripts/bench.sh   also a cold kernel build (minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/simcluster
cluster=guest-images/hello-cluster
runs=${BENCH_RUNS:-5}
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.readlines()[-1])[sys.argv[1]])" "$1"; }

# Make sure the shared cache has the kernel, then time builds in a fresh cache.
$bin image build --quiet $cluster > /dev/null
main_cache=${SIMCLUSTER_CACHE:-$HOME/.cache/simcluster}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/kernel"
if [ "${BENCH_COLD_KERNEL:-0}" = 1 ]; then
  t0=$(date +%s.%N)
  SIMCLUSTER_CACHE=$tmp $bin image build --quiet $cluster > /dev/null
  t1=$(date +%s.%N)
  echo "image build, cold (kernel + packages + rootfs): $(python3 -c "print(round($t1-$t0,1))") s"
else
  cp -r "$main_cache/kernel/." "$tmp/kernel/"
  t0=$(date +%s.%N)
  SIMCLUSTER_CACHE=$tmp $bin image build --quiet $cluster > /dev/null
  t1=$(date +%s.%N)
  echo "image build, cold rootfs (download + unpack + pack; kernel cached): $(python3 -c "print(round($t1-$t0,2))") s"
fi
t0=$(date +%s.%N)
SIMCLUSTER_CACHE=$tmp $bin image build --quiet $cluster > /dev/null
t1=$(date +%s.%N)
echo "image build, cached: $(python3 -c "print(round($t1-$t0,3))") s"

for i in $(seq 1 "$runs"); do
  $bin run --quiet --images $cluster --seed "$i" --out "$tmp/out" | tail -1
done > "$tmp/runs.jsonl"
python3 - "$tmp/runs.jsonl" <<'PY'
import json, sys, statistics as st
runs = [json.loads(l) for l in open(sys.argv[1])]
n = runs[0]["nodes"]
def med(k): return st.median(r[k] for r in runs)
print(f"hello-cluster, {len(runs)} runs of {n} nodes (median):")
print(f"  boot to all agents ready: {med('boot_wall_seconds'):.2f} s wall ({med('boot_wall_seconds')/n:.2f} s per node, nodes boot one at a time)")
print(f"  execution: {med('virtual_seconds'):.1f} virtual s in {med('wall_seconds'):.2f} wall s: {med('speedup'):.1f}x virtual/wall")
print(f"  memory per node (PSS of its host processes): {med('memory_per_node_mib'):.1f} MiB")
print(f"  failures: {sum(r['failures'] for r in runs)}")
PY

# Disks and crash states end to end: rename-safe crashes its writer once per
# execution and runs every crash state of the crash point (one execution
# each). Figures: crash states explored per wall second, simcluster's
# storage per node's disk (overlay of written blocks + cache + write log;
# the 16 MiB base image is shared by every node and execution).
guest-images/examples/build.sh 2>/dev/null
$bin run --quiet --images guest-images/examples/rename-safe --executions "${BENCH_DISK_EXECUTIONS:-6}" --out "$tmp/disk" | tail -1 > "$tmp/disk.json"
python3 - "$tmp/disk.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["crash_states_explored"]
print(f"rename-safe (ext4 data disk, power loss of n2): {r['executions']} executions, {e} crash states explored "
      f"in {r['wall_seconds']:.1f} s wall: {e / r['wall_seconds']:.2f} crash states/s end to end, "
      f"{r['executions_per_hour']:.0f} executions/hour")
print(f"  disk storage per node: {r['disk_storage_per_node_kib']:.0f} KiB; failures: {r['failures']}")
PY
echo "crash-state enumeration alone (no guests): cargo bench -p disksim"
