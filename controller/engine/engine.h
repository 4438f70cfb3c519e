// The reconfiguration engine: turns admitted topology requests into programmed, verified and
// trained circuits, releases them, keeps leases, and reconciles the switches with the store.
// docs/architecture.md §4 and docs/engine.md describe the sequence; this is its contract.
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
//     it trains, then READY.
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
// Tenancy: a caller whose principal is `job:TENANT` sees and changes only TENANT's
//   allocations (PERMISSION_DENIED otherwise, without revealing whose it is); other
//   principals act as operators.
//
// Thread-safe. Transactions run on their own threads; RPC calls return after the intent is
// persisted (RequestTopology) or the change is done (ReleaseTopology, Reconcile, Drain).
#ifndef FLEET_CONTROLLER_ENGINE_ENGINE_H_
#define FLEET_CONTROLLER_ENGINE_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/agents/agent_registry.h"
#include "common/clock.h"
#include "controller/engine/switch_programmer.h"
#include "controller/fabric/switch_registry.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/store/store.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::engine {

// Who is calling, from the RPC's principal.
struct Caller {
  std::string principal;  // As recorded in events.
  std::string tenant;     // Set for role `job`: limited to this tenant's allocations.
  // When the caller stops waiting for the answer (its RPC's deadline): a change that would
  // have to wait past it for another to finish is refused instead of done unseen.
  absl::Time deadline = absl::InfiniteFuture();

  static Caller FromPrincipal(const std::string& principal);
  bool operator_role() const { return tenant.empty(); }
};

struct EngineOptions {
  absl::Duration default_lease = absl::Hours(1);
  absl::Duration max_lease = absl::Hours(24 * 7);
  absl::Duration quiesce_timeout = absl::Seconds(5);
  absl::Duration retrain_timeout = absl::Seconds(10);
  // How long an armed retrain (sent as the switch is programmed, to agents that can see
  // light arrive) waits for its light; past it the agent answers untrained and fleetd
  // retrains the link once the switch is verified. Longer than a batch normally takes.
  // 0: retrains are never armed.
  absl::Duration armed_light_wait = absl::Seconds(5);
  // Backoff of retrain retries for DEGRADED allocations and of failed removals.
  absl::Duration retry_initial = absl::Seconds(1);
  absl::Duration retry_max = absl::Seconds(60);
  // Periodic reconciliation (report policy unless `unknown_policy` says otherwise); 0: off.
  absl::Duration reconcile_interval = absl::Seconds(60);
  v1::UnknownCrossConnectPolicy unknown_policy = v1::UNKNOWN_CROSS_CONNECT_POLICY_REPORT;
  // How often the background loop looks at leases and retries.
  absl::Duration tick = absl::Milliseconds(100);
  // Called at each stage boundary of a transaction with the stage's name (see
  // kFaultPoints); tests use it to kill fleetd at a precise point.
  std::function<void(const std::string& point)> fault_point;
  // Where stage timings, outcomes, releases, retrains and drift are counted; null: nowhere.
  metrics::ControllerMetrics* metrics = nullptr;
};

// The points at which EngineOptions::fault_point is called, in transaction order.
inline constexpr const char* kFaultPoints[] = {
    "persisted",   // Intent committed (PENDING), nothing touched.
    "quiesced",    // Ports quiesced, switch untouched; PROGRAMMING committed or landing if
                   // ports had to be quiesced, else not yet started.
    "programmed",  // Switch programmed and verified (armed links training); TRAINING not yet
                   // committed.
    "training",    // TRAINING committed; links training, not yet all answered.
    "trained",     // Links retrained; READY not yet committed.
    "ready",       // READY committed.
    "releasing",   // RELEASING committed; switch untouched.
    "removed",     // Cross-connects removed from the switch; RELEASED not yet committed.
};

class Engine {
 public:
  // None owned; all outlive the engine. `agents` may be null (links are then never
  // retrained: allocations stay DEGRADED naming the missing agent).
  Engine(EngineOptions options, store::Store* store, fabric::SwitchRegistry* switches,
         agents::CommandSender* agents, const Clock* clock);
  ~Engine();  // Calls Shutdown.

