#!/bin/sh
# Builds the probes' C programs: each DIR/NAME.c becomes the static binary
# DIR/NAME next to it, as guest-images/examples/build.sh does for the
# examples (not committed; see .gitignore).
set -eu
cd "$(dirname "$0")"
CC="${CC:-gcc}"
for src in */*.c; do
    [ -e "$src" ] || continue
    # Up to date (newer than its source and this script): kept, so that the
    # tests that call this script (some under an emulator) do not compile
    # again. FORCE=1 (or another CC) builds anyway.
    if [ -z "${FORCE:-}" ] && [ "$CC" = gcc ] && [ "${src%.c}" -nt "$src" ] && [ "${src%.c}" -nt "$0" ]; then
        continue
    fi
    echo "build.sh: $CC -static -O2 -Wall -o ${src%.c} $src" >&2
    # A temporary name, then a rename: builds that run at once never let a
    # reader see a half-written binary.
    $CC -static -O2 -Wall -Wextra -o "${src%.c}.tmp.$$" "$src" && mv -f "${src%.c}.tmp.$$" "${src%.c}"
done
