// MemberChanges::ReplaceMember and DetachDevices: admission and the one-transaction handover
// are here; the switch work is a Transaction's, as for a phase switch.
#include "controller/engine/member_changes.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "common/wording.h"
#include "controller/engine/circuits.h"
#include "controller/engine/failure_policy.h"
#include "controller/engine/stage_timing.h"
#include "controller/engine/tenancy.h"
#include "fleet/v1/names.h"
#include "fleet/v1/phases.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/replacement.h"

namespace fleet::engine {
namespace {

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

bool MemberChanges::ClaimSettled(const std::string& id, const Caller& caller) {
  // A change asked for while the allocation is READY or DEGRADED (a client acting on what it
  // was told) is not refused for a claim it cannot see: the transaction that stored that
  // state holds the claim for its last steps, a retry while its links retrain, a lease check
  // or a reconciliation pass while it reads the switches. Each lets go within its own
  // timeouts; kClaimWait only bounds a wait on something gone wrong.
  const absl::Time give_up = caller.GiveUp(*p_.ctx.clock, kClaimWait);
  return p_.pool.ClaimWhenFree(id, give_up, [&] {
    absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
    return a.ok() && Settled(a->state());
  });
}

absl::StatusOr<v1::ReplaceMemberResponse> MemberChanges::ReplaceMember(
    const v1::ReplaceMemberRequest& request, const Caller& caller) {
  // A job replaces members of its own tenants' allocations only (Authorized below).
  const std::string& id = request.allocation_id();
  if (request.member().empty()) return absl::InvalidArgumentError("member is empty");
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(*p_.ctx.store, id, caller));
  v1::ReplaceMemberResponse response;
  v1::MemberReplacement record;
  record.set_reason(request.spare().empty() ? "asked for" : "asked for, with the spare named");
  record.set_by(caller.principal);
  RETURN_IF_ERROR(ChangeMembers(
      id, a.state(), request.dry_run(), "a member can be replaced", "replace", caller,
      [&](const v1::Allocation& stored, MemberChange& change) {
        return PlanReplacement(request, /*same_switch_only=*/false, record, stored, change,
                               response);
      },
      response.mutable_allocation()));
  return response;
}

absl::Status MemberChanges::ReplaceFailed(const std::string& id, const FailedMember& failed,
                                          const Caller& caller, OnEnd ended) {
  v1::ReplaceMemberRequest request;
  request.set_allocation_id(id);
  request.set_member(failed.member);
  v1::MemberReplacement record;
  record.set_reason(failed.reason);
  record.set_by(caller.principal);
  if (failed.degraded_for > absl::ZeroDuration()) {
    *record.mutable_degraded_for() = ToProtoDuration(failed.degraded_for);
  }
  v1::ReplaceMemberResponse response;
  return ChangeMembers(
      id, v1::ALLOCATION_STATE_DEGRADED, /*dry_run=*/false, "a member can be replaced", "replace",
      caller,
      [&](const v1::Allocation& stored, MemberChange& change) {
        if (failed.only_if_degraded && stored.state() != v1::ALLOCATION_STATE_DEGRADED) {
          return absl::FailedPreconditionError(
              absl::StrCat("allocation ", id, " is ", v1::Name(stored.state()), " again; no heal"));
        }
        return PlanReplacement(request, failed.same_switch_only, record, stored, change, response);
      },
      response.mutable_allocation(), std::move(ended));
}

absl::Status MemberChanges::PlanReplacement(const v1::ReplaceMemberRequest& request,
                                            bool same_switch_only, v1::MemberReplacement record,
                                            const v1::Allocation& stored, MemberChange& change,
                                            v1::ReplaceMemberResponse& response) {
  const std::string& id = stored.id();
  ASSIGN_OR_RETURN(const Admission::Fabric fabric, p_.admission.Snapshot());
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, p_.inventory.Current());
  ASSIGN_OR_RETURN(
      scheduler::Replacement plan,
      scheduler::PlanReplacement(fabric.snapshot, stored, request.member(), request.spare(),
                                 same_switch_only, UnreachableDevices(p_.ctx.agents, *inventory)));
  *response.mutable_plan() = plan.plan;
  record.set_failed(plan.failed);
  record.set_spare(plan.spare);
  for (int i = 0; i < stored.members_size(); ++i) {
    if (stored.members(i) == plan.failed) record.set_position(static_cast<uint32_t>(i));
  }
  store::CircuitReplacement& r = change.replacement;
  r.planned_at_inventory = fabric.inventory_version;
  r.members = plan.members;
  int next = NextCircuitNumber(stored);
  size_t removed = 0, added = 0;
  for (const scheduler::ReplacedPhase& phase : plan.phases) {
    // The active phase's circuits are on the switch, and so are a prepared phase's.
    const bool on_switch = v1::PhaseOnSwitch(stored, phase.name);
    for (const v1::Circuit& c : phase.diff.remove) {
      r.remove.push_back(c.id());
      if (on_switch) change.removes.push_back(c);
    }
    for (v1::Circuit c : phase.diff.add) {
      c.set_id(absl::StrCat(id, "-c", next++));
      c.set_allocation_id(id);
      c.set_state(on_switch ? v1::CIRCUIT_STATE_PLANNED : v1::CIRCUIT_STATE_INACTIVE);
      r.add.push_back(std::move(c));
    }
    if (on_switch) {
      removed += phase.diff.remove.size();
      added += phase.diff.add.size();
    }
  }
  r.event_kind = "allocation.member_replaced";
  r.event_message =
      absl::StrCat("allocation ", id, " replacing member ", request.member(), " by ", plan.spare,
                   " (", record.reason(), ", by ", record.by(), "): ", removed,
                   " circuits removed, ", added, " added, the rest kept");
  r.record = std::move(record);
  return absl::OkStatus();
}

