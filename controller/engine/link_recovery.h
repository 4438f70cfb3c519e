// How the engine follows failures, and what it retries. Every observation only marks the
// allocations it concerns in the sync queue (sync_queue.h), with the fault it saw; one
// Sync(allocation) at a time, on a worker holding the allocation's claim, then does the next
// step: an agent that goes, a link its agent reports down, a switch port the monitor finds
// failed or dark, a device an operator marks failed each first degrade the allocation's
// circuits they hurt (looked at again at that moment: an agent back by then is not gone);
// then a DEGRADED allocation first has what the switches lack of it made again
// (Reconciler::RepairHeld: a link dark for want of a cross-connect is the switch's fault, not
// a member's), then is healed when its failure policy says so (Healer), or else has its links
// that are not up retrained (asking the agents first, so a link that kept working is not
// disturbed); a RELEASING one has its removal finished. An allocation a transaction holds is
// synced once the transaction lets go (WorkerPool's unclaim runs the due syncs), so no
// observation waits for a claim or is lost to one. An agent that connects gets its idle
// ports quiesced and makes every sync due at once.
#ifndef FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_
#define FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/healer.h"
#include "controller/engine/reconciler.h"
#include "controller/engine/release.h"

namespace fleet::engine {

class LinkRecovery {
 public:
  LinkRecovery(const EngineParts& parts, Releaser* releaser, Healer* healer, Reconciler* reconciler)
      : p_(parts), releaser_(releaser), healer_(healer), reconciler_(reconciler) {}

  // Engine::AgentConnected, Engine::QuiesceIdlePorts and Engine::AgentGone (engine.h).
  void AgentConnected(const std::string& host, const std::vector<std::string>& serials);
  void QuiesceIdlePorts(const std::vector<std::string>& serials);
  void AgentGone(const std::string& host, const std::vector<std::string>& serials,
                 const std::string& why);
  // Engine::LinksDown (engine.h).
  void LinksDown(const std::string& host, const std::vector<v1::LinkState>& links);
  // The switch monitor found `ports` (v1::PortName → what it read) FAILED or DEGRADED: the
  // live circuits crossing one become DEGRADED as for LinksDown, and a retry (which heals
  // under a failure policy) is due at once.
  void SwitchPortsUnhealthy(const std::map<std::string, std::string>& ports);
  // An operator marked `device` FAILED (`why`): its allocations' circuits touching it become
  // DEGRADED, and a retry (which heals under a failure policy) is due at once.
  void DeviceFailed(const std::string& device, const std::string& why);
  // An operator marked `device` healthy: the DEGRADED allocations it is a member of are
  // retried at once (a failed device kept them DEGRADED however their links trained).
  void DeviceHealed(const std::string& device);
  // The switch monitor found `ports` (v1::PortName) well again: the DEGRADED allocations
  // crossing one are retried at once.
  void SwitchPortsWell(const std::set<std::string>& ports);
  // At start: the live circuits crossing a switch port or touching a device the store holds
  // FAILED are degraded (as SwitchPortsUnhealthy and DeviceFailed), since a failure stored
  // just before a crash may not have reached them.
  void DegradeOnFailedParts();
  // Marks every DEGRADED and RELEASING allocation not queued yet (a restart, the periodic
  // reconciliation): nothing recovers outside the queue.
  void MarkUnsettled();
  // Marks every allocation with a fault waiting whose mark the full queue refused (each tick).
  void MarkFaulted();
  // Runs the syncs that are due, each on a worker holding its allocation's claim; one whose
  // claim a transaction holds stays due, and is run when it lets go.
  void RunDueRetries();
  // Runs `id`'s sync (Sync) on a worker if it is due and its claim is free (also WorkerPool's
  // unclaim hook).
  void RunIfDue(const std::string& id);

 private:
  // Why a live circuit is hurt by a failure, or "" when it is not. Asked without a claim (to
  // find the allocations) and again in the sync.
  using Hurt = std::function<std::string(const v1::Circuit&)>;
  // A failure observed for an allocation, waiting for its sync.
  struct Fault {
    Hurt hurt;
    // The retry after the circuits are DEGRADED; 0: a failed part, healed at once.
    absl::Duration retry_after;
    std::string event_kind;  // The event of an allocation already DEGRADED.
  };

  // Logs a refused mark (the queue counts it; the periodic pass marks it again).
  static void Mark(const absl::Status& marked);
  // The sync of allocation `id`, whose claim the caller holds (its entry Running), with the
  // faults observed for it since its last sync: records them, then heals or retrains a
  // DEGRADED one, finishes a RELEASING one's removal, and forgets any other. Ends the entry's
  // attempt (RetryLater, RetryAt, NothingNew or Forget), itself or through what it starts.
  void Sync(const std::string& id, const std::vector<Fault>& faults);
  // Sync's step for DEGRADED `a`: repair on the switch, heal, or retrain.
  void SyncDegraded(const v1::Allocation& a);

 private:
  // The quiesce commands for `serials`' ports in no circuit; under admission.
  std::vector<agent_registry::AddressedCommand> IdlePortQuiesces(
      const std::vector<std::string>& serials);
  // Makes the retry of each DEGRADED allocation `held` says is held back by a part due now.
  void RetryDegradedWhere(const std::function<bool(const v1::Allocation&)>& held);
  // Retrains DEGRADED `a`'s links that are not ACTIVE; true when it is READY again. `count`:
  // the switches were seen to hold the links' cross-connects, so their failures count towards
  // their devices' SUSPECT and the next retry comes by the failure policy's deadline; without
  // it a dark link says nothing of a device, and the next retry waits out the backoff.
  bool RetrainDegraded(const v1::Allocation& a, bool count);

  // The frame of AgentGone, LinksDown, SwitchPortsUnhealthy and DeviceFailed, on a worker:
  // every live allocation with a circuit `hurt` names gets the fault and is marked; its sync
  // Degrade's it, and its retry is then due `retry_after` later, or with 0 (a failed part)
  // at once.
  void DegradeWhere(Hurt hurt, absl::Duration retry_after, std::string event_kind);
  // A fault's work on allocation `id`, whose claim the caller holds: its ACTIVE circuits
  // `hurt` names become DEGRADED with its words, and it too (a DEGRADED one keeps its earlier
  // reasons); false when it is neither READY nor DEGRADED or has no such circuit.
  bool Degrade(const std::string& id, const Hurt& hurt, const std::string& event_kind);

  const EngineParts p_;
  Releaser* const releaser_;
  Healer* const healer_;
  Reconciler* const reconciler_;
  // Taken before the sync queue's mutex, so a fault and its mark are one step.
  absl::Mutex faults_mu_;
  // Faults observed and not yet synced, by allocation id.
  std::map<std::string, std::vector<Fault>> faults_ ABSL_GUARDED_BY(faults_mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_
