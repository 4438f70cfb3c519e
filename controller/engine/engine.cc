#include "controller/engine/engine.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wording.h"
#include "controller/engine/ranks.h"
#include "controller/engine/tenancy.h"
#include "fleet/v1/names.h"
#include "scheduler/fabric_view.h"
#include "scheduler/limits.h"

namespace fleet::engine {

Engine::Engine(EngineOptions options, store::Store* store,
               switch_registry::SwitchRegistry* switches, agent_registry::CommandSender* agents,
               const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      ctx_{options_, store, agents, clock,
           options_.metrics != nullptr ? *options_.metrics
                                       : metrics::ControllerMetrics::Discarded()},
      pool_(
          WorkerPool::Options{
              .max_workers =
                  options_.workers > 0
                      ? options_.workers
                      : std::max(32, 16 * static_cast<int>(std::thread::hardware_concurrency())),
              .max_queued = options_.max_queued_transactions},
          clock),
      inventory_(store),
      syncs_(clock,
             {.initial = options_.retry_initial,
              .max = options_.retry_max,
              .max_entries = options_.max_sync_queue,
              .jitter = options_.retry_jitter,
              .refused = [this] { ctx_.metrics.QueueRefused("sync"); }},
             [this] { background_.Wake(); }),
      trainer_(ctx_, &inventory_),
      programmers_(&inventory_, switches),
      admission_(ctx_, &pool_, &inventory_),
      parts_{ctx_, pool_, inventory_, syncs_, trainer_, programmers_, admission_, costs_},
      releaser_(parts_, &healer_),
      drainer_(parts_, &releaser_, &members_),
      members_(parts_),
      what_if_(parts_),
      reconciler_(parts_, &releaser_, &healer_),
      healer_(parts_, &members_),
      recovery_(parts_, &releaser_, &healer_, &reconciler_),
      monitor_(parts_, &recovery_) {
  // A sync that found its allocation held by a transaction runs as the transaction lets go.
  pool_.OnUnclaimed([this](const std::string& id) { recovery_.RunIfDue(id); });
}

Engine::~Engine() { Shutdown(); }

absl::Status Engine::Start() {
  absl::StatusOr<v1::ReconcileResponse> reconciled = reconciler_.ReconcileSwitches(
      "", options_.unknown_policy, /*dry_run=*/false, "fleetd", "start");
  if (!reconciled.ok()) {
    // An unreachable switch must not keep fleetd down: the periodic pass retries it.
    FLEET_LOG(WARNING) << "start-up reconciliation incomplete: " << reconciled.status();
  }
  if (absl::StatusOr<std::vector<v1::Allocation>> live = store_->ListAllocations({}); live.ok()) {
    admission_.RememberTenants(*live);
  }
  // A failure stored just before a crash reaches the circuits it hurts.
  recovery_.DegradeOnFailedParts();
  // DEGRADED and RELEASING allocations of an earlier run are synced at once (their agents
  // reconnect).
  recovery_.MarkUnsettled();
  next_reconcile_ = ctx_.clock->Now() + options_.reconcile_interval;
  std::function<absl::Duration()> until_next_retry;
  if (options_.wake_for_due_retries) {
    until_next_retry = [this] {
      const std::optional<absl::Time> next = syncs_.NextDue();
      return next ? *next - ctx_.clock->Now() : absl::InfiniteDuration();
    };
  }
  background_.Start(
      options_.tick, [this] { BackgroundPass(); }, std::move(until_next_retry));
  // Its own thread: a switch slow to answer must not hold up leases and retries.
  if (options_.monitor_interval > absl::ZeroDuration()) {
    monitor_loop_.Start(options_.monitor_interval, [this] {
      if (!pool_.stopping()) monitor_.Pass();
    });
  }
  return absl::OkStatus();
}

void Engine::Shutdown() {
  if (!pool_.Stop()) return;
  background_.Stop();
  monitor_loop_.Stop();
  pool_.WaitIdle();
  pool_.JoinWorkers();
}

void Engine::WaitIdleForTest() { pool_.WaitQuiet(); }

void Engine::BackgroundPass() {
  if (pool_.stopping()) return;  // Shutdown stops the pool before the loop.
  // Leases are looked at once a second: reading every live allocation each tick would load
  // the store for a precision no lease needs.
  if (ctx_.clock->Now() >= next_lease_check_) {
    next_lease_check_ = ctx_.clock->Now() + absl::Seconds(1);
    ExpireLeases();
  }
  recovery_.MarkFaulted();
  RunDueRetries();
  if (options_.reconcile_interval > absl::ZeroDuration() && ctx_.clock->Now() >= next_reconcile_) {
    next_reconcile_ = ctx_.clock->Now() + options_.reconcile_interval;
    absl::StatusOr<v1::ReconcileResponse> r = reconciler_.ReconcileSwitches(
        "", options_.unknown_policy, /*dry_run=*/false, "fleetd", "periodic");
    if (!r.ok()) {
      FLEET_LOG(WARNING) << "periodic reconciliation: " << r.status();
    }
    // Level-triggered: whatever is short of its intent is synced again, whatever was missed.
    recovery_.MarkUnsettled();
  }
}

std::map<std::string, Engine::SwitchQueue> Engine::SwitchQueuesForTest() {
  return programmers_.Queues();
}

// --- TopologyService ---

absl::StatusOr<v1::RequestTopologyResponse> Engine::RequestTopology(
    const v1::RequestTopologyRequest& request, const Caller& caller) {
  if (!pool_.HasRoom()) {
    ctx_.metrics.QueueRefused("transactions");
    return absl::ResourceExhaustedError(absl::StrCat(
        "the transaction queue is full (", Counted(options_.max_queued_transactions, "request"),
        " waiting for a worker); nothing was planned or stored: try again"));
  }
  ASSIGN_OR_RETURN(Admission::Admitted admitted, admission_.Admit(request, caller));
  if (!admitted.fresh) return std::move(admitted.response);
  ctx_.Fault("persisted");
  const v1::Allocation& stored = admitted.response.allocation();
  std::vector<v1::StageTiming> timings(stored.stage_timings().begin(),
                                       stored.stage_timings().end());
  pool_.Spawn(stored.id(), [this, id = stored.id(), timings = std::move(timings), stored] {
    parts_.Reconfigure(id, timings, {}, &stored);
  });
  return std::move(admitted.response);
}

absl::StatusOr<v1::Allocation> Engine::GetAllocation(const std::string& id, const Caller& caller) {
  return Authorized(*store_, id, caller);
}

absl::StatusOr<std::vector<v1::Allocation>> Engine::ListAllocations(
    const v1::ListAllocationsRequest& request, const Caller& caller) {
  ASSIGN_OR_RETURN(const store::AllocationFilter filter, ListFilter(request, caller));
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> all, store_->ListAllocations(filter));
  std::erase_if(all, [&](const v1::Allocation& a) { return !caller.ActsFor(a.tenant()); });
  return all;
}

absl::StatusOr<v1::Allocation> Engine::ReleaseTopology(const std::string& id,
                                                       const Caller& caller) {
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(*store_, id, caller));
  if (a.state() == v1::ALLOCATION_STATE_RELEASED) return a;
  // Waits for a running transaction of this allocation to reach a persisted end.
  RETURN_IF_ERROR(releaser_.ReleaseWhenFree(
      id, caller, caller.GiveUp(*ctx_.clock, MemberChanges::kClaimWait),
      v1::ALLOCATION_STATE_RELEASED, "",
      absl::StrCat("allocation ", id, " is still being reconfigured; try again"),
      "fleetd is stopping"));
  return store_->GetAllocation(id);
}

