#!/usr/bin/env bash
# Runs the KVM runtime's tests where the host has no vmx/svm: boots an L1
# Linux (Debian's stock kernel) under QEMU's software emulator
# (qemu-system-x86_64 -accel tcg -cpu max gives the guest AMD SVM with
# nested paging), loads kvm_amd in it, and inside it runs the vmm crate's
# KVM tests, explore/tests/kvm_engine.rs (small guests through the engine),
# tests/kvm_kernel.rs, hello-cluster and a networked example on
# `--runtime kvm` (each several times, comparing trace hashes). L1 sees the
# host's root filesystem read-only over 9p under a tmpfs overlay and chroots
# into it, so the host's binaries (built here first; L1 compiles nothing)
# run unchanged. Results come back through a shared directory: QEMU's exit
# code says nothing about the tests.
#
# Everything comes from Debian packages by name: qemu-system-x86 (installed
# if missing), linux-image-amd64's kernel package and busybox-static
# (downloaded with `apt-get download` and unpacked into the cache, never
# installed). Cached under ${SIMCLUSTER_CACHE:-~/.cache/simcluster}/nested/.
#
# Exit status: 0 when every test inside passed, or when it skips because
# qemu-system-x86_64 cannot be had here (not root, or apt-get cannot install
# it: it says SKIP and why, and records the skip in $SIMCLUSTER_SKIP_LOG as
# "missing", a cause the project's scripts remove as root; under
# SIMCLUSTER_STRICT_SKIPS=1, CI, that is a failure instead);
# 1 when a test inside failed or never ran, a cluster's runs gave different
# trace hashes, nothing was planned (no KVM test binary and no cluster), or
# L1 could not run the tests (did not come up, kvm_amd did not load, L1
# wedged on every boot): that is no result, and no result is not a pass.
# Every test each binary lists (`--list`, less the #[ignore]d ones in the
# short tier) must have passed in its run or a retry: a test that never
# ran (its binary timed out or crashed before it) is rerun with the failed
# ones, and reported as failed if it still has not passed.
# A test binary that failed and passed on retry is a flake, and so is an L1
# that wedged and passed on its next boot (the whole plan runs again): each
# is reported, and recorded in $SIMCLUSTER_FLAKE_LOG (scripts/test.sh lists
# them); skips inside L1 reach $SIMCLUSTER_SKIP_LOG too. The last line but
# one is "NESTED-COUNTS PASSED FAILED" (tests and cluster checks, a test
# that recorded a skip in L1 not counted as passed) for test.sh.
#
# Environment:
#   SIMCLUSTER_NESTED_TIMEOUT  wall-clock limit of the L1 run (s, default 3000)
#   SIMCLUSTER_NESTED_RUNS     runs per cluster for the determinism check (2)
#   SIMCLUSTER_NESTED_TESTS    regex of test binaries to run (default: all KVM ones;
#                              '^$': none, the clusters only)
#   SIMCLUSTER_NESTED_TEST_ARGS  libtest arguments for every test binary, listing and
#                              running alike (a name filter, `--skip NAME`)
#   SIMCLUSTER_TEST_TIER       full: the tests marked #[ignore = "full tier: ..."] run too
#   SIMCLUSTER_NESTED_TEST_REPEAT  runs of each test binary (1; more to measure how often
#                              the emulator trips a test)
#   SIMCLUSTER_NESTED_TEST_RETRIES  reruns of a test that failed, alone (1; 0: none).
#                              QEMU's TCG SVM now and then wedges an L2 vCPU or drops
#                              one of its events (README "The KVM runtime"); a test
#                              that fails and then passes is reported as such, with
#                              the first failure's panic, and does not fail the step
#   SIMCLUSTER_NESTED_CLUSTERS clusters to run (default: hello-cluster probes/guest-state examples/reorder;
#                              set and empty: none, the test binaries only);
#                              DIR:N runs DIR N times instead of SIMCLUSTER_NESTED_RUNS;
#                              DIR:N:LIMIT runs it to LIMIT virtual time (`--time-limit`,
#                              e.g. 30s): a run that ends at the limit passes, and the
#                              runs must still give one trace hash
#   SIMCLUSTER_NESTED_BENCH    DIR:N: also the warm-start bench, N executions of DIR
#                              (one job) with `--warm-start cold`, then forked from one
#                              boot (`--warm-start`): executions/hour side by side, and
#                              each execution's trace hash compared (default: none)
#   SIMCLUSTER_NESTED_SMP / _MEM  L1's vCPUs (2) and memory (MiB, 4096)
#   SIMCLUSTER_NESTED_CPU      QEMU's -cpu for L1 (max,xsave=off)
#   SIMCLUSTER_NESTED_TCG_THREAD  QEMU's TCG threading for L1: single (one host thread
#                              for both vCPUs, the default) or multi (one per vCPU)
#   SIMCLUSTER_NESTED_KVM_AMD  kvm_amd's parameters in L1, e.g. "npt=0" (none)
#   SIMCLUSTER_KVM_KERNEL      the L2 guest kernel (default: the image builder's)
#   SIMCLUSTER_NESTED_STALL    seconds without L1's heartbeat before it counts as hung (180)
#   SIMCLUSTER_NESTED_RETRIES  boots after a hung L1 (1)
#   SIMCLUSTER_NESTED_KEEP     keep the results directory (its path is printed)
#   SIMCLUSTER_NESTED_EXIT_LOG every KVM node's exits logged under exits-N-I/ of the
#                              results (SIMCLUSTER_KVM_EXIT_LOG): where runs part
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
cache=${SIMCLUSTER_CACHE:-$HOME/.cache/simcluster}/nested
timeout_s=${SIMCLUSTER_NESTED_TIMEOUT:-3000}
runs=${SIMCLUSTER_NESTED_RUNS:-2}
tests_re=${SIMCLUSTER_NESTED_TESTS:-.}
test_args=${SIMCLUSTER_NESTED_TEST_ARGS:-}
test_repeat=${SIMCLUSTER_NESTED_TEST_REPEAT:-1}
test_retries=${SIMCLUSTER_NESTED_TEST_RETRIES:-1}
clusters=${SIMCLUSTER_NESTED_CLUSTERS-hello-cluster probes/guest-state examples/reorder}
bench=${SIMCLUSTER_NESTED_BENCH:-}
smp=${SIMCLUSTER_NESTED_SMP:-2}
mem=${SIMCLUSTER_NESTED_MEM:-4096}
# xsave=off: with L1 on `-cpu max` (XSAVE on), the KVM guest kernel (7.2)
# finds CPUID leaf 0xd inconsistent ("x86/fpu: XSAVE disabled") and then
# oopses in prepare_creds (NULL refcount) before PID 1 on every node; with
# L1 without XSAVE its L2 guests use FXSAVE and boot.
cpu=${SIMCLUSTER_NESTED_CPU:-max,xsave=off}
kvm_amd_args=${SIMCLUSTER_NESTED_KVM_AMD:-}
# thread=single: under multi-threaded TCG (a host thread per L1 vCPU) L1
# wedged (soft lockups with an L2 in KVM_RUN) on 4 of the last 9 boots here,
# and 4 tests failed once, each while two L2 guests ran at once; one
# host thread for both vCPUs ran every KVM test binary three times and two
# hello-cluster runs with neither, cluster runs as fast (85-87 s, the same hash).
tcg_thread=${SIMCLUSTER_NESTED_TCG_THREAD:-single}
# --- helpers (tests/nested_judge.rs runs them)
say() { echo "test-kvm-nested: $*"; }
# A cluster in SIMCLUSTER_NESTED_CLUSTERS is DIR or DIR:RUNS (its own count).
cluster_of() { echo "${1%%:*}"; }
runs_of() { local r; case $1 in *:*) r=${1#*:}; echo "${r%%:*}" ;; *) echo "$runs" ;; esac; }
limit_of() { case $1 in *:*:*) echo "${1##*:}" ;; esac; }
# `skip REASON`: qemu cannot be had here, a cause root and apt-get remove
# (so "missing", not "host"): a skip, or a failure under
# SIMCLUSTER_STRICT_SKIPS=1 (CI), where a check that did not run fails.
skip() {
  if [ "${SIMCLUSTER_STRICT_SKIPS:-}" = 1 ]; then
    say "FAILED: would skip ($*), and under SIMCLUSTER_STRICT_SKIPS=1 a skip whose cause the project's scripts can remove is a failure"
    echo "NESTED-COUNTS 0 1"
    exit 1
  fi
  say "SKIP: $*"
  [ -z "${SIMCLUSTER_SKIP_LOG:-}" ] || printf 'test-kvm-nested\tmissing\t%s\n' "$*" >>"$SIMCLUSTER_SKIP_LOG"
  echo "NESTED-COUNTS 0 0"
  exit 0
}
# `no_result REASON`: L1 could not run the tests.
no_result() { say "FAILED: $* (no test ran to its end: not a pass)"; echo "NESTED-COUNTS 0 1"; exit 1; }
# --- end helpers
mkdir -p "$cache"

