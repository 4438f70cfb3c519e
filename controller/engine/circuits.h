// Small facts about circuits and allocations that several parts of the engine use.
#ifndef FLEET_CONTROLLER_ENGINE_CIRCUITS_H_
#define FLEET_CONTROLLER_ENGINE_CIRCUITS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "controller/agent_registry/agent_registry.h"
#include "controller/store/allocation_lifecycle.h"
#include "controller/store/store.h"
#include "fleet/v1/names.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

// "src-onic/port -> dst-onic/port" (v1::PortName of each end).
std::string LinkName(const v1::Circuit& c);
bool SameEnd(const v1::OnicPortRef& a, const v1::OnicPortRef& b);
// The circuits of `a` that are not INACTIVE (its active phase's, or all when it has none).
std::vector<v1::Circuit> LiveCircuits(const v1::Allocation& a);
using store::Ended;
// READY or DEGRADED: no change of the allocation under way.
bool Settled(v1::AllocationState s);
// The command that takes O-NIC `serial`'s port `port` out of service.
agent_registry::AddressedCommand QuiesceCommand(const std::string& serial, uint32_t port);
// Marks each of `circuits` ACTIVE, or DEGRADED with its reason when it is in `failed`
// (circuit id → why); returns the reasons, in circuit order.
std::vector<std::string> RecordRetrain(const std::vector<v1::Circuit>& circuits,
                                       const std::map<std::string, std::string>& failed,
                                       store::AllocationUpdate& update);

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_CIRCUITS_H_
