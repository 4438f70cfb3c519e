#!/usr/bin/env bash
# The replicated demo (docs/ha.md): three fleetd replicas on a three-member etcd cluster, over
# the Gen1 site emulated by fleet-demo-site (one polatis-emu, seven emulated agents, the
# throwaway PKI; fleetd's clients and etcd's clients held to mutual TLS). Requests a ring,
# SIGKILLs the leader, prints the takeover time (kill → first request the new leader accepted),
# checks the ring untouched on the switch and a new ring served by the new leader, then starts
# the killed replica again and checks it follows. Exits non-zero naming the step that failed.
#
# Uses the binaries in build/bin, building only those missing (and installing what building
# and etcd need). With FLEET_BUILD_DIR set (the tests do) it uses $FLEET_BUILD_DIR/bin as it
# is: nothing installed or built; exit 77 where etcd is not installed. Stops every process it
# started (unless it is itself SIGKILLed: then the replicas stay, the site stops).
set -euo pipefail
cd "$(dirname "$0")/../.."
binaries=(fleetd fleetctl fleet-demo-site polatis-emu fleet-onic-agent)
dir=$(mktemp -d "${TMPDIR:-/tmp}/fleet-ha-demo.XXXXXX")

if [ -n "${FLEET_BUILD_DIR:-}" ]; then
  bin="$FLEET_BUILD_DIR/bin"
  if [ ! -x /usr/bin/etcd ]; then
    echo "ha-demo: /usr/bin/etcd not found: install Debian's etcd-server" >&2
    [ -n "${CI:-}" ] && exit 1
    exit 77
  fi
else
  bin=build/bin
  missing=0
  for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || missing=1; done
  if [ $missing = 1 ] || [ ! -x /usr/bin/etcd ]; then bash deploy/quickstart/install-deps.sh --ha; fi
  if [ $missing = 1 ]; then
    BUILD_DIR=build bash deploy/quickstart/build.sh --target "${binaries[@]}" > "$dir/build.log" 2>&1 ||
      { tail -50 "$dir/build.log"; exit 1; }
  fi
fi

declare -a pids=() addresses=() configs=()
site=""
cleanup() {
  for p in "${pids[@]}" $site; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}" $site; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
# A step that failed: say which (and show the end of the log that tells why), and stop.
fail() {
  echo "ha-demo: $1 (state and logs: $dir)" >&2
  if [ -n "${2:-}" ]; then tail -20 "$2" >&2; fi
  exit 1
}

"$bin/fleet-demo-site" --state-dir "$dir/site" > "$dir/site.out" 2> "$dir/site.log" &
site=$!
for _ in $(seq 600); do grep -q '^ready' "$dir/site.out" && break; kill -0 $site 2>/dev/null || break; sleep 0.1; done
grep -q '^ready' "$dir/site.out" || fail "fleet-demo-site did not start" "$dir/site.log"
while read -r address config; do addresses+=("$address"); configs+=("$config"); done \
  < <(sed -n 's/^replica: //p' "$dir/site.out")
echo "etcd members:  $(sed -n 's/^etcd: //p' "$dir/site.out")"
echo "switch:        $(sed -n 's/^switch: //p' "$dir/site.out")"

start_replica() {  # start_replica I: fleetd --config for replica I, its output under $dir.
  "$bin/fleetd" --config "${configs[$1]}" > "$dir/fleetd-$1.out" 2>> "$dir/fleetd-$1.log" &
  pids[$1]=$!
}
for i in "${!configs[@]}"; do start_replica "$i"; done
echo "fleetd:        ${addresses[*]}"

unset FLEET_SERVER FLEET_CA FLEET_CERT FLEET_KEY FLEET_INSECURE FLEET_CONTEXT
# Its contexts name all three replicas: fleetctl asks each whether it leads and dials the leader.
FLEET_CONFIG=$(sed -n 's/^fleetctl-config: //p' "$dir/site.out")
[ -n "$FLEET_CONFIG" ] || fail "fleet-demo-site printed no fleetctl config" "$dir/site.log"
export FLEET_CONFIG
fleetctl() { "$bin/fleetctl" "$@"; }
run() { echo; echo "\$ fleetctl $*"; fleetctl "$@" || fail "fleetctl $* failed"; }
# The leader's address, from the health of any replica; empty while none leads.
leader() { { fleetctl health 2>/dev/null || true; } | sed -n 's/^replica .*leader \([0-9][0-9.:]*\).*/\1/p' | head -1; }
now_ms() { date +%s%3N; }
agents() { { fleetctl get agents 2>/dev/null || true; } | grep -c ' yes ' || true; }

