"""What the client's programs share: the etcd members, etcdctl calls and
the file where drivers record the writes etcd acknowledged.

etcdctl (Debian's etcd-client) talks to one member at a time, so a
partition or a crashed member shows as a failed call, which the callers
count as an unknown outcome, never as a wrong answer.
"""

import os
import subprocess

from antithesis.assertions import unreachable
from antithesis.random import get_random

HOSTS = ["etcd0", "etcd1", "etcd2"]
# One line "KEY VALUE" per put that etcd acknowledged (the container's /tmp
# is the node's: every command of the template sees it).
ACKED = "/tmp/acked-puts"


def etcdctl(host, *args, timeout="2s"):
    """Runs etcdctl against HOST; (True, stdout) or (False, why)."""
    cmd = ["etcdctl", f"--endpoints=http://{host}:2379", "--dial-timeout=1s", f"--command-timeout={timeout}", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except FileNotFoundError as e:
        unreachable("Client cannot run etcdctl", {"error": str(e)})
        raise
    except subprocess.TimeoutExpired:
        return False, "etcdctl did not return within 10 s"
    if done.returncode != 0:
        return False, done.stderr.strip()
    return True, done.stdout


def put(host, key, value):
    ok, out = etcdctl(host, "put", key, value)
    return ok and out.strip() == "OK"


def get(host, key):
    """(True, value or None when the key is absent), or (False, why)."""
    ok, out = etcdctl(host, "get", key, "--print-value-only")
    if not ok:
        return False, out
    return True, (out[:-1] if out.endswith("\n") else out) or None


def get_prefix(host, prefix):
    """(True, {key: value}) of every key under PREFIX, or (False, why)."""
    ok, out = etcdctl(host, "get", "--prefix", prefix, timeout="5s")
    if not ok:
        return False, out
    lines = out.splitlines()
    return True, dict(zip(lines[0::2], lines[1::2]))


def healthy(host):
    ok, _ = etcdctl(host, "endpoint", "health")
    return ok


def random_host(but=None):
    hosts = [h for h in HOSTS if h != but]
    return hosts[get_random() % len(hosts)]


def record_ack(key, value):
    # One write of one short line with O_APPEND: drivers running at once
    # never interleave their lines.
    fd = os.open(ACKED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {value}\n".encode())
    finally:
        os.close(fd)


def acked():
    try:
        with open(ACKED) as f:
            return dict(line.split(" ", 1) for line in f.read().splitlines())
    except FileNotFoundError:
        return {}