  // Reconciles every switch (resuming interrupted transactions) and starts the background
  // loop. A switch that cannot be read is reported (alarm event) and retried by the periodic
  // reconciliation; it does not stop fleetd from starting.
  absl::Status Start();
  // Stops taking new work and waits for running transactions to reach a persisted state.
  void Shutdown();
  // True once Shutdown has begun: long-lived streams end.
  bool stopping();

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
  // the switch is told. Activating the active phase changes nothing.
  // FAILED_PRECONDITION unless the allocation is READY or DEGRADED; NOT_FOUND for an unknown
  // phase (naming the phases there are); ABORTED while another transaction of it runs.
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
  // Checks that `caller` may watch allocation `id` or tenant `tenant`.
  absl::Status CheckWatch(const std::string& id, const std::string& tenant, const Caller& caller);

  // --- AdminService ---
  absl::StatusOr<v1::ReconcileResponse> Reconcile(const v1::ReconcileRequest& request,
                                                  const Caller& caller);
  absl::StatusOr<v1::DrainResponse> Drain(const v1::DrainRequest& request, const Caller& caller);
  absl::Status Undrain(const v1::UndrainRequest& request, const Caller& caller);
  // Substitutes a spare for the failed member `request.member` (operators only): the spare is
  // the request's, else the best free device of the same kind on the member's switch
  // (scheduler/replacement.h). Under admission, on a fresh snapshot, the circuits touching the
  // failed member are replaced in every phase by circuits to the spare and the members list
  // updated, in one store transaction (the allocation PROGRAMMING); then in the background the
  // active phase's old circuits come off the switch and the new ones are made in one batch
  // (removes first), verified and retrained, as a phase switch is. Circuits not touching the
  // failed member are left alone. A refused quiesce or switch batch fails the allocation and
  // takes the circuits from before off the switch. A dry run returns the plan and changes
  // nothing.
  // PERMISSION_DENIED for a job; FAILED_PRECONDITION unless READY or DEGRADED; NOT_FOUND for
  // a device that is not a member; RESOURCE_EXHAUSTED when no spare is free, naming the kind
  // and switch; ABORTED while another transaction of it runs.
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
  // A connected agent went away: the READY allocations with a circuit ending on one of its
  // O-NICs (`serials`) become DEGRADED, naming the host, until it returns. A retry first asks
  // the returned agent for the link's state and retrains only a link that is not up with its
  // expected peer, so a link that kept working is not disturbed.
  void AgentGone(const std::string& host, const std::vector<std::string>& serials,
                 const std::string& why);

  // --- For tests and the background loop ---
  // Releases every allocation whose lease has passed by the clock's now.
  void ExpireLeases();
  // Runs the retries that are due (retrain of DEGRADED links, removal of RELEASING ones).
  void RunDueRetries();
  // Blocks until no transaction is running.
  void WaitIdle();
  // Each switch's programming queue, by switch id.
  struct SwitchQueue {
    int batches = 0;  // Sent so far.
    int queued = 0;   // Change sets waiting for the next batch.
  };
  std::map<std::string, SwitchQueue> SwitchQueues();

 private:
  struct Retry {
    absl::Time due;
    absl::Duration backoff;
    // An agent connected while an attempt was running: the attempt may have missed it, so
    // the next one is at once, not after a longer backoff.
    bool agent_connected_during_attempt = false;
  };
  // Inventory as of one InventoryVersion: read once, shared by admissions and transactions
  // until an inventory or drain change commits.
  struct Fabric {
    uint64_t version = 0;
    v1::Inventory site;
    std::vector<v1::SwitchPort> ports;
    std::map<std::string, std::string> serials;  // O-NIC id → serial.
    // Ports and trunks as planning sees them, without circuits: which may take new light.
    // Admission plans on it with the circuits added (FabricSnapshot::WithCircuits).
    scheduler::FabricSnapshot usability;
  };
  absl::StatusOr<std::shared_ptr<const Fabric>> CurrentFabric();
  // The serial of O-NIC `onic`, from the cached inventory.
  absl::StatusOr<std::string> SerialOf(const std::string& onic);

