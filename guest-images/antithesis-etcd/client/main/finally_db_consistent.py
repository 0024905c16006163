#!/usr/bin/env python3
"""finally_: every put etcd acknowledged during the drivers is in the
database with its value, as every member reads it; then six fresh keys
written are the only keys under their prefix."""

from antithesis.assertions import always, sometimes

from helper import HOSTS, acked, etcdctl, get_prefix, put

want = acked()
for host in HOSTS:
    ok, have = get_prefix(host, "traffic/")
    always(ok, "Every member answers a read at the end", {"host": host, "error": None if ok else have})
    if ok:
        lost = {k: v for k, v in want.items() if have.get(k) != v}
        print(f"{host}: {len(have)} traffic keys, {len(want)} acknowledged, {len(lost)} missing", flush=True)
        always(not lost, "Every acknowledged put is in the database",
               {"host": host, "missing": dict(list(lost.items())[:5]), "acknowledged": len(want)})
sometimes(len(want) > 0, "Some put was acknowledged during the drivers", {"acknowledged": len(want)})

etcdctl(HOSTS[0], "del", "--prefix", "finally/")
for i in range(6):
    put(HOSTS[i % 3], f"finally/{i}", str(i))
ok, keys = get_prefix(HOSTS[1], "finally/")
always(ok and len(keys) == 6, "The database holds exactly the six keys just written",
       {"keys": sorted(keys) if ok else keys})
