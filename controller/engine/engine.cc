#include "controller/engine/engine.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/base/call_once.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "controller/engine/stage_timing.h"
#include "fleet/v1/names.h"
#include "scheduler/circuit_diff.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/limits.h"
#include "scheduler/planner.h"
#include "scheduler/request_plan.h"

namespace fleet::engine {
namespace {

// The reason of a release the lease ran out for; metrics tell it from requested ones by it.
constexpr char kLeaseExpired[] = "lease expired";
// How long a transaction lets the commands it handed to the agents go out on their streams
// before it commits the state they belong to: on a busy host the commit would otherwise
// hold the CPU the streams' writers need, and the agents would start late. A stuck stream
// costs this once.
constexpr absl::Duration kLetCommandsLeave = absl::Milliseconds(2);

std::string LinkName(const v1::Circuit& c) {
  return absl::StrCat(PortName(c.source()), " -> ", PortName(c.destination()));
}

std::vector<v1::Circuit> LiveCircuits(const v1::Allocation& a) {
  std::vector<v1::Circuit> out;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.state() != v1::CIRCUIT_STATE_INACTIVE) out.push_back(c);
  }
  return out;
}

// The command that takes O-NIC `serial`'s port `port` out of service.
agents::AddressedCommand QuiesceCommand(const std::string& serial, uint32_t port) {
  agents::AddressedCommand cmd;
  cmd.onic_serial = serial;
  cmd.command.mutable_quiesce()->set_onic_serial(serial);
  cmd.command.mutable_quiesce()->set_port(port);
  return cmd;
}

bool SameEnd(const v1::OnicPortRef& a, const v1::OnicPortRef& b) {
  return a.onic() == b.onic() && a.port() == b.port();
}

// Marks each of `circuits` ACTIVE, or DEGRADED with its reason when it is in `failed`
// (circuit id → why); returns the reasons, in circuit order.
std::vector<std::string> RecordRetrain(const std::vector<v1::Circuit>& circuits,
                                       const std::map<std::string, std::string>& failed,
                                       store::AllocationUpdate& update) {
  std::vector<std::string> reasons;
  for (const v1::Circuit& c : circuits) {
    auto f = failed.find(c.id());
    if (f == failed.end()) {
      update.circuits[c.id()] = {v1::CIRCUIT_STATE_ACTIVE, ""};
    } else {
      update.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED, f->second};
      reasons.push_back(f->second);
    }
  }
  return reasons;
}

bool Ended(v1::AllocationState s) {
  return s == v1::ALLOCATION_STATE_FAILED || s == v1::ALLOCATION_STATE_RELEASED;
}

}  // namespace

Caller Caller::FromPrincipal(const std::string& principal) {
  Caller caller;
  caller.principal = principal;
  if (absl::StartsWith(principal, "job:")) caller.tenant = principal.substr(4);
  return caller;
}

Engine::Engine(EngineOptions options, store::Store* store, fabric::SwitchRegistry* switches,
               agents::CommandSender* agents, const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      switches_(switches),
      agents_(agents),
      clock_(clock),
      metrics_(options_.metrics != nullptr ? *options_.metrics
                                           : metrics::ControllerMetrics::Discarded()) {}

Engine::~Engine() { Shutdown(); }

absl::Status Engine::Start() {
  absl::StatusOr<v1::ReconcileResponse> reconciled =
      ReconcileSwitches("", options_.unknown_policy, /*dry_run=*/false, "fleetd", "start");
  if (!reconciled.ok()) {
    // An unreachable switch must not keep fleetd down: the periodic pass retries it.
    FLEET_LOG(WARNING) << "start-up reconciliation incomplete: " << reconciled.status();
  }
  if (absl::StatusOr<std::vector<v1::Allocation>> live = store_->ListAllocations({}); live.ok()) {
    absl::MutexLock admit(&admit_mu_);
    for (const v1::Allocation& a : *live) tenants_[a.id()] = a.tenant();
  }
  // DEGRADED allocations of an earlier run are retried at once (their agents reconnect).
  if (absl::StatusOr<std::vector<v1::Allocation>> degraded =
          store_->ListAllocations({"", v1::ALLOCATION_STATE_DEGRADED, false});
      degraded.ok()) {
    absl::MutexLock lock(&mu_);
    for (const v1::Allocation& a : *degraded) {
      retries_[a.id()] = Retry{.due = clock_->Now(), .backoff = options_.retry_initial};
    }
  }
  absl::MutexLock lock(&mu_);
  started_ = true;
  next_reconcile_ = clock_->Now() + options_.reconcile_interval;
  background_ = std::thread([this] { BackgroundLoop(); });
  return absl::OkStatus();
}

void Engine::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    changed_.SignalAll();
    background_wake_.SignalAll();
  }
  if (background_.joinable()) background_.join();
  WaitIdle();
  std::list<std::unique_ptr<Worker>> workers;
  {
    absl::MutexLock lock(&mu_);
    task_queued_.SignalAll();  // Idle workers leave.
    workers.swap(workers_);
  }
  for (auto& w : workers) w->thread.join();
}

bool Engine::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void Engine::WaitIdle() {
  absl::MutexLock lock(&mu_);
  while (running_ > 0) changed_.Wait(&mu_);
}

void Engine::BackgroundLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_) background_wake_.WaitWithTimeout(&mu_, options_.tick);
      if (stopping_) return;
    }
    // Leases are looked at once a second: reading every live allocation each tick would load
    // the store for a precision no lease needs.
    bool leases = false;
    {
      absl::MutexLock lock(&mu_);
      if (clock_->Now() >= next_lease_check_) {
        leases = true;
        next_lease_check_ = clock_->Now() + absl::Seconds(1);
      }
    }
    if (leases) ExpireLeases();
    RunDueRetries();
    bool reconcile = false;
    {
      absl::MutexLock lock(&mu_);
      if (options_.reconcile_interval > absl::ZeroDuration() && clock_->Now() >= next_reconcile_) {
        reconcile = true;
        next_reconcile_ = clock_->Now() + options_.reconcile_interval;
      }
    }
    if (reconcile) {
      absl::StatusOr<v1::ReconcileResponse> r =
          ReconcileSwitches("", options_.unknown_policy, /*dry_run=*/false, "fleetd", "periodic");
      if (!r.ok()) {
        FLEET_LOG(WARNING) << "periodic reconciliation: " << r.status();
      }
    }
  }
}

// --- Claims and transaction threads ---

bool Engine::Claim(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return claimed_.insert(id).second;
}

bool Engine::ClaimSettled(const std::string& id, absl::Time deadline) {
  // A change asked for while the allocation is READY or DEGRADED (a client acting on what it
  // was told) is not refused for a claim it cannot see: the transaction that stored that
  // state holds the claim for its last steps, a retry while its links retrain, a lease check
  // or a reconciliation pass while it reads the switches. Each lets go within its own
  // timeouts; kClaimWait only bounds a wait on something gone wrong.
  const absl::Time give_up = std::min(absl::Now() + kClaimWait, deadline);
  while (!Claim(id)) {
    absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
    if (!a.ok() ||
        (a->state() != v1::ALLOCATION_STATE_READY && a->state() != v1::ALLOCATION_STATE_DEGRADED)) {
      return false;
    }
    absl::MutexLock lock(&mu_);
    if (stopping_ || absl::Now() >= give_up) return false;
    // Released claims signal changed_; the deadline bounds a wake-up for another reason.
    if (claimed_.contains(id)) changed_.WaitWithDeadline(&mu_, give_up);
  }
  return true;
}

void Engine::Unclaim(const std::string& id) {
  absl::MutexLock lock(&mu_);
  claimed_.erase(id);
  changed_.SignalAll();
}

bool Engine::Spawn(const std::string& id, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    // Shutdown is joining the workers: a task queued now might never run. What the caller
    // persisted is resumed at the next start.
    claimed_.erase(id);
    changed_.SignalAll();
    return false;
  }
  // Workers that lingered and left are joined here; each is past its last touch of the engine.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  ++running_;
  tasks_.push_back({id, std::move(fn)});
  if (static_cast<size_t>(idle_workers_) >= tasks_.size()) {
    task_queued_.Signal();
    return true;
  }
  auto worker = std::make_unique<Worker>();
  Worker* w = worker.get();
  w->thread = std::thread([this, w] {
    WorkerLoop();
    w->done.store(true);
  });
  workers_.push_back(std::move(worker));
  return true;
}

void Engine::WorkerLoop() {
  // A worker idle this long leaves; a burst of transactions does not keep its threads for ever.
  constexpr absl::Duration kLinger = absl::Seconds(10);
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_workers_;
    const absl::Time give_up = absl::Now() + kLinger;
    while (tasks_.empty() && !stopping_ && absl::Now() < give_up) {
      task_queued_.WaitWithDeadline(&mu_, give_up);
    }
    --idle_workers_;
    // Queued tasks run even while stopping: Shutdown waits for them (running_).
    if (tasks_.empty()) return;
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task.fn();
    task.fn = nullptr;  // Its captures go before the claim is dropped.
    mu_.Lock();
    claimed_.erase(task.id);
    --running_;
    changed_.SignalAll();
  }
}

