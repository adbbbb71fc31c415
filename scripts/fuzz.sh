#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of the targets in fuzz/:
#
#   scripts/fuzz.sh [seconds-per-target] [target...]
#   scripts/fuzz.sh --defects [seconds [name...]]  # must find fuzz/defects/*.patch
#
# Builds every target (nightly toolchain, AddressSanitizer), then runs each
# target named (default: all of them: resp, replies, parsers) for that many
# seconds (default 300), one after the other, and prints libFuzzer's final
# figures for each: executions (stat::number_of_executed_units), coverage
# (cov: edges, ft: features) and the corpus size. The checked-in seeds
# (fuzz/corpus/<target>) are read, never written: what a run finds goes to
# fuzz/target/corpus/<target> (kept between runs) and a crash to
# fuzz/artifacts/<target>/. Exits non-zero if any target crashed (a panic,
# a failed assertion, an out-of-memory or a timeout of 10 s on one input).
#
# FUZZ_SANITIZER=none builds without AddressSanitizer (cargo fuzz's
# `--sanitizer`; default `address`): CI's short run, where the build is
# most of the stage's time. The fuzzed code is safe Rust (the library
# denies `unsafe_code`), so what ASan adds is a check of the dependencies'
# unsafe code beneath it; libFuzzer finds panics, overflows in debug
# arithmetic (none: release) and hangs either way.
#
# Needs `cargo +nightly`; installs cargo-fuzz (crates.io) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo

# `scripts/fuzz.sh --defects [seconds]`: the tool checked against the
# defects it is there to find (RELIABILITY.md, "Issue 29's defects"). Each
# patch of fuzz/defects/ re-introduces one into the RESP reader, in a
# throwaway worktree of HEAD; the resp target then runs from the checked-in
# seeds and the long ones below alone (a fresh corpus), with its dictionary
# (fuzz/resp.dict), for at most that many seconds (default 300), inputs up
# to 140,000 bytes. Each must crash
# it; the script says how soon, and exits non-zero if one did not.
# Seeds over the 64 KiB line limit, out of reach of the default -max_len
# (4096) and too large to check in: made here, in `dir`. Each starts with a
# 0 byte (the stream in one read).
long_seeds() {
  local dir=$1
  mkdir -p "$dir"
  repeat() { head -c "$2" /dev/zero | tr '\0' "$1"; }
  { printf '\0+'; repeat y 65537; printf '\r\n'; } >"$dir/line-over"
  { printf '\0+'; repeat y 65536; printf '\r\n'; } >"$dir/line-at"
  { printf '\0*2\r\n-ERR '; repeat e 65546; printf '\r\n:1\r\n'; } >"$dir/error-over"
  { printf '\0:'; repeat ' ' 65600; printf '1\r\n'; } >"$dir/padded-number"
  { printf '\0$70000\r\n'; repeat x 70000; printf '\r\n'; } >"$dir/bulk-70000"
}

