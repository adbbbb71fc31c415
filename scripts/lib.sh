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

# Makes sure cargo is available.
ensure_cargo() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo is not installed; install Rust from https://rustup.rs" >&2
    exit 1
  fi
}

# Kills redis-server processes left behind by test processes that were killed
# before their harness could stop them (the harness runs every server in its
# own directory under $TMPDIR/redisson-lock-test-*, which is the server's cwd).
reap_test_servers() {
  local pid cwd
  for pid in $(pgrep -x redis-server 2>/dev/null || true); do
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
    case "$cwd" in
      "${TMPDIR:-/tmp}"/redisson-lock-test-*) kill -9 "$pid" 2>/dev/null || true ;;
    esac
  done
}