void Engine::Fault(const std::string& point) {
  if (options_.fault_point) options_.fault_point(point);
}

void Engine::Record(const std::string& kind, const std::string& object_kind,
                    const std::string& object_id, v1::EventSeverity severity,
                    const std::string& principal, const std::string& message) {
  v1::Event event;
  event.set_kind(kind);
  event.set_object_kind(object_kind);
  event.set_object_id(object_id);
  event.set_severity(severity);
  event.set_principal(principal);
  event.set_message(message);
  if (absl::Status s = store_->AppendEvent(event); !s.ok()) {
    FLEET_LOG(ERROR) << "cannot record event " << kind << " for " << object_kind << " " << object_id
                     << ": " << s;
  }
}

absl::StatusOr<v1::Allocation> Engine::Update(const store::AllocationUpdate& update,
                                              const std::string& principal) {
  absl::StatusOr<v1::Allocation> a = store_->UpdateAllocation(update, principal);
  if (!a.ok()) {
    FLEET_LOG(ERROR) << "cannot record allocation " << update.id << ": " << a.status();
  }
  return a;
}

std::string Engine::NewAllocationId() {
  static absl::Mutex mu;
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("a-%08x", absl::Uniform<uint32_t>(*gen));
}

absl::StatusOr<SwitchProgrammer*> Engine::Programmer(const std::string& switch_id) {
  // From the cached inventory, not a database read on the way to the switch: a change of the
  // switch's address is an inventory change, and reloads the cache.
  ASSIGN_OR_RETURN(std::shared_ptr<const Fabric> fabric, CurrentFabric());
  auto sw = absl::c_find_if(fabric->site.switches(),
                            [&](const v1::Switch& s) { return s.id() == switch_id; });
  if (sw == fabric->site.switches().end()) {
    return absl::NotFoundError(absl::StrCat("switch ", switch_id, " not found"));
  }
  ASSIGN_OR_RETURN(switches::OpticalSwitch * driver, switches_->Driver(*sw));
  absl::MutexLock lock(&mu_);
  auto& programmer = programmers_[switch_id];
  // A rebuilt driver (the switch's address changed) gets a fresh queue.
  if (programmer == nullptr || programmer_drivers_[switch_id] != driver) {
    if (programmer != nullptr) retired_programmers_.push_back(std::move(programmer));
    programmer = std::make_unique<SwitchProgrammer>(switch_id, driver);
    programmer_drivers_[switch_id] = driver;
  }
  return programmer.get();
}

std::map<std::string, Engine::SwitchQueue> Engine::SwitchQueues() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, SwitchQueue> out;
  for (const auto& [id, p] : programmers_) out[id] = {p->batches(), p->queued()};
  return out;
}

absl::StatusOr<std::shared_ptr<const Engine::Fabric>> Engine::CurrentFabric() {
  // The version is read before the inventory: a change committed meanwhile bumps it again,
  // and the next call reloads.
  const uint64_t version = store_->InventoryVersion();
  {
    absl::MutexLock lock(&mu_);
    if (fabric_ != nullptr && fabric_->version == version) return fabric_;
  }
  auto fabric = std::make_shared<Fabric>();
  fabric->version = version;
  ASSIGN_OR_RETURN(fabric->site, store_->LoadInventory());
  ASSIGN_OR_RETURN(fabric->ports, store_->ListPorts(""));
  for (const v1::Onic& o : fabric->site.onics()) fabric->serials[o.id()] = o.serial();
  fabric->usability = scheduler::FabricSnapshot::Build(fabric->site, fabric->ports, {}, {});
  absl::MutexLock lock(&mu_);
  fabric_ = fabric;
  return fabric_;
}

absl::StatusOr<std::string> Engine::SerialOf(const std::string& onic) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Fabric> fabric, CurrentFabric());
  auto it = fabric->serials.find(onic);
  if (it == fabric->serials.end())
    return absl::NotFoundError(absl::StrCat("onic ", onic, " not found"));
  return it->second;
}

// --- Authorization ---

absl::StatusOr<v1::Allocation> Engine::Authorized(const std::string& id, const Caller& caller) {
  if (id.empty()) return absl::InvalidArgumentError("id is empty");
  ASSIGN_OR_RETURN(v1::Allocation a, store_->GetAllocation(id));
  if (!caller.operator_role() && a.tenant() != caller.tenant) {
    return absl::PermissionDeniedError(
        absl::StrCat("allocation ", id, " does not belong to tenant ", caller.tenant));
  }
  return a;
}

