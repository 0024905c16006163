#!/usr/bin/env bash
# Runs every test: unit tests of each crate and end-to-end tests of the
# binary with real user-mode Linux guests. The guest kernel is built first
# (minutes, once; cached by its inputs), so the tests themselves only boot it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
target/debug/simcluster image build guest-images/hello-cluster
cargo test --workspace 2>&1
