#!/bin/sh
# Builds the guest program this cluster's cluster.toml names under
# [image] files (not committed; see .gitignore):
#   dbclient  static C: the workload client, wait
# Used by db-cluster and db-cluster-unsafe (which links to it). The history
# it records is checked on the host by simcluster ([check] history).
set -eu
cd "$(dirname "$0")"
CC="${CC:-gcc}"
# A temporary name, then a rename: builds that run at once (scripts/test.sh)
# never let a reader see a half-written binary.
$CC -static -O2 -Wall -Wextra -Wno-unused-parameter -o "dbclient.tmp.$$" dbclient.c && mv -f "dbclient.tmp.$$" dbclient
echo "build.sh: built dbclient" >&2
