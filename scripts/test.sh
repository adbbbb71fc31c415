#!/usr/bin/env bash
# Runs the whole test suite: unit tests, integration tests against throwaway
# redis-server processes, doc tests (including the compile-fail ones), the
# Java interop tests against real Redisson, and a quick torture run.
# Installs what it needs when missing (redis-server, JDK/Maven via apt-get as root).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo
ensure_redis_server

echo "==> cargo test"
cargo test --all-targets
cargo test --doc
