#!/usr/bin/env bash
# Runs every test: unit tests of each crate and end-to-end tests of the
# binary with real user-mode Linux guests. The guest kernel is built first
# (minutes, once; cached by its inputs), so the tests themselves only boot it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Tools some tests cross-check against (they skip with a message if absent).
if [ "$(id -u)" = 0 ]; then
  missing=""
  for tool in tshark:tshark cpio:cpio; do
    command -v "${tool%%:*}" >/dev/null || missing="$missing ${tool##*:}"
  done
  if [ -n "$missing" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null 2>&1; } \
      || echo "note: could not install$missing; the tests that use them will say they skip"
  fi
fi
# Style and lints first: they take seconds and say the most about a change
# (rustfmt.toml; the workspace lints and clippy.toml's determinism guard).
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all -- --check || { echo "cargo fmt --check: run cargo fmt --all"; exit 1; }
else
  echo "note: rustfmt is not installed; skipping cargo fmt --check"
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --quiet --workspace --all-targets -- -D warnings
else
  echo "note: clippy is not installed; skipping cargo clippy"
fi
cargo build --quiet
images=$(target/debug/simcluster image build guest-images/hello-cluster)
echo "$images"
# The vmm crate's own UML tests boot the same kernel.
SIMCLUSTER_UML_KERNEL=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["kernel"])' "$images")
export SIMCLUSTER_UML_KERNEL
# db-cluster (etcd, three nodes, faults on): one seed, five runs per
# userspace mode, one trace hash each (about 2 minutes). Before cargo test,
# so that its summary closes the output; a failure still fails the script.
db_status=0
SIMCLUSTER_BIN=target/debug/simcluster scripts/determinism-db.sh 1 5 || db_status=$?
# A private one-machine Slurm (Debian's packages, installed if missing)
# for tests/slurm.rs: a job array of shards, merged. If it cannot start,
# that test says why it skips.
slurm_dir=$(mktemp -d /tmp/simcluster-slurm.XXXXXX)
export SIMCLUSTER_SLURM_DIR=$slurm_dir
trap 'scripts/slurm/local.sh stop; rm -rf "$slurm_dir"' EXIT
if scripts/slurm/local.sh start; then
  # shellcheck disable=SC1091
  . "$slurm_dir/env"
else
  echo "note: the local Slurm did not start; tests/slurm.rs will say it skips"
fi
# --no-fail-fast: one failing test binary does not hide the others' results.
test_status=0
cargo test --workspace --no-fail-fast 2>&1 || test_status=$?
# The KVM runtime, where this host has no vmx/svm: an L1 Linux under QEMU's
# emulator (SVM with nested paging) runs the KVM tests, then hello-cluster,
# probes/guest-state and examples/reorder five times each and db-cluster
# twice (about 3 minutes a run under the emulator; five runs were measured by
# hand, README "The KVM runtime") on --runtime kvm, one trace hash per
# cluster required, every non-example passing (about 23 minutes warm).
nested_status=0
SIMCLUSTER_NESTED_RUNS=${SIMCLUSTER_NESTED_RUNS:-5} SIMCLUSTER_NESTED_TIMEOUT=${SIMCLUSTER_NESTED_TIMEOUT:-2400} \
  SIMCLUSTER_NESTED_CLUSTERS=${SIMCLUSTER_NESTED_CLUSTERS:-hello-cluster probes/guest-state examples/reorder db-cluster:2} \
  scripts/test-kvm-nested.sh || nested_status=$?
# The gallery: real clusters from Debian packages, known bugs found and
# replayed, safe configurations passing (about 15 minutes).
gallery_status=0
SIMCLUSTER_BIN=target/debug/simcluster scripts/test-gallery.sh || gallery_status=$?
[ $test_status = 0 ] || exit $test_status
[ $gallery_status = 0 ] || exit $gallery_status
[ $nested_status = 0 ] || exit $nested_status
exit $db_status
