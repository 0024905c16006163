#!/usr/bin/env bash
# Sets up a fresh machine and runs the main job: builds simcluster, builds the
# cluster's images (kernel and root filesystem, cached under
# ${SIMCLUSTER_CACHE:-~/.cache/simcluster}), and explores the cluster.
#
#   scripts/run.sh [CLUSTER_DIR] [simcluster run options...]
#
# Host packages the image builder needs (flex, bison, bc, linux-source-6.1)
# are installed with apt-get on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster="${1:-guest-images/hello-cluster}"
shift || true
cargo build --release --quiet
exec target/release/simcluster run --images "$cluster" "$@"
