#include "scheduler/request_plan.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fleet/v1/names.h"
#include "scheduler/limits.h"

namespace fleet::scheduler {

absl::StatusOr<std::vector<PlannedPhase>> PlanRequestPhases(
    const FabricSnapshot& snapshot, const v1::RequestTopologyRequest& request) {
  RETURN_IF_ERROR(CheckRequestLimits(snapshot, request));
  std::vector<PlannedPhase> phases;
  if (request.phases().empty()) {
    if (!request.initial_phase().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("initial_phase: '", request.initial_phase(),
                                                     "' names a phase, but none are given"));
    }
    if (request.topology().has_all_to_all()) {
      return PlanAllToAllRounds(snapshot, request.tenant(), request.topology().all_to_all(),
                                request.topology().max_switch_hops());
    }
    ASSIGN_OR_RETURN(v1::Plan plan, PlanTopology(snapshot, {request.tenant(), request.topology()}));
    phases.push_back({"", std::move(plan)});
    return phases;
  }
  if (request.topology().form_case() != v1::TopologySpec::FORM_NOT_SET) {
    return absl::InvalidArgumentError("topology: give either one topology or phases, not both");
  }
  // The request's shape is checked whole before any phase is planned.
  std::set<std::string> names;
  for (int i = 0; i < request.phases_size(); ++i) {
    const v1::Phase& phase = request.phases(i);
    const std::string field = absl::StrCat("phases[", i, "]");
    if (phase.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name is empty"));
    }
    if (std::any_of(phase.name().begin(), phase.name().end(),
                    [](char ch) { return std::iscntrl(static_cast<unsigned char>(ch)); })) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".name has a control character; a phase name is one line"));
    }
    if (!names.insert(phase.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".name: phase '", phase.name(), "' is given twice"));
    }
    if (phase.topology().has_all_to_all()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " (", phase.name(),
          "): all-to-all is itself phased (round-1, round-2, ...); request it on its own"));
    }
  }
  if (!request.initial_phase().empty() && !names.contains(request.initial_phase())) {
    return absl::InvalidArgumentError(absl::StrCat("initial_phase: no phase is named '",
                                                   request.initial_phase(), "'; phases are ",
                                                   absl::StrJoin(names, ", ")));
  }
  for (int i = 0; i < request.phases_size(); ++i) {
    const v1::Phase& phase = request.phases(i);
    absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {request.tenant(), phase.topology()});
    if (!plan.ok()) {
      return absl::Status(plan.status().code(), absl::StrCat("phases[", i, "] (", phase.name(),
                                                             "): ", plan.status().message()));
    }
    for (v1::Circuit& c : *plan->mutable_circuits()) c.set_phase(phase.name());
    phases.push_back({phase.name(), std::move(*plan)});
  }
  return phases;
}

v1::Plan CombinePhases(const std::vector<PlannedPhase>& phases, const std::string& initial) {
  if (phases.size() == 1) return phases.front().plan;
  v1::Plan combined;
  std::set<std::string> members, ports;
  for (const PlannedPhase& p : phases) {
    for (const std::string& m : p.plan.members()) {
      if (members.insert(m).second) combined.add_members(m);
    }
    for (const v1::OnicPortRef& port : p.plan.ports_used()) {
      if (ports.insert(v1::PortName(port)).second) {
        *combined.add_ports_used() = port;
      }
    }
    for (const v1::Circuit& c : p.plan.circuits()) *combined.add_circuits() = c;
    if (p.name == initial) {
      *combined.mutable_add() = p.plan.add();
      combined.set_direct_traffic_share(p.plan.direct_traffic_share());
    }
  }
  return combined;
}

}  // namespace fleet::scheduler