if [ "${1:-}" = --defects ]; then
  seconds=${2:-300}
  ensure_cargo_fuzz
  root=$PWD
  scratch=$(mktemp -d)
  trap 'git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
  missed=()
  patches=(fuzz/defects/*.patch)
  if [ $# -gt 2 ]; then
    patches=()
    for name in "${@:3}"; do patches+=("fuzz/defects/$name.patch"); done
  fi
  for patch in "${patches[@]}"; do
    name=$(basename "$patch" .patch)
    git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true
    git worktree add --quiet --detach "$scratch/tree" HEAD
    git -C "$scratch/tree" apply "$root/$patch"
    mkdir -p "$scratch/corpus-$name" "$scratch/artifacts-$name"
    long_seeds "$scratch/long"
    log=$scratch/$name.log
    echo "==> $name: fuzz resp with it, at most ${seconds} s"
    if ! (cd "$scratch/tree" && cargo +nightly fuzz build resp --target-dir "$root/fuzz/target/defects") >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      echo "error: $name: the target does not build with the patch" >&2
      exit 1
    fi
    began=$SECONDS
    status=0
    (cd "$scratch/tree" && cargo +nightly fuzz run resp --target-dir "$root/fuzz/target/defects" \
      "$scratch/corpus-$name" "$root/fuzz/corpus/resp" "$scratch/long" -- \
      -artifact_prefix="$scratch/artifacts-$name/" -max_total_time="$seconds" -timeout=10 \
      -max_len=140000 -dict="$root/fuzz/resp.dict" -print_final_stats=1) >>"$log" 2>&1 || status=$?
    took=$((SECONDS - began))
    cp "$log" "$root/fuzz/target/defects/$name.log"
    if [ "$status" -ne 0 ]; then
      why=$(grep -m1 -E "panicked at|ERROR: |out-of-memory|deadly signal" -A1 "$log" | tr '\n' ' ' | cut -c1-160 || true)
      execs=$(grep -E '^#[0-9]+' "$log" | tail -n1 | sed 's/^#\([0-9]*\).*/\1/' || true)
      echo "    caught after ${took} s (~${execs:-?} executions): ${why:-exit $status}"
    else
      echo "    MISSED: ${seconds} s without a crash (log: $root/fuzz/target/defects/$name.log)"
      missed+=("$name")
    fi
  done
  if [ ${#missed[@]} -gt 0 ]; then
    echo "error: the fuzzer did not find: ${missed[*]}" >&2
    exit 1
  fi
  echo "    every defect of fuzz/defects/ caught"
  exit 0
fi

seconds=${1:-300}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(resp replies parsers)
  every_target=1
fi
case "$seconds" in
  '' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [seconds-per-target] [target...]" >&2
    exit 64
    ;;
esac

ensure_cargo_fuzz

sanitizer=(--sanitizer "${FUZZ_SANITIZER:-address}")
started=$SECONDS
echo "==> cargo +nightly fuzz build ${sanitizer[*]} (${targets[*]})"
if [ -n "${every_target:-}" ]; then
  # Every target: one build, the binaries linked in parallel.
  cargo +nightly fuzz build "${sanitizer[@]}"
else
  for target in "${targets[@]}"; do
    cargo +nightly fuzz build "${sanitizer[@]}" "$target"
  done
fi
echo "    built in $((SECONDS - started)) s"

logs=fuzz/target/logs
mkdir -p "$logs"
failed=()
for target in "${targets[@]}"; do
  corpus=fuzz/target/corpus/$target
  mkdir -p "$corpus"
  log=$logs/$target.log
  echo "==> fuzz $target for ${seconds} s (log: $log)"
  status=0
  # A target's dictionary (fuzz/<target>.dict: the protocol's tokens), if
  # it has one.
  dict=()
  if [ -f "fuzz/$target.dict" ]; then dict=(-dict="fuzz/$target.dict"); fi
  cargo +nightly fuzz run "${sanitizer[@]}" "$target" "$corpus" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1 "${dict[@]}" >"$log" 2>&1 || status=$?
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  # The last status line: "#N  DONE|pulse|NEW  cov: C ft: F corp: U/S ...".
  status_line=$(grep -E '^#[0-9]+' "$log" | tail -n1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$status_line")
  echo "    $target: ${executed:-?} executions, cov: ${cov:-?} ft: ${ft:-?}, corpus ${corp:-?} (${seconds} s)"
  if [ "$status" -ne 0 ]; then
    echo "    $target FAILED (exit $status): see $log and fuzz/artifacts/$target/" >&2
    grep -E "panicked at|ERROR: libFuzzer|SUMMARY" -A2 "$log" | head -n 20 >&2 || true
    failed+=("$target")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "error: crashed: ${failed[*]}" >&2
  exit 1
fi
echo "    fuzzing done in $((SECONDS - started)) s, no crash"
