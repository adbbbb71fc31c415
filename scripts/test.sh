#!/usr/bin/env bash
# Runs the whole test suite: first the fast checks (rustfmt, clippy and
# rustdoc, where any warning fails, and the benchmark crate's unit tests),
# then the MSRV build at the lowest allowed versions, unit tests, integration
# tests against throwaway redis-server processes, doc tests (including the
# compile-fail ones), the Java interop tests against real Redisson, the
# Valkey stage (the conformance, interop and Sentinel tests once more with
# valkey-server), and seven quick torture runs (under a minute each, 30 s of
# chaos; one in a Redis Cluster with failovers, the last one the fenced lock
# with Rust and Java workers and a checked history), and, where the nightly
# toolchain is installed, the fuzz targets of fuzz/ for 20 s each, and
# cargo-mutants on the core lines the last commit changed (a few mutants).
# The fuzz, schedule-exploration, mutation and history stages are described
# in RELIABILITY.md.
# Installs what it needs when missing (redis-server, JDK/Maven via apt-get as
# root; Valkey via pip into target/valkey; the MSRV toolchain via rustup).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# Each stage's header with the time since the start, so that a slow stage
# shows in the log.
stage() { echo "==> [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

ensure_cargo

# In CI (a fresh clone, every target built once) incremental compilation
# only costs time and several GB of disk, and full debug info in some 70 test
# binaries mostly slows their linking; line tables keep backtraces readable.
# Not on a developer's machine, where it would rebuild their `cargo test`
# cache.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
  export CARGO_PROFILE_DEV_DEBUG=line-tables-only
  export CARGO_PROFILE_TEST_DEBUG=line-tables-only
fi

# Cheap checks first, so that a formatting slip or a warning fails in seconds,
# not after the Maven builds and the fault tests. bench/ is its own crate
# (outside any workspace, with its own Cargo.lock): checked the same way, in
# the library's target directory so that the dependencies they share are
# built once.
bench_target=${CARGO_TARGET_DIR:-$PWD/target}
# The optional features that only add code, built together wherever a
# feature is needed (clippy, and the feature tests after `cargo test`).
combined_features=tls-rustls,serde,tracing,metrics,fuzzing,failpoints
stage "cargo fmt --check"
cargo fmt --all --check
cargo fmt --check --manifest-path bench/Cargo.toml
cargo fmt --check --manifest-path fuzz/Cargo.toml
cargo fmt --check --manifest-path fuzz/capture/Cargo.toml
stage "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
# The workspace (the library and the command-line tool, cli/) with every
# optional feature of the library but `shuttle` together: they add code and
# never take any away (only tls.rs has a `not(feature)` arm, which the run
# above checks). One build instead of six.
cargo clippy --workspace --all-targets --features "$(sed 's/[^,]*/redisson-lock\/&/g' <<<"$combined_features")" -- -D warnings
# `shuttle` swaps the synchronisation primitives (src/sync.rs) for the
# library's own schedule tests (its unit tests): the library, and the
# library as its unit tests build it (`--profile test`: cfg(test)). No
# integration test uses the feature.
cargo clippy --lib --features shuttle -- -D warnings
cargo clippy --lib --profile test --features shuttle -- -D warnings
cargo clippy -p redisson-lock-cli --all-targets --no-default-features -- -D warnings
CARGO_TARGET_DIR=$bench_target cargo clippy --all-targets --manifest-path bench/Cargo.toml -- -D warnings
stage "cargo doc --no-deps (warnings are errors)"
RUSTDOCFLAGS=-Dwarnings cargo doc --no-deps
# Then as docs.rs builds it ([package.metadata.docs.rs]: every feature,
# --cfg docsrs for the doc(cfg) badges, which need the nightly doc_cfg
# feature: RUSTC_BOOTSTRAP=1 lets stable rustdoc take it). This one run
# replaces the per-feature ones; the run without features still catches a
# link to a feature-gated item.
RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="-Dwarnings --cfg docsrs" cargo doc --no-deps --all-features
stage "cargo test --manifest-path bench/Cargo.toml (the benchmark's unit tests)"
CARGO_TARGET_DIR=$bench_target cargo test --manifest-path bench/Cargo.toml

# What users depend on, in one build: the library, every feature on, built
# by the MSRV (Cargo.toml's rust-version, installed with rustup when
# missing) with every direct dependency at the lowest version Cargo.toml
# allows. It resolves a copy of the package as published (`cargo package`'s
# normalised manifest) with `cargo update -Z direct-minimal-versions`, which
# stable cargo runs with RUSTC_BOOTSTRAP=1 (cargo-minimal-versions needs
# nightly for the same). One build instead of two keeps CI short; clippy's
# `incompatible_msrv` (on in every clippy run above) checks the API use of
# the newest versions against the MSRV.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
stage "Rust $msrv with the lowest allowed versions: cargo update -Z direct-minimal-versions, cargo check --all-features --lib"
ensure_toolchain "$msrv"
started=$SECONDS
cargo package --quiet --no-verify --allow-dirty --package redisson-lock
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
minimal=target/minimal-versions
rm -rf "$minimal/redisson-lock-$version"
mkdir -p "$minimal"
tar -xzf "${CARGO_TARGET_DIR:-target}/package/redisson-lock-$version.crate" -C "$minimal"
(
  cd "$minimal/redisson-lock-$version"
  # Its own workspace, not the checkout's.
  printf '\n[workspace]\n' >>Cargo.toml
  RUSTC_BOOTSTRAP=1 cargo "+$msrv" update --quiet -Z direct-minimal-versions
  cargo "+$msrv" check --quiet --all-features --lib --target-dir ../target
)
echo "    Rust $msrv builds the library at its lowest versions ($((SECONDS - started)) s)"

ensure_redis_server
ensure_openssl
# This run's id, in the name of every test server's directory (tests/support's
# `test_dir`): the exit trap kills this run's leftover servers only.
REDISSON_LOCK_TEST_RUN="r$$t$(date +%s)"
export REDISSON_LOCK_TEST_RUN
trap reap_test_servers EXIT
ensure_java_maven

# The Java interop tests (tests/java_interop*.rs, and tests/java_versions*.rs
# for the whole version matrix of PROTOCOL §11.1) build these on demand too;
# building them here makes the Maven time visible on its own.
stage "Redisson interop drivers (interop/java)"
newest=$(sed -n 's:.*<redisson.version>\(.*\)</redisson.version>.*:\1:p' interop/java/pom.xml | head -n1)
for version in "$newest" 3.52.0 3.24.3 3.21.3 3.16.8 3.12.4; do
  started=$SECONDS
  interop/java/build.sh "$version" target/interop >/dev/null
  echo "    redisson-driver-$version.jar ready in $((SECONDS - started)) s"
done

# At the workspace root, `cargo test` builds the root package (the library)
# only; the command-line tool's tests are the next step's. Its test binaries
# run in two lanes (scripts/lib.sh's test_in_lanes: the Java interop ones
# beside the others): they spend most of their time waiting on servers and
# JVMs (one after another, 14.4 min of a 52-min CI run).
# Valkey as the server (REDIS_SERVER, REDIS_CLI: every harness honours
# them): the conformance tests, the Java interop tests against Redisson on a
# single server and in a cluster, and the Sentinel tests (valkey-server
# --sentinel), once more, the binaries just built, last in the Java lane.
valkey_bin=$(ensure_valkey)
second_lane_extra() {
  local name binary since status=0
  echo "==> Valkey ($("$valkey_bin/valkey-server" --version | cut -d' ' -f3)): conformance, java_interop, java_interop_cluster, sentinel"
  for name in conformance java_interop java_interop_cluster sentinel; do
    binary=$(grep "/deps/$name-[0-9a-f]*\$" "$1" | head -n1)
    echo "==> $name (Valkey)"
    since=$SECONDS
    REDIS_SERVER=$valkey_bin/valkey-server REDIS_CLI=$valkey_bin/valkey-cli "$binary" || status=1
    echo "    $name (Valkey): $((SECONDS - since)) s"
  done
  return $status
}
stage "cargo test --all-targets (the test binaries in two lanes), and on Valkey"
test_in_lanes --all-targets
# The command-line tool (cli/): its unit tests, its runs against throwaway
# redis-server processes and beside Redisson (about 45 s). With the CLI's
# default feature, tls-rustls: watch_topologies's TLS test (a TLS-only
# server, Redisson 4.7.0 with a keytool truststore of the test's CA) is
# compiled only with it.
stage "cargo test -p redisson-lock-cli"
cargo test -p redisson-lock-cli
cargo test --doc

# The fuzz targets (fuzz/: the RESP reader against redis-rs's parser, every
# script's reply decoding, the text parsers), 20 s each from the checked-in
# seeds: a crash fails CI (scripts/fuzz.sh runs them longer, and with
# AddressSanitizer, whose build would be most of this stage). Only where
# the nightly toolchain is installed; cargo-fuzz is installed when missing.
if has_nightly; then
  stage "fuzz (short): scripts/fuzz.sh 20"
  started=$SECONDS
  FUZZ_SANITIZER=none ./scripts/fuzz.sh 20
  echo "    fuzz stage: $((SECONDS - started)) s"
else
  stage "fuzz (short): skipped, no nightly toolchain (cargo +nightly)"
fi
# Mutation testing of the lock's core (RELIABILITY.md, "Mutation score"):
# the mutants in the core's lines that the last commit changed, at most 3 in all,
# against the library's unit tests (scripts/mutants.sh runs whole
# groups against their integration tests too). Survivors are reported, not
# failed on. Costs nothing when the commit touches none of those files.
if git rev-parse --verify --quiet HEAD~1 >/dev/null; then
  started=$SECONDS
  MUTANTS_UNIT_ONLY=1 MUTANTS_TEST_TIMEOUT=120 ./scripts/mutants.sh --in-diff HEAD~1
  echo "    mutants stage: $((SECONDS - started)) s"
fi
# The tests that need a feature, in one build with every additive feature
# on (`combined_features`, as clippy's):
# - inspect: LockInfo's JSON shape (docs/operating.md's "Lock info JSON",
#   feature serde);
# - failpoints: the races users hit, stopped at named fail points (tikv's
#   `fail`, feature failpoints): an unlock racing a renewal in flight, a
#   subscription lost before a waiter parks, a reply lost after its script
#   ran, NOSCRIPT after a failover, a reply cut by the response timeout;
# - tls: a TLS-only server with a CA made by openssl in the test's directory;
#   tls_topologies: the same in a TLS-only Redis Cluster (3 masters, 3
#   replicas) and Sentinel setup (master, replica, 3 sentinels), every lock
#   type on each (about 40 s) (feature tls-rustls);
# - observability: spans, events and metrics with a capturing subscriber and
#   metrics-util's debugging recorder (features tracing, metrics).
stage "cargo test --features $combined_features: inspect, failpoints, tls, tls_topologies, observability"
cargo test --features "$combined_features" --test inspect --test failpoints \
  --test tls --test tls_topologies --test observability
# Schedule exploration (shuttle's random scheduler, feature `shuttle`, on a
# virtual clock): the multiplexed socket's leader/follower hand-off, the
# holds ledger and its deadline thread, the subscriber's entries, each test
# over 1,000-3,000 random schedules (about a minute in all; RELIABILITY.md).
# SHUTTLE_ITERATIONS=N runs N each; scripts/schedules.sh runs them longer,
# and checks that each re-introduced defect of scripts/schedules/ fails one.
stage "cargo test --features shuttle --lib schedules:: (schedule exploration)"
started=$SECONDS
cargo test --features shuttle --lib schedules::
# The re-introduced defects of scripts/schedules/ (scripts/schedules.sh
# --defects) must still apply to src/: a patch left behind by a rename
# would make that check pass by proving nothing.
for patch in scripts/schedules/*.patch; do
  git apply --check "$patch" || { echo "scripts/schedules: $patch no longer applies to src/" >&2; exit 1; }
done
echo "    schedule stage: $((SECONDS - started)) s"

# The torture binary as `cargo test --all-targets` built it (unoptimised):
# no release build of the library here (2 of CI's minutes). The chaos, not
# the workers' speed, is what the quick runs test; scripts/torture.sh's
# default, and the long runs, are the release build.
export TORTURE_PROFILE=dev
# Freezes past the lease first: overlaps are expected there, and each must
# have been signalled to the earlier holder. Then the run whose summary line
# must show zero in every column but the first.
stage "torture (quick, --beyond-lease): every overlap must be signalled"
./scripts/torture.sh --quick --beyond-lease
stage "torture (quick): pauses within the lease, no overlap allowed"
./scripts/torture.sh --quick
# The read/write lock (no reader beside a writer, no two writers) and the
# fair lock (every waiter served within its queue position x the longest
# hold), both within the lease, under the same chaos.
stage "torture (quick, --kind rw): readers share, writers exclude"
./scripts/torture.sh --quick --kind rw
stage "torture (quick, --kind fair): no overlap, no unfair wait"
./scripts/torture.sh --quick --kind fair
# Semaphores of 2 permits (not owned, no lease), Rust processes and a JVM
# worker (real Redisson): never more than 2 holders, every thread served
# again after the chaos, and the permits accounted for at every census
# (available + held = 2, give or take what the acquires and releases whose
# reply was lost took).
stage "torture (quick, --kind semaphore): at most N holders, permits conserved"
./scripts/torture.sh --quick --kind semaphore
# The locks in a Redis Cluster (3 masters + 3 replicas, one lock per master)
# with failovers in the chaos: coordinated CLUSTER FAILOVERs (no overlap
# allowed) and kill -9 of a master (an overlap allowed only if its earlier
# holder was told its lock was lost).
# On the release build (built here, about 2 minutes): on the unoptimised
# one it failed once in three runs (2026-11-29: 180 overlaps behind one
# holder whose worker was killed, after its lock was lost during a kill -9
# failover, before it reported back); not analysed yet, and never seen on
# the release build.
stage "torture (quick, --cluster): failovers, coordinated and by kill -9"
TORTURE_PROFILE=release ./scripts/torture.sh --quick --cluster
# The fenced lock, Rust workers and two JVM workers (Redisson 4.7.0 and
# 3.24.3, built above) recording every acquire, hold and release with its
# token in a history, under SIGKILLs (Rust and JVM), SIGSTOPs of workers and
# of Redis, pauses and connection kills; the history checker
# (examples/torture/checker.rs, whose unit tests ran in `cargo test
# --all-targets`) must find no overlap within the lease, no token out of
# order and no unsignalled overlap (RELIABILITY.md, "Checked histories
# under faults"; about 45 s).
stage "torture (quick, --kind fenced): checked history, Rust and Java workers"
started=$SECONDS
./scripts/torture.sh --quick --kind fenced
echo "    fenced torture: $((SECONDS - started)) s"
