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
# Host packages the image builder needs (flex, bison, bc, e2fsprogs) are installed
# with apt-get on first use, and linux-source-7.2 is fetched from trixie-backports
# through a private apt root (pinned version and checksum; host apt setup untouched).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster="${1:-guest-images/db-cluster}"
shift || true
cargo build --release --quiet
# The cluster's guest programs: its own build.sh, or its parent's (the
# examples), and that of any sibling directory its cluster.toml takes files
# from (db-cluster-unsafe uses db-cluster's).
if [ -f "$cluster/build.sh" ]; then "$cluster/build.sh"
elif [ -f "$cluster/../build.sh" ]; then "$cluster/../build.sh"
fi
if [ -f "$cluster/cluster.toml" ]; then
  for sib in $(grep -o '"\.\./[^/"]*/' "$cluster/cluster.toml" | tr -d '"' | sort -u); do
    if [ -f "$cluster/$sib/build.sh" ]; then "$cluster/$sib/build.sh"; fi
  done
fi
exec "${CARGO_TARGET_DIR:-target}/release/simcluster" run --images "$cluster" "$@"
