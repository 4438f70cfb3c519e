// The reconfiguration engine: turns admitted topology requests into programmed, verified and
// trained circuits, releases them, keeps leases, and reconciles the switches with the store.
// docs/engine.md explains the sequence; this is its contract.
//
// A reconfiguration (one allocation's transaction):
//   admit + plan (the scheduler, on a snapshot of the store)  — nothing written on error
//   persist intent: the allocation PENDING with its circuits PLANNED, one transaction
//   PROGRAMMING; quiesce every O-NIC port whose light changes (its agent; a port whose agent
//     is not connected is noted and skipped; an agent that refuses fails the request)
//   program: per switch, one batch (removes, then adds), batched with concurrent requests
//   verify: the switch read back equals the batch (part of the same switch call)
//   TRAINING (circuits PROGRAMMED); retrain the receiving end of every circuit with its
//     expected peer (a duplex link or a ring trains both of its ends this way)
//   READY (circuits ACTIVE), with the time of each stage.
// Faults:
//   - a switch error or read-back mismatch: the switch is rolled back to its last good
//     cross-connects, the allocation FAILED with the switch's message, its circuits deleted;
//   - a link that does not train, or whose agent is gone: DEGRADED naming the link, circuits
//     kept, retrained with exponential backoff (and at once when an agent reconnects) until
//     it trains, then READY. Each retry first makes again what the switches lack of the
//     allocation (a link dark for want of a cross-connect is not a member's fault), and a
//     retrain that reached no agent never counts against a device.
// Release: RELEASING (circuits REMOVING), quiesce, remove from the switch, RELEASED with the
//   circuits deleted. A switch error keeps the allocation RELEASING (its ports stay held) and
//   the removal is retried with backoff.
// Leases: every allocation has one (the request's, else the default); KeepAlive renews it;
//   an allocation whose lease passes is released by fleetd.
// Crash consistency: the intent (PENDING) is persisted, and synced (Store::Sync), before any
//   device is touched; the states after it are committed while their step runs, in order,
//   and every step is idempotent, so a restart resumes an interrupted transaction from any
//   of them. Start() reconciles: it resumes PENDING/PROGRAMMING/TRAINING allocations (switch
//   changes are idempotent), finishes
//   RELEASING ones, and leaves READY ones alone when the switch agrees (no switch command
//   changes a correct cross-connect).
// Tenancy: a caller in the job role (service/caller.h) sees and changes only the allocations
//   of the tenants it acts for: another tenant's is answered as a missing one (NOT_FOUND), a
//   request, list or watch for another tenant is PERMISSION_DENIED. Viewers read everything;
//   operators may do everything.
//
// Thread-safe. Transactions run on pooled workers; RPC calls return after the intent is
// persisted (RequestTopology) or the change is done (ReleaseTopology, Reconcile, Drain).
//
// Engine is a facade over its parts, each with its contract in its header:
//   admission.h         validate, plan with the scheduler, persist the intent (claims held)
//   transaction.h       one reconfiguration's stages: load, quiesce, arm, program, train, finish
//   link_trainer.h      the agents: quiesce ports, retrain links
//   switch_programmers.h  one programming queue per switch; a change across switches
//   release.h           release, eviction's release, leases
//   drain.h             drain and undrain, eviction (moving allocations off, else failing them)
//   what_if.h           what a lost part hurts; what-if dry runs
//   member_changes.h    phase switch, replace a member, detach devices
//   reconciler.h        reconciliation and resuming interrupted transactions
//   link_recovery.h     failures (agents, links, switch ports, devices); the retries that follow
//   healer.h            healing under a failure policy: a spare for a failed member
//   failure_policy.h    a policy's deadline; the failed parts under an allocation
//   switch_monitor.h    port status and power read from the switches
//   worker_pool.h, sync_queue.h, inventory_cache.h, background_loop.h: the machinery
// Locks, in the order they may be taken: a switch held to itself (SwitchProgrammer's
// Exclusive, by reconciliation, which adopts under admission, and by a sync's
// Reconciler::RepairHeld, which holds only its allocation's claim and takes nothing under it);
// Admission::mu() (new holdings commit one at a time; admissions plan without it; nothing
// holding it waits for a switch);
// LinkRecovery's faults mutex (a fault and its mark are one step), under which only the
// SyncQueue's and the BackgroundLoop's (its wake) are taken; then any one of the parts' own
// mutexes (WorkerPool's claims and tasks, SyncQueue, InventoryCache, Admission's tenants,
// SwitchProgrammers, a
// SwitchProgrammer's queue, BackgroundLoop, Healer, SwitchMonitor's set of unreadable
// switches), each a leaf: none is held while another is taken, nor while calling out (the
// pool's unclaim hook runs without its lock). (SwitchMonitor's pass mutex is held for a whole
// pass, over switch reads and store writes, and nothing else takes it.) Shutdown stops the
// pool (no new task), stops and joins the background loop and the switch monitor's, waits
// for the running tasks and joins every worker, before any part goes; each SwitchProgrammer
// joins its own thread as it goes.
//
// Threads: the pool's workers (bounded, worker_pool.h), one per switch (SwitchProgrammer),
// the background loop and the switch monitor's; no part makes a thread per call.
#ifndef FLEET_CONTROLLER_ENGINE_ENGINE_H_
#define FLEET_CONTROLLER_ENGINE_ENGINE_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/engine/admission.h"
#include "controller/engine/background_loop.h"
#include "controller/engine/caller.h"
#include "controller/engine/drain.h"
#include "controller/engine/engine_context.h"
#include "controller/engine/engine_options.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/healer.h"
#include "controller/engine/inventory_cache.h"
#include "controller/engine/link_recovery.h"
#include "controller/engine/link_trainer.h"
#include "controller/engine/member_changes.h"
#include "controller/engine/reconciler.h"
#include "controller/engine/release.h"
#include "controller/engine/stage_costs.h"
#include "controller/engine/switch_monitor.h"
#include "controller/engine/switch_programmer.h"
#include "controller/engine/switch_programmers.h"
#include "controller/engine/sync_queue.h"
#include "controller/engine/what_if.h"
#include "controller/engine/worker_pool.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/store/store.h"
#include "controller/switch_registry/switch_registry.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::engine {

