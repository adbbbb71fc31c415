#!/usr/bin/env bash
# Schedule exploration (RELIABILITY.md, "Schedule exploration"): the
# concurrent core's schedule tests (`schedules::` in src/, feature
# `shuttle`), each over many random schedules of shuttle's scheduler, on a
# virtual clock.
#
#   scripts/schedules.sh                 every test at its own CI count
#   scripts/schedules.sh 100000          every test over 100,000 schedules
#   scripts/schedules.sh 100000 TEST...  those tests only (a name filter each)
#   scripts/schedules.sh --defects [PREFIX]
#       checks the tests themselves: applies each patch of
#       scripts/schedules/ (whose name starts with PREFIX: a defect
#       re-introduced, issue 29's and others), runs the test its header
#       names at its CI count DEFECT_RUNS times (5; new seeds each), and
#       fails unless that test fails every time; then takes the patch back
#       out. Prints the schedule at which each run failed.
#
# SHUTTLE_RANDOM_SEED (shuttle's "failing seed", with SHUTTLE_ITERATIONS=1)
# replays one schedule; SHUTTLE_PCT=depth uses the PCT scheduler instead of
# the random one.
# Prints each test's schedules and seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_cargo

features=(--features shuttle --lib)

if [ "${1:-}" = --defects ]; then
  if ! git diff --quiet -- src; then
    echo "src/ has uncommitted changes: --defects patches src/ and takes its patches back out; commit first" >&2
    exit 2
  fi
  applied=
  trap '[ -n "$applied" ] && git apply -R "$applied"' EXIT
  # Each test runs this often (other seeds each time): the schedules it
  # took say how easily the defect is found.
  runs=${DEFECT_RUNS:-5}
  message=
  failed=0
  for patch in scripts/schedules/"${2:-}"*.patch; do
    test_name=$(sed -n 's/^Caught by: //p' "$patch" | head -n1)
    echo "==> $(basename "$patch" .patch): expect $test_name to fail"
    git apply "$patch"
    applied=$patch
    started=$SECONDS
    found=()
    for run in $(seq "$runs"); do
      if cargo test --quiet "${features[@]}" "$test_name" -- --exact >"target/schedules-defect.log" 2>&1; then
        found+=(missed)
      elif grep -q "^schedule exploration: failed at schedule" target/schedules-defect.log; then
        found+=("$(sed -n 's/^schedule exploration: failed at schedule \([0-9]*\) of.*/\1/p' target/schedules-defect.log | head -n1)")
        [ "$run" = 1 ] && message=$(grep -m1 -A1 "panicked at src" target/schedules-defect.log | tail -n1 | cut -c1-150)
      else
        echo "    the build or run failed otherwise:"
        tail -n 20 target/schedules-defect.log
        found+=(error)
      fi
    done
    if printf '%s\n' "${found[@]}" | grep -qv '^[0-9]*$'; then
      echo "    NOT CAUGHT in every run: ${found[*]}"
      failed=1
    else
      echo "    caught in $runs of $runs runs, at schedule ${found[*]} ($((SECONDS - started)) s, build included):"
      echo "    $message"
    fi
    git apply -R "$patch"
    applied=
  done
  exit $failed
fi

iterations=${1:-}
shift || true
filters=("$@")
[ ${#filters[@]} -eq 0 ] && filters=(schedules::)
cargo test --quiet "${features[@]}" --no-run
tests=()
for filter in "${filters[@]}"; do
  while IFS= read -r line; do
    tests+=("${line%: test}")
  done < <(cargo test --quiet "${features[@]}" "$filter" -- --list 2>/dev/null | grep ': test$')
done
total=$SECONDS
log=target/schedules.log
for name in "${tests[@]}"; do
  started=$(date +%s.%N)
  if ! SHUTTLE_ITERATIONS=${iterations:-${SHUTTLE_ITERATIONS:-}} \
    cargo test --quiet "${features[@]}" "$name" -- --exact >"$log" 2>&1; then
    cat "$log"
    echo "    FAILED: $name (SHUTTLE_RANDOM_SEED=<its failing seed, above> SHUTTLE_ITERATIONS=1 replays it)" >&2
    exit 1
  fi
  ended=$(date +%s.%N)
  printf '    %-85s %8.1f s\n' "$name" "$(awk "BEGIN { print $ended - $started }")"
done
echo "    ${#tests[@]} schedule tests, ${iterations:-their CI count of} schedules each: $((SECONDS - total)) s"
