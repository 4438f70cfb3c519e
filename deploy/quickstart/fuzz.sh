#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (when clang is present) and runs each briefly from its
# seeds (fuzz/seeds/TARGET/, plus the deploy/ files that are real inputs of its parser). Exits
# non-zero when any target finds a crash, leak, hang (an input over FUZZ_TIMEOUT seconds) or
# sanitizer report; the input that did it is kept in build-fuzz/artifacts/TARGET/.
#   FUZZ_SECONDS=20 FUZZ_TIMEOUT=5 bash deploy/quickstart/fuzz.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; skipping the fuzz targets"
  exit 0
fi
seconds=${FUZZ_SECONDS:-20}
timeout=${FUZZ_TIMEOUT:-5}
all=(fuzz_adapter_tl1_response fuzz_emulator_tl1 fuzz_adapter_rest_json fuzz_emulator_rest_api
  fuzz_inventory_yaml fuzz_topology_spec fuzz_agent_config fuzz_request_plan fuzz_log_entry)
targets=("${all[@]}")
[ $# -gt 0 ] && targets=("$@")
CC=clang CXX=clang++ BUILD_DIR=build-fuzz bash deploy/quickstart/build.sh \
  -DFLEET_FUZZ=ON -DFLEET_BUILD_TESTS=OFF -DFLEET_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo --target "${targets[@]}" > build-fuzz.log 2>&1 || {
  tail -40 build-fuzz.log; exit 1; }

# Seed directories beyond fuzz/seeds/TARGET/, read but never written.
declare -A extra=(
  [fuzz_inventory_yaml]="deploy/inventory"
  [fuzz_topology_spec]="deploy/examples"
  [fuzz_agent_config]="deploy/config"
)
# The planner takes serialized requests: its seeds are kept as text and encoded here.
encode_request_seeds() {
  local out=build-fuzz/seeds/fuzz_request_plan
  mkdir -p "$out"
  for text in fuzz/seeds/fuzz_request_plan/*.textproto; do
    protoc -I proto -I /usr/include --encode=fleet.v1.RequestTopologyRequest \
      fleet/v1/topology.proto < "$text" > "$out/$(basename "$text" .textproto)"
  done
  echo "$out"
}

failed=()
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  artifacts="build-fuzz/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  seeds=("fuzz/seeds/$t")
  [ "$t" = fuzz_request_plan ] && seeds=("$(encode_request_seeds)")
  [ -n "${extra[$t]:-}" ] && seeds+=("${extra[$t]}")
  echo "fuzz: $t for ${seconds}s"
  log="build-fuzz/$t.log"
  if "build-fuzz/bin/$t" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" > "$log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" || true
  else
    tail -60 "$log"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in build-fuzz/artifacts/, logs in build-fuzz/*.log)"
  exit 1
fi
