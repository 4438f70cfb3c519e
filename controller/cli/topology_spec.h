// The topology request file `fleetctl topology request -f` reads (examples in
// deploy/examples/):
//
//   tenant: team-a
//   name: ring-of-eight            # the job's own label
//   lease: 10m                     # optional; renew with `fleetctl topology keepalive`
//   topology:
//     template:                    # a ring over named devices ...
//       kind: ring-unidirectional  # ring-unidirectional | ring-bidirectional | ...
//       members: [gpu1, gpu2, gpu3]
//       width: 1
//     # ... or explicit links between devices or O-NIC ports (ONIC/PORT):
//     # links:
//     #   - {a: gpu1, b: server1-cpu0, duplex: true}
//     #   - {a: nvme1-n0/1, b: s1c0-n0/2}
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