for _ in $(seq 300); do [ -n "$(leader)" ] && break; sleep 0.1; done
[ -n "$(leader)" ] || fail "no replica leads" "$dir/fleetd-0.log"
for _ in $(seq 300); do [ "$(agents)" = 7 ] && break; sleep 0.1; done
[ "$(agents)" = 7 ] || fail "$(agents) of 7 agents connected" "$dir/site.log"
run health

ring() {  # ring NAME MEMBERS...: a request file for a unidirectional ring; prints its path.
  local name=$1; shift
  local members; members=$(printf '%s, ' "$@")
  printf 'tenant: team-a\nname: %s\ntopology:\n  template:\n    kind: ring-unidirectional\n    members: [%s]\n' \
    "$name" "${members%, }" > "$dir/$name.yaml"
  echo "$dir/$name.yaml"
}
# A circuit list without the column padding (which other rows change).
circuits_of() { { fleetctl get circuits || true; } | grep -F "$1" | tr -s ' '; }
first=$(ring ring-a gpu1 gpu2 gpu3 gpu4)
second=$(ring ring-b gpu5 gpu6 gpu7 gpu8)
echo; echo "\$ fleetctl topology request -f ring-a.yaml --wait"
fleetctl topology request -f "$first" --wait > "$dir/ring-a.txt" || fail "ring-a not ready" "$dir/ring-a.txt"
cat "$dir/ring-a.txt"
id=$(sed -n 's/^ID: *//p' "$dir/ring-a.txt")
[ -n "$id" ] || fail "no ID in the answer to ring-a" "$dir/ring-a.txt"
circuits_of "$id" > "$dir/circuits-before.txt"

old=$(leader)
victim=""
for i in "${!addresses[@]}"; do [ "${addresses[$i]}" = "$old" ] && victim=$i; done
[ -n "$victim" ] || fail "the leader '$old' is none of ${addresses[*]}"
echo; echo "== SIGKILL of the leader, fleetd $old (pid ${pids[$victim]})"
killed=$(now_ms)
kill -KILL "${pids[$victim]}"
wait "${pids[$victim]}" 2>/dev/null || true
# The first mutation the new leader accepts: until one leads, requests are refused UNAVAILABLE.
# One request id for every try: a try whose answer was lost is not made twice.
took=""
while [ $(( $(now_ms) - killed )) -lt 20000 ]; do
  if fleetctl topology request -f "$second" --request-id ha-demo-ring-b > "$dir/ring-b.txt" 2> "$dir/ring-b.err"; then
    took=$(( $(now_ms) - killed )); break
  fi
  sleep 0.05
done
[ -n "$took" ] || fail "no replica took over within 20 s" "$dir/ring-b.err"
new=$(leader)
echo "takeover: ${took} ms (kill → first request accepted), new leader $new"

second_id=$(sed -n 's/^ID: *//p' "$dir/ring-b.txt")
# (Read whole before grep: grep -q would stop reading, and pipefail take fleetctl's SIGPIPE.)
ready() { local shown; shown=$(fleetctl describe allocation "$1" 2>&1) || return 1; grep -qi '^State: *ready' <<< "$shown"; }
for _ in $(seq 100); do ready "$second_id" && break; sleep 0.1; done
ready "$second_id" || fail "ring-b ($second_id) not ready on the new leader: $(fleetctl describe allocation "$second_id" 2>&1)"
ready "$id" || fail "ring-a ($id) not ready after the takeover"
run get allocations
# ring-a's circuits are where they were: the takeover changed nothing on the switch.
circuits_of "$id" > "$dir/circuits-after.txt"
diff "$dir/circuits-before.txt" "$dir/circuits-after.txt" || fail "ring-a's circuits changed across the takeover"
echo; echo "ring-a ($id): its circuits unchanged across the takeover"
run reconcile --dry-run

echo; echo "== fleetd ${addresses[$victim]} started again: it rejoins as a follower"
start_replica "$victim"
role=""
for _ in $(seq 100); do
  role=$({ "$bin/fleetctl" --server "${addresses[$victim]}" health 2>/dev/null || true; } | grep '^replica' || true)
  grep -q ' follower ' <<< "$role" && break
  sleep 0.1
done
echo "$role"
grep -q ' follower ' <<< "$role" || fail "the restarted replica does not follow" "$dir/fleetd-$victim.log"
echo; echo "state and logs: $dir"
