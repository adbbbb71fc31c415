#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of the targets in fuzz/:
#
#   scripts/fuzz.sh [seconds-per-target] [target...]
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
# Needs `cargo +nightly`; installs cargo-fuzz (crates.io) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo
seconds=${1:-300}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(resp replies parsers)
fi
case "$seconds" in
  '' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [seconds-per-target] [target...]" >&2
    exit 64
    ;;
esac

ensure_cargo_fuzz

started=$SECONDS
echo "==> cargo +nightly fuzz build (${targets[*]})"
for target in "${targets[@]}"; do
  cargo +nightly fuzz build "$target"
done
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
  cargo +nightly fuzz run "$target" "$corpus" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1 || status=$?
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
