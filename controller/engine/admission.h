// Admission: a request validated, planned by the scheduler on a snapshot of the store, and
// its intent persisted (the allocation PENDING, its circuits PLANNED or, for inactive
// phases, INACTIVE), holding the claim on it for its transaction.
//
// One admission at a time (mu()): the snapshot a plan is made on must still be true when its
// intent commits, or two requests could pick the same free port. Whatever else must not
// interleave with planning (a member change's plan, idle ports quiesced, a cross-connect
// adopted) holds mu() too. Lock order: mu() before any other lock of the engine.
#ifndef FLEET_CONTROLLER_ENGINE_ADMISSION_H_
#define FLEET_CONTROLLER_ENGINE_ADMISSION_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/engine/caller.h"
#include "controller/engine/engine_context.h"
#include "controller/engine/inventory_cache.h"
#include "controller/engine/worker_pool.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/request_plan.h"

namespace fleet::engine {

class Admission {
 public:
  Admission(const EngineContext& ctx, WorkerPool* pool, InventoryCache* inventory)
      : ctx_(ctx), pool_(pool), inventory_(inventory) {}

  absl::Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // Remembers the tenants of the allocations live at start.
  void RememberTenants(const std::vector<v1::Allocation>& live);

  struct Admitted {
    v1::RequestTopologyResponse response;
    // The intent was persisted now and its claim is held: its transaction is to run. False
    // for a dry run (the plan only) and for a retry of a request admitted before.
    bool fresh = false;
  };
  // Validates `request` (tenant, lease, the site's limits), plans it and, unless a dry run,
  // persists its intent.
  absl::StatusOr<Admitted> Admit(const v1::RequestTopologyRequest& request, const Caller& caller);

  // The fabric as the planner sees it now: inventory, port states, every desired circuit and
  // the live allocations' tenants.
  absl::StatusOr<scheduler::FabricSnapshot> Snapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  absl::StatusOr<absl::Duration> LeaseOf(const v1::RequestTopologyRequest& request) const;
  // Stores the planned allocation `a` under a fresh id, claimed.
  absl::Status Persist(v1::Allocation& a, const v1::Plan& plan, const Caller& caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Admitted> PlanAndPersist(const v1::RequestTopologyRequest& request,
                                          const Caller& caller, absl::Duration lease);

  const EngineContext& ctx_;
  WorkerPool* const pool_;
  InventoryCache* const inventory_;
  absl::Mutex mu_;
  // Tenant of every live allocation (admitted, or found live at start; Snapshot forgets one
  // that holds no circuit any more): what planning needs to keep tenants apart, without
  // reading every allocation on each request.
  std::map<std::string, std::string> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ADMISSION_H_
