#!/usr/bin/env bash
# Benchmarks redisson-lock side by side with the true floor (Redisson's RLock
# scripts less the unlock latch, sent raw), the crate's own scripts sent raw,
# rslock and Redisson, on one throwaway redis-server, in one run (see
# BENCHMARKS.md).
#
#   scripts/bench.sh           full run (5 repetitions); writes BENCHMARKS.md,
#                              docs/benchmarks.svg (and docs/benchmarks-scale.svg, issue
#                              36's curves) and target/bench/results.json
#   scripts/bench.sh --quick   reduced run (~260 s once built before issue 36, measured on a busy machine, which
#                              added ~3 min: scenarios 9, 10, the watchdog curve; scenario 6 alone ~30 s); writes
#                              everything under target/bench/quick/ (BENCHMARKS.md,
#                              benchmarks.svg, results.json), leaving the full
#                              run's files alone
#   ... --report-only          re-renders the report from the last run's raw.jsonl
#   ... --only N               runs scenario N alone (1-6; 7: the paired measurements
#                              and the contended semaphore, with Redisson's
#                              synchronizers beside them;
#                              8: the paired measurements on a 3-master Redis Cluster;
#                              9: the paired rows at a 0.5 ms round trip, every client
#                              through the bench's delay proxy (rlock-bench proxy),
#                              with the proxy's own overhead (PING direct vs through it
#                              at delay 0);
#                              10: a thousand threads: the paired measurement with the
#                              default client at 1, 4, 16, 64, 256 and 1024 threads;
#                              11: many waiters: 1 and 1000 names x 10 waiters on one
#                              client, the crate and Redisson, lock and fair lock
#                              (first repetition only; --quick: 1 and 100 names);
#                              with --quick, to check one
#                              scenario: the report then holds that scenario only)
#
# Issue 36 (scale) also adds to scenario 4 the watchdog curve: the crate alone
# holding 10k, 100k and 1M locks with a 30 s lease for five ticks (first
# repetition only; --quick: 10k with a 6 s lease).
#
# Environment: BENCH_REPS (repetitions), BENCH_NOTE (free text for the report,
# e.g. what else was running), BENCH_SERVER_CPU / BENCH_CLIENT_CPU (default 0
# and 1), REDISSON_VERSION (default: the interop pom's), BENCH_SKIP_JAVA=1,
# BENCH_FEATURES (bench crate features, e.g. `observe`: the library's tracing
# and metrics compiled in, nothing installed).
# Issue 36: BENCH_S4_SIZES (scenario 4's watchdog curve, e.g. "10000 100000
# 1000000"; empty: none), BENCH_S4_SCALE_LEASE_MS (its lease, default 30000),
# BENCH_PROXY_DELAY_US (scenario 9's one-way delay, default 250),
# BENCH_PROXY_CPU (the proxy's CPU, default the server's; "none": unpinned),
# BENCH_PROXY_SPIN_US (the proxy spins the last N µs before each deadline
# instead of sleeping: closer to the delay, at a CPU cost; default 0),
# BENCH_S10_THREADS (scenario 10's thread counts, default "1 4 16 64 256 1024").
#
# The server runs pinned to one vCPU and every client process to the other,
# the same for every contender. Every scenario runs for every contender in each
# repetition, contenders interleaved: A B C D A B C D ...
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/lib.sh

quick=0
report_only=0
only=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --report-only) report_only=1 ;;  # re-render the report from the last run's raw data
    --only) only=${2:-}; shift
      case "$only" in [1-9]|10|11) ;; *) echo "--only takes a scenario number, 1 to 11 (7: the paired measurements, 8: on a cluster, 9: through the delay proxy, 10: to 1024 threads, 11: many waiters)" >&2; exit 2 ;; esac ;;
    -h|--help) sed -n '2,51p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick] [--report-only] [--only N]" >&2; exit 2 ;;
  esac
  shift
done
# wanted N: whether scenario N runs (every one unless --only picked another).
wanted() { [ -z "$only" ] || [ "$only" = "$1" ]; }

# ---------------------------------------------------------------- parameters
FULL_REPS=5
FULL_MINUTES=50   # rough wall time of a full run on the 2-vCPU machine (an estimate: 33 before issue 36's
                  # scenarios 9 and 10 and scenario 4's curve, ~17 min more, not yet timed; 11 before the raw row and
                  # the 100,000-lock scenario 4, 13 before scenario 5, 17 before scenario 6, 27
                  # before scenarios 1 and 2 ran their floor, raw and crate rows 3 times)
if [ "$quick" = 1 ]; then
  mode=quick
  out=target/bench/quick
  reps=${BENCH_REPS:-2}
  s1_ms=1000; s1_warmup=500
  s2_ms=700; s2_warmup=200
  s3_iter=150; s3_warmup=5; s3_hold_us=100
  s4_reps=1
  s5_ms=500; s5_warmup=500
  pair_rounds=6; pair_block_ms=150
  s6_ms=1000; s6_warmup=300
  soak_cycles=100000
  s4_sizes=${BENCH_S4_SIZES-10000}
  s4_scale_lease_ms=${BENCH_S4_SCALE_LEASE_MS:-6000}
  out_md=$out/BENCHMARKS.md
  out_svg=$out/benchmarks.svg
  svg_link=benchmarks.svg
  command="scripts/bench.sh --quick"