class Engine {
 public:
  // None owned; all outlive the engine. `agents` may be null (links are then never
  // retrained: allocations stay DEGRADED naming the missing agent).
  Engine(EngineOptions options, store::Store* store, switch_registry::SwitchRegistry* switches,
         agent_registry::CommandSender* agents, const Clock* clock);
  ~Engine();  // Calls Shutdown.

  // Reconciles every switch (resuming interrupted transactions) and starts the background
  // loop. A switch that cannot be read is reported (alarm event) and retried by the periodic
  // reconciliation; it does not stop fleetd from starting.
  absl::Status Start();
  // Stops taking new work and waits for running transactions to reach a persisted state.
  void Shutdown();

  // --- TopologyService ---
  absl::StatusOr<v1::RequestTopologyResponse> RequestTopology(
      const v1::RequestTopologyRequest& request, const Caller& caller);
  absl::StatusOr<v1::Allocation> GetAllocation(const std::string& id, const Caller& caller);
  absl::StatusOr<std::vector<v1::Allocation>> ListAllocations(
      const v1::ListAllocationsRequest& request, const Caller& caller);
  // Waits for a running transaction of the allocation to finish, then releases it. Returns the
  // allocation RELEASED (or RELEASING if the switch refused; fleetd keeps retrying).
  absl::StatusOr<v1::Allocation> ReleaseTopology(const std::string& id, const Caller& caller);
  absl::StatusOr<absl::Time> KeepAlive(const std::string& id, const Caller& caller);
  // Makes `phase` the allocation's active phase: the handover (the old phase's circuits
  // INACTIVE, the new phase's desired) is persisted before this returns, then the circuits
  // that differ are reconfigured in the background as a request is (quiesce, one switch batch
  // with the old phase's removes before the new one's adds, verify, retrain the new links),
  // and circuits on the same path in both phases are left alone. Never refused for capacity:
  // every phase's circuits hold their ports from admission. The response's plan lists what
  // the switch is told. Activating the active phase changes nothing. A prepared phase (make
  // before break: its circuits on the switch already) is only stored as the active one: no
  // switch command, no retrain, and the answer holds the allocation READY (or DEGRADED).
  // FAILED_PRECONDITION unless the allocation is READY or DEGRADED; NOT_FOUND for an unknown
  // phase (naming the phases there are); ABORTED while another transaction of it runs, or when
  // inventory, drain or health changes kept committing between its checks and its commit.
  absl::StatusOr<v1::ActivatePhaseResponse> ActivatePhase(const v1::ActivatePhaseRequest& request,
                                                          const Caller& caller);
  // Takes pooled devices out of an attach allocation (its tenant's or an operator's): under
  // admission, every circuit touching one of them is deleted and the members updated (the host
  // devices whose ports no circuit uses any more leave too), in one store transaction (the
  // allocation PROGRAMMING); then in the background their ports are quiesced and the
  // cross-connects come off the switch, and the allocation is READY again. Circuits of the
  // other devices are not touched. A dry run returns the plan and changes nothing.
  // INVALID_ARGUMENT for no devices, a device named twice, a device of the host, or detaching
  // every pooled device (release the allocation instead); NOT_FOUND for a device that is not
  // a member; FAILED_PRECONDITION for an allocation that is not an attach or not READY or
  // DEGRADED; ABORTED while another transaction of it runs.
  absl::StatusOr<v1::DetachDevicesResponse> DetachDevices(const v1::DetachDevicesRequest& request,
                                                          const Caller& caller);
  // The rank order that follows the circuits of `request.phase` (empty: the active phase), with
  // each rank's host (ranks.h); the caller's own allocations, or any for an operator.
  absl::StatusOr<v1::GetRanksResponse> GetRanks(const v1::GetRanksRequest& request,
                                                const Caller& caller);
  // What a job's own planner needs (scheduler/fabric_view.h): the devices asked about (or
  // the allocation's members), their ports as the caller may use them, the pairs one circuit
  // could join, on the fabric as the store holds it now (what admission would plan on), and
  // what the stages of a change have cost lately (StageCosts). Reads only; answered by a
  // follower too. The allocation must be the caller's
  // (NOT_FOUND otherwise) and live (FAILED_PRECONDITION once FAILED or RELEASED: it holds
  // nothing); INVALID_ARGUMENT when neither an allocation nor devices are named; the rest as
  // DescribeFabric.
  absl::StatusOr<v1::GetFabricResponse> GetFabric(const v1::GetFabricRequest& request,
                                                  const Caller& caller);
  // Checks that `caller` may watch allocation `id` or tenant `tenant`.
  absl::Status CheckWatch(const std::string& id, const std::string& tenant, const Caller& caller);

