#!/usr/bin/env bash
# The gallery in CI (scripts/test.sh runs it): real clusters from Debian
# packages (guest-images/gallery). Two known bugs must be found within a few
# executions and replay to the same trace hash (the short form of
# scripts/bench-bugs.sh), and the safe configurations must pass an
# execution each with their faults on. About 15 minutes on 2 cores, image
# builds included.
#
#   scripts/test-gallery.sh            (SIMCLUSTER_BIN picks the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=target/release/simcluster
fi
export SIMCLUSTER_BIN=$bin
status=0
echo "== gallery: known bugs (found and replayed)"
scripts/bench-bugs.sh --short || status=1
echo "== gallery: safe configurations (one execution each, faults on)"
guest-images/db-cluster/build.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in redis-wait etcd-lock-fenced postgresql-sync etcd-fsync; do
  if "$bin" run --quiet --images "guest-images/gallery/$c" --seed 1 --executions 1 --out "$tmp/$c" >"$tmp/$c.json" 2>"$tmp/$c.err"; then
    python3 - "$c" "$tmp/$c.json" <<'PY'
import json, sys
j = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
print(f"{sys.argv[1]}: passed, {j['virtual_seconds']:.1f} virtual s in {j['wall_seconds']:.1f} s, reached {sorted(j['reached'])}")
PY
  else
    echo "$c: FAILED (a safe configuration must pass):"; tail -n 20 "$tmp/$c.err"; status=1
  fi
done
exit $status
