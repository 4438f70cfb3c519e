#include "controller/engine/link_recovery.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/wording.h"
#include "controller/engine/circuits.h"
#include "fleet/v1/names.h"

namespace fleet::engine {
namespace {

// Faults kept for one allocation while its sync is away.
constexpr size_t kMaxFaultsPerAllocation = 64;

}  // namespace

void LinkRecovery::RunDueRetries() {
  for (const std::string& id : p_.syncs.Due()) RunIfDue(id);
}

void LinkRecovery::RunIfDue(const std::string& id) {
  if (p_.pool.stopping() || !p_.syncs.IsDue(id)) return;
  // One held by a transaction waits for it: the pool's unclaim calls this again.
  if (!p_.pool.Claim(id)) return;
  std::vector<Fault> faults;
  bool started = true;
  {
    // With the faults so far, as one step: a fault added later comes with a mark of its own,
    // which reruns the sync.
    absl::MutexLock lock(&faults_mu_);
    // Not due again until this attempt schedules the next one (or clears it). Not due any
    // more: another attempt ran between the look and the claim.
    if (!p_.syncs.Running(id)) {
      started = false;
    } else if (auto it = faults_.find(id); it != faults_.end()) {
      faults = std::move(it->second);
      faults_.erase(it);
    }
  }
  if (!started) {
    p_.pool.Unclaim(id);
    return;
  }
  p_.pool.Spawn(id, [this, id, faults = std::move(faults)] {
    Sync(id, faults);
    // A step that hands the allocation on (a heal) or an error path that ended nothing.
    p_.syncs.EndIfRunning(id);
  });
}

void LinkRecovery::MarkUnsettled() {
  for (v1::AllocationState state :
       {v1::ALLOCATION_STATE_DEGRADED, v1::ALLOCATION_STATE_RELEASING}) {
    absl::StatusOr<std::vector<v1::Allocation>> some =
        p_.ctx.store->ListAllocations({"", state, false});
    if (!some.ok()) continue;
    for (const v1::Allocation& a : *some) Mark(p_.syncs.Ensure(a.id()));
  }
  MarkFaulted();
}

void LinkRecovery::MarkFaulted() {
  std::vector<std::string> waiting;
  {
    absl::MutexLock lock(&faults_mu_);
    for (const auto& [id, faults] : faults_) waiting.push_back(id);
  }
  // Outside the lock: an id queued already is left as it is, and one whose faults a sync took
  // meanwhile costs a sync that finds nothing new.
  int refused = 0;
  for (const std::string& id : waiting) refused += !p_.syncs.Ensure(id).ok();
  if (refused > 0) {
    FLEET_LOG(WARNING) << "the sync queue is full: " << Counted(refused, "allocation")
                       << " with a fault recorded wait for room";
  }
}

void LinkRecovery::Mark(const absl::Status& marked) {
  // Counted by the queue; the next periodic pass marks the allocation again.
  if (!marked.ok()) {
    FLEET_LOG(WARNING) << marked.message();
  }
}

void LinkRecovery::Sync(const std::string& id, const std::vector<Fault>& faults) {
  absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
  if (!faults.empty() && a.ok() && Settled(a->state())) {
    // What was observed lands first: the hurt circuits DEGRADED, named.
    bool degraded = false, failed_part = false;
    absl::Duration retry_after = absl::InfiniteDuration();
    for (const Fault& f : faults) {
      const bool hurt = Degrade(id, f.hurt, f.event_kind);
      degraded = degraded || hurt;
      if (hurt) retry_after = std::min(retry_after, f.retry_after);
      // A failed part heals now, even when its circuits were DEGRADED already.
      failed_part = failed_part || f.retry_after == absl::ZeroDuration();
    }
    if (!failed_part && (degraded || a->state() == v1::ALLOCATION_STATE_DEGRADED)) {
      // A link that went down gets the first backoff to come back by itself, no later than a
      // failure policy's `within` says. A report that changed nothing (its link DEGRADED
      // already) leaves the retry when it was, so reports cannot speed it up.
      const absl::Time now = p_.ctx.clock->Now();
      if (degraded) {
        p_.syncs.RetryAt(id, now + retry_after);
      } else {
        p_.syncs.NothingNew(id);
      }
      if (const absl::Time due = HealDue(*a, now); due > now) p_.syncs.DueBy(id, due);
      return;
    }
    a = p_.ctx.store->GetAllocation(id);
  }
  if (a.ok() && a->state() == v1::ALLOCATION_STATE_DEGRADED) {
    SyncDegraded(*a);
  } else if (a.ok() && a->state() == v1::ALLOCATION_STATE_RELEASING) {
    // Ends as its stored intent says (Release reads it). A sync that changed nothing is
    // retried (SyncQueue), so a failure here is too.
    (void)releaser_->Release(id, "fleetd", v1::ALLOCATION_STATE_RELEASED, "");
  } else {
    p_.syncs.Forget(id);
    healer_->Forget(id);
  }
}

void LinkRecovery::SyncDegraded(const v1::Allocation& a) {
  const std::string& id = a.id();
  const bool refused = !healer_->Refusal(id).empty();
  // A failed device or own port names its member at once (rules 1 and 2): it is replaced
  // whatever the switch holds, so the switch is not read first.
  if (!refused && !healer_->FailedPartReasons(a).empty() && healer_->StartIfDue(a)) return;
  // What the switches lack of it is made again first: a link dark for want of its
  // cross-connect is the switch's fault, so its links get their `within` again.
  const Reconciler::HeldCheck on_switch = reconciler_->RepairHeld(a, "fleetd");
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
  if (!refused && healer_->StartIfDue(a)) return;
  if (RetrainDegraded(a, on_switch.verified) || !refused) return;
  if (absl::StatusOr<v1::Allocation> still = p_.ctx.store->GetAllocation(id);
      still.ok() && still->state() == v1::ALLOCATION_STATE_DEGRADED) {
    healer_->StartIfDue(*still);
  }
}

void LinkRecovery::AgentConnected(const std::string& host,
                                  const std::vector<std::string>& serials) {
  p_.syncs.AgentConnected();
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
  if (!inventory.ok()) {
    FLEET_LOG(WARNING) << "idle ports not quiesced: " << inventory.status();
    return commands;
  }
  for (const v1::Onic& onic : (*inventory)->site.onics()) {
    if (!wanted.contains(onic.serial())) continue;
    store::CircuitFilter on_onic;
    on_onic.onic = onic.id();
    absl::StatusOr<std::vector<v1::Circuit>> circuits = p_.ctx.store->ListCircuits(on_onic);
    if (!circuits.ok()) {
      FLEET_LOG(WARNING) << "idle ports of O-NIC " << onic.id()
                         << " not quiesced: " << circuits.status();
      continue;
    }
    std::set<uint32_t> in_use;
    for (const v1::Circuit& c : *circuits) {
      for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
        if (end.onic() == onic.id()) in_use.insert(end.port());
      }
    }
    for (uint32_t port = 1; port <= static_cast<uint32_t>(onic.ports_size()); ++port) {
      if (in_use.contains(port) || !agents->HasOwner(onic.serial()) ||
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
  DegradeWhere(
      [this, host, why, gone](const v1::Circuit& c) -> std::string {
        for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
          absl::StatusOr<std::string> serial = p_.inventory.SerialOf(end.onic());
          // An agent back by the time this is looked at is not gone.
          if (!serial.ok() || !gone.contains(*serial) ||
              (p_.ctx.agents != nullptr && p_.ctx.agents->HasOwner(*serial))) {
            continue;
          }
          return absl::StrCat("link ", LinkName(c), ": the agent of host ", host, " is gone (", why,
                              ")");
        }
        return "";
      },
      p_.ctx.options.retry_initial, "allocation.agent_gone");
}

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
    if (held(a)) Mark(p_.syncs.Mark(a.id()));
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
  // Off the caller's thread (an agent's stream, the monitor's loop, an RPC): finding the
  // allocations reads every circuit (from the store's index) and judges each.
  p_.pool.Spawn(
      "", [this, hurt = std::move(hurt), retry_after, event_kind = std::move(event_kind)] {
        absl::StatusOr<std::vector<v1::Circuit>> circuits = p_.ctx.store->ListCircuits({});
        if (!circuits.ok()) return;
        // Only allocations with a live circuit it hurts, in whatever state: one a transaction
        // is making now is synced once it lets go, and the fault is looked at again then.
        std::set<std::string> hurt_ids;
        for (const v1::Circuit& c : *circuits) {
          if (!c.allocation_id().empty() && c.state() != v1::CIRCUIT_STATE_INACTIVE &&
              !hurt_ids.contains(c.allocation_id()) && !hurt(c).empty()) {
            hurt_ids.insert(c.allocation_id());
          }
        }
        for (const std::string& id : hurt_ids) {
          absl::Status marked;
          {
            // The fault and its mark as one step (RunIfDue).
            absl::MutexLock lock(&faults_mu_);
            std::vector<Fault>& waiting = faults_[id];
            if (waiting.size() < kMaxFaultsPerAllocation) {
              waiting.push_back({hurt, retry_after, event_kind});
            } else {
              // Bounded while its sync is away: the last fault also names what this one
              // hurts (reports are not sent again), with the sooner retry.
              Fault& last = waiting.back();
              last.hurt = [first = std::move(last.hurt), then = hurt](const v1::Circuit& c) {
                std::string why = first(c);
                return why.empty() ? then(c) : why;
              };
              last.retry_after = std::min(last.retry_after, retry_after);
            }
            marked = p_.syncs.Mark(id);
          }
          Mark(marked);
        }
        RunDueRetries();
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
    p_.syncs.Forget(id);
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
  p_.syncs.RetryLater(id);
  // A failure policy's `within` is kept however long the backoff has grown.
  if (heal_ahead) p_.syncs.DueBy(id, heal_due);
  return false;
}

}  // namespace fleet::engine
