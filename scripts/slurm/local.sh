#!/bin/sh
# A one-machine Slurm for tests: munged, slurmctld and slurmd on this host,
# everything (config, keys, sockets, state, logs) under one private
# directory, so the host's own /etc/slurm and /etc/munge are left alone.
#
#   scripts/slurm/local.sh start   # installs Debian's slurm packages if missing
#   . "$SIMCLUSTER_SLURM_DIR/env"  # SLURM_CONF for sbatch, squeue, sinfo
#   scripts/slurm/local.sh stop
#
# SIMCLUSTER_SLURM_DIR (default /tmp/simcluster-slurm) holds it all.
set -eu
dir=${SIMCLUSTER_SLURM_DIR:-/tmp/simcluster-slurm}
cmd=${1:-start}

# Stops the daemons and waits (up to 10 s each) until they are gone: a
# slurmctld still saving its state would race the caller's rm -rf of $dir.
stop() {
    for p in slurmd slurmctld munged; do
        if [ -f "$dir/$p.pid" ]; then
            pid=$(cat "$dir/$p.pid")
            kill "$pid" 2>/dev/null || true
            i=0
            while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
                sleep 0.1
                i=$((i + 1))
            done
            rm -f "$dir/$p.pid"
        fi
    done
}

if [ "$cmd" = stop ]; then
    stop
    exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop" >&2; exit 2; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    echo "local slurm: installing Debian's slurmctld, slurmd, slurm-client and munge" >&2
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
        slurmctld slurmd slurm-client munge >&2 || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge >&2; }
fi

stop
mkdir -p "$dir/spool/ctld" "$dir/spool/d" "$dir/log"
chmod 700 "$dir"
if [ ! -f "$dir/munge.key" ]; then
    # A fresh key for this private cluster (munge wants at least 32 bytes).
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
    chmod 400 "$dir/munge.key"
fi
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
user=$(id -un)
cat > "$dir/slurm.conf" <<CONF
ClusterName=simcluster-local
SlurmctldHost=$host
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/spool/ctld
SlurmdSpoolDir=$dir/spool/d
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=6917
SlurmdPort=6918
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
printf 'export SLURM_CONF=%s\n' "$dir/slurm.conf" > "$dir/env"

munged --force --key-file "$dir/munge.key" --socket "$dir/munge.sock" \
    --pid-file "$dir/munged.pid" --log-file "$dir/log/munged.log" --seed-file "$dir/munge.seed"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i
slurmd
# Ready when the node takes jobs.
i=0
until sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; do
    i=$((i + 1))
    if [ $i -gt 60 ]; then
        echo "local slurm: the node did not come up; logs in $dir/log" >&2
        sinfo >&2 || true
        tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
        exit 1
    fi
    sleep 1
done
echo "local slurm: up on $host ($cpus CPUs); . $dir/env to use it" >&2
