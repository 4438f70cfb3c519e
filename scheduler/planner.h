// Planning a new allocation's circuits: pure, deterministic, no I/O. A snapshot and a
// request in; the circuits and cross-connects to make, or the reason why not, out.
//
// Forms planned here: explicit links (between named O-NIC ports or named devices, directed or
// duplex, `width` parallel circuits between devices) and unidirectional and bidirectional
// rings over named devices. The other forms of TopologySpec (further templates, attach, counts,
// all-to-all, traffic) and phases answer UNIMPLEMENTED naming the form.
//
// Port choice: a device endpoint takes its first port (O-NICs by id, port 1 then 2) that is
// usable and has the sides it needs free: tx for a circuit's source, rx for its destination,
// both for a duplex link or a ring member. A duplex link uses one port at each end, its tx
// toward the peer and its rx from it.
//
// Errors name the field and the reason; nothing is planned:
//   INVALID_ARGUMENT    a malformed request (empty tenant, a link from a port to itself, ...)
//   NOT_FOUND           an unknown device, O-NIC or port
//   FAILED_PRECONDITION a named port that is drained, failed, in a circuit, or another
//                       tenant's; a circuit whose fibers are on different switches
//   RESOURCE_EXHAUSTED  a device without a free port, naming why each of its ports is not
#ifndef FLEET_SCHEDULER_PLANNER_H_
#define FLEET_SCHEDULER_PLANNER_H_

#include <string>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

struct PlanRequest {
  std::string tenant;
  v1::TopologySpec topology;
};

// The plan's circuits have no ids and are PLANNED; `add` lists their cross-connects (a new
// allocation removes nothing), `ports_used` every O-NIC port involved, `members` the
// devices in the order the request names them.
absl::StatusOr<v1::Plan> PlanTopology(const FabricSnapshot& snapshot, const PlanRequest& request);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_PLANNER_H_