else
  mode=full
  out=target/bench
  reps=${BENCH_REPS:-$FULL_REPS}
  s1_ms=3000; s1_warmup=5000
  s2_ms=3000; s2_warmup=500
  s3_iter=500; s3_warmup=20; s3_hold_us=100
  s4_reps=$(( reps < 3 ? reps : 3 ))   # 100,000 locks take a while: 3 of the repetitions
  s5_ms=1000; s5_warmup=1000   # 7 rows x 3 contenders, a JVM start each: ~50 s a repetition
  pair_rounds=20; pair_block_ms=200   # 12 paired measurements (+2 on the cluster) x 8 s a repetition
  s6_ms=2000; s6_warmup=1000   # per side (RedLock, single), alternating: ~15 s a repetition
  soak_cycles=1000000
  s4_sizes=${BENCH_S4_SIZES-10000 100000 1000000}   # ~5 min, first repetition only
  s4_scale_lease_ms=${BENCH_S4_SCALE_LEASE_MS:-30000}
  out_md=BENCHMARKS.md
  out_svg=docs/benchmarks.svg
  svg_link=docs/benchmarks.svg
  command="scripts/bench.sh"
fi
if [ -n "$only" ]; then
  # One scenario alone never replaces a whole run's files.
  out=$out/only-$only
  out_md=$out/BENCHMARKS.md
  out_svg=$out/benchmarks.svg
  svg_link=benchmarks.svg
  command="$command --only $only"
fi
# Scenario 4: the crate and Redisson hold 100,000 locks; rslock, which renews
# each lock on its own timer, holds 10,000 (at 100,000 it cannot keep them on
# one vCPU). A 6 s watchdog timeout (2 s periods) leaves Redisson's 2,000
# sequential renewal calls per tick well inside the lease.
s4_locks=100000
s4_locks_rslock=10000
s4_watchdog_ms=6000
s4_window_permille=3500   # hold for 3.5 renewal periods: 2 or 3 whole ticks
s4_acquire_threads=4      # redisson-lock: threads taking (and holding) the locks
s4_java_in_flight=64      # Redisson: lockAsync()/unlockAsync() calls outstanding
# Scenario 5: every other lock type of the family, uncontended, against its
# own floor (bench/lua/) and Redisson's same type; then 4 readers sharing one
# read lock; then scenario 3 for the fair lock beside the reentrant one.
s5_types="fair read write fenced spin nonreentrant"
s5_rounds=3   # per repetition, alternating: floor and crate runs of each type, reentrant and fair hand-off runs
s12_rounds=3  # per repetition, alternating: scenario 1 and 2 runs of the floor, the raw scripts and the crate
# Scenario 6: RedLock over this many redis-servers (the main one and more,
# all on the server CPU), for the floor, the crate, rslock and Redisson.
s6_masters=5
# Scenario 4's watchdog curve (issue 36): each size held for 5.5 renewal
# periods (five whole ticks), taken on s4_acquire_threads threads.
s4_scale_window_permille=5500
# Scenario 9: every client through the delay proxy, this one-way delay (a
# round trip of twice it on top of loopback's); the paired rows at these
# thread counts, the contended hand-off (1 process of 4 threads) beside them.
proxy_delay_us=${BENCH_PROXY_DELAY_US:-250}
s9_threads="1 16 64"
proxy_ping_samples=2000
# Scenario 10: the paired measurement, default client, at these thread counts
# (warm-up 1,000 pairs per thread and side up to 64 threads; beyond, 10, and
# blocks of pair_block_ms x threads/64 in pair_rounds x 64/threads rounds, at
# least 4).
s10_threads=${BENCH_S10_THREADS:-1 4 16 64 256 1024}
# Scenario 11's large shape: this many names x 10 waiters (--quick: 100).
if [ "$quick" = 1 ]; then s11_names=${BENCH_S11_NAMES:-100}; else s11_names=${BENCH_S11_NAMES:-1000}; fi
# Scenario 8: the paired measurement on a Redis Cluster of this many masters
# (no replicas: the lock commands go to masters only), all on the server CPU.
cluster_masters=3