  // Claims `id` for one transaction; false if another holds it.
  bool Claim(const std::string& id);
  // Claims `id` for a change a caller asks for. While the allocation is READY or DEGRADED
  // and the claim is held (a transaction's last steps after storing its outcome, a retry, a
  // lease check, reconciliation), waits for it, up to kClaimWait or `deadline` (the
  // caller's), whichever comes first: a caller acting on READY is not refused for a claim it
  // cannot see. False when the allocation is in another change (another state), when fleetd
  // is stopping, or past the wait.
  bool ClaimSettled(const std::string& id, absl::Time deadline);
  // How long a caller's change or release waits for a claim to be let go. Every holder lets
  // go within its own timeouts, well inside it.
  static constexpr absl::Duration kClaimWait = absl::Seconds(60);
  void Unclaim(const std::string& id);
  // Runs `fn` on a worker thread holding the claim on `id` (if any); the claim is dropped
  // after. Workers are pooled: one left idle by its last task takes the next, so a
  // transaction does not wait for a thread to be made. False (and `fn` dropped, the claim
  // too) once the engine is stopping.
  bool Spawn(const std::string& id, std::function<void()> fn);
  // A worker: runs queued tasks, and leaves after a while with none.
  void WorkerLoop();

  // The transaction's stages (engine.cc). Each runs with the claim held.
  // `admitted`: the plan and persist timings of a fresh request; empty when resuming.
  // Makes the desired circuits that are not ACTIVE and retrains them; takes the phase switch's
  // `removes` (circuits of a phase no longer active) off the switch in the same batch, before
  // the adds. A phase switch that fails at the switch goes back to phase `from`, DEGRADED
  // until its links retrain; any other failure fails the allocation.
  struct PhaseSwitch {
    // The phase active before; for a resumed transaction, the phase of the circuits it left
    // on the switch when that is certain (InterruptedSwitchFrom), else empty.
    std::string from;
    std::vector<v1::Circuit> removes;
  };
  // `stored`: the allocation as admission just stored it, which saves reading it back.
  void Reconfigure(const std::string& id, std::vector<v1::StageTiming> admitted,
                   PhaseSwitch phase_switch = {}, const v1::Allocation* stored = nullptr);
  // What an interrupted transaction of `a` left on the switch, as reconciliation last saw
  // it: the circuits of its inactive phases no desired circuit uses (a phase switch), and
  // the cross-connects a member change took out of it (Store::PendingRemovals) that nothing
  // desires now, as circuits whose O-NIC ends come from the fibers' wiring.
  std::vector<v1::Circuit> LeftBehind(const v1::Allocation& a);
  // The phase an interrupted phase switch of `a` was from, given what it `left` behind: the
  // one phase of the left circuits, when the switch holds all of that phase and nothing the
  // new phase adds, so a refusal can go back to it. Empty otherwise (a refusal then fails).
  std::string InterruptedSwitchFrom(const v1::Allocation& a, const std::vector<v1::Circuit>& left);
  // Takes the circuits off the switches and ends the allocation in `final_state` (RELEASED,
  // or FAILED for an eviction) with `final_reason`, which the RELEASING commit stores: an
  // allocation already RELEASING ends as its stored intent says, whatever is passed.
  void Release(const std::string& id, const std::string& principal, v1::AllocationState final_state,
               std::string final_reason);
  // Retrains the receiving ends of `circuits`; returns circuit id → failure reason. With
  // `check_first`, a link the agent reports up with its expected peer is left as it is.
  // (A transaction uses StartRetrain and FinishRetrain, to work while the links train.)
  std::map<std::string, std::string> Retrain(const std::vector<v1::Circuit>& circuits,
                                             bool check_first);
  // Retrains handed to the agents whose answers are not collected yet (StartRetrain).
  struct Training {
    std::unique_ptr<agents::SentCommands> sent;  // Null when nothing was sent.
    std::vector<const v1::Circuit*> circuits;    // Sent, in command order.
    std::map<std::string, std::string> failed;   // Not sent (no serial, no agent), with why.
    int agent_gone = 0;                          // Of `failed`, for lack of a connected agent.
  };
  // Hands the retrains of `circuits` to their agents and returns without waiting. `armed`:
  // as the switch is programmed, and only to agents that arm retrains
  // (CommandSender::ArmsRetrains), which train when the expected light arrives; every other
  // circuit is put in `unarmed`, to be retrained once the switch is programmed.
  Training StartRetrain(const std::vector<const v1::Circuit*>& circuits, bool armed,
                        std::vector<const v1::Circuit*>* unarmed = nullptr);
  // Which answers FinishRetrain counts in fleet_link_retrains_total: links the caller
  // retrains again are counted by that retrain.
  enum class Counted { kEvery, kTrainedOnly, kNone };
  // Collects the answers (into `failed`, circuit id → reason) and counts them.
  void FinishRetrain(Training training, std::map<std::string, std::string>& failed,
                     Counted counted = Counted::kEvery);
  // The switch was not programmed: quiesces the armed ports, which ends their wait for light
  // and leaves them out of service, and drops the retrains' answers.
  void Disarm(Training training);
  // Quiesces the O-NIC ports of `circuits`; an error names the port the agent refused.
  // `meanwhile` (if set) runs once the quiesce commands are written to the agents' streams,
  // while the agents work: a state commit need not hold them up. It does not run when no
  // port needs quiescing.
  absl::Status Quiesce(const std::vector<v1::Circuit>& circuits, const std::string& id,
                       const std::function<void()>& meanwhile = nullptr);
  // Programs each switch's part at once, one thread per switch beyond the first; on error the
  // switches are rolled back and the message returned (every failing switch's). The times
  // stored are the slowest switch's (the max with what the pointers hold), since the switches
  // work at once.
  // `retried` (if set) is told whether any switch applied the changes twice (its combined
  // batch failed for another request's part), so the light at their ports was interrupted.
  // `going` (if set) runs once, as the first switch's batch goes out (SwitchProgrammer), or
  // not at all if no switch was sent the changes.
  absl::Status Program(const std::vector<v1::Circuit>& removes,
                       const std::vector<v1::Circuit>& adds, absl::Duration* program_time,
                       absl::Duration* verify_time, bool* retried = nullptr,
                       const std::function<void()>& going = {});
  // What a member change (ReplaceMember, DetachDevices) stores and takes off the switch.
  struct MemberChange {
    store::CircuitReplacement replacement;  // Circuits removed and added, members after.
    std::vector<v1::Circuit> removes;       // The active phase's circuits it deletes.
  };
  // The frame of a member change: claims allocation `id` (ABORTED, naming `seen`, while
  // another change of it runs); under admission, FAILED_PRECONDITION unless it is READY or
  // DEGRADED ("`what` only when ..."), then `plan` plans the change on the stored allocation;
  // unless `dry_run`, the change is stored in one transaction (PROGRAMMING, `caller`'s) and
  // ReconfigureMembers starts its switch work. `after`: the allocation as stored after it (as
  // it was, for a dry run).
  absl::Status ChangeMembers(
      const std::string& id, v1::AllocationState seen, bool dry_run, const std::string& what,
      const std::string& event, const Caller& caller,
      const std::function<absl::Status(const v1::Allocation&, MemberChange&)>& plan,
      v1::Allocation* after);
  // Runs a member change's transaction (ReplaceMember, DetachDevices) in the background:
  // `removes` (the active phase's circuits it deleted) come off the switch, the new circuits
  // go on. If it fails, the circuits from before (`on_switch`) are taken off too; `what`
  // names the change in events.
  void ReconfigureMembers(const std::string& id, std::vector<v1::StageTiming> admitted,
                          std::vector<v1::Circuit> removes, std::vector<v1::Circuit> on_switch,
                          const std::string& what);
  // The fabric as the planner sees it now: inventory, port states, every desired circuit and
  // the live allocations' tenants.
  absl::StatusOr<scheduler::FabricSnapshot> Snapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(admit_mu_);
  // FAILED_PRECONDITION naming each circuit of `adds` (a phase's circuits to put on the
  // switch) whose O-NIC port or trunk is drained or failed now.
  absl::Status PhaseUsable(const std::string& phase, const std::vector<v1::Circuit>& adds);
  void RetrainDegraded(const std::string& id);
  void ScheduleRetry(const std::string& id);
  void Fault(const std::string& point);
  // Appends an event that is not a state change of an allocation (those come with
  // UpdateAllocation); a failure to record it is logged, not fatal.
  void Record(const std::string& kind, const std::string& object_kind, const std::string& object_id,
              v1::EventSeverity severity, const std::string& principal, const std::string& message);

