#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (when clang is present) and runs each briefly.
#   FUZZ_SECONDS=20 bash deploy/quickstart/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; skipping the fuzz targets"
  exit 0
fi
seconds=${FUZZ_SECONDS:-20}
targets=(fuzz_adapter_tl1_response fuzz_emulator_tl1)
CC=clang CXX=clang++ BUILD_DIR=build-fuzz bash deploy/quickstart/build.sh \
  -DFLEET_FUZZ=ON -DFLEET_BUILD_TESTS=OFF -DFLEET_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo --target "${targets[@]}" > build-fuzz.log 2>&1 || {
  tail -40 build-fuzz.log; exit 1; }
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz: $t for ${seconds}s"
  "build-fuzz/bin/$t" -max_total_time="$seconds" -print_final_stats=1 "$corpus" 2>&1 | tail -3
done
