#!/usr/bin/env bash
# db-cluster (etcd on three nodes, faults on) gives the same trace hash
# RUNS times for one seed, in both userspace modes of the 7.2 kernel.
# About 7 s per execution here; tests/determinism_modes.rs does the same for
# hello-cluster and the examples inside `cargo test`.
#
#   scripts/determinism-db.sh [SEED] [RUNS]      (defaults: 1, 5)
#   SIMCLUSTER_BIN=target/debug/simcluster scripts/determinism-db.sh   (as scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
runs=${2:-5}
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=target/release/simcluster
fi
guest-images/db-cluster/build.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for mode in seccomp ptrace; do
  mkdir -p "$tmp/$mode"
  cp -r guest-images/. "$tmp/$mode/"
  sed -i "0,/^\[cluster\]/s//[cluster]\nuserspace = \"$mode\"/" "$tmp/$mode/db-cluster/cluster.toml"
  hashes=()
  for i in $(seq 1 "$runs"); do
    h=$("$bin" run --quiet --images "$tmp/$mode/db-cluster" --seed "$seed" --out "$tmp/out" \
        | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["trace_hash"], j["failures"], round(j["wall_seconds"],1))') || true
    echo "$mode run $i: $h"
    hashes+=("${h%% *}")
  done
  if [ "$(printf '%s\n' "${hashes[@]}" | sort -u | wc -l)" != 1 ]; then
    echo "DIFFERENT trace hashes for seed $seed in $mode mode"; status=1
  else
    echo "$mode: $runs runs, one trace hash"
  fi
done
exit $status
