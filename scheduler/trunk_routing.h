// Routing a circuit across switches: from the ingress an O-NIC's tx fiber enters to the egress
// another O-NIC's rx fiber leaves, over trunk fibers when the two are on different switches.
// Pure; deterministic for a given snapshot.
#ifndef FLEET_SCHEDULER_TRUNK_ROUTING_H_
#define FLEET_SCHEDULER_TRUNK_ROUTING_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

// Switches one circuit may cross unless the request says otherwise: one trunk at most.
inline constexpr uint32_t kDefaultMaxSwitchHops = 2;

struct Route {
  std::vector<v1::CrossConnect> cross_connects;  // In path order, one per switch crossed.
  std::vector<std::string> trunks;               // In path order.
};

// Routes the circuits of one plan. A trunk carries one circuit: the router hands out each
// free trunk once. A trunk is free when both its ports are usable and no desired circuit
// crosses it, except a circuit of `own_allocation` (a re-plan of that allocation may reuse
// its own trunks; those it keeps are marked with Take).
//
// A route crosses the fewest switches possible over free trunks, and at most
// `max_switch_hops` of them (0 means kDefaultMaxSwitchHops); at each hop it takes the group's
// free trunk with the lowest id. Ties between equally short paths go to the switch ids in
// order.
//
// Errors name `what` (the circuit) and the switches:
//   FAILED_PRECONDITION  no trunks join the two switches at all; or the shortest path over
//                        any trunks crosses more switches than the bound allows
//   RESOURCE_EXHAUSTED   a path within the bound exists, but a trunk group on it has no
//                        free trunk; the message names the group and what holds its trunks
//                        (the caller's own allocations by id, others' as "another tenant")
class TrunkRouter {
 public:
  // `tenant`: who asks; a trunk another tenant's circuit holds is named only as that.
  // `held_by`, when set, words why a trunk a holder other than `own_allocation` holds is not
  // free instead (e.g. "in a circuit of another tenant"): for a caller that rule does not
  // describe (GetFabric's: an operator, a job of several tenants).
  using HeldBy = std::function<std::string(const std::string& holder)>;
  TrunkRouter(const FabricSnapshot& snapshot, uint32_t max_switch_hops, std::string tenant,
              std::string own_allocation = "", HeldBy held_by = nullptr);

  absl::StatusOr<Route> RouteCircuit(const v1::SwitchPortRef& ingress,
                                     const v1::SwitchPortRef& egress, const std::string& what);
  // A trunk a kept circuit goes on using.
  void Take(const std::string& trunk) { taken_.insert(trunk); }

 private:
  bool Free(const TrunkState& t) const;
  // Why a trunk is not free ("drained ...", "in a circuit of X", "used by this request").
  std::string WhyNotFree(const TrunkState& t) const;
  // Shortest switch path from `from` to `to` over groups with a trunk `usable` accepts.
  template <typename Usable>
  std::vector<std::string> ShortestPath(const std::string& from, const std::string& to,
                                        Usable usable) const;
  std::string Refusal(const std::vector<std::string>& path) const;

  const FabricSnapshot& snapshot_;
  const uint32_t max_switch_hops_;
  const std::string tenant_;
  const std::string own_allocation_;
  const HeldBy held_by_;
  std::set<std::string> taken_;
};

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_TRUNK_ROUTING_H_
