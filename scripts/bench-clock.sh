#!/usr/bin/env bash
# Guest clock reads through the system call against the vDSO, side by side
# in one run on this machine: every clock read of a guest program a trap
# into its user-mode Linux kernel (SIMCLUSTER_DEBUG_SYSCALL_CLOCK=1, the
# kernel's time-travel-vdso-clock=off) against the vDSO answering them
# from the kernel's page of virtual time (the default). The jobs, rounds
# and table are scripts/bench-modes.sh's.
#
#   scripts/bench-clock.sh                  1 round
#   BENCH_ROUNDS=3 scripts/bench-clock.sh
#   BENCH_EXECUTIONS=4 scripts/bench-clock.sh
exec "$(dirname "$0")/bench-modes.sh" 'clock by syscall=SIMCLUSTER_DEBUG_SYSCALL_CLOCK=1' 'clock by vDSO='
