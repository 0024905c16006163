#!/bin/sh
# Entry point of a Kubernetes Indexed Job pod (deploy/k8s/indexed-job.yaml):
# pod JOB_COMPLETION_INDEX (0-based) of SHARDS runs `simcluster run
# --shard INDEX+1/SHARDS --out OUT_ROOT/shard-INDEX+1` with the arguments
# given. The same executions whatever node the pod lands on; `simcluster
# merge OUT_ROOT/shard-*` combines them once every pod has completed.
#
# A run that finds a failure is a result, not a failed pod: exit 1 becomes
# 0 (the failure is in the shard's shard.json and failures/). Bad input
# (2) and host errors (3) fail the pod, so the Job's backoffLimit retries
# only those. JOBS (default: the CPUs the pod may use) is --jobs.
set -eu
: "${JOB_COMPLETION_INDEX:?not an Indexed Job pod (JOB_COMPLETION_INDEX is unset)}"
: "${SHARDS:?set SHARDS to the Job's completions}"
: "${OUT_ROOT:?set OUT_ROOT to a volume every pod writes to}"
case "$JOB_COMPLETION_INDEX$SHARDS" in
    *[!0-9]*) echo "shard-entry: JOB_COMPLETION_INDEX and SHARDS must be numbers" >&2; exit 2 ;;
esac
if [ "$JOB_COMPLETION_INDEX" -ge "$SHARDS" ]; then
    echo "shard-entry: index $JOB_COMPLETION_INDEX of $SHARDS shards (completions and SHARDS disagree)" >&2
    exit 2
fi
k=$((JOB_COMPLETION_INDEX + 1))
jobs=${JOBS:-$(nproc)}
set +e
"${SIMCLUSTER:-simcluster}" run --shard "$k/$SHARDS" --jobs "$jobs" --out "$OUT_ROOT/shard-$k" "$@"
rc=$?
set -e
if [ $rc = 1 ]; then rc=0; fi
exit $rc
