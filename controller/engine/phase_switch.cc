// MemberChanges::ActivatePhase: the handover from the active phase to another, stored at
// once; the circuits that differ are reconfigured by a Transaction in the background, unless
// the phase is prepared (its circuits on the switch already), when storing it is all.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wording.h"
#include "controller/engine/circuits.h"
#include "controller/engine/member_changes.h"
#include "controller/engine/stage_timing.h"
#include "controller/engine/tenancy.h"
#include "fleet/v1/names.h"
#include "scheduler/circuit_diff.h"

namespace fleet::engine {
namespace {

// The handover of `a` to `phase`: the active phase's circuits INACTIVE; the new phase's
// PLANNED, except a kept circuit whose link was up and whose ports are not quiesced by the
// change, which stays ACTIVE.
store::AllocationUpdate Handover(const v1::Allocation& a, const std::string& phase,
                                 const std::vector<v1::Circuit>& current,
                                 const std::vector<v1::Circuit>& target,
                                 const scheduler::CircuitDiff& diff) {
  std::set<std::string> added;
  for (const v1::Circuit& c : diff.add) added.insert(c.id());
  // Every port of a removed or added circuit is quiesced, so a kept circuit that shares one
  // is made and trained again with them; one whose link was not up is, too. The rest stay.
  std::set<std::string> quiesced, up;
  for (const std::vector<v1::Circuit>* changed : {&diff.remove, &diff.add}) {
    for (const v1::Circuit& c : *changed) {
      quiesced.insert(v1::PortName(c.source()));
      quiesced.insert(v1::PortName(c.destination()));
    }
  }
  for (const v1::Circuit& c : diff.kept) {
    if (c.state() == v1::CIRCUIT_STATE_ACTIVE) {
      up.insert(v1::PortName(c.source()) + ">" + v1::PortName(c.destination()));
    }
  }
  store::AllocationUpdate handover;
  handover.id = a.id();
  handover.state = v1::ALLOCATION_STATE_PROGRAMMING;
  handover.reason = "";
  handover.active_phase = phase;
  for (const v1::Circuit& c : current) handover.circuits[c.id()] = {v1::CIRCUIT_STATE_INACTIVE, ""};
  for (const v1::Circuit& c : target) {
    const bool untouched =
        !added.contains(c.id()) &&
        up.contains(v1::PortName(c.source()) + ">" + v1::PortName(c.destination())) &&
        !quiesced.contains(v1::PortName(c.source())) &&
        !quiesced.contains(v1::PortName(c.destination()));
    handover.circuits[c.id()] = {untouched ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_PLANNED,
                                 ""};
  }
  handover.event_kind = "allocation.phase";
  handover.event_message =
      absl::StrCat("allocation ", a.id(), " switching from phase ", a.active_phase(), " to ", phase,
                   ": ", Counted(diff.kept.size(), "circuit"), " kept, ", diff.remove.size(),
                   " removed, ", diff.add.size(), " added");
  return handover;
}

}  // namespace

absl::StatusOr<v1::ActivatePhaseResponse> MemberChanges::ActivatePhase(
    const v1::ActivatePhaseRequest& request, const Caller& caller) {
  const std::string& id = request.id();
  const std::string& phase = request.phase();
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(*p_.ctx.store, id, caller));
  if (a.phases().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("allocation ", id, " was requested with one topology and has no phases"));
  }
  if (std::find(a.phases().begin(), a.phases().end(), phase) == a.phases().end()) {
    return absl::NotFoundError(absl::StrCat("allocation ", id, " has no phase '", phase,
                                            "'; its phases are ", absl::StrJoin(a.phases(), ", ")));
  }
  if (Ended(a.state()) || a.state() == v1::ALLOCATION_STATE_RELEASING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation ", id, " is ", v1::Name(a.state()), "; it has no phase to activate"));
  }
  if (p_.pool.stopping()) return absl::UnavailableError("fleetd is stopping");
  if (a.active_phase() == phase) {
    v1::ActivatePhaseResponse response;
    *response.mutable_allocation() = std::move(a);
    return response;
  }
  if (!ClaimSettled(id, caller)) {
    return absl::AbortedError(absl::StrCat("allocation ", id,
                                           " is in the middle of another change (",
                                           v1::Name(a.state()), "); retry once it is READY"));
  }
  const absl::Time plan_start = p_.ctx.clock->Now();
  absl::StatusOr<v1::Allocation> fresh = p_.ctx.store->GetAllocation(id);
  if (!fresh.ok() || !Settled(fresh->state())) {
    p_.pool.Unclaim(id);
    if (!fresh.ok()) return fresh.status();
    return absl::FailedPreconditionError(
        absl::StrCat("allocation ", id, " is ", v1::Name(fresh->state()),
                     "; a phase can be activated only when it is READY or DEGRADED"));
  }
  return SwitchPhase(std::move(*fresh), phase, caller, plan_start);
}

