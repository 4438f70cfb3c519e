// Invariants every plan must hold, checked with GoogleTest expectations, and the member-level
// view of a plan that shape checks compare against.
#ifndef FLEET_TESTS_SCHEDULER_PLAN_CHECKS_H_
#define FLEET_TESTS_SCHEDULER_PLAN_CHECKS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler::testing {

// Each circuit a path from the source's tx ingress to the destination's rx egress: one
// cross-connect per switch crossed, at most `max_switch_hops`, consecutive ones joined by the
// circuit's trunks in order (a trunk from the egress of one to the ingress of the next); no
// switch port, trunk, O-NIC tx or O-NIC rx used twice; only ports and trunks that were usable
// and free in `snapshot`; `add` (every circuit's cross-connects in order) and `ports_used`
// consistent with the circuits; every circuit's devices among `members`.
void ExpectLegal(const v1::Plan& plan, const FabricSnapshot& snapshot,
                 uint32_t max_switch_hops = 2);

// (from, to) member indices of each circuit, by the devices at its ends, sorted.
std::vector<std::pair<int, int>> MemberArcs(const v1::Plan& plan, const FabricSnapshot& snapshot,
                                            const std::vector<std::string>& members);

// Distinct O-NIC ports each member uses, by member index.
std::map<int, int> PortsPerMember(const v1::Plan& plan, const FabricSnapshot& snapshot,
                                  const std::vector<std::string>& members);

// Every port that sends to a device also hears from that device (a duplex link's port).
void ExpectDuplexPorts(const v1::Plan& plan, const FabricSnapshot& snapshot);

}  // namespace fleet::scheduler::testing

#endif  // FLEET_TESTS_SCHEDULER_PLAN_CHECKS_H_