absl::Status Engine::CheckWatch(const std::string& id, const std::string& tenant,
                                const Caller& caller) {
  if (id.empty() == tenant.empty()) {
    return absl::InvalidArgumentError("name exactly one of id and tenant to watch");
  }
  if (!id.empty()) return Authorized(id, caller).status();
  if (!caller.operator_role() && tenant != caller.tenant) {
    return absl::PermissionDeniedError(
        absl::StrCat("tenant ", caller.tenant, " may not watch tenant ", tenant));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Allocation> Engine::GetAllocation(const std::string& id, const Caller& caller) {
  return Authorized(id, caller);
}

absl::StatusOr<std::vector<v1::Allocation>> Engine::ListAllocations(
    const v1::ListAllocationsRequest& request, const Caller& caller) {
  store::AllocationFilter filter{request.tenant(), request.state(), request.include_released()};
  if (!caller.operator_role()) {
    if (!filter.tenant.empty() && filter.tenant != caller.tenant) {
      return absl::PermissionDeniedError(
          absl::StrCat("tenant ", caller.tenant, " may not list tenant ", filter.tenant));
    }
    filter.tenant = caller.tenant;
  }
  return store_->ListAllocations(filter);
}

// --- Admission ---

absl::StatusOr<v1::RequestTopologyResponse> Engine::RequestTopology(
    const v1::RequestTopologyRequest& original, const Caller& caller) {
  v1::RequestTopologyRequest request = original;
  if (request.tenant().empty()) request.set_tenant(caller.tenant);
  if (request.tenant().empty()) return absl::InvalidArgumentError("tenant is empty");
  if (!caller.operator_role() && request.tenant() != caller.tenant) {
    return absl::PermissionDeniedError(absl::StrCat(
        "caller ", caller.principal, " may not request for tenant ", request.tenant()));
  }
  absl::Duration lease = options_.default_lease;
  if (request.has_lease()) {
    lease = FromProtoDuration(request.lease());
    if (lease < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("lease: ", absl::FormatDuration(lease), " is negative"));
    }
    if (lease == absl::ZeroDuration()) lease = options_.default_lease;
    if (lease > options_.max_lease) {
      return absl::InvalidArgumentError(absl::StrCat("lease: ", absl::FormatDuration(lease),
                                                     " is longer than the maximum ",
                                                     absl::FormatDuration(options_.max_lease)));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("fleetd is stopping");
  }
  {
    // A request no site like this one could hold is refused before it waits for admission.
    ASSIGN_OR_RETURN(std::shared_ptr<const Fabric> fabric, CurrentFabric());
    RETURN_IF_ERROR(scheduler::CheckRequestLimits(fabric->usability, request));
  }

  v1::RequestTopologyResponse response;
  if (request.dry_run()) {
    // A dry run commits nothing, so it plans outside admission and holds up no one.
    std::optional<scheduler::FabricSnapshot> snapshot;
    {
      absl::MutexLock admit(&admit_mu_);
      ASSIGN_OR_RETURN(snapshot, Snapshot());
    }
    ASSIGN_OR_RETURN(const std::vector<scheduler::PlannedPhase> phases,
                     scheduler::PlanRequestPhases(*snapshot, request));
    *response.mutable_plan() = scheduler::CombinePhases(
        phases, request.initial_phase().empty() ? phases.front().name : request.initial_phase());
    return response;
  }
  std::string id;
  {
    // One admission at a time: the snapshot a plan is made on must still be true when its
    // intent commits, or two requests could pick the same free port.
    absl::MutexLock admit(&admit_mu_);
    const absl::Time plan_start = clock_->Now();
    if (!request.request_id().empty()) {
      ASSIGN_OR_RETURN(std::vector<v1::Allocation> mine,
                       store_->ListAllocations({request.tenant(), {}, true}));
      for (v1::Allocation& a : mine) {
        if (a.request().request_id() == request.request_id()) {
          *response.mutable_allocation() = std::move(a);
          return response;  // A retry of a request already admitted.
        }
      }
    }
    ASSIGN_OR_RETURN(const scheduler::FabricSnapshot snapshot, Snapshot());
    ASSIGN_OR_RETURN(const std::vector<scheduler::PlannedPhase> phases,
                     scheduler::PlanRequestPhases(snapshot, request));
    const std::string initial =
        request.initial_phase().empty() ? phases.front().name : request.initial_phase();
    *response.mutable_plan() = scheduler::CombinePhases(phases, initial);
    const absl::Time persist_start = clock_->Now();

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
    *a.mutable_lease_expires() = ToProtoTime(clock_->Now() + lease);
    *a.add_stage_timings() = StageTiming("plan", plan_start, persist_start - plan_start);
    for (int attempt = 0;; ++attempt) {
      id = NewAllocationId();
      a.set_id(id);
      a.clear_circuits();
      for (int i = 0; i < response.plan().circuits_size(); ++i) {
        v1::Circuit* c = a.add_circuits();
        *c = response.plan().circuits(i);
        c->set_id(absl::StrCat(id, "-c", i + 1));
        c->set_allocation_id(id);
        // Every phase's circuits are stored, holding their ports; only the active phase's
        // are desired on the switch.
        c->set_state(c->phase() == a.active_phase() ? v1::CIRCUIT_STATE_PLANNED
                                                    : v1::CIRCUIT_STATE_INACTIVE);
      }
      if (!Claim(id)) continue;
      absl::Status created = store_->CreateAllocation(a, caller.principal);
      if (created.ok()) {
        tenants_[id] = a.tenant();
        break;
      }
      Unclaim(id);
      if (created.code() != absl::StatusCode::kAlreadyExists || attempt > 3) return created;
    }
    *a.add_stage_timings() = StageTiming("persist", persist_start, clock_->Now() - persist_start);
    *response.mutable_allocation() = std::move(a);
  }
  Fault("persisted");
  std::vector<v1::StageTiming> admitted(response.allocation().stage_timings().begin(),
                                        response.allocation().stage_timings().end());
  Spawn(id, [this, id, admitted = std::move(admitted), stored = response.allocation()] {
    Reconfigure(id, admitted, {}, &stored);
  });
  return response;
}

absl::StatusOr<scheduler::FabricSnapshot> Engine::Snapshot() {
  ASSIGN_OR_RETURN(std::shared_ptr<const Fabric> fabric, CurrentFabric());
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
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
  return fabric->usability.WithCircuits(circuits, holders);
}

// --- The transaction ---

absl::Status Engine::Quiesce(const std::vector<v1::Circuit>& circuits, const std::string& id,
                             const std::function<void()>& meanwhile) {
  std::vector<agents::AddressedCommand> commands;
  std::vector<std::string> names;
  std::vector<std::string> unmanaged;
  absl::Status addressed = absl::OkStatus();
  if (agents_ != nullptr) {
    std::set<std::pair<std::string, uint32_t>> ports;
    for (const v1::Circuit& c : circuits) {
      // A left-behind removal whose end is a trunk has no O-NIC port there.
      if (!c.source().onic().empty()) ports.insert({c.source().onic(), c.source().port()});
      if (!c.destination().onic().empty()) {
        ports.insert({c.destination().onic(), c.destination().port()});
      }
    }
    for (const auto& [onic_id, port] : ports) {
      absl::StatusOr<std::string> serial = SerialOf(onic_id);
      if (!serial.ok()) {
        addressed = serial.status();
        break;
      }
      if (!agents_->HasOwner(*serial)) {
        unmanaged.push_back(absl::StrCat(onic_id, "/", port));
        continue;
      }
      // Out of service already: a port in no circuit is kept quiesced (QuiesceIdlePorts), and
      // a released circuit's port stays quiesced until retrained.
      if (agents_->KnownQuiesced(*serial, port)) continue;
      commands.push_back(QuiesceCommand(*serial, port));
      names.push_back(absl::StrCat(onic_id, "/", port));
    }
  }
  if (!addressed.ok()) return addressed;
  std::vector<absl::StatusOr<v1::CommandResult>> results;
  if (!commands.empty()) {
    std::unique_ptr<agents::SentCommands> sent =
        agents_->Send(std::move(commands), clock_->Now() + options_.quiesce_timeout);
    agents_->AwaitWritten(*sent, kLetCommandsLeave);
    if (meanwhile) meanwhile();
    results = agents_->Await(std::move(sent));
  }
  if (!unmanaged.empty()) {
    Record("allocation.quiesce_skipped", "allocation", id, v1::EVENT_SEVERITY_WARNING, "fleetd",
           absl::StrCat("allocation ", id, ": no connected agent to quiesce ",
                        absl::StrJoin(unmanaged, ", ")));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      // The agent went away mid-command: nothing to protect on a host we cannot reach.
      continue;
    }
    if (results[i]->code() != 0) {
      return absl::FailedPreconditionError(absl::StrCat("the agent refused to quiesce O-NIC port ",
                                                        names[i], ": ", results[i]->message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::Program(const std::vector<v1::Circuit>& removes,
                             const std::vector<v1::Circuit>& adds, absl::Duration* program_time,
                             absl::Duration* verify_time, bool* retried,
                             const std::function<void()>& going) {
  std::map<std::string, switches::CrossConnectBatch> by_switch;
  for (const auto& [circuits, remove] : {std::pair{&removes, true}, std::pair{&adds, false}}) {
    for (const v1::Circuit& c : *circuits) {
      for (const v1::CrossConnect& x : c.cross_connects()) {
        switches::CrossConnectBatch& b = by_switch[x.switch_id()];
        (remove ? b.remove : b.add).push_back({x.ingress(), x.egress()});
      }
    }
  }
  // Every switch is found before any is touched, then the switches program at once: a circuit
  // across a trunk waits for the slower switch, not for the sum of both.
  std::vector<std::pair<SwitchProgrammer*, const switches::CrossConnectBatch*>> parts;
  for (const auto& [switch_id, batch] : by_switch) {
    absl::StatusOr<SwitchProgrammer*> programmer = Programmer(switch_id);
    if (!programmer.ok()) {
      return absl::Status(programmer.status().code(),
                          absl::StrCat("switch ", switch_id, ": ", programmer.status().message()));
    }
    parts.push_back({*programmer, &batch});
  }
  std::vector<ProgramOutcome> outcomes(parts.size());
  {
    absl::once_flag first_going;
    auto part_going = [&] {
      if (going) absl::call_once(first_going, going);
    };
    std::vector<std::thread> others;
    for (size_t i = 1; i < parts.size(); ++i) {
      others.emplace_back(
          [&, i] { outcomes[i] = parts[i].first->Program(*parts[i].second, part_going); });
    }
    if (!parts.empty()) outcomes[0] = parts[0].first->Program(*parts[0].second, part_going);
    for (std::thread& t : others) t.join();
  }
  std::vector<std::pair<SwitchProgrammer*, switches::CrossConnectBatch>> done;
  absl::Status failure;
  auto switch_id = by_switch.begin();
  for (size_t i = 0; i < parts.size(); ++i, ++switch_id) {
    const ProgramOutcome& outcome = outcomes[i];
    if (program_time) *program_time = std::max(*program_time, outcome.program_time);
    if (verify_time) *verify_time = std::max(*verify_time, outcome.verify_time);
    if (retried) *retried = *retried || outcome.retried;
    if (outcome.status.ok()) {
      done.push_back({parts[i].first, *parts[i].second});
      continue;
    }
    std::string message = absl::StrCat("switch ", switch_id->first, ": ", outcome.status.message());
    if (outcome.rolled_back) absl::StrAppend(&message, " (rolled back)");
    if (!outcome.rollback_error.ok())
      absl::StrAppend(&message, "; ", outcome.rollback_error.message());
    if (failure.ok()) {
      failure = absl::Status(outcome.status.code(), message);
    } else {
      failure = absl::Status(failure.code(), absl::StrCat(failure.message(), "; ", message));
    }
  }
  if (failure.ok()) return failure;
  // Undo the switches that took their part, so the fabric is as it was before the request.
  for (auto& [programmer, batch] : done) {
    switches::CrossConnectBatch undo;
    undo.remove = batch.add;
    undo.add = batch.remove;
    ProgramOutcome undone = programmer->Program(undo);
    if (!undone.status.ok()) {
      failure =
          absl::Status(failure.code(),
                       absl::StrCat(failure.message(),
                                    "; undoing another switch failed: ", undone.status.message()));
    }
  }
  return failure;
}

std::map<std::string, std::string> Engine::Retrain(const std::vector<v1::Circuit>& circuits,
                                                   bool check_first) {
  if (check_first && agents_ != nullptr) {
    // Ask before retraining: a link that is up with its expected peer carries traffic.
    std::vector<agents::AddressedCommand> reads;
    std::vector<const v1::Circuit*> asked;
    std::vector<std::string> expected;
    for (const v1::Circuit& c : circuits) {
      absl::StatusOr<std::string> dst = SerialOf(c.destination().onic());
      absl::StatusOr<std::string> src = SerialOf(c.source().onic());
      if (!dst.ok() || !src.ok() || !agents_->HasOwner(*dst)) continue;
      agents::AddressedCommand& cmd = reads.emplace_back();
      cmd.onic_serial = *dst;
      cmd.command.mutable_read_port()->set_onic_serial(*dst);
      cmd.command.mutable_read_port()->set_port(c.destination().port());
      asked.push_back(&c);
      expected.push_back(absl::StrCat(*src, "/", c.source().port()));
    }
    std::vector<absl::StatusOr<v1::CommandResult>> states =
        agents_->SendCommands(std::move(reads), clock_->Now() + options_.quiesce_timeout);
    std::set<std::string> up;
    for (size_t i = 0; i < states.size(); ++i) {
      if (states[i].ok() && states[i]->code() == 0 &&
          states[i]->link().status() == v1::LINK_STATUS_UP &&
          states[i]->link().peer_seen() == expected[i]) {
        up.insert(asked[i]->id());
      }
    }
    std::vector<v1::Circuit> down;
    for (const v1::Circuit& c : circuits) {
      if (!up.contains(c.id())) down.push_back(c);
    }
    return Retrain(down, /*check_first=*/false);
  }
  std::vector<const v1::Circuit*> all;
  for (const v1::Circuit& c : circuits) all.push_back(&c);
  std::map<std::string, std::string> failed;
  FinishRetrain(StartRetrain(all, /*armed=*/false), failed);
  return failed;
}

Engine::Training Engine::StartRetrain(const std::vector<const v1::Circuit*>& circuits, bool armed,
                                      std::vector<const v1::Circuit*>* unarmed) {
  Training training;
  std::vector<agents::AddressedCommand> commands;
  for (const v1::Circuit* c : circuits) {
    absl::StatusOr<std::string> dst = SerialOf(c->destination().onic());
    absl::StatusOr<std::string> src = SerialOf(c->source().onic());
    if (armed && (options_.armed_light_wait <= absl::ZeroDuration() || !dst.ok() || !src.ok() ||
                  agents_ == nullptr || !agents_->ArmsRetrains(*dst))) {
      if (unarmed != nullptr) unarmed->push_back(c);
      continue;
    }
    if (!dst.ok() || !src.ok()) {
      training.failed[c->id()] = std::string((dst.ok() ? src.status() : dst.status()).message());
      continue;
    }
    if (agents_ == nullptr || !agents_->HasOwner(*dst)) {
      training.failed[c->id()] =
          absl::StrCat("link ", LinkName(*c), ": no connected agent for O-NIC ",
                       c->destination().onic(), " (serial ", *dst, ")");
      ++training.agent_gone;
      continue;
    }
    agents::AddressedCommand& cmd = commands.emplace_back();
    cmd.onic_serial = *dst;
    v1::RetrainPort* retrain = cmd.command.mutable_retrain();
    retrain->set_onic_serial(*dst);
    retrain->set_port(c->destination().port());
    retrain->mutable_expected_peer()->set_onic_serial(*src);
    retrain->mutable_expected_peer()->set_port(c->source().port());
    if (armed) {
      *retrain->mutable_await_light() = ToProtoDuration(options_.armed_light_wait);
    }
    training.circuits.push_back(c);
  }
  if (!commands.empty()) {
    const absl::Time deadline = clock_->Now() + options_.retrain_timeout +
                                (armed ? options_.armed_light_wait : absl::ZeroDuration());
    training.sent = agents_->Send(std::move(commands), deadline);
  }
  return training;
}

void Engine::FinishRetrain(Training training, std::map<std::string, std::string>& failed,
                           Counted counted) {
  int untrained = static_cast<int>(training.failed.size()) - training.agent_gone;
  int agent_gone = training.agent_gone, trained = 0;  // Counted for fleet_link_retrains_total.
  failed.merge(training.failed);
  std::vector<absl::StatusOr<v1::CommandResult>> results;
  if (training.sent != nullptr) results = agents_->Await(std::move(training.sent));
  for (size_t i = 0; i < results.size(); ++i) {
    const v1::Circuit& c = *training.circuits[i];
    if (!results[i].ok()) {
      failed[c.id()] = absl::StrCat("link ", LinkName(c), ": ", results[i].status().message());
      // UNAVAILABLE: the agent went away while the link trained.
      ++(results[i].status().code() == absl::StatusCode::kUnavailable ? agent_gone : untrained);
    } else if (results[i]->code() != 0) {
      failed[c.id()] = absl::StrCat("link ", LinkName(c), ": ", results[i]->message());
      ++untrained;
    } else {
      ++trained;
    }
  }
  if (counted == Counted::kNone) return;
  metrics_.LinkRetrains("trained", trained);
  if (counted == Counted::kTrainedOnly) return;
  metrics_.LinkRetrains("failed", untrained);
  metrics_.LinkRetrains("agent_gone", agent_gone);
}

void Engine::Disarm(Training training) {
  if (training.sent == nullptr) return;
  // Quiesced whatever the registry last heard: an armed port's last word may still be the
  // QUIESCED from before it was armed.
  std::vector<agents::AddressedCommand> quiesces;
  for (const v1::Circuit* c : training.circuits) {
    absl::StatusOr<std::string> dst = SerialOf(c->destination().onic());
    if (!dst.ok()) continue;
    quiesces.push_back(QuiesceCommand(*dst, c->destination().port()));
  }
  agents_->SendCommands(std::move(quiesces), clock_->Now() + options_.quiesce_timeout);
  agents_->Await(std::move(training.sent));
}

void Engine::Reconfigure(const std::string& id, std::vector<v1::StageTiming> admitted,
                         PhaseSwitch phase_switch, const v1::Allocation* stored) {
  absl::StatusOr<v1::Allocation> loaded =
      stored != nullptr ? absl::StatusOr<v1::Allocation>(*stored) : store_->GetAllocation(id);
  if (!loaded.ok()) {
    FLEET_LOG(ERROR) << "allocation " << id << " vanished: " << loaded.status();
    return;
  }
  // ACTIVE desired circuits are on the switch with trained links (kept across a phase
  // switch): they are not touched. The rest are made and retrained.
  std::vector<v1::Circuit> circuits;
  for (v1::Circuit& c : LiveCircuits(*loaded)) {
    if (c.state() != v1::CIRCUIT_STATE_ACTIVE) circuits.push_back(std::move(c));
  }
  const std::vector<v1::Circuit>& removes = phase_switch.removes;
  // A resumed transaction keeps the plan's timing and times its own stages again.
  const bool resumed = admitted.empty();
  std::vector<v1::StageTiming> timings = std::move(admitted);
  if (resumed) {
    for (const v1::StageTiming& t : loaded->stage_timings()) {
      if (t.stage() == "plan" || t.stage() == "persist") timings.push_back(t);
    }
  }
  // Counts the outcome and the stages this run timed (a resumed run's plan was counted by the
  // run that made it); the duration runs from the plan's start, the request's acceptance.
  const size_t first_timed_here = resumed ? timings.size() : 0;
  auto count = [&](const std::string& outcome) {
    for (size_t i = first_timed_here; i < timings.size(); ++i) {
      metrics_.StageTook(timings[i].stage(), FromProtoDuration(timings[i].duration()));
    }
    const absl::Time accepted =
        timings.empty() ? clock_->Now() : FromProtoTime(timings[0].started());
    metrics_.ReconfigurationFinished(outcome, clock_->Now() - accepted);
  };
  std::set<std::string> switch_ids;
  for (const v1::Circuit& c : circuits) {
    for (const v1::CrossConnect& x : c.cross_connects()) switch_ids.insert(x.switch_id());
  }

  auto fail = [&](const absl::Status& why, const std::string& stage) {
    store::AllocationUpdate u;
    u.id = id;
    u.state = v1::ALLOCATION_STATE_FAILED;
    u.reason = absl::StrCat(stage, " failed: ", why.message());
    u.stage_timings = timings;
    u.remove_circuits = true;
    u.severity = v1::EVENT_SEVERITY_WARNING;
    u.event_message = absl::StrCat("allocation ", id, " FAILED: ", *u.reason);
    if (!phase_switch.from.empty()) {
      // The switch was rolled back: the old phase's circuits are there, quiesced. Go back to
      // that phase, DEGRADED, and let the retry retrain its links.
      u.state = v1::ALLOCATION_STATE_DEGRADED;
      u.reason = absl::StrCat("phase ", loaded->active_phase(), ": ", *u.reason, "; back on phase ",
                              phase_switch.from);
      u.remove_circuits = false;
      u.active_phase = phase_switch.from;
      for (const v1::Circuit& c : loaded->circuits()) {
        u.circuits[c.id()] =
            c.phase() == phase_switch.from
                ? store::AllocationUpdate::CircuitChange{v1::CIRCUIT_STATE_DEGRADED,
                                                         "phase switch failed"}
                : store::AllocationUpdate::CircuitChange{v1::CIRCUIT_STATE_INACTIVE, ""};
      }
      u.event_message = absl::StrCat("allocation ", id, " DEGRADED: ", *u.reason);
      if (Update(u, "fleetd").ok()) {
        count("failed");
        ScheduleRetry(id);
      }
      return;
    }
    if (Update(u, "fleetd").ok()) count("failed");
  };

  store::AllocationUpdate programming;
  programming.id = id;
  programming.state = v1::ALLOCATION_STATE_PROGRAMMING;
  programming.reason = "";
  programming.event_message =
      absl::StrCat("allocation ", id, " PROGRAMMING: quiescing ports and programming ",
                   circuits.size(), " circuits on switch ", absl::StrJoin(switch_ids, ", "));
  // PROGRAMMING is committed on another worker while the agents quiesce (if any port must be)
  // or the switch moves: a restart resumes PENDING and PROGRAMMING alike, and quiescing or
  // programming again is harmless, so a crash before it lands loses nothing. Every later state
  // waits for it, so states are never stored out of order.
  absl::Notification programming_done;
  bool recorded = false;
  absl::once_flag programming_started;
  auto commit_programming = [&] {
    recorded = Update(programming, "fleetd").ok();
    programming_done.Notify();
  };
  auto start_programming = [&] {
    absl::call_once(programming_started, [&] {
      if (!Spawn("", commit_programming)) commit_programming();
    });
  };
  auto programming_recorded = [&] {
    start_programming();
    programming_done.WaitForNotification();
    return recorded;
  };
  // The intent must outlive a power loss of the host before any device acts on it, as it
  // outlives a crash of fleetd: a switch holding cross-connects of an intent the database
  // lost would hold ports that planning believes free.
  if (absl::Status synced = store_->Sync(); !synced.ok()) {
    // Nothing was touched, and the stored state is left as it is: the disk refused the sync,
    // which does not fix itself (Store::Sync), so the next start resumes the transaction.
    Record("allocation.sync_failed", "allocation", id, v1::EVENT_SEVERITY_ALARM, "fleetd",
           absl::StrCat("allocation ", id,
                        ": not programmed, its intent is not durable: ", synced.message()));
    return;
  }
  absl::Time start = clock_->Now();
  std::vector<v1::Circuit> touched = removes;
  touched.insert(touched.end(), circuits.begin(), circuits.end());
  const absl::Status quiesced = Quiesce(touched, id, start_programming);
  timings.push_back(StageTiming("quiesce", start, clock_->Now() - start));
  if (!quiesced.ok()) {
    if (programming_recorded()) fail(quiesced, "quiesce");
    return;
  }
  Fault("quiesced");

  // Agents that can see light arrive get their retrains now, as the switch moves: each
  // link starts training as its beam settles, while fleetd still hears from the switch and
  // reads it back. The others retrain once the switch is verified. READY needs both.
  // Not armed: a link whose peer reaches it now over a path this batch takes away (a phase
  // switch between two paths of one pair), as the wait could not tell the old light from
  // the new.
  std::vector<const v1::Circuit*> armable, unarmed;
  for (const v1::Circuit& c : circuits) {
    const bool moves = absl::c_any_of(removes, [&](const v1::Circuit& r) {
      return SameEnd(r.source(), c.source()) && SameEnd(r.destination(), c.destination());
    });
    (moves ? unarmed : armable).push_back(&c);
  }
  // Armed, and then PROGRAMMING committed (unless a quiesce started that already), on one
  // other worker as the batch goes to the switch: the work it wakes for does not hold up the
  // batch (on a busy host a woken thread takes the core from the one sending), and a batch
  // queued behind another is not armed 25 ms early. A retrain that arrives after its light
  // (a fast switch) trains at once.
  Training armed;
  absl::Notification arming_done;
  absl::once_flag arming_started;
  auto going = [&] {
    absl::call_once(arming_started, [&] {
      // Notifies last: once it has, this transaction may end, and its frame with it.
      auto arm = [&] {
        armed = StartRetrain(armable, /*armed=*/true, &unarmed);
        absl::call_once(programming_started, commit_programming);
        arming_done.Notify();
      };
      if (!Spawn("", arm)) arm();
    });
  };
  start = clock_->Now();
  absl::Duration program_time, verify_time;
  bool retried = false;
  absl::Status programmed =
      Program(removes, circuits, &program_time, &verify_time, &retried, going);
  // Never sent (no switch to send to): nothing was armed; the links retrain once the switch
  // is verified, as unarmed ones do.
  absl::call_once(arming_started, [&] {
    for (const v1::Circuit* c : armable) unarmed.push_back(c);
    arming_done.Notify();
  });
  arming_done.WaitForNotification();
  timings.push_back(StageTiming("program", start, program_time));
  timings.push_back(StageTiming("verify", start + program_time, verify_time));
  if (!programmed.ok() || !programming_recorded()) Disarm(std::move(armed));
  if (!programming_recorded()) return;
  if (programmed.ok() && (!removes.empty() || resumed)) {
    // A member change's removals are off the switch (or were before a crash let a resumed
    // run find none): nothing is left for a restart to undo.
    if (absl::Status cleared = store_->ClearPendingRemovals(id); !cleared.ok()) {
      FLEET_LOG(WARNING) << "allocation " << id << ": " << cleared;
    }
  }
  if (!programmed.ok()) {
    fail(programmed, "program");
    return;
  }
  Fault("programmed");

  store::AllocationUpdate training;
  training.id = id;
  training.state = v1::ALLOCATION_STATE_TRAINING;
  training.stage_timings = timings;
  for (const v1::Circuit& c : circuits) {
    training.circuits[c.id()] = {v1::CIRCUIT_STATE_PROGRAMMED, ""};
  }
  training.event_message =
      absl::StrCat("allocation ", id, " TRAINING: switch programmed and verified");
  // TRAINING is committed while the agents retrain (the commands go first, so the links start
  // training at once): a restart finds the switch programmed either way and retrains what is
  // not up.
  start = clock_->Now();
  Training rest = StartRetrain(unarmed, /*armed=*/false);
  if (rest.sent != nullptr) agents_->AwaitWritten(*rest.sent, kLetCommandsLeave);
  const bool trained = Update(training, "fleetd").ok();
  if (trained) Fault("training");
  // An armed link whose wait may have judged light the switch then changed is retrained
  // again, now that the switch is verified: its answer failed (its wait ran out before the
  // beam settled, say), or the batch went out twice (undone after another request's part
  // failed, so its light came and went). Its first answer is not counted then.
  std::map<std::string, std::string> failed, armed_failed;
  const std::vector<const v1::Circuit*> armed_circuits = armed.circuits;
  FinishRetrain(std::move(armed), armed_failed,
                !trained  ? Counted::kEvery
                : retried ? Counted::kNone
                          : Counted::kTrainedOnly);
  std::vector<const v1::Circuit*> again;
  for (const v1::Circuit* c : armed_circuits) {
    if (trained && (retried || armed_failed.contains(c->id()))) again.push_back(c);
  }
  Training redo = StartRetrain(again, /*armed=*/false);
  FinishRetrain(std::move(rest), failed);
  FinishRetrain(std::move(redo), failed);
  if (!trained) return;
  // From the switch's answer: an armed link may have finished training before it.
  timings.push_back(StageTiming("retrain", start, clock_->Now() - start));
  Fault("trained");

  store::AllocationUpdate done;
  done.id = id;
  done.stage_timings = timings;
  const std::vector<std::string> reasons = RecordRetrain(circuits, failed, done);
  absl::Duration total;
  for (const v1::StageTiming& t : timings) {
    total += FromProtoDuration(t.duration());
  }
  if (reasons.empty()) {
    done.state = v1::ALLOCATION_STATE_READY;
    done.reason = "";
    done.event_message =
        absl::StrCat("allocation ", id, " READY: ", circuits.size(),
                     " circuits active (stages took ", absl::FormatDuration(total), ")");
  } else {
    done.state = v1::ALLOCATION_STATE_DEGRADED;
    done.reason = absl::StrJoin(reasons, "; ");
    done.severity = v1::EVENT_SEVERITY_WARNING;
    done.event_message = absl::StrCat("allocation ", id, " DEGRADED: ", *done.reason);
  }
  if (!Update(done, "fleetd").ok()) return;
  count(reasons.empty() ? "ready" : "degraded");
  if (!reasons.empty()) ScheduleRetry(id);
  Fault("ready");
}

void Engine::ScheduleRetry(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = retries_.try_emplace(id, Retry{.due = {}, .backoff = options_.retry_initial});
  Retry& retry = it->second;
  if (retry.agent_connected_during_attempt) {
    retry.agent_connected_during_attempt = false;
    retry.due = clock_->Now();
    background_wake_.SignalAll();
    return;
  }
  if (!fresh) retry.backoff = std::min(retry.backoff * 2, options_.retry_max);
  retry.due = clock_->Now() + retry.backoff;
}

void Engine::RunDueRetries() {
  std::vector<std::string> due;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    const absl::Time now = clock_->Now();
    for (const auto& [id, retry] : retries_) {
      if (retry.due <= now && !claimed_.contains(id)) due.push_back(id);
    }
  }
  for (const std::string& id : due) {
    if (!Claim(id)) continue;
    {
      // Pushed out until this attempt schedules the next one (or clears it).
      absl::MutexLock lock(&mu_);
      retries_[id].due = absl::InfiniteFuture();
    }
    Spawn(id, [this, id] {
      absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
      if (a.ok() && a->state() == v1::ALLOCATION_STATE_DEGRADED) {
        RetrainDegraded(id);
      } else if (a.ok() && a->state() == v1::ALLOCATION_STATE_RELEASING) {
        // Ends as its stored intent says (Release reads it).
        Release(id, "fleetd", v1::ALLOCATION_STATE_RELEASED, "");
      } else {
        absl::MutexLock lock(&mu_);
        retries_.erase(id);
      }
    });
  }
}

void Engine::AgentConnected(const std::string& host, const std::vector<std::string>& serials) {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto& [id, retry] : retries_) {
      if (retry.due != absl::InfiniteFuture()) {
        retry.due = now;
      } else {
        retry.agent_connected_during_attempt = true;  // Running now; rerun when it ends.
      }
    }
    background_wake_.SignalAll();
  }
  // Not on this thread: the registry calls from the agent's stream, which must go on reading
  // to take the answers.
  if (!serials.empty()) {
    Spawn(absl::StrCat("agent ", host), [this, serials] { QuiesceIdlePorts(serials); });
  }
}

void Engine::QuiesceIdlePorts(const std::vector<std::string>& serials) {
  if (agents_ == nullptr) return;
  const std::set<std::string> wanted(serials.begin(), serials.end());
  std::vector<agents::AddressedCommand> commands;
  std::unique_ptr<agents::SentCommands> sent;
  {
    absl::MutexLock admit(&admit_mu_);
    absl::StatusOr<std::shared_ptr<const Fabric>> fabric = CurrentFabric();
    absl::StatusOr<std::vector<v1::Circuit>> circuits = store_->ListCircuits({});
    if (!fabric.ok() || !circuits.ok()) {
      FLEET_LOG(WARNING) << "idle ports not quiesced: "
                         << (fabric.ok() ? circuits.status() : fabric.status());
      return;
    }
    std::set<std::pair<std::string, uint32_t>> in_use;  // (O-NIC id, port)
    for (const v1::Circuit& c : *circuits) {
      in_use.insert({c.source().onic(), c.source().port()});
      in_use.insert({c.destination().onic(), c.destination().port()});
    }
    for (const v1::Onic& onic : (*fabric)->site.onics()) {
      if (!wanted.contains(onic.serial())) continue;
      for (uint32_t port = 1; port <= static_cast<uint32_t>(onic.ports_size()); ++port) {
        if (in_use.contains({onic.id(), port}) || !agents_->HasOwner(onic.serial()) ||
            agents_->KnownQuiesced(onic.serial(), port)) {
          continue;
        }
        commands.push_back(QuiesceCommand(onic.serial(), port));
      }
    }
    if (commands.empty()) return;
    sent = agents_->Send(commands, clock_->Now() + options_.quiesce_timeout);
  }
  const std::vector<absl::StatusOr<v1::CommandResult>> results = agents_->Await(std::move(sent));
  std::vector<std::string> refused;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok() && results[i]->code() == 0) continue;
    const agents::AddressedCommand& c = commands[i];
    refused.push_back(
        absl::StrCat(c.onic_serial, "/", c.command.quiesce().port(), " (",
                     results[i].ok() ? results[i]->message() : results[i].status().message(), ")"));
  }
  if (!refused.empty()) {
    FLEET_LOG(WARNING) << "idle O-NIC ports not quiesced (a request using them quiesces them "
                          "first): "
                       << absl::StrJoin(refused, ", ");
  }
}

void Engine::AgentGone(const std::string& host, const std::vector<std::string>& serials,
                       const std::string& why) {
  const std::set<std::string> gone(serials.begin(), serials.end());
  absl::StatusOr<std::vector<v1::Allocation>> ready =
      store_->ListAllocations({"", v1::ALLOCATION_STATE_READY, false});
  if (!ready.ok()) return;
  for (const v1::Allocation& a : *ready) {
    const std::string reason = absl::StrCat("the agent of host ", host, " is gone (", why, ")");
    store::AllocationUpdate u;
    u.id = a.id();
    for (const v1::Circuit& c : LiveCircuits(a)) {
      absl::StatusOr<std::string> dst = SerialOf(c.destination().onic());
      absl::StatusOr<std::string> src = SerialOf(c.source().onic());
      if ((dst.ok() && gone.contains(*dst)) || (src.ok() && gone.contains(*src))) {
        u.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED,
                              absl::StrCat("link ", LinkName(c), ": ", reason)};
      }
    }
    if (u.circuits.empty()) continue;
    // A transaction running on it finds out for itself when it retrains.
    if (!Claim(a.id())) continue;
    u.state = v1::ALLOCATION_STATE_DEGRADED;
    u.reason = reason;
    u.severity = v1::EVENT_SEVERITY_WARNING;
    u.event_message = absl::StrCat("allocation ", a.id(), " DEGRADED: ", reason);
    const bool updated = Update(u, "fleetd").ok();
    Unclaim(a.id());
    if (!updated) continue;
    absl::MutexLock lock(&mu_);
    retries_[a.id()] =
        Retry{.due = clock_->Now() + options_.retry_initial, .backoff = options_.retry_initial};
  }
}