  absl::StatusOr<SwitchProgrammer*> Programmer(const std::string& switch_id);
  absl::StatusOr<v1::Allocation> Update(const store::AllocationUpdate& update,
                                        const std::string& principal);
  absl::StatusOr<v1::Allocation> Authorized(const std::string& id, const Caller& caller);
  std::string NewAllocationId();

  // Reconciliation (reconciler.cc).
  // With `wait_for_resumed`, waits for the interrupted transactions it resumed to end and
  // counts those rolled back (an operator's request; start-up and periodic passes do not wait).
  absl::StatusOr<v1::ReconcileResponse> ReconcileSwitches(
      const std::string& switch_id, v1::UnknownCrossConnectPolicy unknown, bool dry_run,
      const std::string& principal, const std::string& trigger, bool wait_for_resumed = false);
  // Compares one switch, read through `driver` while the caller holds it exclusively.
  absl::Status ReconcileOne(const v1::Switch& sw, switches::OpticalSwitch& driver,
                            v1::UnknownCrossConnectPolicy unknown, bool dry_run,
                            const std::string& principal, v1::ReconcileResponse& response,
                            std::set<std::string>& affected);
  // Claims every allocation a crash left mid-transaction (no thread of this process runs it).
  std::vector<std::string> ClaimInterrupted();
  // Runs the claimed interrupted transactions to their end, each on its own thread.
  void Resume(const std::vector<std::string>& ids);
  void BackgroundLoop();