  // --- AdminService ---
  absl::StatusOr<v1::ReconcileResponse> Reconcile(const v1::ReconcileRequest& request,
                                                  const Caller& caller);
  absl::StatusOr<v1::DrainResponse> Drain(const v1::DrainRequest& request, const Caller& caller);
  absl::Status Undrain(const v1::UndrainRequest& request, const Caller& caller);
  // Marks a device FAILED or HEALTHY (operators only; SUSPECT is fleetd's own word), with an
  // event. A FAILED device gets no new circuits and the circuits of allocations using it
  // become DEGRADED at once, their retries due now (healing under a failure policy). Returns
  // the device as stored. INVALID_ARGUMENT for a health other than HEALTHY or FAILED, or
  // FAILED without a reason; NOT_FOUND for an unknown device.
  absl::StatusOr<v1::Device> SetDeviceHealth(const v1::SetDeviceHealthRequest& request,
                                             const Caller& caller);
  // What losing `request.target` would do: each live allocation it would hurt, the members
  // and circuits hurt, and whether and how its failure policy would heal it (what_if.h).
  // Nothing is stored or touched. INVALID_ARGUMENT for no target, NOT_FOUND for an unknown
  // one.
  absl::StatusOr<v1::WhatIfFailResponse> WhatIfFail(const v1::WhatIfFailRequest& request,
                                                    const Caller& caller);
  // Substitutes a spare for the failed member `request.member` (a job for its own
  // allocations, or an operator): the spare is
  // the request's, else the best free device of the same kind on the member's switch
  // (scheduler/replacement.h). Under admission, on a fresh snapshot, the circuits touching the
  // failed member are replaced in every phase by circuits to the spare and the members list
  // updated, in one store transaction (the allocation PROGRAMMING); then in the background the
  // active phase's old circuits come off the switch and the new ones are made in one batch
  // (removes first), verified and retrained, as a phase switch is. Circuits not touching the
  // failed member are left alone. A refused quiesce or switch batch fails the allocation and
  // takes the circuits from before off the switch. A dry run returns the plan and changes
  // nothing.
  // The replacement is recorded in the allocation's `replacements`, by the caller.
  // NOT_FOUND for another tenant's allocation; FAILED_PRECONDITION unless READY or DEGRADED;
  // NOT_FOUND for a device that is not a member; RESOURCE_EXHAUSTED when no spare is free, naming
  // the kind and switch; ABORTED while another transaction of it runs, or when inventory, drain
  // or health changes kept committing between its plans and its commit.
  absl::StatusOr<v1::ReplaceMemberResponse> ReplaceMember(const v1::ReplaceMemberRequest& request,
                                                          const Caller& caller);

