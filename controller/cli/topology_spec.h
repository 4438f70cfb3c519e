// The topology request file `fleetctl topology request -f` reads (examples in
// deploy/examples/):
//
//   tenant: team-a
//   name: ring-of-eight            # the job's own label
//   lease: 10m                     # optional; renew with `fleetctl topology keepalive`
//   on_failure:                    # optional: heal with a spare (docs/engine.md)
//     replace: true                #    false or absent: stay DEGRADED, retrain until it clears
//     within: 2s                   #    replace once DEGRADED this long (a failed device or
//                                  #    port of the member: at once); default 2s, 1ms to 24h
//     max_replacements: 1          #    heals over the allocation's life (0 or absent: 1)
//     spares: same-switch          #    same-switch (default) | any (other switches over trunks)
//   topology:                      # one topology in exactly one of five forms:
//     template:                    # 1. a template over an ordered member list
//       kind: ring-unidirectional  #    ring-unidirectional | ring-bidirectional | chain |
//                                  #    star | tree | torus-2d | torus-3d | full-mesh
//       members: [gpu1, gpu2, gpu3]
//       width: 1                   #    parallel circuits per logical link
//       duplex: false              #    chain, star, tree: links both ways
//       reverse: false             #    chain: m(n-1) -> ... -> m0
//       hub: gpu1                  #    star: the hub (default: the first member)
//       fanout: 2                  #    tree: children per node
//       dimensions: [2, 2]         #    tori: their product is the member count
//     # 2. explicit links between devices or O-NIC ports (ONIC/PORT):
//     # links:
//     #   - {a: gpu1, b: server1-cpu0, duplex: true, width: 1}
//     #   - {a: nvme1-n0/1, b: s1c0-n0/2}
//     # 3. pooled devices attached to a host (a "virtual server"):
//     # attach: {host: server1, devices: [gpu1, gpu2], width: 1}
//     # 4. all-to-all in rounds, each a phase named round-1, round-2, ...:
//     # all_to_all: {members: [gpu1, gpu2, gpu3, gpu4]}
//     # 5. traffic-aware: source and destination index the member list, bytes per step:
//     # traffic:
//     #   members: [gpu1, gpu2, gpu3]
//     #   matrix: [{source: 0, destination: 1, bytes: 1e9}]
//
// A member list (template `members`, attach `devices`, all_to_all and traffic `members`) is
// either a list of device names or a mapping of names and counts; the planner picks counted
// devices (names first, then counts, in order):
//
//   members:
//     devices: [gpu1]                              # optional
//     count:                                       # optional; cluster optional
//       - {kind: gpu, count: 3, cluster: cluster1} # kind: cpu | gpu | nvme | fpga | other
//       - {kind: cpu, count: 1, host: server1}     # host: only that host's devices
//
// Instead of `topology:`, several named phases over the allocation's members; the first (or
// `initial_phase`) is programmed, `fleetctl topology phase ID NAME` switches:
//
//   phases:
//     - {name: dp, topology: {template: {kind: ring-bidirectional, members: [gpu1, gpu2]}}}
//     - name: tp
//       topology: {links: [{a: gpu1, b: gpu2, duplex: true}]}
//   initial_phase: dp
#ifndef FLEET_CONTROLLER_CLI_TOPOLOGY_SPEC_H_
#define FLEET_CONTROLLER_CLI_TOPOLOGY_SPEC_H_

#include <google/protobuf/duration.pb.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

// A lease as absl::ParseDuration reads it ("90s", "10m", "1h30m"; "0" asks for the server's
// default). INVALID_ARGUMENT for anything else or a negative one; the message quotes the text
// but not where it came from, which the caller adds (the file and line, or the flag).
absl::StatusOr<google::protobuf::Duration> ParseLease(absl::string_view text);

// Every problem "FILE:LINE: ..." at once, INVALID_ARGUMENT.
absl::StatusOr<v1::RequestTopologyRequest> ParseTopologySpec(absl::string_view text,
                                                             absl::string_view file_name);
absl::StatusOr<v1::RequestTopologyRequest> ReadTopologySpecFile(const std::string& path);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_TOPOLOGY_SPEC_H_
