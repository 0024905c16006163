#!/usr/bin/env bash
# The summary of a scripts/test.sh run, from the files that run leaves in
# its work directory (scripts/test.sh calls it last; tests/suite_summary.rs
# runs it on made-up work directories):
#
#   scripts/test-summary.sh WORK TIER SECONDS
#
# WORK holds:
#   stages         one line per stage: "NAME EXIT WALL_S CPU_S"
#   cargo-results  the same per test target ("cargo:test:NAME", "cargo:units",
#                  "cargo:doc"), summed into the stage "cargo-test"
#   queue, tasks/N.log  the tasks, one a line, and task N's output
#   nested.log     scripts/test-kvm-nested.sh's output (its NESTED-COUNTS line;
#                  a slice's nested:NAME tasks leave theirs in their task logs)
#   skips, flakes  $SIMCLUSTER_SKIP_LOG and $SIMCLUSTER_FLAKE_LOG
#   slice          (--slice K) which slice of the full tier ran, and its checks
#
# It closes with one line, "total: N passed, N failed, N skipped", where
#   passed   tests that ran and passed: cargo's "passed" counts, less every
#            test that recorded a skip (testkit: a skipped test returns early,
#            and cargo reports it "ok"; a test's skip log line names it as
#            BINARY::TEST, which is matched against the "test TEST ... ok"
#            lines under "Running ... (deps/BINARY-HASH)"), plus the nested
#            step's passed tests and cluster checks (it subtracts L1's skips
#            itself);
#   failed   cargo's failed tests, plus one per test binary that started and
#            never printed its result line (it crashed or was killed), plus
#            one per test target whose `cargo test` failed with neither (it
#            did not build), plus the nested step's failed tests and checks
#            (or one, when it failed with none counted), plus one per other
#            failed stage (packages, fmt, cycles, features, binary, the
#            kernels, build, determinism, gallery-*, an empty list of test
#            targets);
#            a run that exits 1 never says "0 failed";
#   skipped  distinct tests (and steps, e.g. the nested one) that recorded a skip.
# Exit status: 0 when no stage failed, 1 otherwise.
set -uo pipefail
work=${1:?usage: scripts/test-summary.sh WORK TIER SECONDS}
tier=${2:-short}
secs=${3:-?}
[ -d "$work" ] || { echo "scripts/test-summary.sh: $work: no such directory" >&2; exit 2; }
[ -f "$work/stages" ] || { echo "scripts/test-summary.sh: $work/stages: missing (not a scripts/test.sh work directory)" >&2; exit 2; }
echo
echo "==== summary ($tier tier, $secs s in all)"
if [ -s "$work/slice" ]; then
  sed 's/^/  /' "$work/slice"
fi
python3 - "$work" <<'PY'
import os, re, sys

work = sys.argv[1]
def lines(name):
    path = os.path.join(work, name)
    return open(path, errors="replace").read().splitlines() if os.path.exists(path) else []

stages = [l.split() for l in lines("stages") if l.strip()]
w = max([13] + [len(s[0]) for s in stages])
print(f"  {'stage':<{w}} {'result':<8} {'wall s':>7} {'CPU s':>7}")
for s in stages:
    name, rc, wall, cpu = (s + ["-", "-", "-"])[:4]
    print(f"  {name:<{w}} {'ok' if rc == '0' else 'exit ' + rc:<8} {wall:>7} {cpu:>7}")

# --- cargo's test output, per task ---------------------------------------
queue = lines("queue")
ok, results = set(), []          # "binary::test" that passed; per binary result lines
passed = failed = ignored = 0
crashed, broken, compiled = [], [], 0
task_rc = {}
for l in lines("cargo-results"):
    f = l.split()
    if len(f) >= 2:
        task_rc[f[0]] = f[1]
