#!/usr/bin/env bash
# db-cluster (etcd on three nodes, faults on) gives the same trace hash
# RUNS times for one seed, in both userspace modes of the 7.2 kernel.
# Each run must exit 0 with no failure and print its JSON line: a run that
# crashes, fails a property or prints no hash fails the script (five
# missing hashes are not "one hash"). tests/determinism_modes.rs does the
# same for hello-cluster and the examples inside `cargo test`. The last run
# of each mode runs with `--lookahead off` (every wake-up a round trip of
# its own), so the hash also shows that lookahead changes no trace; it must
# report as many round trips as grants, the others fewer.
# SIMCLUSTER_DETERMINISM_OFF_LAST=0 keeps lookahead on in every run (the
# short tier of scripts/test.sh: a run without it takes 1.7x as long, and
# tests/golden.rs checks lookahead off on four clusters there).
# SIMCLUSTER_DETERMINISM_MODES picks the userspace modes (default: both).
# The short tier runs seccomp only: ptrace mode's determinism is checked
# there on hello-cluster and the examples (tests/determinism_modes.rs),
# and on db-cluster in the full tier (its slice 6, and --full). Its two
# ptrace runs would add about 60 s of wall time to the cold short tier
# (docs/figures.md, "The test suite").
#
#   scripts/determinism-db.sh [SEED] [RUNS]      (defaults: 1, 5)
#   SIMCLUSTER_BIN=target/debug/simcluster scripts/determinism-db.sh   (as scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
runs=${2:-5}
modes=${SIMCLUSTER_DETERMINISM_MODES-seccomp ptrace}
# No mode would check nothing and pass: refuse it, and any unknown word.
[ -n "${modes// /}" ] || { echo "determinism-db.sh: SIMCLUSTER_DETERMINISM_MODES is empty" >&2; exit 2; }
for mode in $modes; do
  case $mode in seccomp | ptrace) ;; *) echo "determinism-db.sh: unknown userspace mode $mode" >&2; exit 2 ;; esac
done
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/simcluster
fi
guest-images/db-cluster/build.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for mode in $modes; do
  mkdir -p "$tmp/$mode"
  cp -r guest-images/. "$tmp/$mode/"
  sed -i "0,/^\[cluster\]/s//[cluster]\nuserspace = \"$mode\"/" "$tmp/$mode/db-cluster/cluster.toml"
  grep -q "^userspace = \"$mode\"" "$tmp/$mode/db-cluster/cluster.toml" \
    || { echo "$mode: could not set userspace in db-cluster's cluster.toml"; exit 1; }
  hashes=()
  for i in $(seq 1 "$runs"); do
    rc=0
    lookahead=on
    if [ "$i" = "$runs" ] && [ "$runs" -gt 1 ] && [ "${SIMCLUSTER_DETERMINISM_OFF_LAST:-1}" != 0 ]; then
      lookahead=off
    fi
    "$bin" run --quiet --images "$tmp/$mode/db-cluster" --seed "$seed" --out "$tmp/out" --lookahead "$lookahead" \
      >"$tmp/run.json" 2>"$tmp/run.err" || rc=$?
    # "HASH FAILURES WALL GRANTS ROUND_TRIPS" from the last JSON line, or nothing.
    h=$(python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith("{")]
if lines:
    j = json.loads(lines[-1])
    print(j["trace_hash"], j["failures"], round(j["wall_seconds"], 1), j["grants"], j["round_trips"])' "$tmp/run.json" 2>/dev/null || true)
    echo "$mode run $i (lookahead $lookahead): exit $rc: ${h:-no JSON line}"
    read -r hash failures _ grants trips <<<"${h:-- - - - -}"
    saved_ok=1
    if [ "$hash" != - ]; then
      if [ "$lookahead" = off ] && [ "$trips" != "$grants" ]; then saved_ok=0; fi
      if [ "$lookahead" = on ] && [ "$trips" -ge "$grants" ]; then saved_ok=0; fi
    fi
    if [ "$saved_ok" = 0 ]; then
      echo "  $mode run $i: $trips round trips for $grants grants with lookahead $lookahead"; status=1
    fi
    if [ "$rc" != 0 ] || [ "$hash" = - ] || [ "$failures" != 0 ]; then
      echo "  $mode run $i must exit 0 with no failure and a trace hash; its last stderr lines:"
      tail -n 15 "$tmp/run.err" | sed 's/^/    /'
      status=1
    fi
    hashes+=("$hash")
  done
  if [ "$(printf '%s\n' "${hashes[@]}" | sort -u | wc -l)" != 1 ]; then
    echo "$mode: DIFFERENT trace hashes for seed $seed: ${hashes[*]}"; status=1
  elif [ "${hashes[0]}" = - ]; then
    echo "$mode: no trace hash to compare"; status=1
  else
    echo "$mode: $runs runs, one trace hash"
  fi
done
exit $status
