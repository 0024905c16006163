#!/usr/bin/env bash
# Puts the Antithesis Python SDK (PyPI's `antithesis`, pinned by version and
# sha256) into simcluster's cache, unpacked, and prints the directory that
# holds it: its `antithesis/` package and `antithesis-VERSION.dist-info/`,
# ready to copy into a guest's /usr/lib/python3/dist-packages/ (the SDK needs
# only the Python standard library). Downloads with pip once; later calls
# print the cached directory. Exit 1 (with the reason on stderr) when the
# wheel cannot be fetched, as without network access.
#
#   scripts/antithesis-python-sdk.sh            # the pinned version
set -euo pipefail
version=0.4.0
sha256=5f1cf8b51a589cba8baec52de36e174a32d02e2ead124b6012a64e83fb642a9c
wheel=antithesis-$version-py3-none-any.whl
cache=${SIMCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/simcluster}/pypi
dir=$cache/antithesis-$version-$sha256
if [ ! -d "$dir/antithesis" ]; then
  tmp=$(mktemp -d "$cache.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$cache")" && mktemp -d "$cache.XXXXXX"; })
  trap 'rm -rf "$tmp"' EXIT
  if ! pip download --quiet --no-deps --only-binary=:all: "antithesis==$version" -d "$tmp" >&2; then
    echo "antithesis-python-sdk: cannot download antithesis==$version from PyPI" >&2
    exit 1
  fi
  got=$(sha256sum "$tmp/$wheel" | cut -d' ' -f1)
  if [ "$got" != "$sha256" ]; then
    echo "antithesis-python-sdk: $wheel has sha256 $got, expected $sha256" >&2
    exit 1
  fi
  python3 -m zipfile -e "$tmp/$wheel" "$tmp/unpacked"
  mkdir -p "$cache"
  rm -rf "$dir"
  mv "$tmp/unpacked" "$dir"
fi
echo "$dir"
