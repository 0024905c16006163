#!/bin/sh
# Builds the guest programs this cluster's cluster.toml names under
# [image] files (not committed; see .gitignore):
#   dbclient  static C: the workload client, seed-entropy, wait
#   lincheck  static Rust: the linearizability invariant (checker crate)
# Used by db-cluster and db-cluster-unsafe (which links to these files).
set -eu
cd "$(dirname "$0")"
CC="${CC:-gcc}"
$CC -static -O2 -Wall -Wextra -Wno-unused-parameter -o dbclient dbclient.c
# Its own target directory, whatever the caller's CARGO_TARGET_DIR says:
# the binary is copied from a known place.
( cd lincheck &&
  RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=target \
    cargo build --release --quiet --target x86_64-unknown-linux-gnu )
cp lincheck/target/x86_64-unknown-linux-gnu/release/lincheck lincheck-bin
echo "build.sh: built dbclient and lincheck-bin" >&2