mkdir -p "$out/events" "$(dirname "$out_md")" "$(dirname "$out_svg")"
raw=$out/raw.jsonl
log=$out/log.txt
render() {
  "$B" report --raw "$raw" --machine "$out/machine.txt" --json "$out/results.json" --md "$out_md" \
    --svg "$out_svg" --svg-link "$svg_link" --analysis bench/ANALYSIS.md
}
if [ "$report_only" = 1 ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
  cargo build --release --quiet --manifest-path bench/Cargo.toml ${BENCH_FEATURES:+--features "$BENCH_FEATURES"}
  B=$CARGO_TARGET_DIR/release/rlock-bench
  render
  echo "==> $out_md, $out_svg, $out/results.json re-rendered from $raw" >&2
  exit 0
fi
: > "$raw"
: > "$log"
rm -f "$out"/events/*

# ---------------------------------------------------------------- tools
ensure_cargo
ensure_redis_server
java_ok=1
java_needed=1
case "$only" in 8|10) java_needed=0 ;; esac   # the cluster's paired scenario and the thread curve have no Redisson side
if [ "$java_needed" = 0 ] || [ "${BENCH_SKIP_JAVA:-0}" = 1 ] || ! ( ensure_java_maven ) >>"$log" 2>&1; then
  java_ok=0
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
echo "==> building the benchmark (release)" >&2
cargo build --release --quiet --manifest-path bench/Cargo.toml ${BENCH_FEATURES:+--features "$BENCH_FEATURES"}
B=$CARGO_TARGET_DIR/release/rlock-bench
# Scenario 11's crate runs count the library's wake-ups (the bench's
# `wakeups` feature compiles the library's `metrics` in, with a recorder of
# the bench's own): a build of their own, so no other scenario pays for it.
B_wakeups=$B
if wanted 11; then
  echo "==> building the benchmark with wake-up counts (scenario 11)" >&2
  CARGO_TARGET_DIR=$CARGO_TARGET_DIR/wakeups cargo build --release --quiet \
    --manifest-path bench/Cargo.toml --features "wakeups${BENCH_FEATURES:+,$BENCH_FEATURES}"
  B_wakeups=$CARGO_TARGET_DIR/wakeups/release/rlock-bench
fi

redisson_version=${REDISSON_VERSION:-$(sed -n 's:.*<redisson.version>\(.*\)</redisson.version>.*:\1:p' interop/java/pom.xml | head -1)}
jar=
if [ "$java_ok" = 1 ]; then
  echo "==> building the Redisson driver $redisson_version" >&2
  if jar=$(interop/java/build.sh "$redisson_version" target/bench/java 2>>"$log" | tail -1) && [ -f "$jar" ]; then
    :
  else
    echo "warning: the Redisson driver did not build (see $log); Redisson is skipped" >&2
    java_ok=0
  fi
fi
contenders="floor raw crate rslock"
family_contenders="floor crate"
redlock_contenders="floor crate rslock"
if [ "$java_ok" = 1 ]; then
  contenders="$contenders redisson"
  family_contenders="$family_contenders redisson"
  redlock_contenders="$redlock_contenders redisson"
fi

# ---------------------------------------------------------------- pinning
# Command prefixes (arrays, not functions: a backgrounded simple command is
# exec'd, so $! is the pid of the process itself and can be killed by pid).
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
  server_cpu=${BENCH_SERVER_CPU:-0}
  client_cpu=${BENCH_CLIENT_CPU:-1}
  on_server=(taskset -c "$server_cpu")
  on_client=(taskset -c "$client_cpu")
  pinning="redis-server on CPU $server_cpu and every client process (Rust and JVM) on CPU $client_cpu, with \`taskset -c\`; scenario 4's INFO poller on CPU $server_cpu"
else
  on_server=(env)
  on_client=(env)
  pinning="none (taskset missing or fewer than 2 CPUs): numbers mix same-CPU and cross-CPU round trips"
fi

# ---------------------------------------------------------------- redis-server
port=$("$B" free-port)
url=redis://127.0.0.1:$port
server_dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-bench.XXXXXX")
redis_pid=
proxy_pid=
master_pids=()
cluster_pids=()
cleanup() {
  local pid
  for pid in $proxy_pid $redis_pid "${master_pids[@]}" "${cluster_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$server_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"${on_server[@]}" "${REDIS_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' \
  --appendonly no --dir "$server_dir" --logfile "$server_dir/redis.log" &
redis_pid=$!
"$B" cmd --url "$url" --wait-s 10 PING >/dev/null
# Scenario 6's other masters, started like the main one.
master_urls=$url
if wanted 6; then
  for ((i = 2; i <= s6_masters; i++)); do
    p=$("$B" free-port)
    mkdir -p "$server_dir/m$i"
    "${on_server[@]}" "${REDIS_SERVER:-redis-server}" --port "$p" --bind 127.0.0.1 --save '' \
      --appendonly no --dir "$server_dir/m$i" --logfile "$server_dir/m$i/redis.log" &
    master_pids+=($!)
    "$B" cmd --url "redis://127.0.0.1:$p" --wait-s 10 PING >/dev/null
    master_urls="$master_urls,redis://127.0.0.1:$p"
  done
fi

# Scenario 9's delay proxy (bench/src/proxy.rs): one process, two listeners
# on free loopback ports, one forwarding with no delay (for its own overhead),
# one with proxy_delay_us each way; killed by pid at the end.
proxy_url=
proxy_port0=
proxy_port_delay=
case "${BENCH_PROXY_CPU:-}" in
  none) on_proxy=(env) ;;
  "") on_proxy=("${on_server[@]}") ;;
  *) on_proxy=(taskset -c "$BENCH_PROXY_CPU") ;;
esac
if wanted 9; then
  "${on_proxy[@]}" "$B" proxy --upstream "$url" --delays-us "0,$proxy_delay_us" --spin-us "${BENCH_PROXY_SPIN_US:-0}" \
    >"$server_dir/proxy.ports" 2>>"$log" &
  proxy_pid=$!
  for ((i = 0; i < 200; i++)); do [ -s "$server_dir/proxy.ports" ] && break; sleep 0.05; done
  read -r proxy_port0 proxy_port_delay <"$server_dir/proxy.ports"
  proxy_url=redis://127.0.0.1:$proxy_port_delay
  "$B" cmd --url "$proxy_url" --wait-s 10 PING >/dev/null
fi

# Scenario 8's cluster: cluster-enabled nodes started like the main server
# (their bus ports picked free too), formed with redis-cli --cluster create.
# Started for each repetition's scenario 8 and stopped after it, so that no
# other scenario runs beside idle cluster nodes.
cluster_urls=
start_cluster() {
  local i p bus nodes=() u
  cluster_urls=
  for ((i = 1; i <= cluster_masters; i++)); do
    p=$("$B" free-port)
    bus=$("$B" free-port)
    [ "$bus" != "$p" ] || bus=$("$B" free-port)
    rm -rf "$server_dir/c$i"; mkdir -p "$server_dir/c$i"
    "${on_server[@]}" "${REDIS_SERVER:-redis-server}" --port "$p" --cluster-port "$bus" \
      --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 5000 --save '' --appendonly no --dir "$server_dir/c$i" \
      --logfile "$server_dir/c$i/redis.log" &
    cluster_pids+=($!)
    "$B" cmd --url "redis://127.0.0.1:$p" --wait-s 10 PING >/dev/null || return 1
    nodes+=("127.0.0.1:$p")
    cluster_urls="$cluster_urls${cluster_urls:+,}redis://127.0.0.1:$p"
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes </dev/null >>"$log" 2>&1 ||
    return 1
  for ((i = 0; i < 300; i++)); do   # every node agrees the cluster is up: 30 s at most
    local up=1
    for u in "${nodes[@]}"; do
      redis-cli -h 127.0.0.1 -p "${u##*:}" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || up=0
    done
    [ "$up" = 1 ] && return 0
    sleep 0.1
  done
  return 1
}
stop_cluster() {
  local pid
  for pid in "${cluster_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  cluster_pids=()
}

# ---------------------------------------------------------------- machine notes
cpu_busy() {  # % of all CPUs busy over one second, before we start
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -r -a b < <(grep '^cpu ' /proc/stat)
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  local idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}
busy=$(cpu_busy)
busiest() {  # the busiest other processes over half a second, "name cpu%, ..."
  top -b -n 2 -d 0.5 -w 200 2>/dev/null | awk '
    /^top -/ { frame++ }
    frame == 2 && header && $9 + 0 >= 5 { printf "%s%s %s%%", sep, $12, $9; sep = ", " }
    frame == 2 && /^ *PID/ { header = 1 }' || true
}
busy_procs=$(busiest)
machine=$out/machine.txt
{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'mode\t%s\n' "$mode"
  printf 'command\t%s\n' "$command"
  printf 'reps\t%s\n' "$reps"
  printf 'full_reps\t%s\n' "$FULL_REPS"
  printf 'full_minutes\t%s\n' "$FULL_MINUTES"
  printf 'cpu\t%s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  printf 'nproc\t%s\n' "$(nproc)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'memory\t%s\n' "$(awk '/MemTotal/ {printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
  printf 'redis\t%s\n' "$("${REDIS_SERVER:-redis-server}" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
  printf 'rustc\t%s\n' "$(rustc --version)"
  if [ "$java_ok" = 1 ]; then
    printf 'java\t%s\n' "$(java -version 2>&1 | head -1)"
    printf 'redisson\t%s\n' "$redisson_version"
  fi
  printf 'rslock\t%s\n' "$(grep -A1 '^name = "rslock"$' bench/Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p')"
  printf 'crate_version\t%s\n' "$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
  printf 'commit\t%s\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src lua Cargo.toml 2>/dev/null || echo ' (library modified)')"
  printf 'pinning\t%s\n' "$pinning"
  printf 'load_start\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf 's1_duration_ms\t%s\ns1_warmup\t%s\ns2_duration_ms\t%s\n' "$s1_ms" "$s1_warmup" "$s2_ms"
  printf 's12_rounds\t%s\n' "$s12_rounds"
  printf 's3_iterations\t%s\ns3_warmup\t%s\ns3_hold_us\t%s\n' "$s3_iter" "$s3_warmup" "$s3_hold_us"
  printf 's4_locks\t%s\ns4_watchdog_ms\t%s\ns4_period_ms\t%s\ns4_window_ms\t%s\n' \
    "$s4_locks" "$s4_watchdog_ms" $((s4_watchdog_ms / 3)) $((s4_watchdog_ms * s4_window_permille / 3000))
  printf 's4_locks_rslock\t%s\ns4_reps\t%s\ns4_acquire_threads\t%s\ns4_java_in_flight\t%s\n' \
    "$s4_locks_rslock" "$s4_reps" "$s4_acquire_threads" "$s4_java_in_flight"
  printf 's5_duration_ms\t%s\ns5_warmup\t%s\ns5_types\t%s\ns5_rounds\t%s\n' \
    "$s5_ms" "$s5_warmup" "$s5_types" "$s5_rounds"
  printf 'pair_rounds\t%s\npair_block_ms\t%s\n' "$pair_rounds" "$pair_block_ms"
  printf 's6_duration_ms\t%s\ns6_warmup\t%s\ns6_masters\t%s\n' "$s6_ms" "$s6_warmup" "$s6_masters"
  printf 'cluster_masters\t%s\n' "$cluster_masters"
  printf 's4_sizes\t%s\ns4_scale_lease_ms\t%s\ns4_scale_window_permille\t%s\n' \
    "$s4_sizes" "$s4_scale_lease_ms" "$s4_scale_window_permille"
  printf 'proxy_delay_us\t%s\ns9_threads\t%s\ns10_threads\t%s\n' \
    "$proxy_delay_us" "$s9_threads" "$s10_threads"
  printf 'proxy_pinning\t%s\n' "${on_proxy[*]}"
  [ -n "$only" ] && printf 'only\t%s\n' "$only"
  printf 'floor\ttrue\n'   # "floor" is the true floor (report: older runs called the crate's scripts that)
} > "$machine"
note="CPU busy in the second before the run: ${busy}% of both vCPUs${busy_procs:+ (busiest: $busy_procs)}."
[ -n "${BENCH_NOTE:-}" ] && note="$note ${BENCH_NOTE}"
[ "$java_ok" = 1 ] || [ "$java_needed" = 0 ] ||
  note="$note Redisson was skipped (no JDK/Maven or the driver did not build)."

# ---------------------------------------------------------------- runners
failures=0
failed_list=""
rep=0
# Scenario 9 sets client_url (the delay proxy's) and prefix (proxied_): every
# client then connects through the proxy and its records' scenario is renamed.
client_url=
prefix=
run_id() { echo "r$rep-$prefix$1-$2-$$"; }
flush() { "$B" cmd --url "$url" FLUSHALL >/dev/null; }
flush_masters() {
  local u
  for u in ${master_urls//,/ }; do "$B" cmd --url "$u" FLUSHALL >/dev/null; done
}

# run_one CONTENDER ARGS...: one process of one contender, JSON line to $raw.
run_one() {
  local c=$1 u=${client_url:-$url} rc=0 lines; shift
  if [ -z "$prefix" ]; then
    if [ "$c" = redisson ]; then
      "${on_client[@]}" java -cp "$jar" dev.redissonlock.Bench --url "$u" --rep "$rep" "$@" >>"$raw" 2>>"$log"
    else
      "${on_client[@]}" "$B" run --contender "$c" --url "$u" --rep "$rep" "$@" >>"$raw" 2>>"$log"
    fi
    return
  fi
  if [ "$c" = redisson ]; then
    lines=$("${on_client[@]}" java -cp "$jar" dev.redissonlock.Bench --url "$u" --rep "$rep" "$@" 2>>"$log") || rc=$?
  else
    lines=$("${on_client[@]}" "$B" run --contender "$c" --url "$u" --rep "$rep" "$@" 2>>"$log") || rc=$?
  fi
  [ -z "$lines" ] ||
    printf '%s\n' "$lines" | sed "s/\"scenario\": *\"\([a-z_0-9]*\)\"/\"scenario\":\"$prefix\1\"/" >>"$raw"
  return "$rc"
}

failed() {
  failures=$((failures + 1))
  failed_list="${failed_list:+$failed_list; }$*"
  echo "  FAILED: $* (see $log)" >&2
  echo "FAILED: $*" >>"$log"
}

# Commands each contender sends itself besides its scripts, for the server's
# time per pair in scenario 1 (INFO commandstats counts a script's own
# commands on their own lines too, so only these are added to the scripts').
direct_commands() {
  case "$1" in
    crate) echo unlink ;;     # the batched unlock-latch flush
    rslock) echo set ;;       # SET NX PX; its release is a script
    redisson) echo del ;;     # the latch DEL after each unlock (its unlock script's own DEL counts too)
    *) echo "" ;;
  esac
}

simple() {  # simple CONTENDER SCENARIO ARGS...
  local c=$1 s=$2 id; shift 2
  id=$(run_id "$s" "$c")
  flush
  [ "$s" = uncontended ] && "$B" cmd --url "$url" CONFIG RESETSTAT >/dev/null
  if run_one "$c" --scenario "$s" --run-id "$id" "$@"; then
    if [ "$s" = uncontended ]; then
      "$B" server-cost --url "$url" --contender "$c" --rep "$rep" --run-id "$id" \
        --direct "$(direct_commands "$c")" >>"$raw" 2>>"$log" || failed "rep $rep server cost of $c"
    fi
  else
    failed "rep $rep $s $c $*"
  fi
}

contended() {  # contended CONTENDER PROCS [LOCK_TYPE [ROUND]]: LOCK_TYPE makes it scenario 5's
  local c=$1 procs=$2 id i ok=1 typed=() named=()
  id=$(run_id "contended$procs${3:+-$3}${4:+-$4}" "$c")
  [ -n "${3:-}" ] && typed=(--lock-type "$3")
  if [ -n "${3:-}" ]; then named=(--scenario family_contended)
  elif [ -n "$prefix" ]; then named=(--scenario "${prefix}contended"); fi
  flush
  local pids=() files=()
  for ((i = 0; i < procs; i++)); do
    files+=("$out/events/$id-$i.txt")
    run_one "$c" --scenario contended --threads 4 --iterations "$s3_iter" --warmup "$s3_warmup" \
      --hold-us "$s3_hold_us" --procs "$procs" --proc-index "$i" --run-id "$id" \
      --events "$out/events/$id-$i.txt" "${typed[@]}" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
  if [ "$ok" = 1 ] && "$B" analyze --contender "$c" --rep "$rep" --run-id "$id" --threads 4 \
      --procs "$procs" --expected $((procs * 4 * s3_iter)) "${named[@]}" \
      "${typed[@]}" "${files[@]}" >>"$raw" 2>>"$log"; then
    :
  else
    failed "rep $rep contended $procs x 4 $c ${3:-} ${4:-}"
  fi
}

# rotated ROUND CONTENDER...: who runs in round ROUND of a scenario that runs
# the floor, the raw scripts and the crate several times per repetition: those
# rotated by one place each round (each takes every position once in 3 rounds,
# so a drift of the machine within a round favours none of them), then, in the
# first round only, the peers (a JVM's start alone takes seconds).
rotated() {
  local round=$1 c i n main=() peers=(); shift
  for c in "$@"; do
    case "$c" in floor|raw|crate) main+=("$c") ;; *) peers+=("$c") ;; esac
  done
  n=${#main[@]}
  for ((i = 0; i < n; i++)); do echo "${main[(i + round - 1) % n]}"; done
  if [ "$round" = 1 ] && [ ${#peers[@]} -gt 0 ]; then printf '%s\n' "${peers[@]}"; fi
  return 0
}

# Redisson has no non-reentrant lock before 4.4.0.
redisson_has() {  # redisson_has LOCK_TYPE
  [ "$1" != nonreentrant ] ||
    [ "$(printf '%s\n' 4.4.0 "$redisson_version" | sort -V | head -1)" = 4.4.0 ]
}

family() {  # family THREADS LOCK_TYPE: scenario 5's measurements of one type:
  # the floor and the crate s5_rounds times, alternating (rotated); Redisson once.
  local threads=$1 t=$2 c round
  for ((round = 1; round <= s5_rounds; round++)); do
    for c in $(rotated "$round" $family_contenders); do
      if [ "$c" = redisson ] && { [ "$round" -gt 1 ] || ! redisson_has "$t"; }; then continue; fi
      simple "$c" family --lock-type "$t" --threads "$threads" --duration-ms "$s5_ms" --warmup "$s5_warmup"
    done
  done
}

# paired THREADS LOCK_TYPE [shared]: the true floor and redisson-lock
# alternating in one process (bench/src/paired.rs); `shared`: all threads on
# one name per side (scenario 5's readers). LOCK_TYPE semaphore, pes or latch:
# that synchronizer against its own protocol floor (bench/src/sync_types.rs).
paired() {
  local id shared=0; id=$(run_id "paired$1-$2" crate)
  [ -n "${3:-}" ] && shared=1
  flush
  run_one crate --scenario paired --threads "$1" --lock-type "$2" --shared-name "$shared" \
    --rounds "$pair_rounds" --block-ms "$pair_block_ms" --warmup 1000 --run-id "$id" ||
    failed "rep $rep paired $1 threads $2"
}

# paired_mux THREADS N: `paired THREADS lock`, the crate's client multiplexed
# over N sockets (0: pooled, explicitly; 4 is the default for one server).
paired_mux() {
  local id; id=$(run_id "pairedmux$1-$2" crate)
  flush
  run_one crate --scenario paired --threads "$1" --lock-type lock --multiplexed "$2" \
    --rounds "$pair_rounds" --block-ms "$pair_block_ms" --warmup 1000 --run-id "$id" ||
    failed "rep $rep paired $1 threads multiplexed $2"
}

# sync_contended CONTENDER (floor, crate or redisson): 8 threads over one
# 2-permit semaphore, scenario 3's iterations and hold, the floor waiting on
# the semaphore's channel (bench/src/sync_types.rs; Redisson's: Bench.java
# syncContended); hand-offs computed in-process.
sync_contended() {
  flush
  run_one "$1" --scenario sync_contended --threads 8 --permits 2 --iterations "$s3_iter" \
    --warmup "$s3_warmup" --hold-us "$s3_hold_us" --run-id "$(run_id semc "$1")" ||
    failed "rep $rep contended semaphore $1"
}

# cluster_paired THREADS: scenario 8, the true floor straight to each name's
# master and redisson-lock's cluster client alternating in one process
# (bench/src/cluster.rs).
cluster_paired() {
  local id u; id=$(run_id "cluster$1" crate)
  for u in ${cluster_urls//,/ }; do "$B" cmd --url "$u" FLUSHALL >/dev/null; done
  run_one crate --scenario cluster_paired --urls "$cluster_urls" --threads "$1" \
    --rounds "$pair_rounds" --block-ms "$pair_block_ms" --warmup 1000 --run-id "$id" ||
    failed "rep $rep cluster paired $1 threads"
}

# paired_default SCENARIO THREADS WARMUP [BLOCK_MS [ROUNDS]]: the paired measurement
# of RLock with the crate's default client (scenario 9 through the proxy,
# scenario 10).
paired_default() {
  local id; id=$(run_id "$1$2" crate)
  flush
  run_one crate --scenario "$1" --threads "$2" --lock-type lock --rounds "${5:-$pair_rounds}" \
    --block-ms "${4:-$pair_block_ms}" --warmup "$3" --run-id "$id" \
    --delay-us "$([ -n "$prefix" ] && echo "$proxy_delay_us" || echo 0)" \
    ${prefix:+--proxy-pid "$proxy_pid"} ||
    failed "rep $rep $1 $2 threads"
}

# proxy_ping: the delay proxy's own cost (PING round trips direct, through it
# at delay 0 and at its delay, interleaved), one record per repetition.
proxy_ping() {
  "${on_client[@]}" "$B" proxy-ping --url "$url" --via-ports "$proxy_port0,$proxy_port_delay" \
    --delays-us "0,$proxy_delay_us" --samples "$proxy_ping_samples" --rep "$rep" >>"$raw" 2>>"$log" ||
    failed "rep $rep proxy ping"
}

# watchdog_scale LOCKS: scenario 4's curve (issue 36), the crate alone.
# The observer polls every 5 ms, every 1 ms up to 10,000 locks: their tick
# (~50 ms) would otherwise be overstated by up to a fifth (two polls).
watchdog_scale() {
  local n=$1 id obs poll=5
  [ "$n" -gt 10000 ] || poll=1
  id=$(run_id "watchdog$n" crate)
  flush
  "${on_server[@]}" "$B" observe --url "$url" --run-id "$id" --contender crate --rep "$rep" \
    --scenario watchdog_scale --timeout-s 900 --poll-ms "$poll" >>"$raw" 2>>"$log" &
  obs=$!
  if run_one crate --scenario watchdog_scale --locks "$n" --watchdog-ms "$s4_scale_lease_ms" \
      --window-permille "$s4_scale_window_permille" --run-id "$id" \
      --acquire-threads "$s4_acquire_threads"; then
    wait "$obs" || failed "rep $rep watchdog observer, $n locks"
  else
    kill "$obs" 2>/dev/null || true
    wait "$obs" 2>/dev/null || true
    failed "rep $rep watchdog $n locks"
  fi
}

watchdog() {  # watchdog CONTENDER
  local c=$1 id obs locks=$s4_locks extra=()
  case "$c" in
    crate) extra=(--acquire-threads "$s4_acquire_threads") ;;
    redisson) extra=(--in-flight "$s4_java_in_flight") ;;
    rslock) locks=$s4_locks_rslock ;;
  esac
  id=$(run_id watchdog "$c")
  flush
  "${on_server[@]}" "$B" observe --url "$url" --run-id "$id" --contender "$c" --rep "$rep" \
    --timeout-s 180 >>"$raw" 2>>"$log" &
  obs=$!
  if run_one "$c" --scenario watchdog --locks "$locks" --watchdog-ms "$s4_watchdog_ms" \
      --window-permille "$s4_window_permille" --run-id "$id" "${extra[@]}"; then
    wait "$obs" || failed "rep $rep watchdog observer for $c"
  else
    kill "$obs" 2>/dev/null || true
    wait "$obs" 2>/dev/null || true
    failed "rep $rep watchdog $c"
  fi
}

redlock() {  # redlock CONTENDER: scenario 6, one measurement
  local c=$1
  flush_masters
  run_one "$c" --scenario redlock --urls "$master_urls" --run-id "$(run_id redlock "$c")" \
    --duration-ms "$s6_ms" --warmup "$s6_warmup" || failed "rep $rep redlock $c"
}

# ---------------------------------------------------------------- the run
start=$(date +%s)
echo "==> $mode run: $reps repetitions of: $contenders (server $url)" >&2
for ((rep = 1; rep <= reps; rep++)); do
  echo "--> repetition $rep/$reps ($(( $(date +%s) - start )) s)" >&2
  if wanted 1; then
    for ((round = 1; round <= s12_rounds; round++)); do
      for c in $(rotated "$round" $contenders); do
        simple "$c" uncontended --duration-ms "$s1_ms" --warmup "$s1_warmup"
      done
    done
  fi
  if wanted 2; then
    for t in 4 16; do
      for ((round = 1; round <= s12_rounds; round++)); do
        for c in $(rotated "$round" $contenders); do
          simple "$c" scaled --threads "$t" --duration-ms "$s2_ms" --warmup "$s2_warmup"
        done
      done
    done
  fi
  if wanted 3; then
    for procs in 1 2; do
      for c in $contenders; do contended "$c" "$procs"; done
    done
  fi
  if wanted 7; then
    paired 1 lock; paired 4 lock; paired 1 fair; paired 4 read shared
    for t in read write fenced spin nonreentrant; do paired 1 "$t"; done
    for t in semaphore pes latch; do paired 1 "$t"; done   # the synchronizers, each against its floor
    if [ "$java_ok" = 1 ]; then   # Redisson's synchronizers beside them, in their own JVM
      for t in semaphore pes latch; do
        simple redisson sync_uncontended --lock-type "$t" --threads 1 --duration-ms "$s5_ms" --warmup "$s5_warmup"
      done
    fi
    # Many threads: the pool against multiplexed sockets (bench/src/report/paired.rs's MANY).
    paired_mux 1 4; paired_mux 1 1
    for threads in 16 64 128; do paired_mux "$threads" 0; paired_mux "$threads" 4; done
    paired_mux 64 1; paired_mux 128 1
    if [ "$java_ok" = 1 ]; then   # Redisson at the same thread counts (scenario 2's run; 16 there when it runs)
      for threads in 1 64 128; do
        simple redisson scaled --threads "$threads" --duration-ms "$s2_ms" --warmup "$s2_warmup"
      done
      wanted 2 || simple redisson scaled --threads 16 --duration-ms "$s2_ms" --warmup "$s2_warmup"
    fi
    if [ $((rep % 2)) = 1 ]; then sync_contended floor; sync_contended crate
    else sync_contended crate; sync_contended floor; fi
    if [ "$java_ok" = 1 ]; then sync_contended redisson; fi
  fi
  if wanted 4 && [ "$rep" -le "$s4_reps" ]; then
    for c in $contenders; do
      case "$c" in floor|raw) continue ;; esac   # no watchdog to measure
      watchdog "$c"
    done
    if [ "$rep" = 1 ]; then
      for n in $s4_sizes; do watchdog_scale "$n"; done
    fi
  fi
  if wanted 5; then
    for t in $s5_types; do family 1 "$t"; done
    family 4 read
    for ((round = 1; round <= s5_rounds; round++)); do
      contended crate 1 lock "$round"
      contended crate 1 fair "$round"
    done
    if [ "$java_ok" = 1 ]; then contended redisson 1 fair; fi
  fi
  if wanted 6; then
    for c in $redlock_contenders; do redlock "$c"; done
  fi
  if wanted 9; then
    proxy_ping
    client_url=$proxy_url; prefix=proxied_
    for t in $s9_threads; do paired_default paired "$t" 1000; done
    if [ $((rep % 2)) = 1 ]; then contended floor 1; contended crate 1
    else contended crate 1; contended floor 1; fi
    if [ "$java_ok" = 1 ]; then
      for t in $s9_threads; do
        simple redisson scaled --threads "$t" --duration-ms "$s2_ms" --warmup "$s2_warmup"
      done
      contended redisson 1
    fi
    client_url=; prefix=
  fi
  if wanted 10; then
    # Beyond 64 threads each block is longer in proportion (3.2 s at 1024 in
    # the full run), so that every thread still completes tens of pairs in it,
    # and the rounds fewer (at least 4), so that each count takes about as long.
    for t in $s10_threads; do
      if [ "$t" -gt 64 ]; then
        r=$((pair_rounds * 64 / t)); [ "$r" -ge 4 ] || r=4
        paired_default paired_many "$t" 10 $((pair_block_ms * t / 64)) "$r"
      else
        paired_default paired_many "$t" 1000
      fi
    done
  fi
  if wanted 11 && [ "$rep" = 1 ]; then
    for lt in lock fair; do
      for names in 1 "$s11_names"; do
        # crate-global: the crate again, its process's futexes in the
        # kernel's global hash (bench/src/main.rs, `futex_hash_from_env`).
        for c in crate crate-global redisson; do
          [ "$c" != redisson ] || [ "$java_ok" = 1 ] || continue
          # Redisson's fair lock asks again at once when the lock is free but
          # not its turn: 34 attempts per acquisition at 100 names x 10
          # (2026-11-29); its 10,000-waiter shape is left out (it did not
          # finish within the quick run's 15 minutes, 2026-11-28).
          [ "$c" != redisson ] || [ "$lt" = lock ] || [ "$names" = 1 ] || continue
          # One name is taken 1,000 times (a p99 of ~1,000 hand-offs, not of
          # 19); each of 1,000 names 20 times (20,000 in all).
          handoffs=20; [ "$names" != 1 ] || handoffs=1000
          B_main=$B; B=$B_wakeups
          futex=; [ "$c" != crate-global ] || futex=global
          RLOCK_BENCH_FUTEX_HASH=$futex simple "${c%-global}" waiters --names "$names" \
            --per-name 10 --handoffs "$handoffs" --lock-type "$lt"
          B=$B_main
        done
      done
    done
  fi
  if wanted 8; then
    if ! command -v redis-cli >/dev/null 2>&1; then
      failed "rep $rep cluster paired: redis-cli is missing (it forms the cluster)"
    elif start_cluster; then
      cluster_paired 1; cluster_paired 4
    else
      failed "rep $rep cluster paired: the cluster did not form"
    fi
    stop_cluster
  fi
done
if [ -z "$only" ]; then
  echo "--> soak: $soak_cycles cycles, redisson-lock only ($(( $(date +%s) - start )) s)" >&2
  rep=1
  simple crate soak --cycles "$soak_cycles" --threads 4
fi

busy_end=$(busiest)
note="$note At the end: ${busy_end:-nothing else above 5% CPU}."
if [ "$failures" -gt 0 ]; then
  note="$note **Failed measurements** (left out of the medians; details in \`$log\`): $failed_list."
fi
printf 'load_end\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$machine"
printf 'note\t%s\n' "$note" >>"$machine"
printf 'elapsed_s\t%s\n' "$(( $(date +%s) - start ))" >>"$machine"

render
echo "==> done in $(( $(date +%s) - start )) s: $out_md, $out_svg, $out/results.json" >&2
sed -n '/^## Targets/,/^## Setup/p' "$out_md" | sed '$d' >&2
if [ "$failures" -gt 0 ]; then
  echo "error: $failures measurement(s) failed; see $log" >&2
  exit 1
fi
