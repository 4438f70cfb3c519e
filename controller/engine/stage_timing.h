// One stage of a reconfiguration as an allocation reports it (Allocation.stage_timings).
#ifndef FLEET_CONTROLLER_ENGINE_STAGE_TIMING_H_
#define FLEET_CONTROLLER_ENGINE_STAGE_TIMING_H_

#include <string>

#include "absl/time/time.h"
#include "common/proto_time.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

inline v1::StageTiming StageTiming(const std::string& stage, absl::Time started,
                                   absl::Duration took) {
  v1::StageTiming timing;
  timing.set_stage(stage);
  *timing.mutable_started() = ToProtoTime(started);
  *timing.mutable_duration() = ToProtoDuration(took);
  return timing;
}

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_STAGE_TIMING_H_
