#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of simcluster's trust
# boundaries, for a fixed time per target:
#   scripts/fuzz.sh [--seconds N] [--merge] [TARGET...]
#   --seconds N  each target runs N seconds (default 60)
#   --merge      afterwards, adds to fuzz/corpus/TARGET the inputs of this
#                run that reach code edges the corpus does not (libFuzzer's
#                -merge=1, edges only); for a deliberate corpus update, then
#                commit it
#   TARGET       any of `cargo fuzz list --fuzz-dir fuzz` (default: all)
#
# The targets are in fuzz/ (a crate outside the workspace, built into
# fuzz/target); their corpora, kept in the repository, in fuzz/corpus/, and
# their dictionaries in fuzz/dict/. A run reads the corpus and writes what
# it finds to a temporary directory, so that the working tree stays as it
# was. Per target it prints one line:
#   fuzz TARGET: N execs, cov C, ft F, corpus K, crashes 0
# (cov: code edges reached, ft: libFuzzer's finer features, corpus: inputs
# it kept, the corpus's included). A crash, a hang (an input that takes
# more than 20 s) or an input that needs more than 2 GiB is a failure: the
# input is kept in fuzz/artifacts/TARGET/ (crash-*, timeout-*, oom-*), its
# path and the target's last output lines are printed, and the script exits
# 1 once every target has run. Reproduce with
#   fuzz/target/x86_64-unknown-linux-gnu/release/TARGET ARTIFACT
# then fix the parser and copy the input into the target's corpus (and,
# where one exists, into tests/fuzz/ or vmm/tests/fuzz/, which
# `cargo test` runs in every tier).
#
# Stable Rust suffices: without a sanitizer (`-s none`) cargo-fuzz passes
# rustc no unstable flag; libfuzzer-sys compiles libFuzzer with the host's
# C++ compiler. cargo-fuzz itself is installed from crates.io when it is
# missing (about 2 minutes); when that fails the targets are skipped, and
# under CI=true the skip fails the run. The first build compiles the
# workspace's crates again, instrumented (about 8 minutes on 2 cores);
# later ones only what changed. Exit: 0 all ran without a failure, 1 a
# target failed or did not build, 2 a bad argument.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

seconds=60
merge=0
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=${2:-}; shift 2 || shift ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    --merge) merge=1; shift ;;
    -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "scripts/fuzz.sh: unknown option $1 (--seconds N, --merge)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "scripts/fuzz.sh: --seconds wants a whole number of seconds above 0, not '$seconds'" >&2
  exit 2
fi

# cargo-fuzz's version is pinned: its flags (and so the build) stay the same.
cargo_fuzz_version=0.13.2
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $cargo_fuzz_version" ]; then
  echo "fuzz: installing cargo-fuzz $cargo_fuzz_version from crates.io"
  if ! nice -n 10 cargo install --quiet --locked cargo-fuzz --version "$cargo_fuzz_version" >/dev/null 2>&1; then
    echo "fuzz: skipped: cargo-fuzz is not installed and \`cargo install cargo-fuzz\` failed"
    [ "${CI:-}" = true ] && exit 1
    exit 0
  fi
fi