absl::StatusOr<absl::Time> Engine::KeepAlive(const std::string& id, const Caller& caller) {
  return releaser_.KeepAlive(id, caller);
}

absl::StatusOr<v1::ActivatePhaseResponse> Engine::ActivatePhase(
    const v1::ActivatePhaseRequest& request, const Caller& caller) {
  return members_.ActivatePhase(request, caller);
}

absl::StatusOr<v1::DetachDevicesResponse> Engine::DetachDevices(
    const v1::DetachDevicesRequest& request, const Caller& caller) {
  return members_.DetachDevices(request, caller);
}

absl::StatusOr<v1::GetRanksResponse> Engine::GetRanks(const v1::GetRanksRequest& request,
                                                      const Caller& caller) {
  ASSIGN_OR_RETURN(const v1::Allocation a, Authorized(*store_, request.id(), caller));
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, inventory_.Current());
  // Attach allocations of the tenant say which host a pooled member runs on.
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> tenants, store_->ListAllocations({a.tenant()}));
  std::erase_if(tenants,
                [](const v1::Allocation& t) { return !t.request().topology().has_attach(); });
  return RankOrder(a, request.phase(), inventory->site, tenants);
}

absl::StatusOr<v1::GetFabricResponse> Engine::GetFabric(const v1::GetFabricRequest& request,
                                                        const Caller& caller) {
  if (request.allocation().empty() && request.devices().empty()) {
    return absl::InvalidArgumentError(
        "allocation and devices are both empty: name an allocation, devices, or both");
  }
  if (!request.devices().empty()) {
    RETURN_IF_ERROR(scheduler::CheckFabricDeviceCount(request.devices_size(), "devices"));
  }
  scheduler::FabricQuery query;
  if (caller.tenant_scoped()) query.tenants = caller.tenants;
  query.devices.assign(request.devices().begin(), request.devices().end());
  query.max_switch_hops = request.max_switch_hops();
  if (!request.allocation().empty()) {
    RETURN_IF_ERROR(scheduler::CheckName("allocation", request.allocation()));
    ASSIGN_OR_RETURN(const v1::Allocation a, Authorized(*store_, request.allocation(), caller));
    if (a.state() == v1::ALLOCATION_STATE_FAILED || a.state() == v1::ALLOCATION_STATE_RELEASED) {
      return absl::FailedPreconditionError(
          absl::StrCat("allocation ", a.id(), " is ", v1::Name(a.state()), ": it holds no port"));
    }
    query.own_allocation = a.id();
    if (query.devices.empty()) {
      query.devices.assign(a.members().begin(), a.members().end());
      query.field = absl::StrCat("allocation ", a.id(), " members");
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, inventory_.Current());
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  // Every holder's tenant read from the store: admission's record of them is kept only where
  // this fleetd leads, and a follower answers reads too.
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> live, store_->ListAllocations({}));
  const scheduler::FabricSnapshot snapshot = inventory->usability.WithCircuits(circuits, live);
  ASSIGN_OR_RETURN(v1::GetFabricResponse out, scheduler::DescribeFabric(snapshot, query));
  for (v1::StageCost& cost : costs_.Recent()) *out.add_change_costs() = std::move(cost);
  return out;
}