void Engine::RetrainDegraded(const std::string& id) {
  absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
  if (!a.ok()) return;
  std::vector<v1::Circuit> untrained;
  for (const v1::Circuit& c : LiveCircuits(*a)) {
    if (c.state() != v1::CIRCUIT_STATE_ACTIVE) untrained.push_back(c);
  }
  const std::map<std::string, std::string> failed = Retrain(untrained, /*check_first=*/true);
  store::AllocationUpdate u;
  u.id = id;
  const std::vector<std::string> reasons = RecordRetrain(untrained, failed, u);
  if (reasons.empty()) {
    u.state = v1::ALLOCATION_STATE_READY;
    u.reason = "";
    u.event_message =
        absl::StrCat("allocation ", id, " READY: ", untrained.size(), " links retrained");
    absl::MutexLock lock(&mu_);
    retries_.erase(id);
  } else {
    u.state = v1::ALLOCATION_STATE_DEGRADED;
    u.reason = absl::StrJoin(reasons, "; ");
    u.severity = v1::EVENT_SEVERITY_WARNING;
    u.event_kind = "allocation.retrain_failed";
    u.event_message = absl::StrCat("allocation ", id, " still DEGRADED: ", *u.reason);
  }
  if (!Update(u, "fleetd").ok()) return;
  if (!reasons.empty()) ScheduleRetry(id);
}

