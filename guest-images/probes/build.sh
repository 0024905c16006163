#!/bin/sh
# Builds the probes' C programs: each DIR/NAME.c becomes the static binary
# DIR/NAME next to it, as guest-images/examples/build.sh does for the
# examples (not committed; see .gitignore).
set -eu
cd "$(dirname "$0")"
CC="${CC:-gcc}"
for src in */*.c; do
    [ -e "$src" ] || continue
    echo "build.sh: $CC -static -O2 -Wall -o ${src%.c} $src" >&2
    # A temporary name, then a rename: builds that run at once never let a
    # reader see a half-written binary.
    $CC -static -O2 -Wall -Wextra -o "${src%.c}.tmp.$$" "$src" && mv -f "${src%.c}.tmp.$$" "${src%.c}"
done
