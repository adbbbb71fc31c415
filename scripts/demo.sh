#!/usr/bin/env bash
# Runs examples/quickstart.rs against a throwaway redis-server.
#
# Unless REDIS_URL is set, starts redis-server on a free loopback port (never
# 6379), without persistence, in its own temporary directory, and stops it by
# pid when the script exits, however it exits. Installs redis-server with
# apt-get (as root) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo

# A TCP port nothing listens on right now: asked of the kernel through Python,
# else picked at random and checked with bash's /dev/tcp.
free_port() {
  local port
  if command -v python3 >/dev/null 2>&1; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if [ "$port" != 6379 ]; then
      echo "$port"
      return
    fi
  fi
  while :; do
    port=$((20000 + RANDOM % 40000))
    [ "$port" = 6379 ] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

# Whether a Redis server answers PING on 127.0.0.1:$1 (no redis-cli needed).
redis_answers() (
  exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
  printf 'PING\r\n' >&3
  reply=""
  read -r -t 1 reply <&3 || true
  [ "${reply%$'\r'}" = "+PONG" ]
)

server_pid=""
server_dir=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$server_dir" ]; then
    rm -rf "$server_dir"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Starts redis-server on a free port; sets server_pid and REDIS_URL.
start_server() {
  local port attempt
  server_dir=$(mktemp -d "${TMPDIR:-/tmp}/redisson-lock-demo.XXXXXX")
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    "${REDIS_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$server_dir" --daemonize no --loglevel warning \
      --logfile "$server_dir/redis.log" </dev/null &
    server_pid=$!
    for _ in $(seq 100); do
      if ! kill -0 "$server_pid" 2>/dev/null; then
        break # exited: most likely someone took the port meanwhile
      fi
      if redis_answers "$port" 2>/dev/null; then
        export REDIS_URL="redis://127.0.0.1:$port/"
        echo "==> redis-server (pid $server_pid) listening on 127.0.0.1:$port"
        return 0
      fi
      sleep 0.05
    done
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    echo "==> redis-server did not start on port $port (attempt $attempt)" >&2
  done
  echo "error: could not start redis-server; its log:" >&2
  cat "$server_dir/redis.log" >&2 || true
  exit 1
}

if [ -n "${REDIS_URL:-}" ]; then
  echo "==> using the Redis server at \$REDIS_URL"
else
  ensure_redis_server
  start_server
fi

echo "==> cargo run --release --example quickstart"
cargo run --release --example quickstart
