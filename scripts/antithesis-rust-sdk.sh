#!/usr/bin/env bash
# Builds guest-images/probes/antithesis-rust (a program using the Antithesis
# Rust SDK from crates.io, antithesis_sdk pinned by Cargo.lock) as a static
# binary into simcluster's cache, keyed by the hash of its sources, and
# prints the binary's path. Exit 1 (the reason on stderr) when it cannot be
# built, as without access to crates.io.
set -euo pipefail
src=$(cd "$(dirname "$0")/../guest-images/probes/antithesis-rust" && pwd)
key=$(cat "$src/Cargo.toml" "$src/Cargo.lock" "$src/src/main.rs" | sha256sum | cut -c1-16)
cache=${SIMCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/simcluster}/antithesis-rust
bin=$cache/sdk-rust-$key
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  # Outside simcluster's build: no workspace wrapper, a target dir of its own.
  if ! env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS RUSTFLAGS="-C target-feature=+crt-static" \
      cargo build --quiet --release --locked --manifest-path "$src/Cargo.toml" \
      --target x86_64-unknown-linux-gnu --target-dir "$cache/target" >&2; then
    echo "antithesis-rust-sdk: cannot build $src (crates.io unreachable?)" >&2
    exit 1
  fi
  cp "$cache/target/x86_64-unknown-linux-gnu/release/sdk-rust" "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
