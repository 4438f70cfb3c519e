// What the stages of a reconfiguration have cost lately on this fleetd, in the transactions
// that ended READY, and those that ended DEGRADED but for their retrain (admissions, phase
// switches in place, heals, replacements alike): the cost of a change a job's own planner weighs
// (GetFabric's change_costs). Thread-safe; memory is bounded by the stages it keeps (quiesce,
// program, verify, retrain) times kWindow.
#ifndef FLEET_CONTROLLER_ENGINE_STAGE_COSTS_H_
#define FLEET_CONTROLLER_ENGINE_STAGE_COSTS_H_

#include <array>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

class StageCosts {
 public:
  // Durations kept per stage: the latest, so a change of the switch or the links shows soon.
  static constexpr size_t kWindow = 64;
  // The stages a change of circuits costs, in the order Recent gives them.
  static constexpr std::array<const char*, 4> kStages = {"quiesce", "program", "verify", "retrain"};

  // One stage of a transaction took `took`; stages not in kStages (plan, persist) are ignored.
  void Record(const std::string& stage, absl::Duration took) ABSL_LOCKS_EXCLUDED(mu_);
  // Each of kStages, in order: the median and 90th percentile of its kept durations and how
  // many there are (a stage never measured has samples 0 and neither).
  std::vector<v1::StageCost> Recent() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::array<std::deque<absl::Duration>, kStages.size()> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_STAGE_COSTS_H_
