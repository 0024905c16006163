#!/usr/bin/env bash
# Sets up a fresh machine and runs the main job: builds simcluster, the
# cluster's guest programs (its build.sh, if it has one), its images (kernel
# and root filesystem, cached under ${SIMCLUSTER_CACHE:-~/.cache/simcluster}),
# and explores the cluster.
#
#   scripts/run.sh [CLUSTER_DIR] [simcluster run options...]
#   scripts/run.sh                                   # guest-images/db-cluster
#   scripts/run.sh guest-images/db-cluster --executions 20
#
# Host packages the image builder needs (flex, bison, bc, linux-source-6.1,
# e2fsprogs) are installed with apt-get on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster="${1:-guest-images/db-cluster}"
shift || true
cargo build --release --quiet
# db-cluster-unsafe and the examples take their programs from a sibling
# directory's build.sh.
for dir in "$cluster" "$cluster/../db-cluster" "$cluster/.."; do
  if [ -x "$dir/build.sh" ] && [ -f "$dir/build.sh" ]; then "$dir/build.sh"; break; fi
done
exec target/release/simcluster run --images "$cluster" "$@"
