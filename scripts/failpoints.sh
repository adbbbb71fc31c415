#!/usr/bin/env bash
# The fail-point tests (tests/failpoints.rs, feature `failpoints`;
# RELIABILITY.md, "Failpoints"), and a check of the tests themselves.
#
#   scripts/failpoints.sh               # the tests
#   scripts/failpoints.sh --defects [PREFIX]
#       applies each patch of scripts/failpoints/ (whose name starts with
#       PREFIX: a defect re-introduced), runs the test its header names, and
#       fails unless that test fails; then takes the patch back out.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_cargo
ensure_redis_server

run=(cargo test --features failpoints --test failpoints)

if [ "${1:-}" != --defects ]; then
  exec "${run[@]}"
fi
if ! git diff --quiet -- src; then
  echo "src/ has uncommitted changes: --defects patches src/ and takes its patches back out; commit first" >&2
  exit 2
fi
applied=
trap '[ -n "$applied" ] && git apply -R "$applied"' EXIT
failed=0
for patch in scripts/failpoints/"${2:-}"*.patch; do
  test_name=$(sed -n 's/^Caught by: //p' "$patch" | head -n1)
  echo "==> $(basename "$patch" .patch): expect $test_name to fail"
  git apply "$patch"
  applied=$patch
  started=$SECONDS
  if "${run[@]}" "$test_name" -- --exact >target/failpoints-defect.log 2>&1; then
    echo "    NOT CAUGHT"
    failed=1
  elif grep -q "^test $test_name \.\.\. FAILED" target/failpoints-defect.log; then
    echo "    caught ($((SECONDS - started)) s, build included):"
    grep -m1 -A1 "panicked at tests" target/failpoints-defect.log | tail -n1 | cut -c1-160 | sed 's/^/    /'
  else
    echo "    the build or run failed otherwise:"
    tail -n 20 target/failpoints-defect.log
    failed=1
  fi
  git apply -R "$patch"
  applied=
done
exit $failed
