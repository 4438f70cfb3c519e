// A request's failure policy (v1::FailurePolicy) and what has failed under an allocation:
// small facts the healer, the retries and the transactions share (healer.h does the healing).
#ifndef FLEET_CONTROLLER_ENGINE_FAILURE_POLICY_H_
#define FLEET_CONTROLLER_ENGINE_FAILURE_POLICY_H_

#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/engine/inventory_cache.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

// The failure policy's `within`, defaulted (2 s).
absl::Duration HealWithin(const v1::FailurePolicy& policy);
// When the allocation's member is replaced at the latest for links that do not retrain:
// `degraded_since` (else `now`) plus `within`; InfiniteFuture without a replace policy.
absl::Time HealDue(const v1::Allocation& a, absl::Time now);

// A member of an allocation with a failed part, and what failed.
struct FailedPart {
  std::string member;
  std::string reason;
};
// `a`'s members whose device an operator marked FAILED (first), then those with a FAILED
// switch port under one of its live circuits' fibers (the source's tx, the destination's
// rx), in circuit order; each port once. While any is, `a` is DEGRADED however its links
// train, since an operator's word or the switch says so.
std::vector<FailedPart> FailedParts(const v1::Allocation& a, const CachedInventory& inventory);

// The devices with an O-NIC whose agent is not connected (none without `agents`): never a
// spare, as no link of theirs could be trained.
std::set<std::string> UnreachableDevices(agent_registry::CommandSender* agents,
                                         const CachedInventory& inventory);

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_FAILURE_POLICY_H_
