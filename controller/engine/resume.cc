// Reconciler's resumption of the transactions a crash interrupted (reconciler.h).
#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/engine/reconciler.h"
#include "fleet/v1/names.h"

namespace fleet::engine {
namespace {}  // namespace

using Key = CrossConnectKey;

std::vector<std::string> Reconciler::ClaimInterrupted() {
  std::vector<std::string> ids;
  absl::StatusOr<std::vector<v1::Allocation>> live = p_.ctx.store->ListAllocations({});
  if (!live.ok()) return ids;
  for (const v1::Allocation& a : *live) {
    const v1::AllocationState s = a.state();
    if (s != v1::ALLOCATION_STATE_PENDING && s != v1::ALLOCATION_STATE_PROGRAMMING &&
        s != v1::ALLOCATION_STATE_TRAINING && s != v1::ALLOCATION_STATE_RELEASING) {
      continue;
    }
    if (p_.pool.Claim(a.id())) ids.push_back(a.id());
  }
  return ids;
}

void Reconciler::Resume(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    p_.pool.Spawn(id, [this, id] {
      absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
      if (!a.ok()) return;
      p_.ctx.Record("allocation.resumed", "allocation", id, v1::EVENT_SEVERITY_INFO, "fleetd",
                    absl::StrCat("allocation ", id, " was interrupted in ", v1::Name(a->state()),
                                 "; resuming"));
      if (a->state() == v1::ALLOCATION_STATE_RELEASING) {
        // Ends as the intent stored when it started says (Release reads it); an allocation
        // from before intents were stored ends RELEASED with its reason.
        (void)releaser_->Release(id, "fleetd", v1::ALLOCATION_STATE_RELEASED, a->reason());
      } else {
        // A phase switch a crash interrupted may have left the old phase's cross-connects.
        std::vector<v1::Circuit> left = LeftBehind(*a);
        std::string from = InterruptedSwitchFrom(*a, left);
        p_.Reconfigure(id, {}, {std::move(from), std::move(left)});
      }
    });
  }
}

std::vector<v1::Circuit> Reconciler::LeftBehind(const v1::Allocation& a) {
  absl::StatusOr<std::vector<v1::CrossConnect>> pending = p_.ctx.store->PendingRemovals(a.id());
  const bool phased =
      std::any_of(a.circuits().begin(), a.circuits().end(),
                  [](const v1::Circuit& c) { return c.state() == v1::CIRCUIT_STATE_INACTIVE; });
  // Only a phased allocation or an interrupted member change leaves anything; the rest need
  // no read of the observed state.
  if (!phased && (!pending.ok() || pending->empty())) return {};
  std::set<Key> desired, observed;
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
    absl::StatusOr<std::vector<v1::CrossConnect>> seen =
        p_.ctx.store->ListObservedCrossConnects(sw);
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
  if (pending.ok() && !pending->empty()) PendingLeft(a, *pending, observed, desired, left);
  return left;
}

void Reconciler::PendingLeft(const v1::Allocation& a, const std::vector<v1::CrossConnect>& pending,
                             const std::set<Key>& observed, const std::set<Key>& desired,
                             std::vector<v1::Circuit>& left) {
  // A member change's removals still on the switch, unless another allocation was given
  // their ports since (its cross-connect is not this one's to remove). This allocation's
  // own new circuits may reuse a port: the removal goes first in the same batch.
  absl::StatusOr<std::vector<v1::Circuit>> all = p_.ctx.store->ListCircuits({});
  if (!all.ok()) return;
  std::set<std::pair<std::string, uint32_t>> desired_ports;  // (switch, port) of any circuit.
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
  if (absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
      inventory.ok()) {
    for (const v1::SwitchPort& p : (*inventory)->ports) {
      if (p.wiring().has_onic_port()) {
        wired[{p.ref().switch_id(), p.ref().port()}] = p.wiring().onic_port();
      }
    }
  }
  for (const v1::CrossConnect& x : pending) {
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
}

std::string Reconciler::InterruptedSwitchFrom(const v1::Allocation& a,
                                              const std::vector<v1::Circuit>& left) {
  std::set<std::string> phases, left_ids;
  for (const v1::Circuit& c : left) {
    left_ids.insert(c.id());
    if (!c.phase().empty() && c.phase() != a.active_phase()) phases.insert(c.phase());
  }
  if (phases.size() != 1) return "";
  const std::string& from = *phases.begin();
  std::set<Key> desired, old;
  std::set<std::string> switch_ids;
  for (const v1::Circuit& c : a.circuits()) {
    for (const v1::CrossConnect& x : c.cross_connects()) {
      switch_ids.insert(x.switch_id());
      if (c.state() != v1::CIRCUIT_STATE_INACTIVE)
        desired.insert({x.switch_id(), x.ingress(), x.egress()});
      if (c.phase() == from) old.insert({x.switch_id(), x.ingress(), x.egress()});
    }
  }
  // Going back is sound only if the switch is as the handover found it: every circuit of the
  // old phase is there (those the new phase shares count as there: LeftBehind leaves them
  // out), and nothing the new phase adds has been made.
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() != from || left_ids.contains(c.id())) continue;
    for (const v1::CrossConnect& x : c.cross_connects()) {
      if (!desired.contains({x.switch_id(), x.ingress(), x.egress()})) return "";
    }
  }
  for (const std::string& sw : switch_ids) {
    absl::StatusOr<std::vector<v1::CrossConnect>> seen =
        p_.ctx.store->ListObservedCrossConnects(sw);
    if (!seen.ok()) return "";
    for (const v1::CrossConnect& x : *seen) {
      const Key key{sw, x.ingress(), x.egress()};
      if (desired.contains(key) && !old.contains(key)) return "";
    }
  }
  return from;
}

}  // namespace fleet::engine
