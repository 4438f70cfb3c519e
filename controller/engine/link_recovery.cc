#include "controller/engine/link_recovery.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/wording.h"
#include "controller/engine/circuits.h"
#include "fleet/v1/names.h"

namespace fleet::engine {

void LinkRecovery::RunDueRetries() {
  if (p_.pool.stopping()) return;
  for (const std::string& id : p_.retries.Due()) {
    if (!p_.pool.Claim(id)) continue;
    // Pushed out until this attempt schedules the next one (or clears it).
    p_.retries.Running(id);
    p_.pool.Spawn(id, [this, id] { RunRetry(id); });
  }
}

void LinkRecovery::RunRetry(const std::string& id) {
  absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
  if (a.ok() && a->state() == v1::ALLOCATION_STATE_DEGRADED) {
    const bool refused = !healer_->Refusal(id).empty();
    // A failed device or own port names its member at once (rules 1 and 2): it is replaced
    // whatever the switch holds, so the switch is not read first.
    if (!refused && !healer_->FailedPartReasons(*a).empty() && healer_->StartIfDue(*a)) return;
    // What the switches lack of it is made again first: a link dark for want of its
    // cross-connect is the switch's fault, so its links get their `within` again.
    const Reconciler::HeldCheck on_switch = reconciler_->RepairHeld(*a, "fleetd");
    if (!on_switch.verified) {
      FLEET_LOG(WARNING) << "allocation " << id << ": " << on_switch.why_not;
    }
    healer_->CrossConnectsSeen(id, p_.ctx.clock->Now(),
                               !on_switch.verified    ? Healer::Seen::kUnseen
                               : on_switch.remade > 0 ? Healer::Seen::kRemade
                                                      : Healer::Seen::kWhole);
    // Links past the policy's `within`: a spare, not a retrain. Once a heal was refused (no
    // spare), the links are retrained first, since the fault may have cleared, and a spare
    // is looked for again only if they fail.
    if (!refused && healer_->StartIfDue(*a)) return;
    if (RetrainDegraded(*a, on_switch.verified) || !refused) return;
    if (absl::StatusOr<v1::Allocation> still = p_.ctx.store->GetAllocation(id);
        still.ok() && still->state() == v1::ALLOCATION_STATE_DEGRADED) {
      healer_->StartIfDue(*still);
    }
  } else if (a.ok() && a->state() == v1::ALLOCATION_STATE_RELEASING) {
    // Ends as its stored intent says (Release reads it).
    releaser_->Release(id, "fleetd", v1::ALLOCATION_STATE_RELEASED, "");
  } else {
    p_.retries.Forget(id);
    healer_->Forget(id);
  }
}

void LinkRecovery::AgentConnected(const std::string& host,
                                  const std::vector<std::string>& serials) {
  p_.retries.AgentConnected();
  // Not on this thread: the registry calls from the agent's stream, which must go on reading
  // to take the answers.
  if (!serials.empty()) {
    p_.pool.Spawn(absl::StrCat("agent ", host), [this, serials] { QuiesceIdlePorts(serials); });
  }
}

std::vector<agent_registry::AddressedCommand> LinkRecovery::IdlePortQuiesces(
    const std::vector<std::string>& serials) {
  agent_registry::CommandSender* const agents = p_.ctx.agents;
  const std::set<std::string> wanted(serials.begin(), serials.end());
  std::vector<agent_registry::AddressedCommand> commands;
  absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
  absl::StatusOr<std::vector<v1::Circuit>> circuits = p_.ctx.store->ListCircuits({});
  if (!inventory.ok() || !circuits.ok()) {
    FLEET_LOG(WARNING) << "idle ports not quiesced: "
                       << (inventory.ok() ? circuits.status() : inventory.status());
    return commands;
  }
  std::set<std::pair<std::string, uint32_t>> in_use;  // (O-NIC id, port)
  for (const v1::Circuit& c : *circuits) {
    in_use.insert({c.source().onic(), c.source().port()});
    in_use.insert({c.destination().onic(), c.destination().port()});
  }
  for (const v1::Onic& onic : (*inventory)->site.onics()) {
    if (!wanted.contains(onic.serial())) continue;
    for (uint32_t port = 1; port <= static_cast<uint32_t>(onic.ports_size()); ++port) {
      if (in_use.contains({onic.id(), port}) || !agents->HasOwner(onic.serial()) ||
          agents->KnownQuiesced(onic.serial(), port)) {
        continue;
      }
      commands.push_back(QuiesceCommand(onic.serial(), port));
    }
  }
  return commands;
}

void LinkRecovery::QuiesceIdlePorts(const std::vector<std::string>& serials) {
  agent_registry::CommandSender* const agents = p_.ctx.agents;
  if (agents == nullptr) return;
  std::vector<agent_registry::AddressedCommand> commands;
  std::unique_ptr<agent_registry::SentCommands> sent;
  {
    absl::MutexLock admit(&p_.admission.mu());
    commands = IdlePortQuiesces(serials);
    if (commands.empty()) return;
    sent = agents->Send(commands, p_.ctx.clock->Now() + p_.ctx.options.quiesce_timeout);
  }
  const std::vector<absl::StatusOr<v1::CommandResult>> results = agents->Await(std::move(sent));
  std::vector<std::string> refused;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok() && results[i]->code() == 0) continue;
    const agent_registry::AddressedCommand& c = commands[i];
    refused.push_back(
        absl::StrCat(v1::PortName(c.onic_serial, c.command.quiesce().port()), " (",
                     results[i].ok() ? results[i]->message() : results[i].status().message(), ")"));
  }
  if (!refused.empty()) {
    FLEET_LOG(WARNING) << "idle O-NIC ports not quiesced (a request using them quiesces them "
                          "first): "
                       << absl::StrJoin(refused, ", ");
  }
}

