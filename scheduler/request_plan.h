// A whole RequestTopologyRequest planned as admission plans it: its numbers checked against
// the site (limits.h), then every phase planned on its own against the same snapshot (a phase
// is active only while the others are not, so phases may share the members' ports). With
// `prepare_next_phase` (two phases, made before break) the second phase takes the members'
// other ports where it can, and the two are kept on the switch together when they share no
// O-NIC port and no trunk. Pure; no I/O. The engine's admission and the planning fuzzer both
// go through here.
#ifndef FLEET_SCHEDULER_REQUEST_PLAN_H_
#define FLEET_SCHEDULER_REQUEST_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/planner.h"

namespace fleet::scheduler {

// The request's phases: its named phases, the rounds of an all-to-all, or the one unnamed
// phase ("") of any other form. Refuses, naming the field, what CheckRequestLimits refuses; a
// request giving both a topology and phases; an empty, repeated or multi-line phase name; an
// all-to-all inside a phase; an initial_phase that names no phase; and whatever the planner
// refuses, prefixed with the phase (`phases[1] (tp): ...`); prepare_next_phase on a request
// that is not of exactly two named phases. `request.tenant` must be set. Both phases are
// `prepared` when the request asks and they can be on the switch together; else none is.
absl::StatusOr<std::vector<PlannedPhase>> PlanRequestPhases(
    const FabricSnapshot& snapshot, const v1::RequestTopologyRequest& request);

// One plan for the whole request: every phase's circuits, the members and ports of all of
// them in first-seen order, and the cross-connects made at admission: the phase `initial`'s
// and every prepared phase's. The circuits made at admission are PLANNED, the others
// INACTIVE (held, not on the switch).
v1::Plan CombinePhases(const std::vector<PlannedPhase>& phases, const std::string& initial);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_REQUEST_PLAN_H_
