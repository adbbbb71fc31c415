#!/usr/bin/env bash
# Torture test: 3 worker processes x 8 threads fight over 3 locks while a chaos
# thread SIGKILLs workers, kills client connections and pauses/stops Redis.
# See examples/torture/main.rs for what is measured. Ends with one summary line and
# exits non-zero if any failure column is non-zero.
#
#   ./scripts/torture.sh --quick        # about a minute of chaos (CI)
#   ./scripts/torture.sh --minutes 10   # a long run (the default is 10 minutes)
#   ... --beyond-lease                  # also freeze Redis past the lease: overlaps
#                                       # are then expected, but each must be
#                                       # signalled to the earlier holder
#   ... --kind rw | --kind fair         # a read/write lock or a fair lock
#                                       # (default: the reentrant lock)
#
# Starts its own redis-server on a free loopback port (no persistence) and
# stops it by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo
ensure_redis_server

cargo build --release --example torture
bin="${CARGO_TARGET_DIR:-target}/release/examples/torture"

dir="$(mktemp -d -t redisson-lock-torture.XXXXXX)"
pid=""
rc=0
cleanup() {
  if [ -n "$pid" ]; then
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  # The torture binary has printed where the worker logs are (before its
  # summary line, which stays the last line): keep them when it failed.
  if [ -z "${TORTURE_KEEP:-}" ] && [ "$rc" = 0 ]; then
    rm -rf "$dir"
  fi
}
trap cleanup EXIT

for attempt in 1 2 3 4 5; do
  port="$("$bin" free-port)"
  "${REDIS_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --protected-mode yes --loglevel warning --dir "$dir" \
    >"$dir/redis.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      break 2
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      break # exited: most likely the port was taken meanwhile
    fi
    sleep 0.05
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
  if [ "$attempt" = 5 ]; then
    echo "error: could not start redis-server (see $dir/redis.log)" >&2
    cat "$dir/redis.log" >&2 || true
    exit 1
  fi
done

echo "==> torture against redis-server pid $pid on 127.0.0.1:$port" >&2
"$bin" --url "redis://127.0.0.1:$port/" --redis-pid "$pid" --log-dir "$dir/logs" "$@" || rc=$?
exit "$rc"