  const EngineOptions options_;
  store::Store* const store_;
  fabric::SwitchRegistry* const switches_;
  agents::CommandSender* const agents_;
  const Clock* const clock_;
  metrics::ControllerMetrics& metrics_;

  absl::Mutex admit_mu_;  // Serializes snapshot → plan → persist, so plans do not collide.
  // Tenant of every live allocation (admitted, or found live at start; Snapshot forgets one
  // that holds no circuit any more): what planning needs to keep tenants apart, without
  // reading every allocation on each request.
  std::map<std::string, std::string> tenants_ ABSL_GUARDED_BY(admit_mu_);

  absl::Mutex mu_;
  absl::CondVar changed_;
  // Wakes the background loop before its tick: stopping, or a retry made due now. Apart from
  // changed_, which every finished task signals: waking on those ran due retries at moments
  // nobody chose, and a test could not see the state before its retry.
  absl::CondVar background_wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // Transaction threads still working.
  // Every transaction thread, joined once done (reaped by Spawn, all of them at Shutdown), so
  // none outlives the engine.
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};  // Left WorkerLoop: ready to join.
  };
  std::list<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
  struct Task {
    std::string id;  // The claim dropped after it; empty for none.
    std::function<void()> fn;
  };
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);  // Spawned, not yet taken by a worker.
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar task_queued_;
  std::set<std::string> claimed_ ABSL_GUARDED_BY(mu_);         // Allocations in a transaction.
  std::map<std::string, Retry> retries_ ABSL_GUARDED_BY(mu_);  // By allocation id.
  std::map<std::string, std::unique_ptr<SwitchProgrammer>> programmers_ ABSL_GUARDED_BY(mu_);
  // Replaced when their switch's driver was (its address changed), and kept: a transaction
  // may still be inside one, as the registry keeps the drivers it replaced.
  std::vector<std::unique_ptr<SwitchProgrammer>> retired_programmers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, switches::OpticalSwitch*> programmer_drivers_ ABSL_GUARDED_BY(mu_);
  absl::Time next_reconcile_ ABSL_GUARDED_BY(mu_);
  absl::Time next_lease_check_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Fabric> fabric_ ABSL_GUARDED_BY(mu_);
  std::thread background_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ENGINE_H_
