#!/bin/sh
# Builds every example's C programs: each DIR/NAME.c becomes the static
# binary DIR/NAME next to it (what the cluster.toml [image] files entries
# name). The binaries are not committed (see .gitignore); run this before
# `simcluster run --images guest-images/examples/DIR`.
#
#   guest-images/examples/build.sh            # all examples
#   CC=clang guest-images/examples/build.sh   # another compiler
set -eu
cd "$(dirname "$0")"
CC="${CC:-gcc}"
CFLAGS="${CFLAGS:--static -O2 -Wall -Wextra -Wno-unused-parameter}"
built=0
for src in */*.c; do
    [ -e "$src" ] || continue
    bin="${src%.c}"
    echo "build.sh: $CC $CFLAGS -o $bin $src" >&2
    # Built under a temporary name and renamed: test binaries and scripts
    # that run at once (scripts/test.sh) may build while another reads.
    # shellcheck disable=SC2086
    $CC $CFLAGS -o "$bin.tmp.$$" "$src" && mv -f "$bin.tmp.$$" "$bin"
    built=$((built + 1))
done
echo "build.sh: built $built binaries" >&2
