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
exec scripts/defects.sh failpoints "${2:-}"