void LinkRecovery::AgentGone(const std::string& host, const std::vector<std::string>& serials,
                             const std::string& why) {
  const std::set<std::string> gone(serials.begin(), serials.end());
  absl::StatusOr<std::vector<v1::Allocation>> ready =
      p_.ctx.store->ListAllocations({"", v1::ALLOCATION_STATE_READY, false});
  if (!ready.ok()) return;
  for (const v1::Allocation& a : *ready) {
    const std::string reason = absl::StrCat("the agent of host ", host, " is gone (", why, ")");
    store::AllocationUpdate u;
    u.id = a.id();
    for (const v1::Circuit& c : LiveCircuits(a)) {
      absl::StatusOr<std::string> dst = p_.inventory.SerialOf(c.destination().onic());
      absl::StatusOr<std::string> src = p_.inventory.SerialOf(c.source().onic());
      if ((dst.ok() && gone.contains(*dst)) || (src.ok() && gone.contains(*src))) {
        u.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED,
                              absl::StrCat("link ", LinkName(c), ": ", reason)};
      }
    }
    if (u.circuits.empty()) continue;
    // A transaction running on it finds out for itself when it retrains.
    if (!p_.pool.Claim(a.id())) continue;
    u.state = v1::ALLOCATION_STATE_DEGRADED;
    u.reason = reason;
    u.severity = v1::EVENT_SEVERITY_WARNING;
    u.event_message = absl::StrCat("allocation ", a.id(), " DEGRADED: ", reason);
    // The retry is scheduled under the claim, so one cannot start between the two.
    if (p_.ctx.Update(u, "fleetd").ok()) {
      const absl::Time now = p_.ctx.clock->Now();
      p_.retries.ScheduleAt(a.id(), now + p_.ctx.options.retry_initial);
      if (const absl::Time due = HealDue(a, now); due > now) p_.retries.DueBy(a.id(), due);
    }
    p_.pool.Unclaim(a.id());
  }
}

namespace {

// How long a failure's report waits for a transaction holding an allocation it hurts (it is
// not sent again: agents and the monitor report changes only).
constexpr absl::Duration kDegradeClaimWait = absl::Seconds(60);

}  // namespace

void LinkRecovery::LinksDown(const std::string& host, const std::vector<v1::LinkState>& links) {
  if (links.empty()) return;
  std::map<std::string, v1::LinkState> down;  // By v1::PortName of serial and port.
  for (const v1::LinkState& link : links)
    down[v1::PortName(link.onic_serial(), link.port())] = link;
  DegradeWhere(
      [this, host, down = std::move(down)](const v1::Circuit& c) -> std::string {
        absl::StatusOr<std::string> dst = p_.inventory.SerialOf(c.destination().onic());
        if (!dst.ok()) return "";
        auto it = down.find(v1::PortName(*dst, c.destination().port()));
        // A port its agent has said UP since (a transaction retrained it) is no longer down.
        if (it == down.end() ||
            (p_.ctx.agents != nullptr && p_.ctx.agents->KnownUp(*dst, c.destination().port()))) {
          return "";
        }
        const std::string& detail = it->second.detail();
        return absl::StrCat("link ", LinkName(c), ": the agent of host ", host, " reports ",
                            v1::PortName(c.destination()), " down", detail.empty() ? "" : " (",
                            detail, detail.empty() ? "" : ")");
      },
      p_.ctx.options.retry_initial, "allocation.link_down");
}

