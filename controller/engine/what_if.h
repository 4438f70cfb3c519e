// Losing a part of the fabric, imagined or real: which members of which allocations a failed
// or drained part hurts, and what would become of each allocation. WhatIf answers
// `fleetctl what-if fail` (nothing is stored, nothing sent to a switch or an agent); the
// drainer's eviction uses HurtBy to know which members to move.
#ifndef FLEET_CONTROLLER_ENGINE_WHAT_IF_H_
#define FLEET_CONTROLLER_ENGINE_WHAT_IF_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/inventory_cache.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::engine {

// The parts a failure or a drain takes out.
struct LostParts {
  std::set<std::string> switch_ports;  // v1::PortName of each.
  std::set<std::string> devices;
  std::string what;  // For messages: "switch port ocs1/437", "device gpu3".
};

// What of allocation `a` a loss hurts: its live circuits crossing a lost switch port or
// ending on a lost device's O-NIC, and the members whose device is lost or whose own fiber
// (the tx of a circuit's source, the rx of its destination) is on a lost port, in member
// order. A lost trunk port hurts circuits but no member.
struct Hurt {
  std::vector<std::string> members;
  std::vector<std::string> circuits;
};
Hurt HurtBy(const v1::Allocation& a, const LostParts& lost, const CachedInventory& inventory);

class WhatIf {
 public:
  explicit WhatIf(const EngineParts& parts) : p_(parts) {}

  // The parts `target` names (a switch port, an O-NIC's two fibers each way, a device, every
  // port of a switch). INVALID_ARGUMENT unless exactly one is named, NOT_FOUND for an unknown
  // one.
  static absl::StatusOr<LostParts> PartsOf(const v1::FailureTarget& target,
                                           const CachedInventory& inventory);

  // Engine::WhatIfFail: each live allocation the loss would hurt, and whether its failure
  // policy would heal it: its members replaced one by one, each planned as fleetd would
  // (PlanReplacement on the fabric with the part failed and the earlier replacements made).
  absl::StatusOr<v1::WhatIfFailResponse> Fail(const v1::WhatIfFailRequest& request);

 private:
  const EngineParts p_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_WHAT_IF_H_