// --- Phases ---

absl::Status Engine::PhaseUsable(const std::string& phase, const std::vector<v1::Circuit>& adds) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Fabric> fabric, CurrentFabric());
  const scheduler::FabricSnapshot& snapshot = fabric->usability;
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
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("phase ", phase, " cannot be activated: ", absl::StrJoin(problems, "; "),
                   " (undrain or repair it, or replace the member)"));
}

absl::StatusOr<v1::ActivatePhaseResponse> Engine::ActivatePhase(
    const v1::ActivatePhaseRequest& request, const Caller& caller) {
  const std::string& id = request.id();
  const std::string& phase = request.phase();
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(id, caller));
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
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("fleetd is stopping");
  }
  v1::ActivatePhaseResponse response;
  if (a.active_phase() == phase) {
    *response.mutable_allocation() = std::move(a);
    return response;
  }
  if (!ClaimSettled(id, caller.deadline)) {
    return absl::AbortedError(absl::StrCat("allocation ", id,
                                           " is in the middle of another change (",
                                           v1::Name(a.state()), "); retry once it is READY"));
  }
  const absl::Time plan_start = clock_->Now();
  absl::StatusOr<v1::Allocation> fresh = store_->GetAllocation(id);
  if (!fresh.ok() || (fresh->state() != v1::ALLOCATION_STATE_READY &&
                      fresh->state() != v1::ALLOCATION_STATE_DEGRADED)) {
    Unclaim(id);
    if (!fresh.ok()) return fresh.status();
    return absl::FailedPreconditionError(
        absl::StrCat("allocation ", id, " is ", v1::Name(fresh->state()),
                     "; a phase can be activated only when it is READY or DEGRADED"));
  }
  a = std::move(*fresh);
  std::vector<v1::Circuit> current, target;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() == a.active_phase()) current.push_back(c);
    if (c.phase() == phase) target.push_back(c);
  }
  const scheduler::CircuitDiff diff = scheduler::DiffCircuits(current, target);
  // The phase's ports are held, so capacity never refuses a phase switch; but a port or trunk
  // drained or failed since admission gets no new light, as for any new circuit.
  if (absl::Status usable = PhaseUsable(phase, diff.add); !usable.ok()) {
    Unclaim(id);
    return usable;
  }
  std::set<std::string> added;
  for (const v1::Circuit& c : diff.add) added.insert(c.id());
  // Every port of a removed or added circuit is quiesced, so a kept circuit that shares one
  // is made and trained again with them; one whose link was not up is, too. The rest stay.
  std::set<std::string> quiesced, up;
  for (const std::vector<v1::Circuit>* changed : {&diff.remove, &diff.add}) {
    for (const v1::Circuit& c : *changed) {
      quiesced.insert(PortName(c.source()));
      quiesced.insert(PortName(c.destination()));
    }
  }
  for (const v1::Circuit& c : diff.kept) {
    if (c.state() == v1::CIRCUIT_STATE_ACTIVE) {
      up.insert(PortName(c.source()) + ">" + PortName(c.destination()));
    }
  }

  store::AllocationUpdate handover;
  handover.id = id;
  handover.state = v1::ALLOCATION_STATE_PROGRAMMING;
  handover.reason = "";
  handover.active_phase = phase;
  for (const v1::Circuit& c : current) handover.circuits[c.id()] = {v1::CIRCUIT_STATE_INACTIVE, ""};
  for (const v1::Circuit& c : target) {
    const bool untouched = !added.contains(c.id()) &&
                           up.contains(PortName(c.source()) + ">" + PortName(c.destination())) &&
                           !quiesced.contains(PortName(c.source())) &&
                           !quiesced.contains(PortName(c.destination()));
    handover.circuits[c.id()] = {untouched ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_PLANNED,
                                 ""};
  }
  handover.event_kind = "allocation.phase";
  handover.event_message =
      absl::StrCat("allocation ", id, " switching from phase ", a.active_phase(), " to ", phase,
                   ": ", diff.kept.size(), " circuits kept, ", diff.remove.size(), " removed, ",
                   diff.add.size(), " added");
  const absl::Time persist_start = clock_->Now();
  // The stored timings are this transaction's from the handover on, so a resumed run does not
  // count the previous transaction's.
  handover.stage_timings = {StageTiming("plan", plan_start, persist_start - plan_start)};
  absl::StatusOr<v1::Allocation> switched = Update(handover, caller.principal);
  if (!switched.ok()) {
    Unclaim(id);
    return switched.status();
  }
  std::vector<v1::StageTiming> admitted = {
      StageTiming("plan", plan_start, persist_start - plan_start),
      StageTiming("persist", persist_start, clock_->Now() - persist_start)};

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
  Spawn(id, [this, id, admitted = std::move(admitted),
             phase_switch = PhaseSwitch{a.active_phase(), diff.remove}]() mutable {
    Reconfigure(id, std::move(admitted), std::move(phase_switch));
  });
  return response;
}