void LinkRecovery::SwitchPortsUnhealthy(const std::map<std::string, std::string>& ports) {
  if (ports.empty()) return;
  DegradeWhere(
      [ports](const v1::Circuit& c) -> std::string {
        for (const v1::CrossConnect& x : c.cross_connects()) {
          for (uint32_t port : {x.ingress(), x.egress()}) {
            auto it = ports.find(v1::PortName(x.switch_id(), port));
            if (it != ports.end()) {
              return absl::StrCat("link ", LinkName(c), ": switch port ", it->first, " ",
                                  it->second);
            }
          }
        }
        return "";
      },
      absl::ZeroDuration(), "allocation.port_unhealthy");
}

void LinkRecovery::DeviceFailed(const std::string& device, const std::string& why) {
  DegradeWhere(
      [this, device, why](const v1::Circuit& c) -> std::string {
        absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
        if (!inventory.ok()) return "";
        for (const v1::Onic& o : (*inventory)->site.onics()) {
          if (o.device() == device &&
              (o.id() == c.source().onic() || o.id() == c.destination().onic())) {
            return absl::StrCat("link ", LinkName(c), ": device ", device, " failed (", why, ")");
          }
        }
        return "";
      },
      absl::ZeroDuration(), "allocation.device_failed");
}

void LinkRecovery::DeviceHealed(const std::string& device) {
  healer_->DeviceHealed(device);
  RetryDegradedWhere([&](const v1::Allocation& a) {
    return std::find(a.members().begin(), a.members().end(), device) != a.members().end();
  });
}

void LinkRecovery::SwitchPortsWell(const std::set<std::string>& ports) {
  if (ports.empty()) return;
  RetryDegradedWhere([&](const v1::Allocation& a) {
    for (const v1::Circuit& c : LiveCircuits(a)) {
      for (const v1::CrossConnect& x : c.cross_connects()) {
        if (ports.contains(v1::PortName(x.switch_id(), x.ingress())) ||
            ports.contains(v1::PortName(x.switch_id(), x.egress()))) {
          return true;
        }
      }
    }
    return false;
  });
}

void LinkRecovery::RetryDegradedWhere(const std::function<bool(const v1::Allocation&)>& held) {
  absl::StatusOr<std::vector<v1::Allocation>> degraded =
      p_.ctx.store->ListAllocations({"", v1::ALLOCATION_STATE_DEGRADED, false});
  if (!degraded.ok()) return;
  for (const v1::Allocation& a : *degraded) {
    if (held(a)) p_.retries.ScheduleAt(a.id(), p_.ctx.clock->Now());
  }
}

void LinkRecovery::DegradeOnFailedParts() {
  absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
  if (!inventory.ok()) return;
  std::set<std::string> failed_ports, failed_devices;
  for (const v1::SwitchPort& p : (*inventory)->ports) {
    if (p.oper_state() == v1::OPER_STATE_FAILED) failed_ports.insert(v1::PortName(p.ref()));
  }
  for (const v1::Device& d : (*inventory)->site.devices()) {
    if (d.health() == v1::DEVICE_HEALTH_FAILED) failed_devices.insert(d.id());
  }
  if (failed_ports.empty() && failed_devices.empty()) return;
  DegradeWhere(
      [failed_ports, failed_devices, site = *inventory](const v1::Circuit& c) -> std::string {
        for (const v1::CrossConnect& x : c.cross_connects()) {
          for (uint32_t port : {x.ingress(), x.egress()}) {
            const std::string name = v1::PortName(x.switch_id(), port);
            if (failed_ports.contains(name)) {
              return absl::StrCat("link ", LinkName(c), ": switch port ", name, " failed");
            }
          }
        }
        for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
          const std::string& device = site->DeviceOf(end.onic());
          if (failed_devices.contains(device)) {
            return absl::StrCat("link ", LinkName(c), ": device ", device, " failed");
          }
        }
        return "";
      },
      absl::ZeroDuration(), "allocation.failed_part");
}

void LinkRecovery::DegradeWhere(Hurt hurt, absl::Duration retry_after, std::string event_kind) {
  // Off the caller's thread (an agent's stream, the monitor's loop, an RPC).
  p_.pool.Spawn(
      "", [this, hurt = std::move(hurt), retry_after, event_kind = std::move(event_kind)] {
        absl::StatusOr<std::vector<v1::Allocation>> live = p_.ctx.store->ListAllocations({});
        if (!live.ok()) return;
        for (const v1::Allocation& a : *live) {
          // Only those with a circuit it hurts, in whatever state: one a transaction is making now
          // is looked at again once it lets go.
          bool hurts = false;
          for (const v1::Circuit& c : LiveCircuits(a)) hurts = hurts || !hurt(c).empty();
          if (!hurts) continue;
          const absl::Time give_up = absl::Now() + kDegradeClaimWait;
          if (p_.pool.WaitAndClaim(a.id(), give_up) != WorkerPool::Claimed::kClaimed) continue;
          const bool degraded = Degrade(a.id(), hurt, event_kind);
          if (retry_after == absl::ZeroDuration()) {
            // A failed part: its retry (which heals) runs now, on a worker of its own that takes
            // the claim over, even when its circuits were DEGRADED already.
            p_.retries.Running(a.id());
            const std::string id = a.id();
            p_.pool.Spawn(id, [this, id] { RunRetry(id); });
            continue;
          }
          if (degraded) {
            // Under the claim, so a retry cannot start between the update and its scheduling;
            // no later than a failure policy's `within` says.
            const absl::Time now = p_.ctx.clock->Now();
            p_.retries.ScheduleAt(a.id(), now + retry_after);
            if (const absl::Time due = HealDue(a, now); due > now) p_.retries.DueBy(a.id(), due);
          }
          p_.pool.Unclaim(a.id());
        }
      });
}

