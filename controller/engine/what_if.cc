#include "controller/engine/what_if.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "controller/engine/circuits.h"
#include "controller/engine/failure_policy.h"
#include "fleet/v1/names.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/replacement.h"

namespace fleet::engine {

Hurt HurtBy(const v1::Allocation& a, const LostParts& lost, const CachedInventory& inventory) {
  std::map<std::string, const v1::OnicPort*> onic_ports;  // v1::PortName → fibers.
  for (const v1::Onic& o : inventory.site.onics()) {
    for (const v1::OnicPort& p : o.ports()) onic_ports[v1::PortName(o.id(), p.index())] = &p;
  }
  std::set<std::string> members;
  Hurt hurt;
  for (const v1::Circuit& c : LiveCircuits(a)) {
    bool hit = false;
    for (const v1::CrossConnect& x : c.cross_connects()) {
      hit |= lost.switch_ports.contains(v1::PortName(x.switch_id(), x.ingress())) ||
             lost.switch_ports.contains(v1::PortName(x.switch_id(), x.egress()));
    }
    for (const auto& [end, tx] : {std::pair{c.source(), true}, std::pair{c.destination(), false}}) {
      const std::string& device = inventory.DeviceOf(end.onic());
      auto fibers = onic_ports.find(v1::PortName(end));
      const bool own_fiber_lost =
          fibers != onic_ports.end() && lost.switch_ports.contains(v1::PortName(
                                            tx ? fibers->second->tx() : fibers->second->rx()));
      if (lost.devices.contains(device) || own_fiber_lost) {
        hit = true;
        members.insert(device);
      }
    }
    if (hit) hurt.circuits.push_back(c.id());
  }
  for (const std::string& m : a.members()) {
    if (members.contains(m)) hurt.members.push_back(m);
  }
  return hurt;
}

absl::StatusOr<LostParts> WhatIf::PartsOf(const v1::FailureTarget& target,
                                          const CachedInventory& inventory) {
  LostParts lost;
  switch (target.target_case()) {
    case v1::FailureTarget::kSwitchPort: {
      const std::string name = v1::PortName(target.switch_port());
      for (const v1::SwitchPort& p : inventory.ports) {
        if (v1::PortName(p.ref()) == name) lost.switch_ports.insert(name);
      }
      if (lost.switch_ports.empty()) {
        return absl::NotFoundError(absl::StrCat("target.switch_port: ", name, " not found"));
      }
      lost.what = absl::StrCat("switch port ", name);
      return lost;
    }
    case v1::FailureTarget::kOnic:
      for (const v1::Onic& o : inventory.site.onics()) {
        if (o.id() != target.onic()) continue;
        for (const v1::OnicPort& p : o.ports()) {
          lost.switch_ports.insert(v1::PortName(p.tx()));
          lost.switch_ports.insert(v1::PortName(p.rx()));
        }
        lost.what = absl::StrCat("onic ", o.id());
        return lost;
      }
      return absl::NotFoundError(absl::StrCat("target.onic: ", target.onic(), " not found"));
    case v1::FailureTarget::kDevice:
      for (const v1::Device& d : inventory.site.devices()) {
        if (d.id() != target.device()) continue;
        lost.devices.insert(d.id());
        lost.what = absl::StrCat("device ", d.id());
        return lost;
      }
      return absl::NotFoundError(absl::StrCat("target.device: ", target.device(), " not found"));
    case v1::FailureTarget::kSwitchId:
      for (const v1::SwitchPort& p : inventory.ports) {
        if (p.ref().switch_id() == target.switch_id()) {
          lost.switch_ports.insert(v1::PortName(p.ref()));
        }
      }
      if (lost.switch_ports.empty()) {
        return absl::NotFoundError(
            absl::StrCat("target.switch_id: ", target.switch_id(), " not found"));
      }
      lost.what = absl::StrCat("switch ", target.switch_id());
      return lost;
    default:
      return absl::InvalidArgumentError(
          "target: name a switch port, an O-NIC, a device or a switch");
  }
}

namespace {

// `a` after `r`: its members and every phase's circuits as the replacement leaves them, the
// re-made circuits numbered so later plans can tell them apart.
void Apply(const scheduler::Replacement& r, v1::Allocation& a, int& made) {
  *a.mutable_members() = {r.members.begin(), r.members.end()};
  a.clear_circuits();
  for (const scheduler::ReplacedPhase& phase : r.phases) {
    for (v1::Circuit c : phase.circuits) {
      if (c.id().empty()) c.set_id(absl::StrCat(a.id(), "-what-if-", ++made));
      c.set_allocation_id(a.id());
      c.set_phase(phase.name);
      *a.add_circuits() = std::move(c);
    }
  }
}

}  // namespace

absl::StatusOr<v1::WhatIfFailResponse> WhatIf::Fail(const v1::WhatIfFailRequest& request) {
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, p_.inventory.Current());
  ASSIGN_OR_RETURN(const LostParts lost, PartsOf(request.target(), *inventory));
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> live, p_.ctx.store->ListAllocations({}));
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, p_.ctx.store->ListCircuits({}));
  // The fabric with the part failed, and no circuit yet.
  v1::Inventory site = inventory->site;
  for (v1::Device& d : *site.mutable_devices()) {
    if (!lost.devices.contains(d.id())) continue;
    d.set_health(v1::DEVICE_HEALTH_FAILED);
    d.set_health_reason("what-if");
  }
  std::vector<v1::SwitchPort> ports = inventory->ports;
  for (v1::SwitchPort& p : ports) {
    if (lost.switch_ports.contains(v1::PortName(p.ref()))) p.set_oper_state(v1::OPER_STATE_FAILED);
  }
  const scheduler::FabricSnapshot failed = scheduler::FabricSnapshot::Build(site, ports, {}, {});
  const std::set<std::string> unreachable = UnreachableDevices(p_.ctx.agents, *inventory);

  v1::WhatIfFailResponse response;
  for (const v1::Allocation& a : live) {
    const Hurt hurt = HurtBy(a, lost, *inventory);
    if (hurt.circuits.empty()) continue;
    v1::HurtAllocation& h = *response.add_allocations();
    h.set_id(a.id());
    h.set_tenant(a.tenant());
    *h.mutable_members_hurt() = {hurt.members.begin(), hurt.members.end()};
    *h.mutable_circuits_hurt() = {hurt.circuits.begin(), hurt.circuits.end()};
    const v1::FailurePolicy& policy = a.request().on_failure();
    const uint32_t max = policy.max_replacements() > 0 ? policy.max_replacements() : 1;
    uint32_t used = 0;
    for (const v1::MemberReplacement& r : a.replacements()) used += r.by() == "fleetd";
    if (!policy.replace()) {
      h.set_outcome("stays DEGRADED until the part is back: no failure policy replaces members");
      continue;
    }
    if (hurt.members.empty()) {
      h.set_outcome(absl::StrCat("stays DEGRADED until the part is back: ", lost.what,
                                 " carries trunks only, and healing replaces members"));
      continue;
    }
    if (hurt.members.size() > max - std::min(used, max)) {
      h.set_outcome(absl::StrCat("stays DEGRADED: ", hurt.members.size(),
                                 " members hurt, and its failure policy has ",
                                 max - std::min(used, max), " replacement(s) left"));
      continue;
    }
    // Each member in turn, on the fabric as the earlier replacements leave it.
    v1::Allocation after = a;
    std::vector<v1::Circuit> others;
    for (const v1::Circuit& c : circuits) {
      if (c.allocation_id() != a.id()) others.push_back(c);
    }
    int made = 0;
    std::vector<std::string> steps;
    std::string refusal;
    for (const std::string& member : hurt.members) {
      std::vector<v1::Circuit> now = others;
      for (const v1::Circuit& c : after.circuits()) now.push_back(c);
      const scheduler::FabricSnapshot fabric = failed.WithCircuits(now, live);
      absl::StatusOr<scheduler::Replacement> r = scheduler::PlanReplacement(
          fabric, after, member, "", policy.spares() != v1::SPARE_SCOPE_ANY, unreachable);
      if (!r.ok()) {
        refusal = absl::StrCat("cannot replace ", member, ": ", r.status().message());
        break;
      }
      v1::MemberReplacement& record = *h.add_replacements();
      record.set_failed(member);
      record.set_spare(r->spare);
      record.set_reason(absl::StrCat(lost.what, " failed"));
      record.set_by("fleetd");
      for (int i = 0; i < after.members_size(); ++i) {
        if (after.members(i) == member) record.set_position(static_cast<uint32_t>(i));
      }
      size_t remade = 0;
      for (const scheduler::ReplacedPhase& phase : r->phases) remade += phase.diff.add.size();
      steps.push_back(absl::StrCat("replace ", member, " by ", r->spare, ": ", remade, " circuit",
                                   remade == 1 ? "" : "s", " re-made"));
      Apply(*r, after, made);
    }
    h.set_heals(refusal.empty());
    h.set_outcome(refusal.empty() ? absl::StrJoin(steps, "; then ")
                                  : absl::StrCat("stays DEGRADED: ", refusal));
  }
  return response;
}

}  // namespace fleet::engine
