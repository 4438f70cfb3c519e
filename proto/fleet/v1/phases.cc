#include "fleet/v1/phases.h"

#include <algorithm>

namespace fleet::v1 {

bool PhaseOnSwitch(const Allocation& allocation, const std::string& phase) {
  if (phase == allocation.active_phase()) return true;
  return std::any_of(
      allocation.circuits().begin(), allocation.circuits().end(),
      [&](const Circuit& c) { return c.phase() == phase && c.state() != CIRCUIT_STATE_INACTIVE; });
}

bool HoldsPreparedPhase(const Allocation& allocation) {
  return std::any_of(
      allocation.circuits().begin(), allocation.circuits().end(), [&](const Circuit& c) {
        return c.phase() != allocation.active_phase() && c.state() != CIRCUIT_STATE_INACTIVE;
      });
}

}  // namespace fleet::v1