all=$(cargo fuzz list --fuzz-dir fuzz)
[ ${#targets[@]} = 0 ] && mapfile -t targets <<<"$all"
for t in "${targets[@]}"; do
  if ! grep -qx -- "$t" <<<"$all"; then
    echo "scripts/fuzz.sh: no fuzz target '$t' (there are: $(tr '\n' ' ' <<<"$all"))" >&2
    exit 2
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/simcluster-fuzz.XXXXXX")
# The targets' own files (the oci target writes a layout per input, the
# vhost_user target binds a socket) go to memory where it can: on a disk's
# file system the oci target ran 300 inputs a second.
scratch=$work
[ -d /dev/shm ] && [ -w /dev/shm ] && scratch=$(mktemp -d /dev/shm/simcluster-fuzz.XXXXXX)
trap 'rm -rf "$work" "$scratch"' EXIT

# The build: release with debug assertions and overflow checks, coverage
# instrumentation (inline 8-bit counters, comparisons traced), always in
# fuzz/target (whatever CARGO_TARGET_DIR says). The environment's compiler
# wrappers and flags are left out, so every caller gets the same build (and
# does not rebuild another's). 16 codegen units:
# the cold build takes about half as long as with cargo-fuzz's default of
# one.
build() {
  env -u RUSTC_WRAPPER -u RUSTC_WORKSPACE_WRAPPER -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u RUSTC_BOOTSTRAP \
    nice -n 10 cargo fuzz build --fuzz-dir fuzz --target-dir fuzz/target -s none --codegen-units 16 "$@"
}
build_targets() {
  if [ ${#targets[@]} = "$(wc -l <<<"$all")" ]; then
    build
  else
    for t in "${targets[@]}"; do build "$t" || return 1; done
  fi
}
began=$SECONDS
if ! build_targets >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log"
  echo "fuzz: the fuzz targets did not build (cargo fuzz build --fuzz-dir fuzz -s none)"
  exit 1
fi
echo "fuzz: built in $((SECONDS - began)) s; ${#targets[@]} targets, $seconds s each"

bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "$scratch/tmp-$t" "fuzz/artifacts/$t"
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048
    -artifact_prefix="fuzz/artifacts/$t/")
  [ -f "fuzz/dict/$t.dict" ] && args+=(-dict="fuzz/dict/$t.dict")
  log=$work/$t.log
  # A target's temporary files go with $scratch. The
  # outer limit only catches a fuzzer that stops answering altogether.
  TMPDIR=$scratch/tmp-$t timeout -k 10 $((seconds + 300)) "$bin_dir/$t" "${args[@]}" "$work/$t" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  stats=$(grep -E '^#[0-9]+.* cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1)
  cov=$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<<"$stats")
  ft=$(sed -E 's/.* ft: ([0-9]+).*/\1/' <<<"$stats")
  corp=$(sed -E 's/.* corp: ([0-9]+).*/\1/' <<<"$stats")
  artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
  line="fuzz $t: ${execs:-?} execs, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
  if [ $rc = 0 ] && [ -n "$execs" ] && [ -n "$stats" ]; then
    echo "$line, crashes 0"
  else
    failed=$((failed + 1))
    # What went wrong (a panic's message, libFuzzer's verdict), not the
    # backtrace; the whole log is in the artifact's reproduction.
    { grep -E -A1 'panicked at' "$log"; grep -E '^(==[0-9]+== ERROR|ALARM|SUMMARY|MS: |artifact_prefix)' "$log"; } |
      head -n 20 | sed "s/^/  $t| /"
    grep -q -E 'panicked at|ERROR|ALARM' "$log" || tail -n 20 "$log" | sed "s/^/  $t| /"
    if [ -n "$artifact" ]; then
      echo "$line, crashes 1: $artifact"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then
      echo "$line, no result: the fuzzer did not stop within $((seconds + 300)) s"
    else
      echo "$line, no result: the fuzzer exited $rc without a report"
    fi
  fi
  if [ $merge = 1 ] && [ $rc = 0 ]; then
    before=$(find "fuzz/corpus/$t" -type f | wc -l)
    # Edges only (-use_counters=0): merging by libFuzzer's features (hit
    # counts of each edge) kept 500 KiB to 1 MiB per target after a minute.
    TMPDIR=$scratch/tmp-$t "$bin_dir/$t" -merge=1 -use_counters=0 -timeout=20 -rss_limit_mb=2048 \
      "fuzz/corpus/$t" "$work/$t" >"$work/$t.merge.log" 2>&1 || { tail -n 20 "$work/$t.merge.log"; failed=$((failed + 1)); }
    echo "  merged: fuzz/corpus/$t has $(find "fuzz/corpus/$t" -type f | wc -l) inputs (was $before)," \
      "$(find "fuzz/corpus/$t" -type f -printf '%s\n' | awk '{n += $1} END {print n}') bytes"
  fi
done
[ $failed = 0 ] || { echo "fuzz: $failed of ${#targets[@]} targets failed"; exit 1; }
echo "fuzz: ${#targets[@]} targets, none failed"