std::vector<v1::Circuit> Engine::LeftBehind(const v1::Allocation& a) {
  absl::StatusOr<std::vector<v1::CrossConnect>> pending = store_->PendingRemovals(a.id());
  const bool phased =
      std::any_of(a.circuits().begin(), a.circuits().end(),
                  [](const v1::Circuit& c) { return c.state() == v1::CIRCUIT_STATE_INACTIVE; });
  // Only a phased allocation or an interrupted member change leaves anything; the rest need
  // no read of the observed state.
  if (!phased && (!pending.ok() || pending->empty())) return {};
  using Key = std::tuple<std::string, uint32_t, uint32_t>;
  std::set<Key> desired, observed;
  std::set<std::pair<std::string, uint32_t>> desired_ports;  // (switch, port) of any circuit.
  std::set<std::string> switch_ids;
  for (const v1::Circuit& c : a.circuits()) {
    for (const v1::CrossConnect& x : c.cross_connects()) {
      switch_ids.insert(x.switch_id());
      if (c.state() != v1::CIRCUIT_STATE_INACTIVE) {
        desired.insert({x.switch_id(), x.ingress(), x.egress()});
      }
    }
  }
  if (pending.ok()) {
    for (const v1::CrossConnect& x : *pending) switch_ids.insert(x.switch_id());
  }
  for (const std::string& sw : switch_ids) {
    absl::StatusOr<std::vector<v1::CrossConnect>> seen = store_->ListObservedCrossConnects(sw);
    if (!seen.ok()) continue;
    for (const v1::CrossConnect& x : *seen) observed.insert({sw, x.ingress(), x.egress()});
  }
  std::vector<v1::Circuit> left;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.state() != v1::CIRCUIT_STATE_INACTIVE || c.cross_connects().empty()) continue;
    bool on_switch = true;
    for (const v1::CrossConnect& x : c.cross_connects()) {
      const Key key{x.switch_id(), x.ingress(), x.egress()};
      on_switch = on_switch && observed.contains(key) && !desired.contains(key);
    }
    if (on_switch) left.push_back(c);
  }
  if (!pending.ok() || pending->empty()) return left;
  // A member change's removals still on the switch, unless another allocation was given
  // their ports since (its cross-connect is not this one's to remove). This allocation's
  // own new circuits may reuse a port: the removal goes first in the same batch.
  absl::StatusOr<std::vector<v1::Circuit>> all = store_->ListCircuits({});
  if (!all.ok()) return left;
  for (const v1::Circuit& c : *all) {
    if (c.allocation_id() == a.id() || c.state() == v1::CIRCUIT_STATE_INACTIVE) continue;
    for (const v1::CrossConnect& x : c.cross_connects()) {
      desired_ports.insert({x.switch_id(), x.ingress()});
      desired_ports.insert({x.switch_id(), x.egress()});
    }
  }
  // The O-NIC ports the fibers of a removal's ends belong to, so they are quiesced before
  // their light goes.
  std::map<std::pair<std::string, uint32_t>, v1::OnicPortRef> wired;
  if (absl::StatusOr<std::shared_ptr<const Fabric>> fabric = CurrentFabric(); fabric.ok()) {
    for (const v1::SwitchPort& p : (*fabric)->ports) {
      if (p.wiring().has_onic_port()) {
        wired[{p.ref().switch_id(), p.ref().port()}] = p.wiring().onic_port();
      }
    }
  }
  for (const v1::CrossConnect& x : *pending) {
    const Key key{x.switch_id(), x.ingress(), x.egress()};
    // A record the crash left after the removal is done, or one this allocation has made
    // again since (a member replaced back), is not the switch's to undo.
    if (!observed.contains(key) || desired.contains(key) ||
        desired_ports.contains({x.switch_id(), x.ingress()}) ||
        desired_ports.contains({x.switch_id(), x.egress()})) {
      continue;
    }
    // The member it belonged to has left the allocation; its fibers' O-NIC ports are known
    // from the wiring (a trunk end has none).
    v1::Circuit& removal = left.emplace_back();
    removal.set_id(absl::StrCat("removed ", x.switch_id(), " ", x.ingress(), "->", x.egress()));
    *removal.add_cross_connects() = x;
    if (auto tx = wired.find({x.switch_id(), x.ingress()}); tx != wired.end()) {
      *removal.mutable_source() = tx->second;
    }
    if (auto rx = wired.find({x.switch_id(), x.egress()}); rx != wired.end()) {
      *removal.mutable_destination() = rx->second;
    }
  }
  return left;
}

