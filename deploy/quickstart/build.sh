#!/usr/bin/env bash
# Configures and builds FLEET into BUILD_DIR (default build/). Extra arguments go to cmake.
#   bash deploy/quickstart/build.sh                 # RelWithDebInfo in build/
#   BUILD_DIR=build-asan bash deploy/quickstart/build.sh -DFLEET_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja "$@" > "$BUILD_DIR.configure.log" 2>&1 || {
  cat "$BUILD_DIR.configure.log"; exit 1; }
rm -f "$BUILD_DIR.configure.log"
cmake --build "$BUILD_DIR" -j "$(nproc)"
