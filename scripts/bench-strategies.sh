#!/usr/bin/env bash
# Per strategy and example cluster: how many executions until the known bug
# shows (over several run seeds), and executions per hour. These are the
# figures behind the bounds asserted in tests/strategies.rs.
#
#   scripts/bench-strategies.sh                 every example, seeds 1..3
#   SEEDS="1 2 3 4 5" MAX=40 scripts/bench-strategies.sh
#   EXAMPLES="crash-primary" STRATEGIES="pct dfs" scripts/bench-strategies.sh
#   SIMCLUSTER_BIN=target/debug/simcluster scripts/bench-strategies.sh   (no release build)
#
# Each row: the 1-based execution of the first failure per seed, then the
# median and the worst over the seeds ('-' counts as worse than MAX).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SIMCLUSTER_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/simcluster
fi
guest-images/examples/build.sh 2>/dev/null
seeds=${SEEDS:-1 2 3}
max=${MAX:-30}
examples=${EXAMPLES:-reorder partition crash-primary rename-unsafe ack-unsafe ack-unsafe-lazy stages hello-cluster}
strategies=${STRATEGIES:-random pct delay dfs coverage}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf "%-15s %-8s %-22s %-13s %-10s %s\n" example strategy "first failure per seed" "median/worst" "exec/hour" "wall s"
for ex in $examples; do
  dir=guest-images/examples/$ex
  [ "$ex" = hello-cluster ] && dir=guest-images/hello-cluster
  for s in $strategies; do
    firsts=""
    rate_sum=0; n=0; wall=0
    for seed in $seeds; do
      json=$($bin run --quiet --images "$dir" --strategy "$s" --seed "$seed" --executions "$max" --until-failure \
             --critical-walks 0 --out "$out/$ex-$s-$seed" 2>/dev/null | tail -1) || true
      if [ -z "$json" ]; then firsts="$firsts error"; continue; fi
      first=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); i=d['failing_execution']; print('-' if i is None else i+1)" "$json")
      rate=$(python3 -c "import json,sys; print(round(json.loads(sys.argv[1])['executions_per_hour']))" "$json")
      w=$(python3 -c "import json,sys; print(round(json.loads(sys.argv[1])['wall_seconds'],1))" "$json")
      firsts="$firsts $first"; rate_sum=$((rate_sum + rate)); n=$((n + 1)); wall=$(python3 -c "print(round($wall+$w,1))")
    done
    mw=$(python3 -c "
import sys
v = sorted(int(x) if x.isdigit() else $max + 1 for x in sys.argv[1:])
f = lambda x: str(x) if x <= $max else '-'
print(f(v[len(v) // 2]) + '/' + f(v[-1]) if v else '-')" $firsts)
    printf "%-15s %-8s %-22s %-13s %-10s %s\n" "$ex" "$s" "$firsts" "$mw" "$((rate_sum / (n > 0 ? n : 1)))" "$wall"
  done
done
echo "('-': no failure within $max executions; hello-cluster has no bug, its row is the executions/hour figure)"
