#!/usr/bin/env bash
# Mutation testing of the lock's core with cargo-mutants (RELIABILITY.md,
# "Mutation score"): each mutant (an operator flipped, a return value
# replaced, a branch removed) is built and the tests that cover its file run
# against it; a mutant the tests still pass is a "survivor", either a test
# missing or an equivalent change (listed with its reason in RELIABILITY.md).
#
#   ./scripts/mutants.sh                 # every group below (hours)
#   ./scripts/mutants.sh holds resp      # some groups
#   ./scripts/mutants.sh --in-diff REV   # only mutants in lines changed since
#                                        # REV, in the core's files, at most
#                                        # MUTANTS_MAX of them in all (CI)
#   MUTANTS_ITERATE=1 ...                # resume: skip what an earlier run
#                                        # of the group caught
#   MUTANTS_UNIT_ONLY=1 ...              # the library's unit tests only (CI:
#                                        # one test binary to relink per
#                                        # mutant instead of six)
#   MUTANTS_EXCLUDE_RE='regex' ...       # leave out mutants by name
#   MUTANTS_FILES='a.rs b.rs' MUTANTS_TESTS='t1 t2' MUTANTS_TAG=x ...
#                                        # a part of a group, against some of
#                                        # its tests (a survivor of such a
#                                        # run is run again with them all);
#                                        # output in target/mutants/<group>-x
#
# Groups (files, then the tests that cover them; every group also runs the
# library's unit tests):
#   holds   the holds ledger, its deadline and lost signal
#   resp    the reply reader
#   mux     the multiplexed socket
#   unlock  the unlock paths
# Results go to target/mutants/<group>/mutants.out (caught.txt, missed.txt,
# timeout.txt, unviable.txt). Installs cargo-mutants when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_cargo
ensure_redis_server
# Outside CI the mutants are built in a copy of the tree from scratch: without
# debug information each one's dozen test binaries link in about half the
# time. (CI reuses its target/, built with the default profile.)
if [ "${CI:-}" != true ]; then export CARGO_PROFILE_DEV_DEBUG=0; fi
# Installed on first use, so that a CI run whose change touches none of the
# core's files costs nothing.
ensure_mutants() {
  if ! cargo mutants --version >/dev/null 2>&1; then
    echo "==> installing cargo-mutants"
    cargo install --locked cargo-mutants
  fi
}

# The shuttle models (`schedules.rs`) are tests, compiled only with the
# `shuttle` feature: not code to mutate.
MODELS='**/schedules.rs'

group_files() {
  if [ -n "${MUTANTS_FILES:-}" ]; then echo "$MUTANTS_FILES"; return; fi
  case $1 in
  holds) echo "src/engine/holds.rs src/engine/holds/*.rs src/lock/signal.rs" ;;
  resp) echo "src/net/resp.rs" ;;
  mux) echo "src/net/mux.rs src/net/mux/**/*.rs src/net/mux/*.rs" ;;
  unlock) echo "src/lock/unlock.rs src/lock/guard.rs src/lock/guard/*.rs" ;;
  *) echo "unknown group $1" >&2; exit 2 ;;
  esac
}
# Features a group's tests need (tests/failpoints.rs: `failpoints`).
group_features() {
  case $1 in
  holds | mux) echo "failpoints" ;;
  # observability: a guard's reentry and token as the acquire reports them.
  unlock) echo "failpoints,tracing,metrics" ;;
  esac
}
group_tests() {
  if [ -n "${MUTANTS_TESTS:-}" ]; then echo "$MUTANTS_TESTS"; return; fi
  case $1 in
  holds) echo "operable lost_reasons lease_races keep_for hold_accounting failpoints shutdown" ;;
  resp) echo "trickle hostile_input" ;;
  mux) echo "multiplexed signals trickle failpoints" ;;
  unlock) echo "unlock_latch keep_for force_unlock multilock failpoints conformance fenced cancel fork faults_lost_reply replicas observability shutdown lost_reasons" ;;
  esac
}

