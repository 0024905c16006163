#!/usr/bin/env python3
"""first_: runs once, before any driver and before any fault: the cluster
has its three members and takes a write."""

import sys

from antithesis.assertions import always

from helper import HOSTS, etcdctl, put

ok, out = etcdctl(HOSTS[0], "member", "list")
members = sorted(line.split(", ")[2] for line in out.splitlines()) if ok else []
print("members:", members, flush=True)
always(members == HOSTS, "The cluster has the three members of the compose file", {"members": members})
always(put(HOSTS[0], "setup/marker", "ready"), "A write succeeds before any fault", {"host": HOSTS[0]})
sys.exit(0)
