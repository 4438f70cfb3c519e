#!/usr/bin/env bash
# Installs what is needed, builds, and runs the embedded default: `fleetd --demo` — the
# FLEET Gen1 inventory (one 384x384 Polatis, four servers, eight GPUs, two NVMe JBODs) on an
# emulated Polatis switch with one emulated O-NIC agent per server and per device chassis —
# then runs the main job: a ring of the eight GPUs, requested, programmed, trained and shown
# READY with its circuits, then released. With --keep, the ring stays and fleetd keeps
# running in the foreground.
set -euo pipefail
cd "$(dirname "$0")/../.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

bash deploy/quickstart/install-deps.sh --build
BUILD_DIR=build bash deploy/quickstart/build.sh > /tmp/fleet-demo-build.log 2>&1 || {
  tail -50 /tmp/fleet-demo-build.log; exit 1; }

state=$(mktemp -d /tmp/fleet-demo.XXXXXX)
out="$state/fleetd.out"
build/bin/fleetd --demo --state-dir "$state" --grpc-port 0 --metrics-port 0 \
  > "$out" 2> "$state/fleetd.log" &
fleetd=$!
trap 'kill $fleetd 2>/dev/null; wait $fleetd 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^state: ' "$out" && break; kill -0 $fleetd || break; sleep 0.1; done
if ! grep -q '^fleetctl-config: ' "$out"; then cat "$state/fleetd.log"; exit 1; fi
cat "$out"
server=$(sed -n 's/^grpc: //p' "$out")
# fleetd serves mutual TLS; the demo wrote a throwaway CA, certificates and fleetctl contexts
# (the current one an operator) into its state directory. FLEET_* left in the shell from
# another fleetd would beat the context, so they go.
unset FLEET_SERVER FLEET_CA FLEET_CERT FLEET_KEY FLEET_INSECURE FLEET_CONTEXT
export FLEET_CONFIG=$(sed -n 's/^fleetctl-config: //p' "$out")
fleetctl() { build/bin/fleetctl "$@"; }

run() { echo; echo "\$ fleetctl $*"; fleetctl "$@"; }
# The agents (four servers, the GPU pool, two JBODs) dial in within a moment of starting.
for _ in $(seq 50); do [ "$(fleetctl get agents 2>/dev/null | grep -c ' yes ')" = 7 ] && break; sleep 0.1; done
run health
run get agents
run get switches
run get devices
run topology request -f deploy/examples/ring-8-gpus.yaml --dry-run

# The main job: the ring, programmed on the switch, retrained by the agents, READY.
echo; echo "\$ fleetctl topology request -f deploy/examples/ring-8-gpus.yaml --wait"
fleetctl topology request -f deploy/examples/ring-8-gpus.yaml --wait | tee "$state/ring.txt"
ring=$(sed -n 's/^ID: *//p' "$state/ring.txt")
run describe allocation "$ring"
run link status gpu1-n0
run reconcile --dry-run
run events --kind allocation

if [ $keep = 1 ]; then
  echo; echo "fleetd is serving on $server (state in $state); the ring $ring stays READY."
  echo "Release it with: FLEET_CONFIG=$FLEET_CONFIG build/bin/fleetctl topology release $ring"
  echo "Ctrl-C stops fleetd."
  wait $fleetd
else
  run topology release "$ring" --wait
  run get circuits
fi