bool LinkRecovery::Degrade(const std::string& id, const Hurt& hurt, const std::string& event_kind) {
  // Read again under the claim: what the listing saw may have changed since.
  absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
  if (!a.ok() || !Settled(a->state())) return false;
  store::AllocationUpdate u;
  u.id = id;
  std::vector<std::string> reasons;
  for (const v1::Circuit& c : LiveCircuits(*a)) {
    if (c.state() != v1::CIRCUIT_STATE_ACTIVE) continue;
    std::string reason = hurt(c);
    if (reason.empty()) continue;
    u.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED, reason};
    reasons.push_back(std::move(reason));
  }
  if (reasons.empty()) return false;
  const std::string reason = absl::StrJoin(reasons, "; ");
  u.severity = v1::EVENT_SEVERITY_WARNING;
  u.state = v1::ALLOCATION_STATE_DEGRADED;
  if (a->state() == v1::ALLOCATION_STATE_DEGRADED) {
    // Already DEGRADED: the links that failed before stay in the reason.
    u.reason = a->reason().empty() ? reason : absl::StrCat(a->reason(), "; ", reason);
    u.event_kind = event_kind;
    u.event_message = absl::StrCat("allocation ", id, ": ", reason);
  } else {
    u.reason = reason;
    u.event_message = absl::StrCat("allocation ", id, " DEGRADED: ", reason);
  }
  return p_.ctx.Update(u, "fleetd").ok();
}

bool LinkRecovery::RetrainDegraded(const v1::Allocation& a, bool count) {
  const std::string& id = a.id();
  std::vector<v1::Circuit> untrained;
  for (const v1::Circuit& c : LiveCircuits(a)) {
    if (c.state() != v1::CIRCUIT_STATE_ACTIVE) untrained.push_back(c);
  }
  // Under a failure policy the agents give up when its `within` runs out: then a spare. Not
  // once it has run out (a heal refused or used up): then the links get their full time.
  const absl::Time heal_due = healer_->LinksDue(a, p_.ctx.clock->Now());
  const bool heal_ahead = count && heal_due > p_.ctx.clock->Now() && healer_->Refusal(id).empty();
  const LinkTrainer::Failures failed = p_.trainer.Retrain(
      untrained, /*check_first=*/true, heal_ahead ? heal_due : absl::InfiniteFuture());
  if (count) healer_->CountRetrains(untrained, failed);
  store::AllocationUpdate u;
  u.id = id;
  std::vector<std::string> reasons = RecordRetrain(untrained, failed.why, u);
  for (std::string& part : healer_->FailedPartReasons(a)) reasons.push_back(std::move(part));
  if (reasons.empty()) {
    u.state = v1::ALLOCATION_STATE_READY;
    u.reason = "";
    u.event_message = absl::StrCat("allocation ", id, " READY: ", Counted(untrained.size(), "link"),
                                   " retrained");
    p_.retries.Forget(id);
    healer_->Forget(id);
  } else {
    u.state = v1::ALLOCATION_STATE_DEGRADED;
    u.reason = absl::StrJoin(reasons, "; ");
    // Why the failure policy has not healed it, while that stands.
    if (std::string refusal = healer_->Refusal(id); !refusal.empty()) {
      absl::StrAppend(&*u.reason, "; ", refusal);
    }
    u.severity = v1::EVENT_SEVERITY_WARNING;
    u.event_kind = "allocation.retrain_failed";
    u.event_message = absl::StrCat("allocation ", id, " still DEGRADED: ", *u.reason);
  }
  if (!p_.ctx.Update(u, "fleetd").ok()) return false;
  if (reasons.empty()) return true;
  p_.retries.RetryLater(id);
  // A failure policy's `within` is kept however long the backoff has grown.
  if (heal_ahead) p_.retries.DueBy(id, heal_due);
  return false;
}

}  // namespace fleet::engine
