#!/usr/bin/env bash
# Configures and builds FLEET into BUILD_DIR (default build/). Extra arguments go to cmake.
#   bash deploy/quickstart/build.sh                 # RelWithDebInfo in build/
#   BUILD_DIR=build-asan bash deploy/quickstart/build.sh -DFLEET_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# Relative paths in ccache's keys, so a fresh clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# Arguments before --target go to cmake's configure step; --target NAMES limit the build.
configure=()
build_targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--target" ]; then shift; build_targets=("$@"); break; fi
  configure+=("$1"); shift
done
cmake -S . -B "$BUILD_DIR" -G Ninja "${configure[@]}" > "$BUILD_DIR.configure.log" 2>&1 || {
  cat "$BUILD_DIR.configure.log"; exit 1; }
rm -f "$BUILD_DIR.configure.log"
if [ ${#build_targets[@]} -gt 0 ]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${build_targets[@]}"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