absl::StatusOr<v1::ActivatePhaseResponse> MemberChanges::SwitchPhase(v1::Allocation a,
                                                                     const std::string& phase,
                                                                     const Caller& caller,
                                                                     absl::Time plan_start) {
  const std::string id = a.id();
  std::vector<v1::Circuit> current, target;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() == a.active_phase()) current.push_back(c);
    if (c.phase() == phase) target.push_back(c);
  }
  if (Prepared(target)) return ActivatePrepared(std::move(a), phase, target, caller, plan_start);
  const scheduler::CircuitDiff diff = scheduler::DiffCircuits(current, target);
  // The phase's ports are held, so capacity never refuses a phase switch; but a port or trunk
  // drained or failed since admission gets no new light, as for any new circuit.
  store::AllocationUpdate handover = Handover(a, phase, current, target, diff);
  absl::Time persist_start;
  absl::StatusOr<v1::Allocation> switched;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<uint64_t> usable_at = PhaseUsable(phase, diff.add);
    if (!usable_at.ok()) {
      p_.pool.Unclaim(id);
      return usable_at.status();
    }
    // New light only on what was checked usable: the handover commits only if no inventory,
    // drain or health change committed since the check (else it checks again).
    if (!diff.add.empty()) handover.planned_at_inventory = *usable_at;
    persist_start = p_.ctx.clock->Now();
    // The stored timings are this transaction's from the handover on, so a resumed run does
    // not count the previous transaction's.
    handover.stage_timings = {StageTiming("plan", plan_start, persist_start - plan_start)};
    switched = p_.ctx.store->UpdateAllocation(handover, caller.principal);
    if (switched.ok()) break;
    if (!absl::IsAborted(switched.status()) || diff.add.empty()) {
      FLEET_LOG(ERROR) << "allocation " << id << ": the handover to phase " << phase
                       << " was not stored: " << switched.status();
      p_.pool.Unclaim(id);
      return switched.status();
    }
    if (attempt == Admission::kPlanAttempts) {
      p_.pool.Unclaim(id);
      return absl::AbortedError(absl::StrCat(
          "allocation ", id, ": phase ", phase, " was checked ", Admission::kPlanAttempts,
          " times and an inventory, drain or health change committed after each; retry"));
    }
  }
  std::vector<v1::StageTiming> admitted = {
      StageTiming("plan", plan_start, persist_start - plan_start),
      StageTiming("persist", persist_start, p_.ctx.clock->Now() - persist_start)};

  v1::ActivatePhaseResponse response;
  v1::Plan& plan = *response.mutable_plan();
  for (const v1::Circuit& c : diff.remove) {
    for (const v1::CrossConnect& x : c.cross_connects()) *plan.add_remove() = x;
  }
  for (const v1::Circuit& c : diff.add) {
    for (const v1::CrossConnect& x : c.cross_connects()) *plan.add_add() = x;
  }
  *plan.mutable_members() = a.members();
  for (const v1::Circuit& c : target) *plan.add_circuits() = c;
  *response.mutable_allocation() = std::move(*switched);
  p_.pool.Spawn(id, [p = p_, id, admitted = std::move(admitted),
                     phase_switch = PhaseSwitch{a.active_phase(), diff.remove}]() mutable {
    p.Reconfigure(id, std::move(admitted), std::move(phase_switch));
  });
  return response;
}