// --- Release, lease, keep-alive ---

void Engine::Release(const std::string& id, const std::string& principal,
                     v1::AllocationState final_state, std::string final_reason) {
  absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
  if (!a.ok() || a->state() == v1::ALLOCATION_STATE_RELEASED) return;
  const std::vector<v1::Circuit> circuits = LiveCircuits(*a);
  if (a->state() == v1::ALLOCATION_STATE_RELEASING) {
    // A release already under way ends as it was meant to when it started, whoever
    // resumes or retries it (a restart, the retry loop, a second ReleaseTopology).
    absl::StatusOr<std::optional<store::AllocationUpdate::ReleaseIntent>> intent =
        store_->ReleaseIntentOf(id);
    if (intent.ok() && intent->has_value()) {
      final_state = (*intent)->state;
      final_reason = (*intent)->reason;
    }
  } else if (!circuits.empty()) {
    store::AllocationUpdate releasing;
    releasing.id = id;
    releasing.state = v1::ALLOCATION_STATE_RELEASING;
    releasing.release = store::AllocationUpdate::ReleaseIntent{final_state, final_reason};
    if (!final_reason.empty()) releasing.reason = final_reason;
    for (const v1::Circuit& c : circuits) {
      releasing.circuits[c.id()] = {v1::CIRCUIT_STATE_REMOVING, ""};
    }
    releasing.event_message =
        absl::StrCat("allocation ", id, " RELEASING: removing ", circuits.size(), " circuits");
    if (!Update(releasing, principal).ok()) return;
  }
  // As for an intent: RELEASING outlives a power loss before the circuits come off, or the
  // allocation would come back READY without them and reconciliation would make them again.
  if (absl::Status synced = store_->Sync(); !synced.ok()) {
    Record("allocation.sync_failed", "allocation", id, v1::EVENT_SEVERITY_ALARM, "fleetd",
           absl::StrCat("allocation ", id,
                        ": not released, RELEASING is not durable: ", synced.message()));
    return;
  }
  Fault("releasing");
  if (!circuits.empty()) {
    if (absl::Status q = Quiesce(circuits, id); !q.ok()) {
      // Releasing goes on: the job let go of these ports; record what the agent said.
      Record("allocation.quiesce_refused", "allocation", id, v1::EVENT_SEVERITY_WARNING, "fleetd",
             absl::StrCat("allocation ", id, ": ", q.message()));
    }
    absl::Status removed = Program(/*removes=*/circuits, /*adds=*/{}, nullptr, nullptr);
    if (!removed.ok()) {
      store::AllocationUpdate stuck;
      stuck.id = id;
      stuck.reason = absl::StrCat("removal failed, retrying: ", removed.message());
      stuck.severity = v1::EVENT_SEVERITY_WARNING;
      stuck.event_kind = "allocation.release_failed";
      stuck.event_message = absl::StrCat("allocation ", id, ": ", *stuck.reason);
      (void)Update(stuck, principal);
      ScheduleRetry(id);
      return;
    }
  }
  Fault("removed");
  store::AllocationUpdate done;
  done.id = id;
  done.state = final_state;
  done.reason = final_reason;
  done.remove_circuits = true;
  if (final_state == v1::ALLOCATION_STATE_FAILED) done.severity = v1::EVENT_SEVERITY_WARNING;
  done.event_message = absl::StrCat("allocation ", id, " ", v1::Name(final_state),
                                    final_reason.empty() ? "" : ": ", final_reason);
  if (Update(done, principal).ok()) {
    metrics_.Released(final_state == v1::ALLOCATION_STATE_FAILED ? "evicted"
                      : final_reason == kLeaseExpired            ? "lease_expired"
                                                                 : "requested");
  }
  absl::MutexLock lock(&mu_);
  retries_.erase(id);
}

