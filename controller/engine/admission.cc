#include "controller/engine/admission.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "controller/engine/stage_timing.h"
#include "scheduler/limits.h"
#include "scheduler/planner.h"

namespace fleet::engine {
namespace {

std::string RandomAllocationId() {
  static absl::Mutex mu;
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("a-%08x", absl::Uniform<uint32_t>(*gen));
}

}  // namespace

void Admission::RememberTenants(const std::vector<v1::Allocation>& live) {
  absl::MutexLock admit(&mu_);
  for (const v1::Allocation& a : live) tenants_[a.id()] = a.tenant();
}

absl::StatusOr<absl::Duration> Admission::LeaseOf(const v1::RequestTopologyRequest& request) const {
  const EngineOptions& options = ctx_.options;
  absl::Duration lease = options.default_lease;
  if (!request.has_lease()) return lease;
  lease = FromProtoDuration(request.lease());
  if (lease < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease: ", absl::FormatDuration(lease), " is negative"));
  }
  if (lease == absl::ZeroDuration()) lease = options.default_lease;
  if (lease > options.max_lease) {
    return absl::InvalidArgumentError(absl::StrCat("lease: ", absl::FormatDuration(lease),
                                                   " is longer than the maximum ",
                                                   absl::FormatDuration(options.max_lease)));
  }
  return lease;
}

absl::StatusOr<Admission::Admitted> Admission::Admit(const v1::RequestTopologyRequest& original,
                                                     const Caller& caller) {
  v1::RequestTopologyRequest request = original;
  if (!caller.operator_role() && !caller.tenant_scoped()) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.Describe(), " may not request topologies"));
  }
  // A job acting for one tenant need not name it.
  if (request.tenant().empty() && caller.tenants.size() == 1) {
    request.set_tenant(caller.tenants.front());
  }
  if (request.tenant().empty()) {
    return absl::InvalidArgumentError(
        caller.tenants.empty()
            ? "tenant is empty"
            : absl::StrCat("tenant is empty: ", caller.Describe(), "; name one"));
  }
  if (!caller.ActsFor(request.tenant())) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.Describe(), " may not request for tenant ", request.tenant()));
  }
  ASSIGN_OR_RETURN(const absl::Duration lease, LeaseOf(request));
  if (pool_->stopping()) return absl::UnavailableError("fleetd is stopping");
  {
    // A request no site like this one could hold is refused before it waits for admission.
    ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, inventory_->Current());
    RETURN_IF_ERROR(scheduler::CheckRequestLimits(inventory->usability, request));
  }
  if (!request.dry_run()) return PlanAndPersist(request, caller, lease);
  // A dry run commits nothing, so it plans outside admission and holds up no one.
  std::optional<scheduler::FabricSnapshot> snapshot;
  {
    absl::MutexLock admit(&mu_);
    ASSIGN_OR_RETURN(snapshot, Snapshot());
  }
  ASSIGN_OR_RETURN(const std::vector<scheduler::PlannedPhase> phases,
                   scheduler::PlanRequestPhases(*snapshot, request));
  Admitted admitted;
  *admitted.response.mutable_plan() = scheduler::CombinePhases(
      phases, request.initial_phase().empty() ? phases.front().name : request.initial_phase());
  return admitted;
}

