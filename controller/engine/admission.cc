#include "controller/engine/admission.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "controller/engine/stage_timing.h"
#include "scheduler/limits.h"
#include "scheduler/planner.h"

namespace fleet::engine {
namespace {

// What a commit of `circuits` holds: the sending side of their sources' O-NIC ports, the
// receiving side of their destinations', and their trunks (as the planner holds them).
std::set<std::string> Footprint(const google::protobuf::RepeatedPtrField<v1::Circuit>& circuits) {
  std::set<std::string> held;
  for (const v1::Circuit& c : circuits) {
    held.insert(absl::StrCat(c.source().onic(), "/", c.source().port(), " tx"));
    held.insert(absl::StrCat(c.destination().onic(), "/", c.destination().port(), " rx"));
    for (const std::string& trunk : c.trunks()) held.insert(absl::StrCat("trunk ", trunk));
  }
  return held;
}

}  // namespace

Admission::Admission(const EngineContext& ctx, WorkerPool* pool, InventoryCache* inventory)
    : ctx_(ctx),
      pool_(pool),
      inventory_(inventory),
      free_plans_(ctx.options.parallel_plans > 0
                      ? ctx.options.parallel_plans
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

absl::StatusOr<Admission::Planned> Admission::Plan(const v1::RequestTopologyRequest& request,
                                                   absl::Time deadline) {
  {
    absl::MutexLock lock(&plans_mu_);
    if (!plans_mu_.AwaitWithDeadline(absl::Condition(
                                         +[](int* free) { return *free > 0; }, &free_plans_),
                                     deadline)) {
      return absl::DeadlineExceededError(
          "the request's deadline passed waiting for a turn to plan");
    }
    --free_plans_;
  }
  // The snapshot is taken in the turn, so that no waiting request holds one or lets it age.
  absl::StatusOr<Planned> planned = [&]() -> absl::StatusOr<Planned> {
    Planned p;
    ASSIGN_OR_RETURN(p.fabric, Snapshot());
    ASSIGN_OR_RETURN(p.phases, scheduler::PlanRequestPhases(p.fabric.snapshot, request));
    return p;
  }();
  absl::MutexLock lock(&plans_mu_);
  ++free_plans_;
  return planned;
}

void Admission::RememberTenants(const std::vector<v1::Allocation>& live) {
  absl::MutexLock lock(&tenants_mu_);
  for (const v1::Allocation& a : live) tenants_[a.id()] = {a.tenant(), 0};
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
  // A dry run commits nothing.
  ASSIGN_OR_RETURN(const Planned planned, Plan(request, caller.deadline));
  const std::vector<scheduler::PlannedPhase>& phases = planned.phases;
  Admitted admitted;
  *admitted.response.mutable_plan() = scheduler::CombinePhases(
      phases, request.initial_phase().empty() ? phases.front().name : request.initial_phase());
  return admitted;
}

absl::StatusOr<std::optional<v1::Allocation>> Admission::Earlier(
    const v1::RequestTopologyRequest& request) {
  return ctx_.store->FindRequest(request.tenant(), request.request_id());
}

absl::StatusOr<Admission::Admitted> Admission::PlanAndPersist(
    const v1::RequestTopologyRequest& request, const Caller& caller, absl::Duration lease) {
  const absl::Time plan_start = ctx_.clock->Now();
  Admitted admitted;
  v1::RequestTopologyResponse& response = admitted.response;
  std::optional<v1::Allocation> earlier;
  if (!request.request_id().empty()) {
    ASSIGN_OR_RETURN(earlier, Earlier(request));
  }
  for (int attempt = 1; !earlier.has_value(); ++attempt) {
    ASSIGN_OR_RETURN(const Planned planned, Plan(request, caller.deadline));
    const Fabric& fabric = planned.fabric;
    const std::vector<scheduler::PlannedPhase>& phases = planned.phases;
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
    // The plan stage spans every plan this admission made.
    *a.add_stage_timings() = StageTiming("plan", plan_start, persist_start - plan_start);
    ctx_.Fault("planned");
    ASSIGN_OR_RETURN(const Outcome outcome, Persist(a, response.plan(), caller, fabric, earlier));
    if (outcome == Outcome::kEarlier) break;
    if (outcome == Outcome::kCommitted) {
      *a.add_stage_timings() =
          StageTiming("persist", persist_start, ctx_.clock->Now() - persist_start);
      *response.mutable_allocation() = std::move(a);
      admitted.fresh = true;
      return admitted;
    }
    const bool port = outcome == Outcome::kPortTaken;
    if (attempt == kPlanAttempts) {
      ctx_.metrics.AdmissionConflict(port ? "port" : "inventory", "aborted");
      return absl::AbortedError(
          absl::StrCat("admission: ", kPlanAttempts,
                       " plans each lost what they used to a concurrent commit", " (the last: ",
                       port ? "a port or trunk it planned on was taken"
                            : "an inventory, drain or health change committed",
                       "); retry the request"));
    }
    ctx_.metrics.AdmissionConflict(port ? "port" : "inventory", "replanned");
  }
  response.clear_plan();
  *response.mutable_allocation() = *std::move(earlier);
  return admitted;  // A retry of a request admitted before.
}

absl::StatusOr<Admission::Outcome> Admission::Persist(v1::Allocation& a, const v1::Plan& plan,
                                                      const Caller& caller, const Fabric& fabric,
                                                      std::optional<v1::Allocation>& earlier) {
  std::set<std::string> footprint = Footprint(plan.circuits());
  absl::MutexLock admit(&mu_);
  // The same request, sent again before the first answer came, may have committed since this
  // one looked: under mu() the look and the write are one step.
  if (!a.request().request_id().empty()) {
    ASSIGN_OR_RETURN(earlier, Earlier(a.request()));
    if (earlier.has_value()) return Outcome::kEarlier;
  }
  if (TakenSince(fabric.holdings_version, footprint)) return Outcome::kPortTaken;
  for (int attempt = 0;; ++attempt) {
    const std::string id = NewId();
    a.set_id(id);
    a.clear_circuits();
    for (int i = 0; i < plan.circuits_size(); ++i) {
      v1::Circuit* c = a.add_circuits();
      *c = plan.circuits(i);
      c->set_id(absl::StrCat(id, "-c", i + 1));
      c->set_allocation_id(id);
      // Every phase's circuits are stored, holding their ports; those of the active phase
      // and of a prepared one are desired on the switch (PLANNED), the others INACTIVE, as
      // CombinePhases says.
    }
    // An id claimed by a transaction, stored, or known live is taken: another is asked for.
    if (pool_->Claim(id)) {
      bool fresh;
      {
        absl::MutexLock lock(&tenants_mu_);
        fresh = tenants_.try_emplace(id, Tenant{a.tenant(), kCommitting}).second;
      }
      absl::Status created =
          fresh ? ctx_.store->CreateAllocation(a, caller.principal, fabric.inventory_version)
                : absl::AlreadyExistsError(absl::StrCat("allocation ", id, " is live"));
      if (fresh) {
        absl::MutexLock lock(&tenants_mu_);
        if (created.ok()) {
          tenants_[id].committed_at = commits_ended_++;
        } else {
          tenants_.erase(id);
        }
      }
      if (created.ok()) {
        Log(std::move(footprint));
        return Outcome::kCommitted;
      }
      pool_->Unclaim(id);
      if (absl::IsAborted(created)) return Outcome::kInventoryChanged;
      if (absl::IsFailedPrecondition(created)) {
        // The store names the circuit in the way, which may be another tenant's: logged, not
        // returned. (The check above makes this a disagreement between the inventory and
        // the stored circuits, such as a port re-cabled under a circuit.)
        FLEET_LOG(WARNING) << "admission of " << id << " refused by the store: " << created;
        return absl::FailedPreconditionError(
            "a port or cross-connect of the plan is already in a desired circuit (the stored "
            "circuits and the inventory disagree; run fleetctl reconcile)");
      }
      if (!absl::IsAlreadyExists(created)) return created;
    }
    if (attempt >= 3) {
      return absl::AlreadyExistsError(
          absl::StrCat("allocation id ", id, " is taken (", attempt + 1, " ids tried)"));
    }
  }
}

std::string Admission::NewId() {
  if (ctx_.options.new_allocation_id) return ctx_.options.new_allocation_id();
  return absl::StrFormat("a-%08x", absl::Uniform<uint32_t>(ids_));
}

void Admission::Committed(const std::vector<v1::Circuit>& circuits) {
  Log(Footprint({circuits.begin(), circuits.end()}));
}

void Admission::Log(std::set<std::string> footprint) {
  const uint64_t version = holdings_version_.load() + 1;
  holdings_.emplace_back(version, std::move(footprint));
  if (holdings_.size() > kHoldingsLogged) holdings_.pop_front();
  holdings_version_.store(version);
}

bool Admission::TakenSince(uint64_t holdings_version,
                           const std::set<std::string>& footprint) const {
  if (holdings_version == holdings_version_.load()) return false;
  // Older than the log reaches: what came between is not known, so it may be taken.
  if (holdings_.empty() || holdings_.front().first > holdings_version + 1) return true;
  for (auto it = holdings_.rbegin(); it != holdings_.rend() && it->first > holdings_version; ++it) {
    for (const std::string& held : it->second) {
      if (footprint.contains(held)) return true;
    }
  }
  return false;
}

absl::StatusOr<Admission::Fabric> Admission::Snapshot() {
  Fabric fabric;
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, inventory_->Current());
  fabric.inventory_version = inventory->version;
  fabric.holdings_version = holdings_version_.load();
  uint64_t ended_before_read;
  {
    absl::MutexLock lock(&tenants_mu_);
    ended_before_read = commits_ended_;
  }
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, ctx_.store->ListCircuits({}));
  // An allocation that holds no circuit has ended (every live one holds its circuits from
  // its admission on): its tenant is forgotten, so the map stays the size of the live set.
  std::set<std::string> holding;
  for (const v1::Circuit& c : circuits) holding.insert(c.allocation_id());
  std::vector<v1::Allocation> holders;  // Only id and tenant matter to the snapshot.
  {
    absl::MutexLock lock(&tenants_mu_);
    std::erase_if(tenants_, [&](const auto& entry) {
      return entry.second.committed_at < ended_before_read && !holding.contains(entry.first);
    });
    for (const auto& [holder, t] : tenants_) {
      v1::Allocation& a = holders.emplace_back();
      a.set_id(holder);
      a.set_tenant(t.tenant);
    }
  }
  fabric.snapshot = inventory->usability.WithCircuits(circuits, holders);
  return fabric;
}

}  // namespace fleet::engine
