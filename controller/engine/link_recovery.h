// How the engine follows failures, and what it retries: an agent that goes, a link its
// agent reports down, a switch port the monitor finds failed or dark, a device an operator
// marks failed each degrade the allocations with a circuit on it; an agent that connects
// gets its idle ports quiesced and makes every retry due at once. A due retry
// (RetryScheduler) of a DEGRADED allocation first makes again what the switches lack of it
// (Reconciler::RepairHeld: a link dark for want of a cross-connect is the switch's fault,
// not a member's), then heals it when its failure policy says so (Healer), or else retrains
// its links that are not up (asking the agents first, so a link that kept working is not
// disturbed); a due retry of a RELEASING one finishes its removal.
#ifndef FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_
#define FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

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
  // Runs the retries that are due, each on a worker holding its allocation's claim.
  void RunDueRetries();
  // One retry of allocation `id`, whose claim the caller holds (its retry Running): heals or
  // retrains a DEGRADED one, finishes a RELEASING one's removal, forgets any other.
  void RunRetry(const std::string& id);

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

  // Why a live circuit is hurt by a failure, or "" when it is not. Asked without a claim (to
  // find the allocations) and again under it.
  using Hurt = std::function<std::string(const v1::Circuit&)>;
  // The frame of LinksDown, SwitchPortsUnhealthy and DeviceFailed, on a worker: every live
  // allocation with a circuit `hurt` names is claimed (waiting up to a minute for a
  // transaction holding it, as a report is not sent again) and Degrade'd; a retry is then due
  // `retry_after` later, or with 0 (a failed part) runs at once on a worker of its own
  // (`event_kind` labels the event of an allocation already DEGRADED).
  void DegradeWhere(Hurt hurt, absl::Duration retry_after, std::string event_kind);
  // DegradeWhere's work on allocation `id`, whose claim the caller holds: its ACTIVE circuits
  // `hurt` names become DEGRADED with its words, and it too (a DEGRADED one keeps its earlier
  // reasons); false when it is neither READY nor DEGRADED or has no such circuit.
  bool Degrade(const std::string& id, const Hurt& hurt, const std::string& event_kind);

  const EngineParts p_;
  Releaser* const releaser_;
  Healer* const healer_;
  Reconciler* const reconciler_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_
