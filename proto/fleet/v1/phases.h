// Facts about an Allocation's phases that the scheduler, the engine and fleetctl each need,
// kept here once, beside the messages they read.
#ifndef FLEET_PROTO_FLEET_V1_PHASES_H_
#define FLEET_PROTO_FLEET_V1_PHASES_H_

#include <string>

#include "fleet/v1/topology.pb.h"

namespace fleet::v1 {

// Whether phase `phase` of `allocation` is on the switch: the active phase, or one prepared
// while another is active (make before break); either has circuits that are not INACTIVE.
// "" is the phase of a single-phase allocation.
bool PhaseOnSwitch(const Allocation& allocation, const std::string& phase);

// Whether a phase other than the active one is on the switch (prepared).
bool HoldsPreparedPhase(const Allocation& allocation);

}  // namespace fleet::v1

#endif  // FLEET_PROTO_FLEET_V1_PHASES_H_
