#!/usr/bin/env bash
# simcluster's own cost per grant (one node let run until it waits again),
# with the time-travel exchange as socket messages against the shared-memory
# clock, on hello-cluster (3 nodes, 60 virtual s) with the 7.2 kernel:
# - instructions per grant in simcluster's process (valgrind --tool=callgrind,
#   guests not traced: repeatable on a noisy machine), and the top functions;
# - system calls per grant in simcluster's process (strace -c, no -f).
#
#   scripts/bench-controller.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/simcluster
for tool in valgrind strace callgrind_annotate; do
  command -v $tool >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind strace >/dev/null; break; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for transport in messages shared-memory; do
  mkdir -p "$tmp/$transport"
  cp -r guest-images/hello-cluster/. "$tmp/$transport/"
  sed -i "0,/^\[cluster\]/s//[cluster]\ntime_travel = \"$transport\"/" "$tmp/$transport/cluster.toml"
  "$bin" image build --quiet "$tmp/$transport" >/dev/null
done
for transport in messages shared-memory; do
  c=$tmp/$transport
  # Unconfined under valgrind: it keeps the descriptor limit the jail would
  # set (setrlimit fails), and the jail is no part of the grant path.
  SIMCLUSTER_DEBUG_UNCONFINED=1 valgrind --tool=callgrind --trace-children=no --callgrind-out-file="$tmp/cg.$transport" \
    "$bin" run --quiet --images "$c" --seed 1 --watchdog 600 --out "$tmp/o1" > "$tmp/cg-run.$transport" 2>"$tmp/cg-err.$transport"
  strace -c -o "$tmp/st.$transport" "$bin" run --quiet --images "$c" --seed 1 --out "$tmp/o2" > "$tmp/st-run.$transport"
  python3 - "$transport" "$tmp/cg.$transport" "$tmp/cg-run.$transport" "$tmp/st.$transport" <<'PY'
import json, re, sys
transport, cg, run, st = sys.argv[1:]
r = json.loads(open(run).read().strip().splitlines()[-1])
grants = r["grants"]
ir = None
for line in open(cg):
    if line.startswith("summary:") or line.startswith("totals:"):
        ir = int(line.split()[1])
calls = 0
for line in open(st):
    m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
    if m and m.group(2) != "total":
        calls += int(m.group(1))
print(f"{transport:>14}: {grants} grants, {ir / grants:,.0f} instructions/grant, {calls / grants:.1f} syscalls/grant "
      f"(trace {r['trace_hash'][:12]})")
PY
  echo "  top functions ($transport, own instructions):"
  callgrind_annotate "$tmp/cg.$transport" 2>/dev/null | grep -E "^ *[0-9,]+ \(" | sed -n "2,11p" | cut -c1-150 | sed 's/^/    /'
  echo "  top system calls ($transport):"
  sed -n "3,16p" "$tmp/st.$transport" | sed 's/^/    /'
done