# One cargo-mutants run over the files of a group with its tests.
run_group() {
  local group=$1
  shift
  local dir=$group${MUTANTS_TAG:+-$MUTANTS_TAG}
  # The test targets are named for the build too (`--cargo-arg`): cargo
  # test --no-run would otherwise build every test binary of the crate for
  # each mutant (161 s a mutant here, against ~10 s for the library's own).
  local args=(--no-shuffle --baseline skip
    --output "target/mutants/$dir" --cargo-arg=--lib --exclude "$MODELS")
  # In CI (a throwaway clone, already built) the mutants are made in place,
  # reusing target/; elsewhere in a copy, so that the checkout is never left
  # mutated.
  if [ "${CI:-}" = true ]; then args+=(--in-place); fi
  local f t
  for f in $(group_files "$group"); do args+=(--file "$f"); done
  if [ -z "${MUTANTS_UNIT_ONLY:-}" ]; then
    for t in $(group_tests "$group"); do args+=(--cargo-arg=--test="$t"); done
    local features
    features=$(group_features "$group")
    if [ -n "$features" ]; then args+=(--features "$features"); fi
  fi
  args+=(--timeout "${MUTANTS_TEST_TIMEOUT:-300}")
  # Mutants to leave out by name (e.g. those an earlier run saw hang: a
  # resumed run tries them again, at the full timeout each).
  if [ -n "${MUTANTS_EXCLUDE_RE:-}" ]; then args+=(--exclude-re "$MUTANTS_EXCLUDE_RE"); fi
  # Resumes a group's run: the mutants an earlier run caught are skipped.
  if [ -n "${MUTANTS_ITERATE:-}" ]; then args+=(--iterate); fi
  mkdir -p "target/mutants/$dir"
  echo "==> cargo mutants: $group ($(cargo mutants --list "${args[@]}" "$@" | wc -l) mutants)"
  # cargo-mutants exits 2 when a mutant survives, 3 on a timeout: the
  # figures are the result here, the script goes on to the next group.
  cargo mutants "${args[@]}" "$@" || true
  local out=target/mutants/$dir/mutants.out
  echo "    $dir: caught $(wc -l <"$out/caught.txt"), missed $(wc -l <"$out/missed.txt"), timeout $(wc -l <"$out/timeout.txt"), unviable $(wc -l <"$out/unviable.txt")"
  if [ -s "$out/missed.txt" ]; then
    sed 's/^/    missed: /' "$out/missed.txt"
  fi
}

if [ "${1:-}" = --in-diff ]; then
  rev=${2:?--in-diff needs a revision}
  max=${MUTANTS_MAX:-3}
  diff=target/mutants/in-diff.patch
  mkdir -p target/mutants
  failed=0
  echo "==> cargo mutants --in-diff $rev (the core's files changed since)"
  for group in holds resp mux unlock; do
    # shellcheck disable=SC2046
    git diff "$rev" -- $(group_files "$group") >"$diff"
    [ -s "$diff" ] || continue
    ensure_mutants
    n=$(cargo mutants --list --in-diff "$diff" --exclude "$MODELS" $(for f in $(group_files "$group"); do echo --file "$f"; done) | wc -l)
    [ "$n" -gt 0 ] || continue
    # Over the budget (what is left of MUTANTS_MAX for the whole run): one
    # shard of about that many, chosen by the revision so that successive
    # changes sample different ones.
    [ "$max" -gt 0 ] || break
    shard=()
    if [ "$n" -gt "$max" ]; then
      shards=$(((n + max - 1) / max))
      pick=$((0x$(git rev-parse --short=6 HEAD) % shards))
      shard=(--shard "$pick/$shards")
    fi
    run_group "$group" --in-diff "$diff" "${shard[@]}"
    tested=$(cat target/mutants/"$group"/mutants.out/{caught,missed,timeout,unviable}.txt | wc -l)
    max=$((max - tested))
    if [ -s "target/mutants/$group/mutants.out/missed.txt" ]; then failed=1; fi
  done
  # A survivor in a changed line is reported, with whether RELIABILITY.md
  # lists it as equivalent (by the name cargo-mutants gives it). It does not
  # fail the run: CI's short run has only the unit tests, and a mutant they
  # miss may be caught by the integration tests of the long run.
  if [ "$failed" = 1 ]; then
    for group in holds resp mux unlock; do
      out=target/mutants/$group/mutants.out/missed.txt
      [ -s "$out" ] || continue
      while IFS= read -r line; do
        name=${line#*: }
        if grep -Fq -- "$name" RELIABILITY.md; then
          echo "    survivor (listed as equivalent): $line"
        else
          echo "    survivor (not listed; run the long run of its group): $line"
        fi
      done <"$out"
    done
  fi
  exit 0
fi

# The survivors of a group whose files have shuttle models (RELIABILITY.md,
# "Schedule exploration") against those models: `--iterate` skips the
# mutants the first pass caught; the library built with `shuttle` (its
# synchronisation swapped for the model's) runs `schedules::` only.
schedules_pass() {
  local group=$1
  local args=(--no-shuffle --baseline skip --iterate
    --output "target/mutants/$group" --cargo-arg=--lib --features shuttle
    --cargo-test-arg=schedules:: --timeout "${MUTANTS_TEST_TIMEOUT:-300}"
    --exclude "$MODELS")
  if [ "${CI:-}" = true ]; then args+=(--in-place); fi
  local f
  for f in $(group_files "$group"); do args+=(--file "$f"); done
  echo "==> cargo mutants: $group's survivors against its schedule models"
  cargo mutants "${args[@]}" || true
  local out=target/mutants/$group/mutants.out
  echo "    $group after the models: missed $(wc -l <"$out/missed.txt")"
  if [ -s "$out/missed.txt" ]; then
    sed 's/^/    missed: /' "$out/missed.txt"
  fi
}

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(holds resp mux unlock)
ensure_mutants
for group in "${groups[@]}"; do
  run_group "$group"
  case $group in
  holds | mux) [ -n "${MUTANTS_UNIT_ONLY:-}" ] || schedules_pass "$group" ;;
  esac
done
