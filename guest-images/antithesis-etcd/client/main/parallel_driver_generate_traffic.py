#!/usr/bin/env python3
"""parallel_driver_: puts a few random keys through random members, each
read back through another member. Faults happen meanwhile: a put or a get
may fail (unknown outcome, not a bug), but a value read back must be the
value written, and an acknowledged put is recorded for finally_."""

from antithesis.assertions import always, sometimes
from antithesis.random import get_random

from helper import get, put, random_host, record_ack

puts = gets = 0
for _ in range(3 + get_random() % 4):
    key = f"traffic/{get_random():016x}"
    value = f"{get_random():016x}"
    host = random_host()
    if not put(host, key, value):
        print(f"put {key} via {host}: failed", flush=True)
        continue
    puts += 1
    record_ack(key, value)
    other = random_host(but=host)
    ok, got = get(other, key)
    if not ok:
        print(f"get {key} via {other}: failed", flush=True)
        continue
    gets += 1
    always(got == value, "A value read back is the value written",
           {"key": key, "written": value, "read": got, "put_via": host, "get_via": other})
print(f"traffic: {puts} puts, {gets} gets", flush=True)
sometimes(puts > 0, "Client can make successful put requests", {"puts": puts})
sometimes(gets > 0, "Client can make successful get requests", {"gets": gets})
