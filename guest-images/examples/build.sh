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
CFLAGS_SET=${CFLAGS:+1}
CFLAGS="${CFLAGS:--static -O2 -Wall -Wextra -Wno-unused-parameter}"
built=0
for src in */*.c; do
    [ -e "$src" ] || continue
    bin="${src%.c}"
    # Up to date (newer than its source, simnet.h and this script): kept, so
    # that every test binary that calls this script does not compile all of
    # them again. FORCE=1 (or another CC or CFLAGS) builds anyway.
    if [ -z "${FORCE:-}" ] && [ "$CC" = gcc ] && [ -z "${CFLAGS_SET:-}" ] && [ "$bin" -nt "$src" ] \
        && [ "$bin" -nt simnet.h ] && [ "$bin" -nt "$0" ]; then
        continue
    fi
    echo "build.sh: $CC $CFLAGS -o $bin $src" >&2
    # Built under a temporary name and renamed: test binaries and scripts
    # that run at once (scripts/test.sh) may build while another reads.
    # shellcheck disable=SC2086
    $CC $CFLAGS -o "$bin.tmp.$$" "$src" && mv -f "$bin.tmp.$$" "$bin"
    built=$((built + 1))
done
echo "build.sh: built $built binaries" >&2