absl::Status MemberChanges::ChangeMembers(const std::string& id, v1::AllocationState seen,
                                          bool dry_run, const std::string& what,
                                          const std::string& event, const Caller& caller,
                                          const Planner& plan, v1::Allocation* after,
                                          OnEnd on_end) {
  if (p_.pool.stopping()) return absl::UnavailableError("fleetd is stopping");
  if (!ClaimSettled(id, caller)) {
    return absl::AbortedError(absl::StrCat("allocation ", id,
                                           " is in the middle of another change (", v1::Name(seen),
                                           "); retry once it is READY"));
  }
  MemberChange change;
  std::vector<v1::Circuit> on_switch;  // Every desired circuit before the change.
  std::vector<v1::StageTiming> admitted;
  absl::Status admitted_ok = [&]() -> absl::Status {
    absl::MutexLock admit(&p_.admission.mu());
    const absl::Time plan_start = p_.ctx.clock->Now();
    ASSIGN_OR_RETURN(v1::Allocation stored, p_.ctx.store->GetAllocation(id));
    if (!Settled(stored.state())) {
      return absl::FailedPreconditionError(absl::StrCat("allocation ", id, " is ",
                                                        v1::Name(stored.state()), "; ", what,
                                                        " only when it is READY or DEGRADED"));
    }
    for (const v1::Circuit& c : stored.circuits()) {
      if (c.state() != v1::CIRCUIT_STATE_INACTIVE) on_switch.push_back(c);
    }
    for (int attempt = 1;; ++attempt) {
      change = MemberChange();
      RETURN_IF_ERROR(plan(stored, change));
      if (dry_run) {
        *after = std::move(stored);
        return absl::OkStatus();
      }
      p_.ctx.Fault("planned");
      const absl::Time persist_start = p_.ctx.clock->Now();
      change.replacement.allocation_id = id;
      change.replacement.state = v1::ALLOCATION_STATE_PROGRAMMING;
      absl::StatusOr<v1::Allocation> replaced =
          p_.ctx.store->ReplaceCircuits(change.replacement, caller.principal);
      if (replaced.ok()) {
        *after = *std::move(replaced);
        p_.admission.Committed(change.replacement.add);
        admitted = {StageTiming("plan", plan_start, persist_start - plan_start),
                    StageTiming("persist", persist_start, p_.ctx.clock->Now() - persist_start)};
        return absl::OkStatus();
      }
      // ABORTED: an inventory, drain or health change committed since the plan (the claim and
      // mu() keep everything else still). Planned again on it, as admission does.
      if (!absl::IsAborted(replaced.status()) ||
          change.replacement.planned_at_inventory == store::kAnyInventory) {
        return replaced.status();
      }
      if (attempt == Admission::kPlanAttempts) {
        return absl::AbortedError(absl::StrCat(
            "allocation ", id, ": ", Admission::kPlanAttempts, " plans of the ", what,
            " each lost to an inventory, drain or health change committed meanwhile; retry"));
      }
    }
  }();
  if (!admitted_ok.ok() || dry_run) {
    p_.pool.Unclaim(id);
    return admitted_ok;
  }
  ReconfigureMembers(id, std::move(admitted), std::move(change.removes), std::move(on_switch),
                     event, std::move(on_end));
  return absl::OkStatus();
}

