// Loopback TCP ports for processes a FLEET program starts on its own machine (the replicated
// demo's etcd members and fleetd replicas; the tests' daemons).
#ifndef FLEET_COMMON_FREE_PORTS_H_
#define FLEET_COMMON_FREE_PORTS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace fleet {

// `count` distinct ports free on 127.0.0.1 now, picked at random outside the kernel's ephemeral
// range (net.ipv4.ip_local_port_range; below it, else above it): an outgoing connection is
// never given one, so a process that stops can start again on its port. Where the range leaves
// no room outside it, the kernel's choice. Nothing holds them: the caller binds them soon.
// INTERNAL when that many free ones were not found.
absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count);

}  // namespace fleet

#endif  // FLEET_COMMON_FREE_PORTS_H_