absl::StatusOr<Admission::Admitted> Admission::PlanAndPersist(
    const v1::RequestTopologyRequest& request, const Caller& caller, absl::Duration lease) {
  Admitted admitted;
  v1::RequestTopologyResponse& response = admitted.response;
  // One admission at a time: the snapshot a plan is made on must still be true when its
  // intent commits, or two requests could pick the same free port.
  absl::MutexLock admit(&mu_);
  const absl::Time plan_start = ctx_.clock->Now();
  if (!request.request_id().empty()) {
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> mine,
                     ctx_.store->ListAllocations({request.tenant(), {}, true}));
    for (v1::Allocation& a : mine) {
      if (a.request().request_id() == request.request_id()) {
        *response.mutable_allocation() = std::move(a);
        return admitted;  // A retry of a request already admitted.
      }
    }
  }
  ASSIGN_OR_RETURN(const scheduler::FabricSnapshot snapshot, Snapshot());
  ASSIGN_OR_RETURN(const std::vector<scheduler::PlannedPhase> phases,
                   scheduler::PlanRequestPhases(snapshot, request));
  const std::string initial =
      request.initial_phase().empty() ? phases.front().name : request.initial_phase();
  *response.mutable_plan() = scheduler::CombinePhases(phases, initial);
  const absl::Time persist_start = ctx_.clock->Now();

  v1::Allocation a;
  a.set_tenant(request.tenant());
  a.set_name(request.name());
  a.set_state(v1::ALLOCATION_STATE_PENDING);
  *a.mutable_request() = request;
  *a.mutable_members() = response.plan().members();
  a.set_direct_traffic_share(response.plan().direct_traffic_share());
  if (phases.size() > 1 || !phases.front().name.empty()) {
    for (const scheduler::PlannedPhase& p : phases) a.add_phases(p.name);
    a.set_active_phase(initial);
  }
  *a.mutable_lease_expires() = ToProtoTime(ctx_.clock->Now() + lease);
  *a.add_stage_timings() = StageTiming("plan", plan_start, persist_start - plan_start);
  RETURN_IF_ERROR(Persist(a, response.plan(), caller));
  *a.add_stage_timings() = StageTiming("persist", persist_start, ctx_.clock->Now() - persist_start);
  *response.mutable_allocation() = std::move(a);
  admitted.fresh = true;
  return admitted;
}

absl::Status Admission::Persist(v1::Allocation& a, const v1::Plan& plan, const Caller& caller) {
  for (int attempt = 0;; ++attempt) {
    const std::string id =
        ctx_.options.new_allocation_id ? ctx_.options.new_allocation_id() : RandomAllocationId();
    a.set_id(id);
    a.clear_circuits();
    for (int i = 0; i < plan.circuits_size(); ++i) {
      v1::Circuit* c = a.add_circuits();
      *c = plan.circuits(i);
      c->set_id(absl::StrCat(id, "-c", i + 1));
      c->set_allocation_id(id);
      // Every phase's circuits are stored, holding their ports; only the active phase's
      // are desired on the switch.
      c->set_state(c->phase() == a.active_phase() ? v1::CIRCUIT_STATE_PLANNED
                                                  : v1::CIRCUIT_STATE_INACTIVE);
    }
    // An id claimed by a transaction, or stored, is taken: another is asked for.
    if (pool_->Claim(id)) {
      absl::Status created = ctx_.store->CreateAllocation(a, caller.principal);
      if (created.ok()) {
        tenants_[id] = a.tenant();
        return created;
      }
      pool_->Unclaim(id);
      if (created.code() != absl::StatusCode::kAlreadyExists) return created;
    }
    if (attempt >= 3) {
      return absl::AlreadyExistsError(
          absl::StrCat("allocation id ", id, " is taken (", attempt + 1, " ids tried)"));
    }
  }
}

absl::StatusOr<scheduler::FabricSnapshot> Admission::Snapshot() {
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, inventory_->Current());
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, ctx_.store->ListCircuits({}));
  // An allocation that holds no circuit has ended (every live one holds its circuits from
  // its admission on): its tenant is forgotten, so the map stays the size of the live set.
  std::set<std::string> holding;
  for (const v1::Circuit& c : circuits) holding.insert(c.allocation_id());
  std::erase_if(tenants_, [&](const auto& entry) { return !holding.contains(entry.first); });
  std::vector<v1::Allocation> holders;  // Only id and tenant matter to the snapshot.
  for (const auto& [holder, tenant] : tenants_) {
    v1::Allocation& a = holders.emplace_back();
    a.set_id(holder);
    a.set_tenant(tenant);
  }
  return inventory->usability.WithCircuits(circuits, holders);
}

}  // namespace fleet::engine
