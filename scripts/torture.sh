#!/usr/bin/env bash
# Torture test: 3 worker processes x 8 threads fight over 3 locks while a chaos
# thread SIGKILLs workers, kills client connections and pauses/stops Redis.
# See examples/torture/main.rs for what is measured. Ends with one summary line and
# exits non-zero if any failure column is non-zero.
#
#   ./scripts/torture.sh --quick        # 30 s of chaos (CI)
#   ./scripts/torture.sh --minutes 10   # a long run (the default is 10 minutes)
#   ... --beyond-lease                  # also freeze Redis past the lease: overlaps
#                                       # are then expected, but each must be
#                                       # signalled to the earlier holder
#   ... --kind rw | --kind fair         # a read/write lock or a fair lock
#                                       # (default: the reentrant lock)
#   ... --kind semaphore                # 3 semaphores of 2 permits: never more
#                                       # than 2 holders, permits accounted for
#                                       # at the end (a ledger of every acquire
#                                       # and release), a final round after the
#                                       # chaos (not with --cluster/--beyond-lease)
#                                       # and a JVM worker (real Redisson, through
#                                       # the interop driver, built here with Maven)
#                                       # on the same semaphores; TORTURE_NO_JAVA=1,
#                                       # or no java/mvn on PATH: without it
#   ... --kind fenced                   # the fenced lock (getFencedLock), with a
#                                       # checked history: Rust workers and two JVM
#                                       # workers (real Redisson, 4.7.0 and 3.24.3,
#                                       # through the interop driver) record every
#                                       # acquire, hold and release with its token;
#                                       # the chaos also SIGSTOPs workers and
#                                       # SIGKILLs JVMs; the checker
#                                       # (examples/torture/checker.rs and
#                                       # checker/) must find no
#                                       # violation. TORTURE_NO_JAVA=1: without JVMs
#   ... --history [FILE]                # keep the history (any lock kind; fenced
#                                       # runs always check one): in FILE, by
#                                       # default target/torture-history/<kind>-<time>.hist
#   ./scripts/torture.sh --check-history FILE...
#                                       # only run the checker on recorded histories
#   ... --multiplexed N                 # the workers' clients multiplexed over N
#                                       # connections per server
#                                       # (`ClientBuilder::multiplexed`; passed
#                                       # down as REDISSON_LOCK_TEST_MULTIPLEXED)
#   ./scripts/torture.sh --cluster [--quick]
#                                       # the locks in a Redis Cluster (3 masters
#                                       # + 3 replicas, the 3 locks on 3 masters),
#                                       # with failovers in the chaos (--quick:
#                                       # 75 s of chaos, about 1.5 min in all)
#
# Starts its own redis-server on a free loopback port (no persistence) and
# stops it by pid on exit.
#
# With --cluster that server only keeps the run's bookkeeping (occupancy sets,
# counters), out of the chaos; the torture binary starts 6 cluster nodes on
# free loopback ports (no persistence) under the run's directory, and the
# workers' clients get the masters as seeds. Its chaos then: worker SIGKILLs,
# CLIENT KILL (normal, pubsub) on every master, short CLIENT PAUSE or SIGSTOP
# of one master, and every few seconds a failover of the master of a random
# lock, alternately coordinated (CLUSTER FAILOVER on its replica: no overlap
# allowed) and kill -9 (the cluster promotes the replica, then the killed
# node is started again with its nodes.conf and rejoins as a replica; until
# the promotion the cluster refuses every slot: an overlap from the kill to 5 s
# after the promotion is then allowed only if the earlier holder was told its
# lock was lost, counted as overlaps_after_master_kill). In a cluster run, 4
# sections in 1000 hold their lock for 0.3-5 s, to span failovers. The binary
# stops the nodes when it ends; this script also kills, on exit, every node
# still running from the pid files (only a redis-server in that node's
# directory). --beyond-lease is not supported with --cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo
ensure_redis_server

# TORTURE_PROFILE=dev: the unoptimised build (CI's quick runs, where
# `cargo test --all-targets` has built it already: the chaos, not the
# workers' speed, is what is tested). Default: release.
case "${TORTURE_PROFILE:-release}" in
  release) cargo build --release --example torture; built=release ;;
  dev) cargo build --example torture; built=debug ;;
  *) echo "TORTURE_PROFILE is release or dev" >&2; exit 2 ;;
