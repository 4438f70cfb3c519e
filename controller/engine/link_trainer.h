// The engine's side of the host agents: quiescing O-NIC ports before their light changes,
// and retraining links with their expected peer.
//
// A retrain is sent to the receiving end of a circuit (its destination port), naming the
// source port as the peer it must see. A transaction starts its retrains (StartRetrain),
// works while the links train, then collects the answers (FinishRetrain), or cancels them
// (Disarm) when the switch was not programmed. Retrain does both for a retry.
#ifndef FLEET_CONTROLLER_ENGINE_LINK_TRAINER_H_
#define FLEET_CONTROLLER_ENGINE_LINK_TRAINER_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "controller/engine/engine_context.h"
#include "controller/engine/inventory_cache.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

// How long a transaction lets the commands it handed to the agents go out on their streams
// before it commits the state they belong to: on a busy host the commit would otherwise
// hold the CPU the streams' writers need, and the agents would start late. A stuck stream
// costs this once.
inline constexpr absl::Duration kLetCommandsLeave = absl::Milliseconds(2);

// What the agent at circuit `c`'s destination should find enumerated behind its port once `c`
// trained (agent_registry::EnumeratedBehind on the circuit's two devices, from `site`).
v1::PcieIdentity EnumeratedBehind(const CachedInventory& site, const v1::Circuit& c);

class LinkTrainer {
 public:
  LinkTrainer(const EngineContext& ctx, InventoryCache* inventory)
      : ctx_(ctx), inventory_(inventory) {}

  // Quiesces the O-NIC ports of `circuits` (of allocation `id`, for events); an error names
  // the port the agent refused. A port whose agent is not connected is skipped (an event
  // says so); one the agent already reported quiesced gets no command. `meanwhile` (if set)
  // runs once the commands are written to the agents' streams, while the agents work; it
  // does not run when no port needs quiescing.
  absl::Status Quiesce(const std::vector<v1::Circuit>& circuits, const std::string& id,
                       const std::function<void()>& meanwhile = nullptr);

  // The links that did not train: circuit id → why; and which of them reached no agent
  // (none connected at the receiving end, or it left while the link trained; or none at the
  // sending end, whose light may then be out), which says nothing of the receiving device.
  struct Failures {
    std::map<std::string, std::string> why;
    std::set<std::string> no_agent;  // A subset of `why`'s keys.

    // Records circuit `id`'s failure, unless one is recorded already.
    void Add(const std::string& id, std::string reason, bool for_lack_of_agent);
    // Adds `other`'s, as Add does each.
    void Merge(const Failures& other);
  };
  // Retrains handed to the agents whose answers are not collected yet.
  struct Training {
    std::unique_ptr<agent_registry::SentCommands> sent;  // Null when nothing was sent.
    std::vector<const v1::Circuit*> circuits;            // Sent, in command order.
    Failures failed;                                     // Not sent (no serial, no agent).
    std::set<std::string> sender_absent;                 // Sent, with no agent at the sending end.
  };
  // Hands the retrains of `circuits` to their agents and returns without waiting. `armed`:
  // as the switch is programmed, and only to agents that arm retrains
  // (CommandSender::ArmsRetrains), which train when the expected light arrives; every other
  // circuit is put in `unarmed`, to be retrained once the switch is programmed.
  Training StartRetrain(const std::vector<const v1::Circuit*>& circuits, bool armed,
                        std::vector<const v1::Circuit*>* unarmed = nullptr,
                        absl::Time by = absl::InfiniteFuture());
  // Waits up to `within` for the retrains of `training` to be written to the agents' streams.
  void AwaitWritten(const Training& training, absl::Duration within);
  // Which answers FinishRetrain counts in fleet_link_retrains_total: links the caller
  // retrains again are counted by that retrain.
  enum class Counted { kEvery, kTrainedOnly, kNone };
  // Collects the answers (into `failed`, circuit id → reason) and counts them.
  void FinishRetrain(Training training, Failures& failed, Counted counted = Counted::kEvery);
  // The switch was not programmed: quiesces the armed ports, which ends their wait for light
  // and leaves them out of service, and drops the retrains' answers.
  void Disarm(Training training);
  // Retrains the receiving ends of `circuits`; returns the links that did not train. With
  // `check_first`, a link the agent reports up with its expected peer is left as it is. The
  // agents give up at `by` if that is sooner than the retrain timeout (a failure policy's
  // deadline, after which the member is replaced rather than retrained).
  Failures Retrain(const std::vector<v1::Circuit>& circuits, bool check_first,
                   absl::Time by = absl::InfiniteFuture());

 private:
  // The circuits of `circuits` whose link is not up with its expected peer, as the agents
  // answer.
  std::vector<v1::Circuit> NotUp(const std::vector<v1::Circuit>& circuits);

  const EngineContext& ctx_;
  InventoryCache* const inventory_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_LINK_TRAINER_H_
