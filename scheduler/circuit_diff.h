// What changes between the circuits an allocation holds and the ones it should hold: used
// for phase switches and re-planning, so that circuits already right are left alone.
#ifndef FLEET_SCHEDULER_CIRCUIT_DIFF_H_
#define FLEET_SCHEDULER_CIRCUIT_DIFF_H_

#include <vector>

#include "fleet/v1/topology.pb.h"

namespace fleet::scheduler {

struct CircuitDiff {
  std::vector<v1::Circuit> remove;  // Current and not desired, in current order: taken off first.
  std::vector<v1::Circuit> add;     // Desired and not current, in desired order.
  std::vector<v1::Circuit> kept;    // In both, as current holds them (id and state), in
                                    // desired order.
};

// Two circuits are the same when they carry light along the same path: the same source and
// destination O-NIC ports, the same cross-connects and trunks in order. Id, allocation,
// state, phase and reason do not matter. Circuits are matched as multisets, so a path
// listed twice on one side is kept at most as often as the other side lists it. Pure;
// O((c + d) log(c + d)).
CircuitDiff DiffCircuits(const std::vector<v1::Circuit>& current,
                         const std::vector<v1::Circuit>& desired);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_CIRCUIT_DIFF_H_