esac
bin="${CARGO_TARGET_DIR:-target}/$built/examples/torture"

dir="$(mktemp -d -t redisson-lock-torture.XXXXXX)"
pid=""
rc=0
cleanup() {
  stop_cluster_nodes
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

if [ "${1:-}" = --check-history ]; then
  shift
  exec "$bin" check-history "$@"
fi

cluster_args=()
args=()
want_multiplexed=0
want_history=0
kind=reentrant
prev=""
for arg in "$@"; do
  if [ "$prev" = --kind ]; then kind=$arg; fi
  prev=$arg
  if [ "$want_history" = 1 ]; then
    want_history=0
    case "$arg" in
      -*) ;; # no file named: the default one (below)
      *) args+=(--history "$arg"); continue ;;
    esac
    args+=(--history "$history_default")
  fi
  if [ "$want_multiplexed" = 1 ]; then
    case "$arg" in [1-9] | [1-5][0-9] | 6[0-4]) ;; *) echo "--multiplexed takes 1 to 64" >&2; exit 2 ;; esac
    export REDISSON_LOCK_TEST_MULTIPLEXED="$arg"
    want_multiplexed=0
  elif [ "$arg" = --multiplexed ]; then
    want_multiplexed=1
  elif [ "$arg" = --cluster ]; then
    cluster_args=(--cluster-dir "$dir/cluster")
  elif [ "$arg" = --history ]; then
    want_history=1
    history_default="$PWD/target/torture-history/KIND-$(date +%Y%m%d-%H%M%S).hist"
  else
    args+=("$arg")
  fi
done
if [ "$want_multiplexed" = 1 ]; then
  echo "--multiplexed takes a number of connections" >&2
  exit 2
fi
if [ "$want_history" = 1 ]; then
  args+=(--history "$history_default")
fi
# The default history file is named after the kind.
for i in "${!args[@]}"; do
  args[i]=${args[i]/\/KIND-//$kind-}
done

# A semaphore run gets a JVM worker: the interop driver of the newest
# Redisson of interop/java/pom.xml (built once, then reused while up to date).
java_args=()
if { [ "$kind" = semaphore ] || [ "$kind" = fenced ]; } && [ -z "${TORTURE_NO_JAVA:-}" ]; then
  if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
    newest=$(sed -n 's:.*<redisson.version>\(.*\)</redisson.version>.*:\1:p' interop/java/pom.xml | head -n1)
    jar=$(interop/java/build.sh "$newest" target/interop | tail -n1)
    java_args=(--java-jar "$jar")
    if [ "$kind" = fenced ]; then
      # And one 3.x (the fenced lock is in Redisson since 3.19.0).
      jar=$(interop/java/build.sh 3.24.3 target/interop | tail -n1)
      java_args+=(--java-jar "$jar")
    fi
  else
    echo "warning: no java or mvn on PATH: the $kind run goes without its JVM worker" >&2
  fi
fi

# Cluster nodes the torture binary left running (it died before it could
# stop them): by the pid in each node's pid file, if that process still runs
# in the node's directory.
stop_cluster_nodes() {
  local pidfile node_pid node_dir
  for pidfile in "$dir"/cluster/*/pid; do
    [ -f "$pidfile" ] || continue
    node_pid=$(cat "$pidfile" 2>/dev/null || true)
    node_dir=$(dirname "$pidfile")
    if [ -n "$node_pid" ] && [ "$(readlink "/proc/$node_pid/cwd" 2>/dev/null)" = "$node_dir" ]; then
      kill -CONT "$node_pid" 2>/dev/null || true
      kill -9 "$node_pid" 2>/dev/null || true
    fi
  done
}

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
"$bin" --url "redis://127.0.0.1:$port/" --redis-pid "$pid" --log-dir "$dir/logs" \
  ${cluster_args[@]+"${cluster_args[@]}"} ${java_args[@]+"${java_args[@]}"} \
  ${args[@]+"${args[@]}"} || rc=$?
exit "$rc"
