// Member replacement: Engine::ReplaceMember (engine.h). Admission and the one-transaction
// handover are here; the switch work is Reconfigure's, as for a phase switch.
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/base/status_macros.h"
#include "controller/engine/engine.h"
#include "fleet/v1/names.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/replacement.h"

namespace fleet::engine {
namespace {

using google::protobuf::util::TimeUtil;

v1::StageTiming Timing(const std::string& name, absl::Time started, absl::Duration took) {
  v1::StageTiming timing;
  timing.set_stage(name);
  *timing.mutable_started() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(started));
  *timing.mutable_duration() = TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(took));
  return timing;
}

// The next free circuit number of allocation `id`: its circuits are `id`-c1, -c2, ….
int NextCircuitNumber(const v1::Allocation& a) {
  int next = a.circuits_size() + 1;
  const std::string prefix = absl::StrCat(a.id(), "-c");
  for (const v1::Circuit& c : a.circuits()) {
    int n = 0;
    if (c.id().starts_with(prefix) && absl::SimpleAtoi(c.id().substr(prefix.size()), &n)) {
      next = std::max(next, n + 1);
    }
  }
  return next;
}

}  // namespace

absl::StatusOr<v1::ReplaceMemberResponse> Engine::ReplaceMember(
    const v1::ReplaceMemberRequest& request, const Caller& caller) {
  if (!caller.operator_role()) {
    return absl::PermissionDeniedError("replacing a member is for operators, not jobs");
  }
  const std::string& id = request.allocation_id();
  if (request.member().empty()) return absl::InvalidArgumentError("member is empty");
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(id, caller));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("fleetd is stopping");
  }
  if (!Claim(id)) {
    return absl::AbortedError(absl::StrCat("allocation ", id,
                                           " is in the middle of another change (",
                                           v1::Name(a.state()), "); retry once it is READY"));
  }
  v1::ReplaceMemberResponse response;
  std::vector<v1::Circuit> removes;    // The active phase's circuits to take off the switch.
  std::vector<v1::Circuit> on_switch;  // Every desired circuit before the replacement.
  std::vector<v1::StageTiming> admitted;
  absl::Status admitted_ok = [&]() -> absl::Status {
    absl::MutexLock admit(&admit_mu_);
    const absl::Time plan_start = clock_->Now();
    ASSIGN_OR_RETURN(a, store_->GetAllocation(id));
    if (a.state() != v1::ALLOCATION_STATE_READY && a.state() != v1::ALLOCATION_STATE_DEGRADED) {
      return absl::FailedPreconditionError(
          absl::StrCat("allocation ", id, " is ", v1::Name(a.state()),
                       "; a member can be replaced only when it is READY or DEGRADED"));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const Fabric> fabric, CurrentFabric());
    ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
    std::vector<v1::Allocation> holders;
    for (const auto& [holder, tenant] : tenants_) {
      v1::Allocation& h = holders.emplace_back();
      h.set_id(holder);
      h.set_tenant(tenant);
    }
    const scheduler::FabricSnapshot snapshot =
        scheduler::FabricSnapshot::Build(fabric->site, fabric->ports, circuits, holders);
    ASSIGN_OR_RETURN(scheduler::Replacement plan,
                     scheduler::PlanReplacement(snapshot, a, request.member(), request.spare()));
    *response.mutable_plan() = plan.plan;
    if (request.dry_run()) {
      *response.mutable_allocation() = a;
      return absl::OkStatus();
    }
    const absl::Time persist_start = clock_->Now();
    store::CircuitReplacement r;
    r.allocation_id = id;
    r.members = plan.members;
    r.state = v1::ALLOCATION_STATE_PROGRAMMING;
    int next = NextCircuitNumber(a);
    size_t removed = 0, added = 0;
    for (const scheduler::ReplacedPhase& phase : plan.phases) {
      const bool active = phase.name == a.active_phase();
      for (const v1::Circuit& c : phase.diff.remove) {
        r.remove.push_back(c.id());
        if (active) removes.push_back(c);
      }
      for (v1::Circuit c : phase.diff.add) {
        c.set_id(absl::StrCat(id, "-c", next++));
        c.set_allocation_id(id);
        c.set_state(active ? v1::CIRCUIT_STATE_PLANNED : v1::CIRCUIT_STATE_INACTIVE);
        r.add.push_back(std::move(c));
      }
      if (active) {
        removed = phase.diff.remove.size();
        added = phase.diff.add.size();
      }
    }
    r.event_message =
        absl::StrCat("allocation ", id, " replacing member ", request.member(), " by ", plan.spare,
                     ": ", removed, " circuits removed, ", added, " added, the rest kept");
    for (const v1::Circuit& c : a.circuits()) {
      if (c.state() != v1::CIRCUIT_STATE_INACTIVE) on_switch.push_back(c);
    }
    ASSIGN_OR_RETURN(v1::Allocation after, store_->ReplaceCircuits(r, caller.principal));
    admitted = {Timing("plan", plan_start, persist_start - plan_start),
                Timing("persist", persist_start, clock_->Now() - persist_start)};
    *response.mutable_allocation() = std::move(after);
    return absl::OkStatus();
  }();
  if (!admitted_ok.ok() || request.dry_run()) {
    Unclaim(id);
    if (!admitted_ok.ok()) return admitted_ok;
    return response;
  }
  Spawn(id, [this, id, admitted = std::move(admitted), on_switch = std::move(on_switch),
             phase_switch = PhaseSwitch{"", std::move(removes)}]() mutable {
    Reconfigure(id, std::move(admitted), std::move(phase_switch));
    // A replacement that failed before its batch stuck (quiesce refused, or the switch refused
    // and was rolled back) leaves the circuits from before it on the switch while the
    // allocation is FAILED and holds none: take them off, as a failed request leaves nothing.
    absl::StatusOr<v1::Allocation> ended = store_->GetAllocation(id);
    if (!ended.ok() || ended->state() != v1::ALLOCATION_STATE_FAILED) return;
    absl::Duration program_time, verify_time;
    if (absl::Status cleared = Program(on_switch, {}, &program_time, &verify_time); !cleared.ok()) {
      Record("allocation.replace", "allocation", id, v1::EVENT_SEVERITY_WARNING, "fleetd",
             absl::StrCat("allocation ", id,
                          ": the circuits from before the failed replacement "
                          "could not be taken off the switch (",
                          cleared.message(), "); reconciliation reports them"));
    }
  });
  return response;
}

}  // namespace fleet::engine
