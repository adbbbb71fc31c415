#!/usr/bin/env bash
# Checks a tool against the defects it is for: applies each patch of a set
# (a defect re-introduced, most of them issue 29's), runs the test its header
# names ("Caught by: NAME"), and fails unless that test fails; then takes
# the patch back out. (The fuzz targets and the schedule models have their
# own: scripts/fuzz.sh --defects, scripts/schedules.sh --defects.)
#
#   scripts/defects.sh failpoints [PREFIX]    # scripts/failpoints/*.patch
#                                             # against tests/failpoints.rs
#   scripts/defects.sh cli-history [PREFIX]   # scripts/cli-history/*.patch
#                                             # against cli/tests/history.rs
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_cargo
ensure_redis_server

set_name=${1:?which set: failpoints or cli-history}
case $set_name in
failpoints) run=(cargo test --features failpoints --test failpoints) ;;
cli-history) run=(cargo test -p redisson-lock-cli --test history) ;;
*) echo "unknown set $set_name" >&2; exit 2 ;;
esac
if ! git diff --quiet -- src cli/src; then
  echo "src/ or cli/src/ has uncommitted changes: the patches go there and are taken back out; commit first" >&2
  exit 2
fi
applied=
trap '[ -n "$applied" ] && git apply -R "$applied"' EXIT
failed=0
for patch in scripts/"$set_name"/"${2:-}"*.patch; do
  test_name=$(sed -n 's/^Caught by: //p' "$patch" | head -n1)
  echo "==> $(basename "$patch" .patch): expect $test_name to fail"
  git apply "$patch"
  applied=$patch
  started=$SECONDS
  log=target/defect-$set_name.log
  if "${run[@]}" "$test_name" -- --exact --nocapture >"$log" 2>&1; then
    echo "    NOT CAUGHT"
    grep -m1 '^cli history' "$log" | sed 's/^/    /' || true
    failed=1
  elif grep -q "^test $test_name \.\.\. FAILED" "$log"; then
    echo "    caught ($((SECONDS - started)) s, build included):"
    grep -m1 '^cli history' "$log" | cut -c1-240 | sed 's/^/    /' || true
    grep -m1 -A1 "panicked at" "$log" | tail -n1 | cut -c1-200 | sed 's/^/    /'
  else
    echo "    the build or run failed otherwise:"
    tail -n 20 "$log"
    failed=1
  fi
  git apply -R "$patch"
  applied=
done
exit $failed
