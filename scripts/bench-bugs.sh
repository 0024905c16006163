#!/usr/bin/env bash
# The real-bug benchmark: known bugs in Debian software nobody here wrote
# (guest-images/gallery, each cluster citing its source in README.md), run
# per strategy over several seeds. Prints, per run, whether the bug was
# found, the executions and the virtual time (summed over those executions)
# to its first detection, and the wall time; then a summary per case and
# strategy. A found bug is replayed once per case (same trace hash).
#
# Found means a failure of the case's known kind (`kinds` below, the
# gallery README's "what failed" column); a run that fails with another
# kind, or that gives no result line, is an error, as is a found bug with no
# failure file to replay.
#
#   scripts/bench-bugs.sh                      # the full form (hours)
#   scripts/bench-bugs.sh --short              # CI: two cases, random, seed 1
#   CASES="redis-async etcd-lock" STRATEGIES="random pct" SEEDS="1 2" MAX=6 scripts/bench-bugs.sh
#
# Exit status: 0 when every case was found by at least one of its runs (the
# short form: by every run) and no run was an error, 1 otherwise; 2 for a
# case with no known failure kind.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each case's bug and the failure kind(s) it shows as (the JSON line's
# failure.kind; guest-images/gallery/README.md, "what failed": etcd-no-fsync's
# members refuse their bbolt database at start, or under dfs the history is
# not linearizable).
declare -A kinds=(
  [redis-async]=linearizability
  [postgresql-async]=linearizability
  [etcd-no-fsync]="start_command linearizability"
  [etcd-lock]=workload
  [postgresql-txn-rr]=anomaly
  [nats-async]=workload
)
short=0
[ "${1:-}" = --short ] && short=1
if [ $short = 1 ]; then
  CASES=${CASES:-"redis-async etcd-lock"}
  STRATEGIES=${STRATEGIES:-random}
  SEEDS=${SEEDS:-1}
  MAX=${MAX:-4}
else
  CASES=${CASES:-"redis-async postgresql-async etcd-no-fsync etcd-lock postgresql-txn-rr nats-async"}
  STRATEGIES=${STRATEGIES:-"random pct delay dfs coverage"}
  SEEDS=${SEEDS:-"1 2 3"}
  MAX=${MAX:-10}
fi
for c in $CASES; do
  [ -n "${kinds[$c]:-}" ] || { echo "bench-bugs.sh: no known failure kind for case $c (known: ${!kinds[*]})" >&2; exit 2; }
done
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/simcluster
fi
guest-images/db-cluster/build.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in $CASES; do
  "$bin" image build --quiet "guest-images/gallery/$c" >/dev/null
done

printf '%-17s %-7s %4s  %-5s %10s %12s %9s  %s\n' case strategy seed found execs virtual_s wall_s failure
results=$tmp/results
: >"$results"
status=0
for c in $CASES; do
  replayed=
  for s in $STRATEGIES; do
    for seed in $SEEDS; do
      out=$tmp/$c-$s-$seed
      "$bin" run --quiet --images "guest-images/gallery/$c" --strategy "$s" --seed "$seed" \
        --executions "$MAX" --until-failure --out "$out" >"$out.json" 2>"$out.err" || true
      python3 - "$c" "$s" "$seed" "$out" "$results" "${kinds[$c]}" <<'PY'
import json, sys
case, strategy, seed, out, results, kinds = sys.argv[1:]
try:
    line = json.loads(open(out + ".json").read().strip().splitlines()[-1])
    record = json.load(open(out + "/shard.json"))
except Exception as e:
    print(f"{case:<17} {strategy:<7} {seed:>4}  ERROR (no result: {e}) {open(out + '.err').read().strip()[-300:]}")
    open(results, "a").write(f"{case} {strategy} {seed} error 0 0 0\n")
    sys.exit(0)
failed = line["failures"] > 0
kind = (line.get("failure") or {}).get("kind", "-")
found = failed and kind in kinds.split()
if failed and not found:
    message = (line.get("failure") or {}).get("message", "")[:300].replace("\n", " ")
    print(f"{case:<17} {strategy:<7} {seed:>4}  ERROR: failed with kind {kind}, not the case's bug ({kinds}): {message}")
    open(results, "a").write(f"{case} {strategy} {seed} wrong 0 0 0\n")
    sys.exit(0)
first = line.get("failing_execution") if found else None
# Executions (not crash-state siblings) up to and including the first
# failing one, and their virtual time.
execs = [r for r in record["executions"] if r["crash_state"] is None and (first is None or r["execution"] <= first)]
virtual = sum(r["virtual_ns"] for r in record["executions"] if first is None or r["execution"] <= first) / 1e9
print(f"{case:<17} {strategy:<7} {seed:>4}  {'yes' if found else 'no':<5} {len(execs):>10} {virtual:>12.1f} "
      f"{line['wall_seconds']:>9.1f}  {kind}")
open(results, "a").write(f"{case} {strategy} {seed} {'yes' if found else 'no'} {len(execs)} {virtual:.1f} {line['wall_seconds']:.1f}\n")
PY
      f=$(ls "$out"/failures/*/failure.json 2>/dev/null | head -n 1 || true)
      if [ -z "$f" ] && [ "$(awk -v k="$c $s $seed" 'index($0, k " ") == 1 {print $4}' "$results")" = yes ]; then
        echo "  $c ($s, seed $seed): found, but no failure file under $out/failures to replay"; status=1
      fi
      if [ -z "$replayed" ] && [ -n "$f" ] && [ "$(awk -v k="$c $s $seed" 'index($0, k " ") == 1 {print $4}' "$results")" = yes ]; then
        if "$bin" replay --quiet "$f" >"$out.replay" 2>&1; then
          echo "  replay of $c ($s, seed $seed): same trace hash and failure"
        else
          echo "  replay of $c ($s, seed $seed): DIFFERENT"; status=1
        fi
        replayed=1
      fi
    done
  done
done

echo
echo "summary (found in runs; executions and virtual s to first detection: median over the runs that found it)"
python3 - "$results" "$short" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
short = sys.argv[2] == "1"
by = {}
for case, strategy, seed, found, execs, virt, wall in rows:
    by.setdefault((case, strategy), []).append((found, int(execs), float(virt), float(wall)))
missing = set()
for case in dict.fromkeys(r[0] for r in rows):
    any_found = False
    for (c, s), runs in by.items():
        if c != case:
            continue
        hits = [r for r in runs if r[0] == "yes"]
        any_found |= bool(hits)
        if short and len(hits) < len(runs):
            missing.add(case)
        med = lambda i: statistics.median(r[i] for r in hits) if hits else float("nan")
        print(f"  {case:<17} {s:<7} found {len(hits)}/{len(runs)}  executions {med(1):>5.1f}  virtual {med(2):>7.1f} s  "
              f"wall {sum(r[3] for r in runs):>7.1f} s in all")
    if not any_found:
        missing.add(case)
errors = [f"{r[0]} {r[1]} seed {r[2]} ({'another failure kind' if r[3] == 'wrong' else 'no result'})"
          for r in rows if r[3] in ("error", "wrong")]
if errors:
    print("ERRORS: " + "; ".join(errors))
if missing:
    print("NOT FOUND: " + ", ".join(sorted(missing)))
sys.exit(1 if missing or errors else 0)
PY
exit $status