hash_re = re.compile(r"-[0-9a-f]{16}$")
for n, task in enumerate(queue, 1):
    if not task.startswith("cargo:"):
        continue
    log = lines(f"tasks/{n}.log")
    if any(re.match(r"^\s*Compiling ", l) for l in log):
        compiled += 1
    binary, open_bin, task_failed, task_crashed = None, None, 0, []
    for l in log:
        m = re.match(r"^\s*Running (?:unittests )?(\S+)(?: \((\S+)\))?", l)
        d = re.match(r"^\s*Doc-tests (\S+)", l)
        if m or d:
            if open_bin:  # the binary before printed no result line
                task_crashed.append(open_bin)
            binary = hash_re.sub("", os.path.basename(m.group(2) or m.group(1))) if m else "doc:" + d.group(1)
            open_bin = binary
            continue
        t = re.match(r"^test (.+) \.\.\. ok$", l)
        if t and binary:
            ok.add(f"{binary}::{t.group(1)}")
            continue
        if l.startswith("test result:"):
            c = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|ignored)", l)}
            passed += c.get("passed", 0)
            failed += c.get("failed", 0)
            ignored += c.get("ignored", 0)
            task_failed += c.get("failed", 0)
            secs = re.search(r"finished in ([0-9.]+)s", l)
            results.append((float(secs.group(1)) if secs else 0.0, binary or task))
            open_bin = None
    if open_bin:  # the last binary started and printed no result line
        task_crashed.append(open_bin)
    crashed += task_crashed
    if task_rc.get(task, "0") != "0" and task_failed == 0 and not task_crashed:
        broken.append(task)

if results:
    print("  slowest test binaries (cargo test):")
    for s, b in sorted(results, key=lambda r: -r[0])[:8]:
        print(f"  {s:10.1f} s  {b}")
if compiled:
    print(f"  note: {compiled} test tasks compiled code the build stage should have built")

# --- skips: a skipped test is not a passed one ----------------------------
skips = {}
for l in lines("skips"):
    f = l.split("\t")
    if len(f) >= 3 and f[0]:
        skips.setdefault(f[0], (f[1], f[2]))
skipped_ok = [t for t in skips if t in ok]
passed -= len(skipped_ok)
unmatched = [t for t in skips if t not in ok and not t.startswith("L1 ") and "::" in t]

# --- the nested step --------------------------------------------------------
# The short tier's nested step (nested.log) and a slice's nested checks
# (tasks named nested:NAME, each a run of the step of its own).
nested_counts = {}
def nested_of(name, log):
    counts = [l for l in log if l.startswith("NESTED-COUNTS ")]
    if counts:
        f = counts[-1].split()
        nested_counts[name] = (int(f[1]), int(f[2]))
nested_of("nested", lines("nested.log"))
for n, task in enumerate(queue, 1):
    if task.startswith("nested:"):
        nested_of(task, lines(f"tasks/{n}.log"))
n_passed = sum(p for p, _ in nested_counts.values())
n_failed = sum(f for _, f in nested_counts.values())

# --- failed stages ------------------------------------------------------------
failed_stages = [s for s in stages if len(s) >= 2 and s[1] != "0"]
stage_failures = []
for s in failed_stages:
    name = s[0]
    if name == "cargo-test":
        continue  # counted test by test above
    if name in nested_counts and nested_counts[name][1] > 0:
        continue  # its failures are in its NESTED-COUNTS
    stage_failures.append(name)
total_failed = failed + len(crashed) + len(broken) + n_failed + len(stage_failures)
if failed_stages and total_failed == 0:
    total_failed = 1  # never "0 failed" when the run fails (cannot happen: a guard)
total_passed = passed + n_passed

print(f"  skipped tests: {len(skips)}")
for t, (cause, why) in sorted(skips.items()):
    print(f"    SKIP {t} ({cause}): {why}")
if skipped_ok:
    print(f"    ({len(skipped_ok)} of them reported ok by cargo: counted as skipped, not passed)")
unexpected = sorted(t for t, (cause, _) in skips.items() if cause == "host-unexpected")
if unexpected:
    print(f"    UNEXPECTED host skips ({len(unexpected)}): not listed for this kind of host in "
          "testkit::EXPECTED_HOST_SKIPS (a failure under CI=true): " + ", ".join(unexpected))
if unmatched:
    print(f"    ({len(unmatched)} named no test cargo reported ok: " + ", ".join(sorted(unmatched)) + ")")
flakes = lines("flakes")
print(f"  flakes (passed only on retry): {len(flakes)}")
for l in flakes:
    print(f"    FLAKE {l}")
if ignored:
    print(f"  left to the full tier (#[ignore]): {ignored} tests (scripts/test.sh --full runs them)")
for b in crashed:
    print(f"  CRASHED test binary (started, no result line): {b}")
for t in broken:
    print(f"  FAILED test target without a failed test (did it build?): {t}")
if failed_stages:
    print("  FAILED stages: " + " ".join(s[0] for s in failed_stages))
print(f"total: {total_passed} passed, {total_failed} failed, {len(skips)} skipped")
sys.exit(1 if failed_stages else 0)
PY