absl::StatusOr<v1::Allocation> Engine::ReleaseTopology(const std::string& id,
                                                       const Caller& caller) {
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(id, caller));
  if (a.state() == v1::ALLOCATION_STATE_RELEASED) return a;
  {
    // Wait for a running transaction of this allocation to reach a persisted end.
    absl::MutexLock lock(&mu_);
    const absl::Time give_up = std::min(absl::Now() + kClaimWait, caller.deadline);
    while (claimed_.contains(id) && !stopping_ && absl::Now() < give_up) {
      changed_.WaitWithDeadline(&mu_, give_up);
    }
    if (stopping_) return absl::UnavailableError("fleetd is stopping");
    if (claimed_.contains(id)) {
      return absl::UnavailableError(
          absl::StrCat("allocation ", id, " is still being reconfigured; try again"));
    }
    claimed_.insert(id);
  }
  Release(id, caller.principal, v1::ALLOCATION_STATE_RELEASED, "");
  Unclaim(id);
  return store_->GetAllocation(id);
}

absl::StatusOr<absl::Time> Engine::KeepAlive(const std::string& id, const Caller& caller) {
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(id, caller));
  if (Ended(a.state()) || a.state() == v1::ALLOCATION_STATE_RELEASING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation ", id, " is ", v1::Name(a.state()), "; its lease cannot be renewed"));
  }
  absl::Duration lease = options_.default_lease;
  if (a.request().has_lease() && FromProtoDuration(a.request().lease()) > absl::ZeroDuration()) {
    lease = FromProtoDuration(a.request().lease());
  }
  store::AllocationUpdate u;
  u.id = id;
  u.lease_expires = clock_->Now() + lease;
  u.event_kind = "allocation.lease";
  u.event_message =
      absl::StrCat("allocation ", id, " lease renewed until ", absl::FormatTime(*u.lease_expires));
  RETURN_IF_ERROR(store_->UpdateAllocation(u, caller.principal).status());
  return *u.lease_expires;
}

void Engine::ExpireLeases() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
  }
  absl::StatusOr<std::vector<v1::Allocation>> live = store_->ListAllocations({});
  if (!live.ok()) return;
  const absl::Time now = clock_->Now();
  for (const v1::Allocation& a : *live) {
    if (Ended(a.state()) || a.state() == v1::ALLOCATION_STATE_RELEASING) continue;
    if (!a.has_lease_expires() || FromProtoTime(a.lease_expires()) > now) continue;
    if (!Claim(a.id())) continue;  // Mid-transaction: the next tick takes it.
    const std::string id = a.id();
    Spawn(id, [this, id] {
      Release(id, "fleetd/lease", v1::ALLOCATION_STATE_RELEASED, kLeaseExpired);
    });
  }
}

// --- Drain ---

namespace {

absl::StatusOr<store::DrainTargetRef> TargetOf(const v1::DrainTarget& target) {
  store::DrainTargetRef ref;
  switch (target.target_case()) {
    case v1::DrainTarget::kSwitchPort:
      ref.switch_id = target.switch_port().switch_id();
      ref.port = target.switch_port().port();
      if (ref.switch_id.empty() || ref.port == 0) {
        return absl::InvalidArgumentError("target.switch_port needs a switch_id and a port");
      }
      return ref;
    case v1::DrainTarget::kOnic:
      ref.onic = target.onic();
      break;
    case v1::DrainTarget::kHost:
      ref.host = target.host();
      break;
    default:
      return absl::InvalidArgumentError("target: name a switch port, an O-NIC or a host");
  }
  if (ref.onic.empty() && ref.host.empty()) return absl::InvalidArgumentError("target is empty");
  return ref;
}

std::string Describe(const store::DrainTargetRef& t) {
  if (!t.switch_id.empty()) return absl::StrCat("switch port ", t.switch_id, "/", t.port);
  if (!t.onic.empty()) return absl::StrCat("O-NIC ", t.onic);
  return absl::StrCat("host ", t.host);
}

}  // namespace

absl::StatusOr<v1::DrainResponse> Engine::Drain(const v1::DrainRequest& request,
                                                const Caller& caller) {
  if (!caller.operator_role()) {
    return absl::PermissionDeniedError("drain is for operators, not jobs");
  }
  ASSIGN_OR_RETURN(store::DrainTargetRef target, TargetOf(request.target()));
  RETURN_IF_ERROR(store_->SetDrained(target, true, request.reason(), caller.principal));
  // Which live allocations have a circuit on the drained thing.
  std::set<std::string> host_onics;
  if (!target.host.empty()) {
    ASSIGN_OR_RETURN(std::vector<v1::Onic> onics, store_->ListOnics({target.host, ""}));
    for (const v1::Onic& o : onics) host_onics.insert(o.id());
  }
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  std::set<std::string> affected;
  for (const v1::Circuit& c : circuits) {
    if (c.allocation_id().empty()) continue;
    bool hit = false;
    for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
      hit |= end.onic() == target.onic || host_onics.contains(end.onic());
    }
    for (const v1::CrossConnect& x : c.cross_connects()) {
      hit |= x.switch_id() == target.switch_id &&
             (x.ingress() == target.port || x.egress() == target.port);
    }
    if (hit) affected.insert(c.allocation_id());
  }
  v1::DrainResponse response;
  for (const std::string& id : affected) response.add_affected_allocations(id);
  if (!request.evict()) return response;
  const std::string reason = absl::StrCat("evicted: ", Describe(target), " was drained",
                                          request.reason().empty() ? "" : ": ", request.reason());
  for (const std::string& id : affected) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time give_up = absl::Now() + absl::Seconds(60);
      while (claimed_.contains(id) && !stopping_ && absl::Now() < give_up) {
        changed_.WaitWithDeadline(&mu_, give_up);
      }
      if (stopping_ || claimed_.contains(id)) {
        return absl::UnavailableError(
            absl::StrCat("allocation ", id, " is busy; drain recorded, eviction incomplete"));
      }
      claimed_.insert(id);
    }
    Release(id, caller.principal, v1::ALLOCATION_STATE_FAILED, reason);
    Unclaim(id);
  }
  return response;
}

absl::Status Engine::Undrain(const v1::UndrainRequest& request, const Caller& caller) {
  if (!caller.operator_role()) {
    return absl::PermissionDeniedError("undrain is for operators, not jobs");
  }
  ASSIGN_OR_RETURN(store::DrainTargetRef target, TargetOf(request.target()));
  return store_->SetDrained(target, false, "", caller.principal);
}

}  // namespace fleet::engine
