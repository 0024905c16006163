#!/usr/bin/env bash
# The gallery in the tests: real clusters from Debian packages
# (guest-images/gallery). Known bugs must be found within a few executions
# and replay to the same trace hash (scripts/bench-bugs.sh), and safe
# configurations must pass an execution each with their faults on.
#
#   scripts/test-gallery.sh          the short tier (scripts/test.sh): one bug,
#                                    etcd-no-fsync (bbolt after power loss), found
#                                    and replayed, and its safe twin etcd-fsync
#                                    passing; both reuse db-cluster's etcd packages
#                                    (about 3 minutes here)
#   --bugs or --safe runs one half (scripts/test.sh runs them as two tasks)
#   scripts/test-gallery.sh --full   every case under every strategy (the table in
#                                    guest-images/gallery/README.md, about 55
#                                    minutes) and the six safe configurations
#
# A safe configuration passes when simcluster exits 0 and its JSON line
# says so: no failure, the execution asked for ran (with its crash-state
# siblings, if it enumerated a crash point's states), a trace hash.
# SIMCLUSTER_BIN picks the binary; SAFE="CASE ..." the safe configurations
# (CASES="CASE ...", read by scripts/bench-bugs.sh, the bugs).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/simcluster
fi
export SIMCLUSTER_BIN=$bin
full="" part=all
for a in "$@"; do
  case "$a" in
    --full) full=1 ;;
    --bugs) part=bugs ;;
    --safe) part=safe ;;
    *) echo "test-gallery.sh: unknown option $a (--full, --bugs, --safe)" >&2; exit 2 ;;
  esac
done
if [ -n "$full" ]; then
  bugs=(env SEEDS=1 MAX=8 scripts/bench-bugs.sh)
  safe=${SAFE:-"redis-wait etcd-lock-fenced postgresql-sync etcd-fsync postgresql-txn-serializable nats-sync"}
else
  bugs=(env CASES="${CASES:-etcd-no-fsync}" scripts/bench-bugs.sh --short)
  safe=${SAFE:-etcd-fsync}
fi
status=0
if [ $part != safe ]; then
  echo "== gallery: known bugs (found and replayed)"
  "${bugs[@]}" || status=1
fi
[ $part != bugs ] || exit $status
echo "== gallery: safe configurations (one execution each, faults on)"
guest-images/db-cluster/build.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in $safe; do
  rc=0
  "$bin" run --quiet --images "guest-images/gallery/$c" --seed 1 --executions 1 --out "$tmp/$c" >"$tmp/$c.json" 2>"$tmp/$c.err" || rc=$?
  if ! python3 - "$c" "$tmp/$c.json" "$rc" <<'PY'
import json, re, sys
case, path, rc = sys.argv[1:]
try:
    j = json.loads(open(path).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError) as e:
    sys.exit(f"{case}: FAILED (exit {rc}, no JSON line: {e})")
wrong = []
if rc != "0":
    wrong.append(f"exit {rc}")
if j.get("failures") != 0:
    wrong.append(f"failures {j.get('failures')}: {(j.get('failure') or {}).get('kind', '?')}")
# One execution asked; its crash-state siblings (a crash point whose disk
# states are enumerated) count as executions of their own, so more is fine,
# none is not.
if not isinstance(j.get("executions"), int) or j["executions"] < 1:
    wrong.append(f"executions {j.get('executions')}: nothing ran")
if not re.fullmatch(r"[0-9a-f]{64}", str(j.get("trace_hash", ""))):
    wrong.append(f"trace hash {j.get('trace_hash')!r}")
if wrong:
    sys.exit(f"{case}: FAILED (a safe configuration must pass): " + "; ".join(wrong))
print(f"{case}: passed, {j['executions']} executions, {j['virtual_seconds']:.1f} virtual s in {j['wall_seconds']:.1f} s, reached {sorted(j['reached'])}, trace {j['trace_hash'][:16]}")
PY
  then
    tail -n 20 "$tmp/$c.err"; status=1
  fi
done
exit $status
