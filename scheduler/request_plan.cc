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
namespace {

// Whether two phases' circuits can be on the switch at once: no O-NIC port (so no edge switch
// port) and no trunk used by both.
bool FitTogether(const v1::Plan& a, const v1::Plan& b) {
  std::set<std::string> ports, trunks;
  for (const v1::OnicPortRef& port : a.ports_used()) ports.insert(v1::PortName(port));
  for (const v1::Circuit& c : a.circuits()) trunks.insert(c.trunks().begin(), c.trunks().end());
  for (const v1::OnicPortRef& port : b.ports_used()) {
    if (ports.contains(v1::PortName(port))) return false;
  }
  for (const v1::Circuit& c : b.circuits()) {
    for (const std::string& trunk : c.trunks()) {
      if (trunks.contains(trunk)) return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<PlannedPhase>> PlanRequestPhases(
    const FabricSnapshot& snapshot, const v1::RequestTopologyRequest& request) {
  RETURN_IF_ERROR(CheckRequestLimits(snapshot, request));
  if (request.prepare_next_phase() && request.phases_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prepare_next_phase: make before break keeps two phases on the switch, each on its own "
        "ports, so it needs a request of exactly two phases; this one has ",
        request.phases().empty() ? "one topology" : absl::StrCat(request.phases_size())));
  }
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
    PlanRequest planned_phase{request.tenant(), phase.topology(), {}};
    // Made before break: the second phase keeps off the first one's ports where it can.
    if (request.prepare_next_phase() && i == 1) {
      for (const v1::OnicPortRef& port : phases.front().plan.ports_used()) {
        planned_phase.avoid_ports.insert({port.onic(), port.port()});
      }
    }
    absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, planned_phase);
    if (!plan.ok()) {
      return absl::Status(plan.status().code(), absl::StrCat("phases[", i, "] (", phase.name(),
                                                             "): ", plan.status().message()));
    }
    for (v1::Circuit& c : *plan->mutable_circuits()) c.set_phase(phase.name());
    phases.push_back({phase.name(), std::move(*plan)});
  }
  if (request.prepare_next_phase() && FitTogether(phases[0].plan, phases[1].plan)) {
    for (PlannedPhase& phase : phases) phase.prepared = true;
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
    const bool made = p.name == initial || p.prepared;
    for (const v1::Circuit& c : p.plan.circuits()) {
      v1::Circuit* stored = combined.add_circuits();
      *stored = c;
      stored->set_state(made ? v1::CIRCUIT_STATE_PLANNED : v1::CIRCUIT_STATE_INACTIVE);
    }
    if (made) {
      for (const v1::CrossConnect& x : p.plan.add()) *combined.add_add() = x;
    }
    if (p.name == initial) combined.set_direct_traffic_share(p.plan.direct_traffic_share());
  }
  return combined;
}

}  // namespace fleet::scheduler