absl::Status Engine::CheckWatch(const std::string& id, const std::string& tenant,
                                const Caller& caller) {
  return fleet::engine::CheckWatch(*store_, id, tenant, caller);
}

// --- AdminService ---

absl::StatusOr<v1::ReconcileResponse> Engine::Reconcile(const v1::ReconcileRequest& request,
                                                        const Caller& caller) {
  return reconciler_.Reconcile(request, caller);
}

absl::StatusOr<v1::DrainResponse> Engine::Drain(const v1::DrainRequest& request,
                                                const Caller& caller) {
  return drainer_.Drain(request, caller);
}

absl::Status Engine::Undrain(const v1::UndrainRequest& request, const Caller& caller) {
  return drainer_.Undrain(request, caller);
}

absl::StatusOr<v1::ReplaceMemberResponse> Engine::ReplaceMember(
    const v1::ReplaceMemberRequest& request, const Caller& caller) {
  return members_.ReplaceMember(request, caller);
}

absl::StatusOr<v1::WhatIfFailResponse> Engine::WhatIfFail(const v1::WhatIfFailRequest& request,
                                                          const Caller&) {
  return what_if_.Fail(request);
}

absl::StatusOr<v1::Device> Engine::SetDeviceHealth(const v1::SetDeviceHealthRequest& request,
                                                   const Caller& caller) {
  if (request.health() != v1::DEVICE_HEALTH_HEALTHY &&
      request.health() != v1::DEVICE_HEALTH_FAILED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "health: ", v1::Name(request.health()),
        " cannot be set; an operator marks a device healthy or failed (suspect is fleetd's)"));
  }
  RETURN_IF_ERROR(store_->SetDeviceHealth(request.device(), request.health(), request.reason(),
                                          caller.principal));
  if (request.health() == v1::DEVICE_HEALTH_FAILED) {
    recovery_.DeviceFailed(request.device(), request.reason());
  } else {
    recovery_.DeviceHealed(request.device());
  }
  return store_->GetDevice(request.device());
}

// --- Agents ---

void Engine::AgentConnected(const std::string& host, const std::vector<std::string>& serials) {
  recovery_.AgentConnected(host, serials);
}

void Engine::QuiesceIdlePorts(const std::vector<std::string>& serials) {
  recovery_.QuiesceIdlePorts(serials);
}

void Engine::LinksDown(const std::string& host, const std::vector<v1::LinkState>& links) {
  recovery_.LinksDown(host, links);
}

void Engine::AgentGone(const std::string& host, const std::vector<std::string>& serials,
                       const std::string& why) {
  recovery_.AgentGone(host, serials, why);
}

void Engine::ExpireLeases() { releaser_.ExpireLeases(); }

void Engine::RunDueRetries() { recovery_.RunDueRetries(); }

std::vector<store::PortHealth> Engine::MonitorSwitches() { return monitor_.Pass(); }

}  // namespace fleet::engine