  // An agent (re)connected, owning the O-NICs `serials`: retry the DEGRADED allocations now,
  // and quiesce its ports that are in no circuit (QuiesceIdlePorts) in the background.
  void AgentConnected(const std::string& host, const std::vector<std::string>& serials);
  // Takes every port of the O-NICs `serials` that is in no circuit (of any allocation or
  // phase, or an operator's) out of service, unless its agent already said it is: a port
  // carries no light until a circuit is made, and a reconfiguration finds its new ports
  // already quiesced, so the switch need not wait for the agents. The commands are handed
  // over under admission, so a request admitted later is queued behind them at the agent.
  // Refusals are logged. Blocks until the agents answer.
  void QuiesceIdlePorts(const std::vector<std::string>& serials);
  // A connected agent went away: the ACTIVE circuits of READY and DEGRADED allocations that
  // end on one of its O-NICs (`serials`) become DEGRADED, naming the host, unless it is back
  // by the time their allocation is synced. A retry first asks the returned agent for the
  // link's state and retrains only a link that is not up with its expected peer, so a link
  // that kept working is not disturbed. Returns at once; the work runs on a worker.
  void AgentGone(const std::string& host, const std::vector<std::string>& serials,
                 const std::string& why);
  // The agent of `host` reported ports of its O-NICs DOWN (`detail` says why: no light, a
  // wrong peer, too little power), as they changed or as it registered: the ACTIVE circuits
  // of READY and DEGRADED allocations arriving on those ports become DEGRADED naming the link
  // and the agent's words, their allocation DEGRADED at once (a DEGRADED one keeps its earlier
  // reasons), and a retry is due after the first backoff (then as for AgentGone). An
  // allocation a transaction holds is looked at once it lets go (its fault kept until then), as a
  // report is not sent again. Returns at once; the work runs on a worker.
  void LinksDown(const std::string& host, const std::vector<v1::LinkState>& links);

  // --- For the background loop, and tests that drive it by hand ---
  // Releases every allocation whose lease has passed by the clock's now.
  void ExpireLeases();
  // Runs the retries that are due (heal or retrain of DEGRADED links, removal of RELEASING
  // ones).
  void RunDueRetries();
  // One pass of the switch monitor (switch_monitor.h); its own loop runs it every
  // EngineOptions::monitor_interval. Returns the port health changes recorded.
  std::vector<store::PortHealth> MonitorSwitches();

  // --- For tests only ---
  // Blocks until no transaction or sync is running and no allocation is claimed.
  void WaitIdleForTest();
  // Each switch's programming queue, by switch id.
  using SwitchQueue = SwitchProgrammers::Queue;
  std::map<std::string, SwitchQueue> SwitchQueuesForTest();

 private:
  // One pass of the background loop: leases (once a second), due retries, and the periodic
  // reconciliation when it is due.
  void BackgroundPass();

  const EngineOptions options_;
  store::Store* const store_;
  const EngineContext ctx_;
  WorkerPool pool_;
  InventoryCache inventory_;
  BackgroundLoop background_;
  BackgroundLoop monitor_loop_;
  SyncQueue syncs_;
  LinkTrainer trainer_;
  SwitchProgrammers programmers_;
  Admission admission_;
  StageCosts costs_;
  const EngineParts parts_;
  Releaser releaser_;
  Drainer drainer_;
  MemberChanges members_;
  WhatIf what_if_;
  Reconciler reconciler_;
  Healer healer_;
  LinkRecovery recovery_;
  SwitchMonitor monitor_;
  // The background loop's own (set by Start before it runs).
  absl::Time next_reconcile_;
  absl::Time next_lease_check_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ENGINE_H_
