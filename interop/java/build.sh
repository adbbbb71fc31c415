#!/usr/bin/env bash
# Build the self-contained Redisson interop driver for one Redisson version.
#
#   interop/java/build.sh <redisson-version> <out-dir>
#
# Produces <out-dir>/redisson-driver-<version>.jar and prints its path as the
# last stdout line. The build is skipped when that jar is newer than pom.xml
# and every file under src/. Each version gets its own Maven build directory
# (<out-dir>/build-<version>) so builds of different versions never clash.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 <redisson-version> <out-dir>" >&2
  exit 2
fi
version=$1
out_dir=$2

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: '$tool' not found on PATH; the Redisson interop driver needs a JDK (17+) and Maven" >&2
    exit 127
  fi
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
jar="$out_dir/redisson-driver-$version.jar"

# Up to date? (no file under src/ nor pom.xml newer than the jar)
up_to_date() {
  [ -f "$jar" ] && [ -z "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]
}
if up_to_date; then
  echo "$jar"
  exit 0
fi

# Serialise concurrent builds of the same version (e.g. parallel test
# processes); re-check after waiting, another build may have just finished.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out_dir/.build-$version.lock"
  flock 9
  if up_to_date; then
    echo "$jar"
    exit 0
  fi
fi

build_dir="$out_dir/build-$version"
echo "building Redisson driver $version ..." >&2
# Maven's own output goes to stderr (stdout carries only the jar path), with
# the stray ANSI reset codes Debian's Maven prints even in batch mode removed.
# pipefail (set above) keeps mvn's exit status.
# Extra Maven flags (e.g. -o for offline) may be passed in $INTEROP_MVN_ARGS.
# shellcheck disable=SC2086
if ! mvn -q -B ${INTEROP_MVN_ARGS:-} -f "$here/pom.xml" \
    -Dredisson.version="$version" \
    -DbuildDir="$build_dir" \
    package 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' >&2; then
  echo "error: Maven build of the Redisson $version interop driver failed (see above)" >&2
  exit 1
fi

cp "$build_dir/redisson-driver-$version.jar" "$jar.tmp"
mv -f "$jar.tmp" "$jar"   # atomic: a half-copied jar is never seen as up to date
echo "$jar"