void MemberChanges::ReconfigureMembers(const std::string& id, std::vector<v1::StageTiming> admitted,
                                       std::vector<v1::Circuit> removes,
                                       std::vector<v1::Circuit> on_switch, const std::string& what,
                                       OnEnd on_end) {
  p_.pool.Spawn(id, [p = p_, id, what, admitted = std::move(admitted),
                     on_switch = std::move(on_switch),
                     phase_switch = PhaseSwitch{"", std::move(removes)},
                     on_end = std::move(on_end)]() mutable {
    p.Reconfigure(id, std::move(admitted), std::move(phase_switch));
    absl::StatusOr<v1::Allocation> ended = p.ctx.store->GetAllocation(id);
    if (ended.ok() && on_end) on_end(*ended);
    // A change that failed before its batch stuck (quiesce refused, or the switch refused and
    // was rolled back) leaves the circuits from before it on the switch while the allocation
    // is FAILED and holds none: take them off, as a failed request leaves nothing.
    if (!ended.ok() || ended->state() != v1::ALLOCATION_STATE_FAILED) return;
    absl::Duration program_time, verify_time;
    absl::Status cleared = p.programmers.Program(on_switch, {}, &program_time, &verify_time);
    if (cleared.ok()) cleared = p.ctx.store->ClearPendingRemovals(id);
    if (!cleared.ok()) {
      p.ctx.Record("allocation." + what, "allocation", id, v1::EVENT_SEVERITY_WARNING, "fleetd",
                   absl::StrCat("allocation ", id, ": the ", what,
                                " failed and the circuits from before it could not be taken off "
                                "the switch (",
                                cleared.message(), "); reconciliation reports them"));
    }
  });
}

absl::StatusOr<v1::DetachDevicesResponse> MemberChanges::DetachDevices(
    const v1::DetachDevicesRequest& request, const Caller& caller) {
  const std::string& id = request.id();
  if (request.devices().empty()) return absl::InvalidArgumentError("devices: none given");
  const std::set<std::string> detached(request.devices().begin(), request.devices().end());
  if (detached.size() != static_cast<size_t>(request.devices_size())) {
    return absl::InvalidArgumentError("devices: a device is named twice");
  }
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(*p_.ctx.store, id, caller));
  if (!a.request().topology().has_attach()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation ", id, " is not an attach (a virtual server); only attached devices detach"));
  }
  v1::DetachDevicesResponse response;
  RETURN_IF_ERROR(ChangeMembers(
      id, a.state(), request.dry_run(), "devices can be detached", "detach", caller,
      [&](const v1::Allocation& stored, MemberChange& change) {
        return PlanDetach(request, stored, change, response);
      },
      response.mutable_allocation()));
  return response;
}

absl::Status MemberChanges::PlanDetach(const v1::DetachDevicesRequest& request,
                                       const v1::Allocation& stored, MemberChange& change,
                                       v1::DetachDevicesResponse& response) {
  const std::string& id = stored.id();
  const std::set<std::string> detached(request.devices().begin(), request.devices().end());
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, p_.inventory.Current());
  std::map<std::string, std::string> host_of;  // Device → its host, "" when pooled.
  for (const v1::Device& d : inventory->site.devices()) host_of[d.id()] = d.host();
  const std::set<std::string> members(stored.members().begin(), stored.members().end());
  int pooled_left = 0;
  for (const std::string& m : stored.members()) {
    pooled_left += host_of[m].empty() && !detached.contains(m);
  }
  for (int i = 0; i < request.devices_size(); ++i) {
    const std::string& d = request.devices(i);
    if (!members.contains(d)) {
      return absl::NotFoundError(absl::StrCat("devices[", i, "]: ", d,
                                              " is not a member of allocation ", id, " (",
                                              absl::StrJoin(stored.members(), ", "), ")"));
    }
    if (!host_of[d].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices[", i, "]: ", d, " is a device of host ", host_of[d],
                       ", not an attached one; release the allocation to take the "
                       "virtual server apart"));
    }
  }
  if (pooled_left == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("detaching every attached device leaves no virtual server; release "
                     "allocation ",
                     id, " instead"));
  }
  store::CircuitReplacement& r = change.replacement;
  std::set<std::string> still_used;  // Devices with a kept circuit.
  std::set<std::pair<std::string, uint32_t>> freed;
  v1::Plan& plan = *response.mutable_plan();
  for (const v1::Circuit& c : stored.circuits()) {
    if (detached.contains(inventory->DeviceOf(c.source().onic())) ||
        detached.contains(inventory->DeviceOf(c.destination().onic()))) {
      r.remove.push_back(c.id());
      change.removes.push_back(c);
      for (const v1::CrossConnect& x : c.cross_connects()) *plan.add_remove() = x;
      for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
        if (freed.insert({end.onic(), end.port()}).second) *plan.add_ports_used() = end;
      }
      continue;
    }
    still_used.insert(inventory->DeviceOf(c.source().onic()));
    still_used.insert(inventory->DeviceOf(c.destination().onic()));
  }
  for (const std::string& m : stored.members()) {
    if (still_used.contains(m)) r.members.push_back(m);
  }
  *plan.mutable_members() = {r.members.begin(), r.members.end()};
  r.event_kind = "allocation.detach";
  r.event_message =
      absl::StrCat("allocation ", id, " detaching ", absl::StrJoin(request.devices(), ", "), ": ",
                   Counted(change.removes.size(), "circuit"), " removed, the rest kept");
  return absl::OkStatus();
}

}  // namespace fleet::engine