# --- 1. Debian packages -----------------------------------------------------
if ! command -v qemu-system-x86_64 >/dev/null; then
  [ "$(id -u)" = 0 ] || skip "qemu-system-x86_64 is missing and only root can install qemu-system-x86"
  say "installing qemu-system-x86"
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null 2>&1; }; } \
    || skip "could not install qemu-system-x86 with apt-get"
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86 installed no qemu-system-x86_64"
fi

# `pkg_version NAME`: the candidate version apt would install.
pkg_version() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}'; }
# `fetch_deb NAME VERSION DIR`: unpacks NAME=VERSION into DIR (once).
fetch_deb() {
  local name=$1 version=$2 dir=$3 tmp
  [ -e "$dir/.done" ] && return 0
  rm -rf "$dir" && mkdir -p "$dir"
  tmp=$(mktemp -d "$cache/dl.XXXXXX")
  # apt-get download drops to the _apt user where it can; let it write.
  chmod 0777 "$tmp"
  (cd "$tmp" && apt-get download -q "$name=$version" >/dev/null 2>&1) \
    || { rm -rf "$tmp"; return 1; }
  dpkg-deb -x "$tmp"/*.deb "$dir/root" && rm -rf "$tmp" && touch "$dir/.done"
}

kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
if [ -z "$kpkg" ] && [ "$(id -u)" = 0 ]; then
  # A fresh machine may have no package lists yet.
  apt-get update -q >/dev/null 2>&1 || true
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
fi
[ -n "$kpkg" ] || no_result "apt knows no linux-image-amd64 (the L1 kernel)"
kver=$(pkg_version "$kpkg")
kdir=$cache/$kpkg-$kver
fetch_deb "$kpkg" "$kver" "$kdir" || no_result "apt-get download $kpkg=$kver failed"
bbver=$(pkg_version busybox-static)
bbdir=$cache/busybox-static-$bbver
fetch_deb busybox-static "$bbver" "$bbdir" || no_result "apt-get download busybox-static=$bbver failed"
busybox=$bbdir/root/bin/busybox
vmlinuz=$(echo "$kdir"/root/boot/vmlinuz-*)
moddir=$(echo "$kdir"/root/lib/modules/*)
[ -f "$vmlinuz" ] && [ -d "$moddir" ] || no_result "$kpkg has no vmlinuz or modules"

# The modules L1 loads, dependencies first (from each module's .modinfo
# `depends=`; the package has no modules.dep, depmod makes it on install).
declare -A modpath=() seen=()
while IFS= read -r f; do
  n=$(basename "$f" .ko); modpath[${n//-/_}]=$f
done < <(find "$moddir" -name '*.ko')
order=()
add_module() {
  local n=${1//-/_} dep
  [ -n "${seen[$n]:-}" ] && return 0
  seen[$n]=1
  [ -n "${modpath[$n]:-}" ] || { say "no module $n in $kpkg (built in?)"; return 0; }
  for dep in $(tr '\0' '\n' < "${modpath[$n]}" | sed -n 's/^depends=//p' | tr ',' ' '); do
    add_module "$dep"
  done
  order+=("$n")
}
# virtio-pci and 9p first (the shared filesystems), overlay, then KVM last
# so that its failure is reported, not fatal.
for m in virtio_pci 9pnet_virtio 9p overlay kvm kvm_amd; do add_module "$m"; done

# --- 2. Host side: binaries, L2 kernel, images ---------------------------------
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
say "building simcluster and the KVM test binaries on the host"
nice -n 19 cargo build --quiet
bin=${SIMCLUSTER_BIN:-${CARGO_TARGET_DIR:-target}/debug/simcluster}
bin=$(realpath "$bin")
testlist=$(mktemp)
trap 'rm -f "$testlist"' EXIT
# One workspace-wide invocation, the same as scripts/test.sh's build (a
# no-op after it): `-p vmm` or `-p explore` alone resolves features for that
# package only and compiled crates again (minutes, cold, on this lane's CPU).
nice -n 19 cargo test --quiet --workspace --no-run --message-format=json 2>/dev/null >"$testlist.all"
python3 - "$testlist.all" "$test_repeat" "$tests_re" >"$testlist" <<'EOF'
import json, re, sys
want = re.compile(sys.argv[-1])
repeat = int(sys.argv[-2])
for path in sys.argv[1:-2]:
    for line in open(path):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        t = m["target"]
        if "test" in t["kind"] and t["name"].startswith("kvm_") and want.search(t["name"]):
            for k in range(1, repeat + 1):
                print(t["name"] + ("" if k == 1 else "@%d" % k), m["executable"])
EOF
rm -f "$testlist.all"
# Nothing to run is no result: an empty list of KVM test binaries (a
# filter that matches none, a build that made none) with no cluster to run
# must not pass as "0 failed".
if [ ! -s "$testlist" ] && [ -z "${clusters//[[:space:]]/}$bench" ]; then
  no_result "nothing to run: no KVM test binary matches '$tests_re' and no cluster is asked for"
fi
kvm_kernel=${SIMCLUSTER_KVM_KERNEL:-}
if [ -z "$kvm_kernel" ]; then
  say "the KVM guest kernel (built once, cached; minutes when cold)"
  kvm_kernel=$(nice -n 19 "$bin" image kernel --runtime kvm | python3 -c 'import json,sys; print(json.load(sys.stdin)["kernel"])')
fi
kvm_kernel=$(realpath "$kvm_kernel")
# The clusters' images, and those tests/kvm_kernel.rs boots (hello-cluster
# only in the full tier), built here so that L1 only reads the cache (an
# image built under the emulator takes minutes).
kernel_test_images=probes/guest-state
[ "${SIMCLUSTER_TEST_TIER:-}" != full ] || kernel_test_images="$kernel_test_images hello-cluster"
for spec in $(printf '%s\n' $kernel_test_images $clusters $bench | awk -F: '!seen[$1]++'); do
  c=$(cluster_of "$spec")
  case $c in
    examples/*) guest-images/examples/build.sh >/dev/null 2>&1 ;;
    probes/*) guest-images/probes/build.sh >/dev/null 2>&1 ;;
    *) [ ! -x "guest-images/$c/build.sh" ] || "guest-images/$c/build.sh" >/dev/null 2>&1 ;;
  esac
  nice -n 19 "$bin" image build "guest-images/$c" >/dev/null
done

# --- 3. L1's initramfs --------------------------------------------------------
key=$( { echo "initramfs-1"; sha256sum "$busybox"; for m in "${order[@]}"; do echo "$m"; done; sed -n '/^# --- init/,/^# --- end init/p' "$0"; } | sha256sum | cut -c1-16)
initrd=$cache/initramfs-$kver-$key.cpio.gz
if [ ! -f "$initrd" ]; then
  stage=$(mktemp -d "$cache/stage.XXXXXX")
  mkdir -p "$stage"/{bin,dev,proc,sys,modules,results,lower,ovl,newroot}
  cp "$busybox" "$stage/bin/busybox"
  for m in "${order[@]}"; do cp "${modpath[$m]}" "$stage/modules/$m.ko"; done
  printf '%s\n' "${order[@]}" >"$stage/modules/order"
  sed -n '/^# --- init/,/^# --- end init/p' "$0" | sed '1d;$d' >"$stage/init"
  chmod 755 "$stage/init"
  (cd "$stage" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1 >"$initrd.tmp") && mv "$initrd.tmp" "$initrd"
  rm -rf "$stage"
fi
: <<'INIT'
# --- init (L1's /init: loads modules, mounts, chroots, runs /results/plan.sh)
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
log() { echo "nested-init: $*" >/dev/console; }
for m in $(cat /modules/order); do
  case $m in kvm|kvm_amd|ccp|irqbypass) continue ;; esac
  insmod /modules/$m.ko 2>/dev/console || log "insmod $m failed"
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 results /results; then
  log "cannot mount the results directory"; poweroff -f
fi
echo up >/results/booted
grep -o -m1 -w 'svm\|npt' /proc/cpuinfo | sort -u | tr '\n' ' ' >/results/cpu-flags
kvm_ok=1
for m in irqbypass ccp kvm kvm_amd; do
  grep -qx $m /modules/order || continue
  args=""
  # kvm_amd's parameters from L1's command line (nested_kvm_amd=npt=0,...).
  [ $m = kvm_amd ] && args=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nested_kvm_amd=//p' | tr ',' ' ')
  insmod /modules/$m.ko $args >>/results/insmod.log 2>&1 || { echo "insmod $m $args failed" >>/results/insmod.log; kvm_ok=0; }
done
[ -c /dev/kvm ] || kvm_ok=0
dmesg | grep -i 'kvm\|svm' >>/results/insmod.log 2>&1
echo $kvm_ok >/results/kvm
if [ $kvm_ok = 1 ]; then
  mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=262144,cache=loose hostroot /lower \
    || log "cannot mount the host's root"
  mount -t tmpfs -o size=1g tmpfs /ovl
  mkdir -p /ovl/upper /ovl/work
  mount -t overlay -o lowerdir=/lower,upperdir=/ovl/upper,workdir=/ovl/work overlay /newroot \
    || { log "overlay failed; the host's root stays read-only"; mount --bind /lower /newroot; }
  mount -t proc proc /newroot/proc
  mount -t sysfs sys /newroot/sys
  mount -t devtmpfs dev /newroot/dev
  # A tmpfs of its own for /tmp, unless the host's /tmp holds what the plan
  # runs (a checkout or cache under /tmp: the overlay shows it, writable).
  [ -e /results/keep-host-tmp ] || mount -t tmpfs -o size=1g tmpfs /newroot/tmp
  mkdir -p /newroot/nested-results
  mount --bind /results /newroot/nested-results
  # What L1 is doing, every 30 s (for a run that hangs or times out).
  ( while sleep 30; do { date; uptime; top -b -n 1 | head -n 12; } >/results/heartbeat 2>&1; done ) &
  chroot /newroot /bin/sh /nested-results/plan.sh >/results/plan.log 2>&1
  echo $? >/results/plan.rc
fi
sync
poweroff -f
# --- end init
INIT

# --- 4. The plan L1 runs (in the chroot) -------------------------------------
results=$(mktemp -d "${TMPDIR:-/tmp}/simcluster-nested.XXXXXX")
chmod 0777 "$results"
# L1 mounts a tmpfs on /tmp, which would hide a checkout, a cargo target or a
# cache under the host's /tmp (a CI clone may live there): then it keeps the
# overlay's /tmp instead.
# Each test binary's tests as it lists them (the host lists them: listing
# needs no KVM), less the #[ignore]d ones in the short tier: every one must
# pass in L1, in the binary's run or a retry (expect-NAME in the results).
while read -r name exe; do
  {
    # shellcheck disable=SC2086
    if [ "${SIMCLUSTER_TEST_TIER:-}" = full ]; then
      "$exe" --list $test_args | sed -n 's/: test$//p' | sort -u
    else
      comm -23 <("$exe" --list $test_args | sed -n 's/: test$//p' | sort -u) \
        <("$exe" --list --ignored $test_args | sed -n 's/: test$//p' | sort -u)
    fi
  } >"$results/expect-$name" || no_result "$exe --list failed"
done <"$testlist"
for p in "$repo" "$(realpath -m "${CARGO_TARGET_DIR:-$repo/target}")" "$(realpath -m "${SIMCLUSTER_CACHE:-$HOME/.cache/simcluster}")" "$kvm_kernel"; do
  case $p in /tmp|/tmp/*) touch "$results/keep-host-tmp" ;; esac
done
# Kept when asked for, or when something failed (the report names it).
[ -n "${SIMCLUSTER_NESTED_KEEP:-}" ] || trap 'rc=$?; rm -f "$testlist"; [ $rc != 0 ] || [ "${retried:-0}" != 0 ] || rm -rf "$results"' EXIT
{
  echo "#!/bin/sh"
  echo "cd '$repo'"
  echo "export HOME='$HOME' PATH='/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' SIMCLUSTER_CACHE='${SIMCLUSTER_CACHE:-$HOME/.cache/simcluster}'"
  echo "export SIMCLUSTER_KVM_KERNEL='$kvm_kernel' RUST_BACKTRACE=1 SIMCLUSTER_SKIP_LOG=/nested-results/skips"
  [ -z "${SIMCLUSTER_STRICT_SKIPS:-}" ] || echo "export SIMCLUSTER_STRICT_SKIPS='$SIMCLUSTER_STRICT_SKIPS'"
  # The full tier (scripts/test.sh --full) runs the tests marked #[ignore = "full tier: ..."] too.
  echo "export SIMCLUSTER_TEST_TIER='${SIMCLUSTER_TEST_TIER:-short}'"
  # Each test binary's limit: kvm_kernel's full-tier tests (three guest-state
  # runs, hello-cluster, warm starts) took 1236 s in L1 on a busy host.
  if [ "${SIMCLUSTER_TEST_TIER:-}" = full ]; then
    echo "ignored=--include-ignored binary_timeout=3600"
  else
    echo "ignored= binary_timeout=1200"
  fi
  echo "R=/nested-results"
  echo "test_args='$test_args'"
  cat <<'EOF'
# `step NAME CMD...`: runs CMD, its output in $R/NAME.out, exit code in
# $R/NAME.rc and wall seconds in $R/NAME.secs.
step() {
  name=$1; shift
  echo "step $name: $*"
  start=$(date +%s)
  "$@" >"$R/$name.out" 2>&1
  rc=$?
  echo $(( $(date +%s) - start )) >"$R/$name.secs"
  echo $rc >"$R/$name.rc"
  echo "step $name: rc=$rc in $(cat "$R/$name.secs") s"
  sync
}
# `test_step NAME EXE RETRIES`: runs a test binary, one test at a time
# (every test failure seen under the emulator came while two L2 guests ran
# at once, one per L1 vCPU); every test of $R/expect-NAME that has not
# passed yet (it failed, or never ran: the binary timed out or crashed
# before it) is run again, alone (--exact), as retry-NAME-K, while any has
# not passed and RETRIES allow.
# (Its variables are t_*: step's own are global in sh.)
test_step() {
  t_name=$1 t_exe=$2 t_left=$3 t_k=0 t_last=test-$1
  step "$t_last" timeout "$binary_timeout" "$t_exe" --test-threads=1 $ignored $test_args
  while [ "$(cat "$R/$t_last.rc")" != 0 ] && [ "$t_left" -gt 0 ]; do
    t_failed=""
    while read -r t_t; do
      grep -qFx "test $t_t ... ok" "$R/test-$t_name.out" "$R/retry-$t_name-"*.out 2>/dev/null || t_failed="$t_failed $t_t"
    done <"$R/expect-$t_name"
    [ -n "$t_failed" ] || return 0
    t_k=$((t_k + 1)) t_left=$((t_left - 1))
    t_last=retry-$t_name-$t_k
    # shellcheck disable=SC2086
    step "$t_last" timeout "$binary_timeout" "$t_exe" --exact $t_failed --test-threads=1 $ignored
  done
}
EOF
  while read -r name exe; do
    echo "test_step '$name' '$exe' $test_retries"
  done <"$testlist"
  n=0
  for spec in $clusters; do
    n=$((n + 1))
    c=$(cluster_of "$spec")
    for i in $(seq 1 "$(runs_of "$spec")"); do
      log_env=""
      if [ -n "${SIMCLUSTER_NESTED_EXIT_LOG:-}" ]; then
        echo "mkdir -p /nested-results/exits-$n-$i"
        log_env="SIMCLUSTER_KVM_EXIT_LOG=/nested-results/exits-$n-$i"
      fi
      # One run's limit: db-cluster's execution on KVM under TCG, with the
      # crash-state siblings it has explored since the crash-point fix,
      # took 834 s on a busy 2-core host (2026-11-27: the full tier's
      # gallery beside it); 900 s cut the second run short.
      limit=$(limit_of "$spec")
      echo "step 'run-$n-$i' env $log_env timeout 2400 '$bin' run --quiet --runtime kvm --watchdog 300 --images 'guest-images/$c' --seed 1${limit:+ --time-limit $limit} --out /nested-results/out-$n-$i"
    done
  done
  if [ -n "$bench" ]; then
    for mode in cold fork; do
      echo "step 'bench-$mode' timeout 3000 '$bin' run --quiet --runtime kvm --watchdog 300 --images 'guest-images/$(cluster_of "$bench")' --seed 1 --jobs 1 --executions $(runs_of "$bench") --warm-start $mode --out /nested-results/bench-$mode"
    done
  fi
  echo "echo plan done"
} >"$results/plan.sh"

# --- 5. Boot L1 ---------------------------------------------------------------------
say "booting L1 ($kpkg $kver) under qemu-system-x86_64 -accel tcg,thread=$tcg_thread -cpu $cpu, $smp vCPUs, $mem MiB; limit ${timeout_s}s"
say "results in $results (console: $results/console.log)"
# L1 writes $results/heartbeat every 30 s once it runs the plan. Under
# TCG an L1 has been seen to wedge (an L1 vCPU stuck in an L2 guest, no
# heartbeat, no progress; seen with thread=multi): after $stall_s s without
# a heartbeat it is stopped and booted once more ($retries), and the report
# says so.
boot_l1() {
  timeout --kill-after=30 "$timeout_s" nice -n 19 qemu-system-x86_64 \
    -accel "tcg,thread=$tcg_thread" -cpu "$cpu" -smp "$smp" -m "$mem" -machine q35 \
    -kernel "$vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 panic=-1 loglevel=4${kvm_amd_args:+ nested_kvm_amd=${kvm_amd_args// /,}}" \
    -display none -monitor none -serial "file:$results/console.log" -no-reboot -nic none \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$results,mount_tag=results,security_model=none" \
    >"$results/qemu.log" 2>&1 &
  local pid=$! last
  stalled=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    [ -e "$results/booted" ] && [ ! -e "$results/plan.rc" ] || continue
    last=$(stat -c %Y "$results/booted" "$results/heartbeat" 2>/dev/null | sort -n | tail -n 1 || true)
    if [ $(( $(date +%s) - last )) -gt "$stall_s" ]; then
      stalled=1
      say "L1 stopped responding (no heartbeat for ${stall_s}s); stopping it"
      kill "$pid" 2>/dev/null || true  # timeout passes it on to qemu
      break
    fi
  done
  qemu_rc=0
  wait "$pid" || qemu_rc=$?
}
stall_s=${SIMCLUSTER_NESTED_STALL:-180}
retries=${SIMCLUSTER_NESTED_RETRIES:-1}
start=$(date +%s)
attempt=1 wedges=()
while :; do
  boot_l1
  [ "$stalled" = 1 ] && [ "$attempt" -le "$retries" ] || break
  # Keep what the wedged boot left for diagnosis: where the plan was, the
  # last heartbeat (L1's top) and its console.
  wedged_at=$(tail -n 1 "$results/plan.log" 2>/dev/null || true)
  wedges+=("boot $attempt wedged (no heartbeat for ${stall_s}s) at: ${wedged_at:-before the plan}")
  say "the wedged boot was at: ${wedged_at:-before the plan}"
  mkdir -p "$results/wedged-$attempt"
  for f in plan.log heartbeat console.log; do
    [ ! -e "$results/$f" ] || mv "$results/$f" "$results/wedged-$attempt/"
  done
  attempt=$((attempt + 1))
  say "booting L1 again (attempt $attempt)"
  find "$results" -mindepth 1 -maxdepth 1 ! -name plan.sh ! -name keep-host-tmp ! -name 'expect-*' ! -name 'wedged-*' -exec rm -rf {} +
done
wall=$(( $(date +%s) - start ))
say "L1 ran ${wall}s (qemu exit $qemu_rc, $attempt boot(s))"
kept=" (results: $results)"
retried=0
# An L1 that wedged on every boot is QEMU's emulator hanging: the tests
# inside never reported, which is no pass.
[ "$stalled" = 1 ] && no_result "L1 stopped responding ${attempt} time(s) under TCG$kept"
# An L1 that wedged and came back: the whole plan ran again on the next
# boot. A retry like any other: reported, and recorded as a flake.
if [ ${#wedges[@]} -gt 0 ]; then
  retried=$((retried + 1))
  say "FLAKE: L1 wedged under the emulator and was booted again (the whole plan ran again): ${wedges[*]}"
  [ -z "${SIMCLUSTER_FLAKE_LOG:-}" ] || echo "L1 wedged under the emulator and was booted again, the whole plan ran again: ${wedges[*]}" >>"$SIMCLUSTER_FLAKE_LOG"
fi

# --- 6. Report -----------------------------------------------------------------------
if [ ! -e "$results/booted" ]; then
  tail -n 20 "$results/console.log" "$results/qemu.log" 2>/dev/null | sed 's/^/  /'
  [ "$qemu_rc" = 124 ] && no_result "L1 did not come up within ${timeout_s}s"
  no_result "L1 did not come up (qemu exit $qemu_rc)"
fi
if [ "$(cat "$results/kvm" 2>/dev/null)" != 1 ]; then
  sed 's/^/  /' "$results/insmod.log" 2>/dev/null | tail -n 20
  no_result "L1 booted (cpu flags: $(cat "$results/cpu-flags" 2>/dev/null)) but kvm_amd did not load or /dev/kvm is missing"
fi
# --- judge (each test binary's verdict; tests/nested_judge.rs runs these
# functions on made-up results)
# `panic_lines FILE MAX PREFIX`: the failed tests of a libtest output and their
# panics (with the assertion lines after them, backtraces left out).
panic_lines() {
  grep -E -A3 '^(test .* \.\.\. FAILED|thread .* panicked)' "$1" | grep -v -E '^(stack backtrace:|--|) *$|^ +[0-9]+: ' \
    | head -n "$2" | cut -c1-300 | sed "s/^/    $3/" || true
}
status=0 n_passed=0 n_failed=0
# `passed_tests NAME`: the tests that passed in NAME's run or its retries.
passed_tests() {
  cat "$results/test-$1.out" "$results/retry-$1-"*.out 2>/dev/null | sed -n 's/^test \(.*\) \.\.\. ok$/\1/p' | sort -u
}
# `judge_test NAME`: NAME's verdict from $results: prints it, adds to
# n_passed / n_failed / retried, sets status=1 on a failure. Every test in
# expect-NAME must have passed in the run or a retry; a test that recorded
# a skip in L1 ($results/skips, BINARY::TEST) is not counted as passed.
judge_test() {
  local name=$1 f=$results/test-$1 bin=${1%@*} retry missing n_ok n_skip rc
  retry=$(ls "$results"/retry-"$name"-*.rc 2>/dev/null | sort -V | tail -n 1 || true)
  retry=${retry%.rc}
  missing=$(comm -23 <(sort -u "$results/expect-$name") <(passed_tests "$name"))
  n_ok=$(comm -12 <(sort -u "$results/expect-$name") <(passed_tests "$name") | wc -l)
  n_skip=$( { [ ! -e "$results/skips" ] || cut -f1 "$results/skips" | sed -n "s/^$bin:://p"; } | sort -u \
    | comm -12 - <(passed_tests "$name") | wc -l)
  n_passed=$((n_passed + n_ok - n_skip))
  rc=$(cat "$f.rc" 2>/dev/null || echo none)
  if [ "$rc" = none ]; then
    if [ -e "$f.out" ]; then
      say "test $name: did not finish (L1 stopped: timeout?); its last lines:"
      tail -n 5 "$f.out" | sed 's/^/    /'
    else
      say "test $name: not started"
    fi
  fi
  if [ -z "$missing" ] && [ "$rc" = 0 ]; then
    say "test $name: ok in $(cat "$f.secs")s: $(grep -E '^test result:' "$f.out" | tail -n 1)$([ "$n_skip" = 0 ] || echo " ($n_skip skipped)")"
  elif [ -z "$missing" ] && [ -n "$retry" ] && [ "$(cat "$retry.rc")" = 0 ]; then
    say "test $name: PASSED ON RETRY under the emulator (${retry##*-} retry): it first failed (exit $rc) in $(cat "$f.secs" 2>/dev/null || echo ?)s: $(grep -E '^test result:' "$f.out" 2>/dev/null | tail -n 1)"
    [ ! -e "$f.out" ] || panic_lines "$f.out" 12 "first run: "
    say "  retry: $(grep -E '^test result:' "$retry.out" | tail -n 1)"
    retried=$((retried + 1))
    [ -z "${SIMCLUSTER_FLAKE_LOG:-}" ] || echo "L1 $name: failed or stopped (exit $rc), then passed on retry under the emulator (not passed in the first run: $(comm -23 <(sort -u "$results/expect-$name") <(sed -n 's/^test \(.*\) \.\.\. ok$/\1/p' "$f.out" 2>/dev/null | sort -u) | tr '\n' ' '))" >>"$SIMCLUSTER_FLAKE_LOG"
  else
    n_failed=$((n_failed + $(echo "$missing" | grep -c . || true)))
    [ -n "$missing" ] || n_failed=$((n_failed + 1))  # all passed, yet the binary failed
    say "test $name: FAILED (exit $rc) in $(cat "$f.secs" 2>/dev/null || echo ?)s: $(grep -E '^test result:' "$f.out" 2>/dev/null | tail -n 1)"
    [ -z "$missing" ] || say "  never passed (failed, or never ran): $(echo "$missing" | tr '\n' ' ')"
    [ ! -e "$f.out" ] || panic_lines "$f.out" 20 ""
    [ -z "$retry" ] || { say "  and again on retry:"; panic_lines "$retry.out" 10 ""; }
    status=1
  fi
}
# --- end judge
while read -r name _; do
  judge_test "$name"
done <"$testlist"
[ "$retried" = 0 ] || say "$retried test binar$([ "$retried" = 1 ] && echo y || echo ies) passed only on retry (the first failures are above and in $results)"
n=0
for spec in $clusters; do
  n=$((n + 1))
  c=$(cluster_of "$spec")
  c_runs=$(runs_of "$spec")
  hashes=""
  # One check per cluster: its runs passed and agreed (a run that failed
  # or never finished fails it, not only a hash that differs).
  before=$status
  for i in $(seq 1 "$c_runs"); do
    f=$results/run-$n-$i
    if [ ! -e "$f.rc" ]; then
      say "$c run $i: did not finish"; status=1; hashes="$hashes none"; continue
    fi
    line=$(grep '^{' "$f.out" | tail -n 1 || true)
    h=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["trace_hash"], "failures=%s" % j["failures"], "virtual=%s" % j.get("virtual_seconds", "?"), "kind=%s" % (j.get("failure") or {}).get("kind", "-"))' "$line" 2>/dev/null || echo "none")
    say "$c run $i: exit $(cat "$f.rc") in $(cat "$f.secs")s wall under TCG: $h"
    if [ "$h" = none ]; then
      tail -n 15 "$f.out" | sed 's/^/    /'; status=1
    elif [ "$(cat "$f.rc")" != 0 ]; then
      # The examples' bugs are meant to be found: for them only the trace
      # hash counts; a run to a virtual-time limit (DIR:N:LIMIT) ends at
      # it. Every other cluster must pass.
      if [[ $c != examples/* ]] && { [ -z "$(limit_of "$spec")" ] || [ "${h##*kind=}" != time_limit ]; }; then
        python3 -c 'import json,sys; print("    " + json.loads(sys.argv[1]).get("failure", {}).get("message", "?")[:2000].replace("\n", "\n    "))' "$line" || true
        status=1
      fi
    fi
    hashes="$hashes ${h%% *}"
  done
  if echo "$hashes" | grep -qw none; then
    say "$c: trace hashes not compared (a run gave none)"; status=1
  elif [ "$(printf '%s\n' $hashes | sort -u | wc -l)" = 1 ]; then
    say "$c: $c_runs runs, one trace hash"
  else
    say "$c: DIFFERENT trace hashes:$hashes"; status=1
  fi
  if [ "$status" = "$before" ]; then n_passed=$((n_passed + 1)); else n_failed=$((n_failed + 1)); fi
done
if [ -n "$bench" ]; then
  # Executions/hour with and without warm start, and each execution's hash
  # in both (they must match: warm start saves wall time, nothing else).
  python3 - "$results" "$bench" <<'PY' | while IFS= read -r l; do say "$l"; done || status=1
import json, os, sys
r, bench = sys.argv[1], sys.argv[2]
rows, hashes, ok = [], {}, True
for mode in ("cold", "fork"):
    try:
        secs = int(open(f"{r}/bench-{mode}.secs").read())
        rc = open(f"{r}/bench-{mode}.rc").read().strip()
        ex = json.load(open(f"{r}/bench-{mode}/shard.json"))["executions"]
    except (OSError, ValueError, KeyError) as e:
        print(f"bench {mode}: no result ({e})"); ok = False; continue
    hashes[mode] = [(e["execution"], e["trace_hash"]) for e in ex]
    boots = sorted({e.get("boot_wall_seconds") for e in ex if e.get("boot_wall_seconds") is not None})
    rows.append((mode, len(ex), secs, rc, boots))
print(f"warm-start bench, {bench} under nested emulation (QEMU TCG, L1 KVM), one job:")
print("  (executions count crash-state siblings: each is an execution of its own)")
print(f"  {'mode':<6} {'executions':>10} {'wall s':>7} {'executions/hour':>16}  boot wall s")
for mode, n, secs, rc, boots in rows:
    rate = n * 3600 / secs if secs else 0
    b = ", ".join(f"{x:.1f}" for x in boots[:4]) + (" ..." if len(boots) > 4 else "")
    print(f"  {mode:<6} {n:>10} {secs:>7} {rate:>16.1f}  {b} (exit {rc})")
if len(hashes) == 2:
    if hashes["cold"] == hashes["fork"]:
        print(f"  every execution's trace hash is the same cold and forked ({len(hashes['cold'])})")
    else:
        print(f"  DIFFERENT trace hashes: cold {hashes['cold']} fork {hashes['fork']}"); ok = False
sys.exit(0 if ok else 1)
PY
fi
[ -e "$results/plan.rc" ] || { say "the plan did not finish (L1 timed out after ${timeout_s}s?)"; status=1; }
# Skips inside L1, under L1's name for them.
if [ -s "$results/skips" ] && [ -n "${SIMCLUSTER_SKIP_LOG:-}" ]; then
  sed 's/^/L1 /' "$results/skips" >>"$SIMCLUSTER_SKIP_LOG"
fi
# Nothing that ran is no pass ("NESTED-COUNTS 0 0" would read as one).
if [ $((n_passed + n_failed)) = 0 ]; then
  say "FAILED: no test and no cluster check ran in L1 (an empty plan, or every test skipped): not a pass"
  n_failed=1 status=1
fi
echo "NESTED-COUNTS $n_passed $n_failed"
if [ $status = 0 ]; then say "all passed in L1 (${wall}s)"; else say "FAILED$kept"; fi
exit $status
