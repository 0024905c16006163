#!/usr/bin/env python3
"""eventually_: after the faults stop, every member becomes healthy again
(within 30 s of virtual time)."""

import time

from antithesis.assertions import always, reachable

from helper import HOSTS, healthy

reachable("Performing health check on the etcd cluster", None)
deadline = time.monotonic() + 30
while True:
    sick = [h for h in HOSTS if not healthy(h)]
    if not sick or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print("unhealthy:", sick, flush=True)
always(not sick, "Every etcd member is healthy once faults stop", {"unhealthy": sick})
