#include "controller/engine/link_trainer.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "controller/agent_registry/retrain_command.h"
#include "controller/engine/circuits.h"
#include "fleet/v1/names.h"

namespace fleet::engine {

absl::Status LinkTrainer::Quiesce(const std::vector<v1::Circuit>& circuits, const std::string& id,
                                  const std::function<void()>& meanwhile) {
  agent_registry::CommandSender* const agents = ctx_.agents;
  std::vector<agent_registry::AddressedCommand> commands;
  std::vector<std::string> names;
  std::vector<std::string> unmanaged;
  absl::Status addressed = absl::OkStatus();
  if (agents != nullptr) {
    std::set<std::pair<std::string, uint32_t>> ports;
    for (const v1::Circuit& c : circuits) {
      // A left-behind removal whose end is a trunk has no O-NIC port there.
      if (!c.source().onic().empty()) ports.insert({c.source().onic(), c.source().port()});
      if (!c.destination().onic().empty()) {
        ports.insert({c.destination().onic(), c.destination().port()});
      }
    }
    for (const auto& [onic_id, port] : ports) {
      absl::StatusOr<std::string> serial = inventory_->SerialOf(onic_id);
      if (!serial.ok()) {
        addressed = serial.status();
        break;
      }
      if (!agents->HasOwner(*serial)) {
        unmanaged.push_back(v1::PortName(onic_id, port));
        continue;
      }
      // Out of service already: a port in no circuit is kept quiesced (QuiesceIdlePorts), and
      // a released circuit's port stays quiesced until retrained.
      if (agents->KnownQuiesced(*serial, port)) continue;
      commands.push_back(QuiesceCommand(*serial, port));
      names.push_back(v1::PortName(onic_id, port));
    }
  }
  if (!addressed.ok()) return addressed;
  std::vector<absl::StatusOr<v1::CommandResult>> results;
  if (!commands.empty()) {
    std::unique_ptr<agent_registry::SentCommands> sent =
        agents->Send(std::move(commands), ctx_.clock->Now() + ctx_.options.quiesce_timeout);
    agents->AwaitWritten(*sent, kLetCommandsLeave);
    if (meanwhile) meanwhile();
    results = agents->Await(std::move(sent));
  }
  if (!unmanaged.empty()) {
    ctx_.Record("allocation.quiesce_skipped", "allocation", id, v1::EVENT_SEVERITY_WARNING,
                "fleetd",
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

std::vector<v1::Circuit> LinkTrainer::NotUp(const std::vector<v1::Circuit>& circuits) {
  // Ask before retraining: a link that is up with its expected peer carries traffic.
  std::vector<agent_registry::AddressedCommand> reads;
  std::vector<const v1::Circuit*> asked;
  std::vector<std::string> expected;
  for (const v1::Circuit& c : circuits) {
    absl::StatusOr<std::string> dst = inventory_->SerialOf(c.destination().onic());
    absl::StatusOr<std::string> src = inventory_->SerialOf(c.source().onic());
    if (!dst.ok() || !src.ok() || !ctx_.agents->HasOwner(*dst)) continue;
    agent_registry::AddressedCommand& cmd = reads.emplace_back();
    cmd.onic_serial = *dst;
    cmd.command.mutable_read_port()->set_onic_serial(*dst);
    cmd.command.mutable_read_port()->set_port(c.destination().port());
    asked.push_back(&c);
    expected.push_back(v1::PortName(*src, c.source().port()));
  }
  std::vector<absl::StatusOr<v1::CommandResult>> states =
      ctx_.agents->SendCommands(std::move(reads), ctx_.clock->Now() + ctx_.options.quiesce_timeout);
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
  return down;
}

void LinkTrainer::Failures::Add(const std::string& id, std::string reason, bool for_lack_of_agent) {
  if (!why.emplace(id, std::move(reason)).second) return;
  if (for_lack_of_agent) no_agent.insert(id);
}

void LinkTrainer::Failures::Merge(const Failures& other) {
  for (const auto& [id, reason] : other.why) Add(id, reason, other.no_agent.contains(id));
}

LinkTrainer::Failures LinkTrainer::Retrain(const std::vector<v1::Circuit>& circuits,
                                           bool check_first, absl::Time by) {
  if (check_first && ctx_.agents != nullptr) {
    return Retrain(NotUp(circuits), /*check_first=*/false, by);
  }
  std::vector<const v1::Circuit*> all;
  for (const v1::Circuit& c : circuits) all.push_back(&c);
  Failures failed;
  FinishRetrain(StartRetrain(all, /*armed=*/false, nullptr, by), failed);
  return failed;
}

v1::PcieIdentity EnumeratedBehind(const CachedInventory& site, const v1::Circuit& c) {
  const v1::Device* at = site.FindDevice(site.DeviceOf(c.destination().onic()));
  const v1::Device* from = site.FindDevice(site.DeviceOf(c.source().onic()));
  if (at == nullptr || from == nullptr) return {};
  return agent_registry::EnumeratedBehind(*at, *from);
}

LinkTrainer::Training LinkTrainer::StartRetrain(const std::vector<const v1::Circuit*>& circuits,
                                                bool armed,
                                                std::vector<const v1::Circuit*>* unarmed,
                                                absl::Time by) {
  agent_registry::CommandSender* const agents = ctx_.agents;
  const EngineOptions& options = ctx_.options;
  Training training;
  std::vector<agent_registry::AddressedCommand> commands;
  // For the PCIe identity of each source's device: without it a pcie-sysfs agent would check
  // nothing, so a circuit whose inventory cannot be read is not retrained.
  absl::StatusOr<std::shared_ptr<const CachedInventory>> site = inventory_->Current();
  for (const v1::Circuit* c : circuits) {
    if (!site.ok()) {
      training.failed.Add(
          c->id(),
          absl::StrCat("link ", LinkName(*c), ": reading the inventory: ", site.status().message()),
          /*for_lack_of_agent=*/false);
      continue;
    }
    absl::StatusOr<std::string> dst = inventory_->SerialOf(c->destination().onic());
    absl::StatusOr<std::string> src = inventory_->SerialOf(c->source().onic());
    if (armed && (options.armed_light_wait <= absl::ZeroDuration() || !dst.ok() || !src.ok() ||
                  agents == nullptr || !agents->ArmsRetrains(*dst))) {
      if (unarmed != nullptr) unarmed->push_back(c);
      continue;
    }
    if (!dst.ok() || !src.ok()) {
      training.failed.Add(c->id(), std::string((dst.ok() ? src.status() : dst.status()).message()),
                          /*for_lack_of_agent=*/false);
      continue;
    }
    if (agents == nullptr || !agents->HasOwner(*dst)) {
      training.failed.Add(c->id(),
                          absl::StrCat("link ", LinkName(*c), ": no connected agent for O-NIC ",
                                       c->destination().onic(), " (serial ", *dst, ")"),
                          /*for_lack_of_agent=*/true);
      continue;
    }
    if (!agents->HasOwner(*src)) training.sender_absent.insert(c->id());
    agent_registry::AddressedCommand& cmd = commands.emplace_back();
    cmd.onic_serial = *dst;
    agent_registry::ExpectedPeer peer{*src, c->source().port(), {}};
    peer.device = EnumeratedBehind(**site, *c);
    cmd.command = agent_registry::RetrainCommand(*dst, c->destination().port(), peer);
    if (armed) {
      *cmd.command.mutable_retrain()->mutable_await_light() =
          ToProtoDuration(options.armed_light_wait);
    }
    training.circuits.push_back(c);
  }
  if (!commands.empty()) {
    const absl::Time deadline =
        std::min(by, ctx_.clock->Now() + options.retrain_timeout +
                         (armed ? options.armed_light_wait : absl::ZeroDuration()));
    training.sent = agents->Send(std::move(commands), deadline);
  }
  return training;
}

void LinkTrainer::AwaitWritten(const Training& training, absl::Duration within) {
  if (training.sent != nullptr) ctx_.agents->AwaitWritten(*training.sent, within);
}

void LinkTrainer::FinishRetrain(Training training, Failures& failed, Counted counted) {
  // Counted for fleet_link_retrains_total.
  int agent_gone = static_cast<int>(training.failed.no_agent.size());
  int untrained = static_cast<int>(training.failed.why.size()) - agent_gone, trained = 0;
  failed.Merge(training.failed);
  std::vector<absl::StatusOr<v1::CommandResult>> results;
  if (training.sent != nullptr) results = ctx_.agents->Await(std::move(training.sent));
  for (size_t i = 0; i < results.size(); ++i) {
    const v1::Circuit& c = *training.circuits[i];
    if (!results[i].ok()) {
      // UNAVAILABLE: the agent went away while the link trained (a connected agent's own
      // UNAVAILABLE comes as its answer's code, below).
      const bool gone = results[i].status().code() == absl::StatusCode::kUnavailable;
      failed.Add(c.id(), absl::StrCat("link ", LinkName(c), ": ", results[i].status().message()),
                 gone);
      ++(gone ? agent_gone : untrained);
    } else if (results[i]->code() != 0) {
      failed.Add(c.id(), absl::StrCat("link ", LinkName(c), ": ", results[i]->message()),
                 training.sender_absent.contains(c.id()));
      ++untrained;
    } else {
      ++trained;
    }
  }
  if (counted == Counted::kNone) return;
  ctx_.metrics.LinkRetrains("trained", trained);
  if (counted == Counted::kTrainedOnly) return;
  ctx_.metrics.LinkRetrains("failed", untrained);
  ctx_.metrics.LinkRetrains("agent_gone", agent_gone);
}

void LinkTrainer::Disarm(Training training) {
  if (training.sent == nullptr) return;
  // Quiesced whatever the registry last heard: an armed port's last word may still be the
  // QUIESCED from before it was armed.
  std::vector<agent_registry::AddressedCommand> quiesces;
  for (const v1::Circuit* c : training.circuits) {
    absl::StatusOr<std::string> dst = inventory_->SerialOf(c->destination().onic());
    if (!dst.ok()) continue;
    quiesces.push_back(QuiesceCommand(*dst, c->destination().port()));
  }
  ctx_.agents->SendCommands(std::move(quiesces), ctx_.clock->Now() + ctx_.options.quiesce_timeout);
  ctx_.agents->Await(std::move(training.sent));
}

}  // namespace fleet::engine
