#!/usr/bin/env python3
"""The client container's entrypoint: waits until every etcd member answers
a health check, then tells Antithesis (here: simcluster) that setup is
complete, and stays up so that the Test Composer commands can run in the
container."""

import sys
import time

from antithesis.lifecycle import setup_complete

from helper import HOSTS, healthy

start = time.monotonic()
while not all(healthy(h) for h in HOSTS):
    if time.monotonic() - start > 120:
        print("client: the etcd cluster did not become healthy in 120 s", flush=True)
        sys.exit(1)
    time.sleep(0.5)
print("client: cluster is healthy", flush=True)
setup_complete({"Message": "ETCD cluster is healthy"})
while True:
    time.sleep(3600)
