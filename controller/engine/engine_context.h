// What every part of the engine reaches: its options, the store, the agents, the clock and
// the metrics, and the three ways a part reports what it did.
#ifndef FLEET_CONTROLLER_ENGINE_ENGINE_CONTEXT_H_
#define FLEET_CONTROLLER_ENGINE_ENGINE_CONTEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/engine/engine_options.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/store/store.h"

namespace fleet::engine {

struct EngineContext {
  const EngineOptions& options;
  store::Store* const store;
  agent_registry::CommandSender* const agents;  // May be null: links are then never retrained.
  const Clock* const clock;
  metrics::ControllerMetrics& metrics;

  // Calls EngineOptions::fault_point, if set.
  void Fault(const std::string& point) const;
  // Appends an event that is not a state change of an allocation (those come with Update);
  // a failure to record it is logged, not fatal.
  void Record(const std::string& kind, const std::string& object_kind, const std::string& object_id,
              v1::EventSeverity severity, const std::string& principal,
              const std::string& message) const;
  // Store::UpdateAllocation, with a failure logged.
  absl::StatusOr<v1::Allocation> Update(const store::AllocationUpdate& update,
                                        const std::string& principal) const;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ENGINE_CONTEXT_H_