bool MemberChanges::Prepared(const std::vector<v1::Circuit>& circuits) {
  return !circuits.empty() &&
         std::none_of(circuits.begin(), circuits.end(),
                      [](const v1::Circuit& c) { return c.state() == v1::CIRCUIT_STATE_INACTIVE; });
}

absl::StatusOr<v1::ActivatePhaseResponse> MemberChanges::ActivatePrepared(
    v1::Allocation a, const std::string& phase, const std::vector<v1::Circuit>& target,
    const Caller& caller, absl::Time plan_start) {
  const std::string id = a.id();
  // Both phases are on the switch and stay there: only which one the job uses changes. The
  // state (READY, or DEGRADED with its reason) is the circuits', as it was.
  store::AllocationUpdate handover;
  handover.id = id;
  handover.active_phase = phase;
  handover.stage_timings = {StageTiming("plan", plan_start, p_.ctx.clock->Now() - plan_start)};
  handover.event_kind = "allocation.phase";
  handover.event_message =
      absl::StrCat("allocation ", id, " switched from phase ", a.active_phase(), " to ", phase,
                   ", prepared: no switch command, ", Counted(target.size(), "circuit"),
                   " already on the switch");
  absl::StatusOr<v1::Allocation> switched =
      p_.ctx.store->UpdateAllocation(handover, caller.principal);
  p_.pool.Unclaim(id);
  if (!switched.ok()) {
    FLEET_LOG(ERROR) << "allocation " << id << ": the activation of prepared phase " << phase
                     << " was not stored: " << switched.status();
    return switched.status();
  }
  v1::ActivatePhaseResponse response;
  v1::Plan& plan = *response.mutable_plan();
  *plan.mutable_members() = a.members();
  for (const v1::Circuit& c : target) *plan.add_circuits() = c;
  *response.mutable_allocation() = std::move(*switched);
  return response;
}

absl::StatusOr<uint64_t> MemberChanges::PhaseUsable(const std::string& phase,
                                                    const std::vector<v1::Circuit>& adds) {
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, p_.inventory.Current());
  const scheduler::FabricSnapshot& snapshot = inventory->usability;
  std::vector<std::string> problems;
  for (const v1::Circuit& c : adds) {
    for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
      const scheduler::OnicPortState* port = snapshot.Port(end.onic(), end.port());
      if (port != nullptr && !port->unusable.empty()) {
        problems.push_back(
            absl::StrCat("circuit ", c.id(), " (", LinkName(c), "): ", port->unusable));
      }
    }
    for (int k = 0; k + 1 < c.cross_connects_size() && k < c.trunks_size(); ++k) {
      const v1::CrossConnect& from = c.cross_connects(k);
      const v1::CrossConnect& to = c.cross_connects(k + 1);
      const scheduler::TrunkState* trunk = nullptr;
      for (const scheduler::TrunkState* t : snapshot.Trunks(from.switch_id(), to.switch_id())) {
        if (t->id == c.trunks(k)) trunk = t;
      }
      if (trunk == nullptr || trunk->from.port() != from.egress() ||
          trunk->to.port() != to.ingress()) {
        problems.push_back(absl::StrCat("circuit ", c.id(), ": trunk ", c.trunks(k),
                                        " is no longer the fiber from ", from.switch_id(), "/",
                                        from.egress(), " to ", to.switch_id(), "/", to.ingress()));
      } else if (!trunk->unusable.empty()) {
        problems.push_back(
            absl::StrCat("circuit ", c.id(), ": trunk ", trunk->id, ": ", trunk->unusable));
      }
    }
  }
  if (problems.empty()) return inventory->version;
  return absl::FailedPreconditionError(
      absl::StrCat("phase ", phase, " cannot be activated: ", absl::StrJoin(problems, "; "),
                   " (undrain or repair it, or replace the member)"));
}

}  // namespace fleet::engine
