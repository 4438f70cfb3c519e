// How the engine follows the agents, and what it retries: an agent that goes degrades the
// READY allocations with a link on its O-NICs; one that connects gets its idle ports
// quiesced and makes every retry due at once. A due retry (RetryScheduler) retrains a
// DEGRADED allocation's links that are not up (asking the agents first, so a link that kept
// working is not disturbed), or finishes a RELEASING one's removal.
#ifndef FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_
#define FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_

#include <map>
#include <string>
#include <vector>

#include "controller/engine/engine_parts.h"
#include "controller/engine/release.h"

namespace fleet::engine {

class LinkRecovery {
 public:
  LinkRecovery(const EngineParts& parts, Releaser* releaser) : p_(parts), releaser_(releaser) {}

  // Engine::AgentConnected, Engine::QuiesceIdlePorts and Engine::AgentGone (engine.h).
  void AgentConnected(const std::string& host, const std::vector<std::string>& serials);
  void QuiesceIdlePorts(const std::vector<std::string>& serials);
  void AgentGone(const std::string& host, const std::vector<std::string>& serials,
                 const std::string& why);
  // Engine::LinksDown (engine.h).
  void LinksDown(const std::string& host, const std::vector<v1::LinkState>& links);
  // Runs the retries that are due, each on a worker holding its allocation's claim.
  void RunDueRetries();

 private:
  // The quiesce commands for `serials`' ports in no circuit; under admission.
  std::vector<agent_registry::AddressedCommand> IdlePortQuiesces(
      const std::vector<std::string>& serials);
  void RetrainDegraded(const std::string& id);
  // LinksDown's work on allocation `id`, whose claim the caller holds: its ACTIVE circuits
  // arriving on a port of `down` (by v1::PortName of serial and port) become DEGRADED, and it
  // too; false when it is neither READY nor DEGRADED or has no such circuit.
  bool DegradeLinksDown(const std::string& id, const std::string& host,
                        const std::map<std::string, const v1::LinkState*>& down);

  const EngineParts p_;
  Releaser* const releaser_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_LINK_RECOVERY_H_
