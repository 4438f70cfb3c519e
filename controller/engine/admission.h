// Admission: a request validated, planned by the scheduler on a snapshot of the store, and
// its intent persisted (the allocation PENDING, its circuits PLANNED or, for inactive
// phases, INACTIVE), holding the claim on it for its transaction.
//
// Optimistic: a request plans on a snapshot taken with no lock held, so requests plan in
// parallel, and its intent commits only if what the plan used is unchanged since:
// - no new holding (an admission's intent, a member change, an adopted cross-connect) has
//   committed on one of the O-NIC ports or trunks the plan uses, inactive phases included.
//   Every new holding commits under mu() and is logged here (Committed), so this is checked
//   in memory before the store is asked;
// - the inventory version is the one the plan was made on: no inventory, drain or health
//   change has committed (store::AllocationStore::CreateAllocation checks it with the write).
// Otherwise it plans again on what is stored now, kPlanAttempts plans in all, then fails
// ABORTED saying what it lost. Two requests racing for one port: one commits, the other plans
// around it or is refused; never both.
//
// mu(): new holdings commit one at a time, each logged with Committed before mu() is let go,
// so that a plan can be checked against every commit since its snapshot, and so that what acts
// on the ports no circuit holds (idle-port quiescing, under mu()) sees each commit whole. An
// admission holds it only for its check and write, never over its planning; nothing holding
// it waits for a switch. Lock order: engine.h.
#ifndef FLEET_CONTROLLER_ENGINE_ADMISSION_H_
#define FLEET_CONTROLLER_ENGINE_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/random/random.h"
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
  Admission(const EngineContext& ctx, WorkerPool* pool, InventoryCache* inventory);

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

  // How many plans one admission makes at most before it is refused ABORTED.
  static constexpr int kPlanAttempts = 4;

  // The fabric as the planner sees it now: inventory, port states, every desired circuit and
  // the live allocations' tenants, with the versions it was read at (what a commit of a plan
  // made on it is checked against). Needs no lock.
  struct Fabric {
    scheduler::FabricSnapshot snapshot;
    uint64_t inventory_version = 0;
    uint64_t holdings_version = 0;
  };
  absl::StatusOr<Fabric> Snapshot() ABSL_LOCKS_EXCLUDED(tenants_mu_);

  // Logs new holdings just committed under mu() by another part (a member change's new
  // circuits, an adopted cross-connect), so that a plan made before them is checked against
  // them. Admissions log their own.
  void Committed(const std::vector<v1::Circuit>& circuits) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  absl::StatusOr<absl::Duration> LeaseOf(const v1::RequestTopologyRequest& request) const;
  absl::StatusOr<Admitted> PlanAndPersist(const v1::RequestTopologyRequest& request,
                                          const Caller& caller, absl::Duration lease);
  // The allocation the tenant's request `request_id` made before, if any.
  absl::StatusOr<std::optional<v1::Allocation>> Earlier(const v1::RequestTopologyRequest& request);
  enum class Outcome { kCommitted, kEarlier, kPortTaken, kInventoryChanged };
  // Stores the planned allocation `a` under a fresh id, claimed, if the fabric it was planned
  // on still lets it (kCommitted); else writes nothing and says what changed. kEarlier, with
  // `earlier` set, when the same request (by request_id) committed meanwhile.
  absl::StatusOr<Outcome> Persist(v1::Allocation& a, const v1::Plan& plan, const Caller& caller,
                                  const Fabric& fabric, std::optional<v1::Allocation>& earlier)
      ABSL_LOCKS_EXCLUDED(mu_, tenants_mu_);
  // Whether a holding committed since `holdings_version` uses one of `footprint`'s ports or
  // trunks (or is too old to tell).
  bool TakenSince(uint64_t holdings_version, const std::set<std::string>& footprint) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(std::set<std::string> footprint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A snapshot and `request` planned on it, in a turn to plan (waited for until `deadline`:
  // DEADLINE_EXCEEDED).
  struct Planned {
    Fabric fabric;
    std::vector<scheduler::PlannedPhase> phases;
  };
  absl::StatusOr<Planned> Plan(const v1::RequestTopologyRequest& request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(plans_mu_);
  // The id for a new allocation: EngineOptions::new_allocation_id, or "a-" and 8 random hex
  // digits.
  std::string NewId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EngineContext& ctx_;
  WorkerPool* const pool_;
  InventoryCache* const inventory_;
  absl::Mutex mu_;
  absl::BitGen ids_ ABSL_GUARDED_BY(mu_);
  // Turns to plan (EngineOptions::parallel_plans): taken over a snapshot and its plan.
  absl::Mutex plans_mu_;
  int free_plans_ ABSL_GUARDED_BY(plans_mu_);
  // Bumped under mu_ as each new holding is logged; read without it by Snapshot, before
  // the circuits, so a snapshot holds every commit up to the version it notes.
  std::atomic<uint64_t> holdings_version_{0};
  // The O-NIC port sides ("onic/port tx|rx") and trunks ("trunk id") of the most recent commits of
  // new holdings (at most kHoldingsLogged), oldest first, by holdings version.
  static constexpr size_t kHoldingsLogged = 1024;
  std::deque<std::pair<uint64_t, std::set<std::string>>> holdings_ ABSL_GUARDED_BY(mu_);
  // Tenant of every live allocation (admitted, or found live at start): what planning needs
  // to keep tenants apart, without reading every allocation on each request. An entry is
  // made before its allocation's circuits commit, so a snapshot that reads them finds their
  // tenant. Snapshot forgets an entry that holds no circuit only if its commit ended before
  // the snapshot read the circuits (`committed_at` below the count it noted then).
  struct Tenant {
    std::string tenant;
    uint64_t committed_at = 0;  // kCommitting while its commit is under way.
  };
  static constexpr uint64_t kCommitting = UINT64_MAX;
  absl::Mutex tenants_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(tenants_mu_);
  uint64_t commits_ended_ ABSL_GUARDED_BY(tenants_mu_) = 1;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ADMISSION_H_
