#!/usr/bin/env bash
# Checked histories of the command-line tool's `run` under faults
# (cli/tests/history.rs; RELIABILITY.md, "Checked histories").
#
#   scripts/cli-history.sh [SECONDS]      # one run (default 600 s: the long
#                                         # run; CI runs the test's 30 s)
#   scripts/cli-history.sh --defects      # = scripts/defects.sh cli-history
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --defects ]; then
  exec scripts/defects.sh cli-history "${2:-}"
fi
. scripts/lib.sh
ensure_cargo
ensure_redis_server
CLI_HISTORY_SECS=${1:-600} exec cargo test -p redisson-lock-cli --test history \
  jobs_never_run_beyond_their_lock_under_ctrl_z_and_kills -- --nocapture
