#!/usr/bin/env bash
# Regenerates the README's pictures with fleetctl -o dot and Graphviz: the demo's ring of
# eight GPUs on one switch (demo-ring.svg), and a ring of four GPUs over the two-cluster site's
# two switches and their trunks (two-switch-ring.svg). Needs a build (build/bin) and graphviz.
#   bash docs/pictures/make.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${BUILD_DIR:-build}/bin
out=docs/pictures
command -v dot >/dev/null || { echo "make.sh: dot is missing: apt-get install graphviz" >&2; exit 1; }

# Starts fleetd --demo (with extra flags), requests the topology in file $1 and draws the
# allocation as $2; fleetd is stopped again.
picture() {
  local request=$1 svg=$2; shift 2
  local state; state=$(mktemp -d /tmp/fleet-pictures.XXXXXX)
  "$bin/fleetd" --demo --insecure --state-dir "$state" --grpc-port 0 --metrics-port 0 "$@" \
    >"$state/out" 2>"$state/err" &
  local fleetd=$!
  trap "kill $fleetd 2>/dev/null; wait $fleetd 2>/dev/null; rm -rf '$state'" RETURN
  for _ in $(seq 200); do grep -q '^grpc: ' "$state/out" && break; kill -0 $fleetd; sleep 0.05; done
  local server; server=$(sed -n 's/^grpc: //p' "$state/out")
  local id
  id=$("$bin/fleetctl" --server "$server" --insecure topology request -f "$request" --wait -o json \
         2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["allocation"]["id"])')
  "$bin/fleetctl" --server "$server" --insecure describe allocation "$id" -o dot |
    dot -Tsvg -o "$out/$svg"
  echo "make.sh: $out/$svg"
}

picture deploy/examples/ring-8-gpus.yaml demo-ring.svg
ring=$(mktemp /tmp/fleet-two-switch-ring.XXXXXX.yaml)
cat >"$ring" <<'YAML'
tenant: team-a
name: two-switch-ring
topology:
  template: {kind: ring-unidirectional, members: [a-gpu1, a-gpu2, b-gpu1, b-gpu2]}
YAML
picture "$ring" two-switch-ring.svg --demo-site deploy/inventory/fleet-2cluster.yaml
rm -f "$ring"
