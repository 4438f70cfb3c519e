#!/usr/bin/env bash
# Installs what is needed, builds, and runs the embedded default: fleetd with the FLEET
# Gen1 inventory (one 384x384 Polatis, four servers, eight GPUs, two NVMe JBODs), then
# shows what it serves with fleetctl. With --keep, fleetd keeps running in the foreground.
set -euo pipefail
cd "$(dirname "$0")/../.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

bash deploy/quickstart/install-deps.sh
BUILD_DIR=build bash deploy/quickstart/build.sh > /tmp/fleet-demo-build.log 2>&1 || {
  tail -50 /tmp/fleet-demo-build.log; exit 1; }

state=$(mktemp -d /tmp/fleet-demo.XXXXXX)
out="$state/fleetd.out"
build/bin/fleetd --state-dir "$state" --grpc-port 0 --metrics-port 0 \
  --inventory deploy/inventory/fleet-gen1.yaml > "$out" 2> "$state/fleetd.log" &
fleetd=$!
trap 'kill $fleetd 2>/dev/null; wait $fleetd 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^metrics: ' "$out" && break; kill -0 $fleetd || break; sleep 0.1; done
if ! grep -q '^grpc: ' "$out"; then cat "$state/fleetd.log"; exit 1; fi
cat "$out"
server=$(sed -n 's/^grpc: //p' "$out")
fleetctl() { build/bin/fleetctl --server "$server" "$@"; }

run() { echo; echo "\$ fleetctl $*"; fleetctl "$@"; }
run get switches
run get hosts
run get devices
run get onics --host server1
echo; echo "\$ fleetctl get ports --switch ocs1    (first 12 and last 4 of 768)"
fleetctl get ports --switch ocs1 > "$state/ports.txt"
head -13 "$state/ports.txt"; echo "..."; tail -4 "$state/ports.txt"
echo "($(($(wc -l < "$state/ports.txt") - 1)) ports)"
run get events --limit 5

if [ $keep = 1 ]; then
  echo; echo "fleetd is serving on $server (state in $state); Ctrl-C stops it."
  wait $fleetd
fi
