#!/usr/bin/env bash
# Installs what is needed, builds, and runs the embedded default: `fleetd --demo` — the
# FLEET Gen1 inventory (one 384x384 Polatis, four servers, eight GPUs, two NVMe JBODs) on an
# emulated Polatis switch with one emulated O-NIC agent per server — then shows it with
# fleetctl. With --keep, the demo keeps running in the foreground.
set -euo pipefail
cd "$(dirname "$0")/../.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

bash deploy/quickstart/install-deps.sh
BUILD_DIR=build bash deploy/quickstart/build.sh > /tmp/fleet-demo-build.log 2>&1 || {
  tail -50 /tmp/fleet-demo-build.log; exit 1; }

state=$(mktemp -d /tmp/fleet-demo.XXXXXX)
out="$state/fleetd.out"
build/bin/fleetd --demo --state-dir "$state" --grpc-port 0 --metrics-port 0 \
  > "$out" 2> "$state/fleetd.log" &
fleetd=$!
trap 'kill $fleetd 2>/dev/null; wait $fleetd 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^state: ' "$out" && break; kill -0 $fleetd || break; sleep 0.1; done
if ! grep -q '^grpc: ' "$out"; then cat "$state/fleetd.log"; exit 1; fi
cat "$out"
server=$(sed -n 's/^grpc: //p' "$out")
fleetctl() { build/bin/fleetctl --server "$server" "$@"; }

run() { echo; echo "\$ fleetctl $*"; fleetctl "$@"; }
# The agents dial in within a moment of starting.
for _ in $(seq 50); do [ "$(fleetctl get agents 2>/dev/null | grep -c ' yes ')" = 4 ] && break; sleep 0.1; done
run health
run get agents
run get switches
run get devices
run get onics --host server1
echo; echo "\$ fleetctl get ports --switch ocs1    (first 12 and last 4 of 768)"
fleetctl get ports --switch ocs1 > "$state/ports.txt"
head -13 "$state/ports.txt"; echo "..."; tail -4 "$state/ports.txt"
echo "($(($(wc -l < "$state/ports.txt") - 1)) ports)"
tl1=$(sed -n 's/^tl1: //p' "$out")
echo; echo "# patch s1c0-n0 port 1 (ingress 1) to s1c0-n1 port 1 (egress 387) over raw TL1, then retrain"
printf 'ACT-USER::admin:1::root;ENT-PATCH::1,387:2:;' | timeout 3 bash -c "cat > /dev/tcp/${tl1%:*}/${tl1#*:}" || true
for _ in $(seq 20); do fleetctl link retrain s1c0-n1 1 > "$state/retrain.txt" 2>&1 && break; sleep 0.1; done
echo "\$ fleetctl link retrain s1c0-n1 1"; cat "$state/retrain.txt"
run link status s1c0-n1
run topology request -f deploy/examples/ring-8-gpus.yaml --dry-run
run get events --limit 5

if [ $keep = 1 ]; then
  echo; echo "fleetd is serving on $server (state in $state); Ctrl-C stops it."
  wait $fleetd
fi
