#include "scheduler/replacement.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fleet/v1/names.h"
#include "fleet/v1/phases.h"
#include "scheduler/member_selection.h"
#include "scheduler/trunk_routing.h"

namespace fleet::scheduler {
namespace {

using PortKey = std::pair<std::string, uint32_t>;

PortKey KeyOf(const v1::OnicPortRef& ref) { return {ref.onic(), ref.port()}; }

std::string PortName(const PortKey& k) { return v1::PortName(k.first, k.second); }

// The allocation holding a port of `device` (either side), or "" when none does.
std::string HeldBy(const FabricSnapshot& snapshot, const std::string& device) {
  for (const OnicPortState* p : snapshot.DevicePorts(device)) {
    if (!p->tx_holder.empty()) return p->tx_holder;
    if (!p->rx_holder.empty()) return p->rx_holder;
  }
  return "";
}

// Checks a named spare; returns why it cannot stand in, or OK.
absl::Status CheckNamedSpare(const FabricSnapshot& snapshot, const v1::Allocation& allocation,
                             const v1::Device& failed, const std::string& on_switch,
                             const std::string& spare) {
  auto it = snapshot.devices().find(spare);
  if (it == snapshot.devices().end()) {
    return absl::NotFoundError(absl::StrCat("spare: device ", spare, " not found"));
  }
  const v1::Device& d = it->second;
  if (std::find(allocation.members().begin(), allocation.members().end(), spare) !=
      allocation.members().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spare: device ", spare, " is already a member of allocation ", allocation.id()));
  }
  if (d.kind() != failed.kind()) {
    return absl::InvalidArgumentError(absl::StrCat("spare: device ", spare, " is a ",
                                                   v1::Name(d.kind()), ", not a ",
                                                   v1::Name(failed.kind()), " like ", failed.id()));
  }
  if (d.admin_state() == v1::ADMIN_STATE_DRAINED) {
    return absl::FailedPreconditionError(absl::StrCat("spare: device ", spare, " is drained"));
  }
  if (const std::string holder = HeldBy(snapshot, spare); !holder.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("spare: device ", spare, " is in use by allocation ", holder));
  }
  std::vector<const OnicPortState*> ports = snapshot.DevicePorts(spare);
  if (ports.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("spare: device ", spare, " has no O-NIC"));
  }
  // On another switch, the re-made circuits need trunks; routing them says if that fails.
  if (ports.front()->tx.switch_id() != on_switch && !snapshot.HasTrunks()) {
    return absl::FailedPreconditionError(
        absl::StrCat("spare: device ", spare, " is not on switch ", on_switch, " of ", failed.id(),
                     " and the site has no trunks between switches"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Replacement> PlanReplacement(const FabricSnapshot& snapshot,
                                            const v1::Allocation& allocation,
                                            const std::string& failed_member,
                                            const std::string& named_spare, bool same_switch_only,
                                            const std::set<std::string>& unreachable) {
  const auto& members = allocation.members();
  if (std::find(members.begin(), members.end(), failed_member) == members.end()) {
    return absl::NotFoundError(absl::StrCat("member: allocation ", allocation.id(),
                                            " has no member ", failed_member, "; its members are ",
                                            absl::StrJoin(members, ", ")));
  }
  auto failed_it = snapshot.devices().find(failed_member);
  if (failed_it == snapshot.devices().end()) {
    return absl::NotFoundError(absl::StrCat("member: device ", failed_member, " not found"));
  }
  const v1::Device& failed = failed_it->second;
  const std::vector<const OnicPortState*> failed_ports = snapshot.DevicePorts(failed_member);
  if (failed_ports.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("member: device ", failed_member, " has no O-NIC port"));
  }
  const std::string failed_switch = failed_ports.front()->tx.switch_id();

  // The failed member's ports its circuits use, over every phase, by index among its ports.
  std::set<PortKey> used;
  for (const v1::Circuit& c : allocation.circuits()) {
    for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
      for (const OnicPortState* p : failed_ports) {
        if (p->onic == end.onic() && p->port == end.port()) used.insert(KeyOf(end));
      }
    }
  }
  std::vector<size_t> used_index;  // Positions in failed_ports.
  for (size_t i = 0; i < failed_ports.size(); ++i) {
    if (used.contains({failed_ports[i]->onic, failed_ports[i]->port})) used_index.push_back(i);
  }
  const int need = static_cast<int>(used_index.size());

  Replacement out;
  out.failed = failed_member;
  if (!named_spare.empty()) {
    absl::Status ok = CheckNamedSpare(snapshot, allocation, failed, failed_switch, named_spare);
    if (!ok.ok()) return ok;
    out.spare = named_spare;
  } else {
    // Member selection with the current members named (so none is picked) and one count of the
    // failed member's kind on its switch.
    // Devices of the kind with a port in any allocation's desired circuit, or unreachable, are
    // not spares: they are named too, which keeps them out of the pick.
    v1::MemberSet set;
    for (const std::string& m : members) set.add_devices(m);
    for (const auto& [id, device] : snapshot.devices()) {
      if (device.kind() != failed.kind()) continue;
      if (HeldBy(snapshot, id).empty() && !unreachable.contains(id)) continue;
      if (std::find(members.begin(), members.end(), id) == members.end()) set.add_devices(id);
    }
    v1::DeviceCount* count = set.add_counts();
    count->set_kind(failed.kind());
    count->set_count(1);
    // A host's device (a CPU) is replaced on the same host: the job's processes run there.
    count->set_host(failed.host());
    std::vector<int> needs(set.devices_size(), 0);
    needs.push_back(need);
    absl::StatusOr<std::vector<std::string>> picked =
        PickMembers(snapshot, set, needs, failed_switch, "spare",
                    PickOptions{.spares = true, .span_switches = !same_switch_only});
    if (!picked.ok()) {
      if (picked.status().code() != absl::StatusCode::kResourceExhausted) return picked.status();
      return absl::ResourceExhaustedError(
          absl::StrCat("no free spare of kind ", v1::Name(failed.kind()), " on switch ",
                       failed_switch, " for ", failed_member, " (it uses ", need, " port",
                       need == 1 ? "" : "s", "): ", picked.status().message()));
    }
    out.spare = picked->back();
  }

  // Map each used port to the spare's port of the same index when free, else its next free.
  const std::vector<const OnicPortState*> spare_ports = snapshot.DevicePorts(out.spare);
  std::map<PortKey, const OnicPortState*> mapped;
  std::set<size_t> taken;
  std::vector<size_t> unmapped;
  for (size_t i : used_index) {
    if (i < spare_ports.size() && spare_ports[i]->Free()) {
      mapped[{failed_ports[i]->onic, failed_ports[i]->port}] = spare_ports[i];
      taken.insert(i);
    } else {
      unmapped.push_back(i);
    }
  }
  size_t next = 0;
  for (size_t i : unmapped) {
    while (next < spare_ports.size() && (taken.contains(next) || !spare_ports[next]->Free())) {
      ++next;
    }
    if (next == spare_ports.size()) {
      return absl::ResourceExhaustedError(absl::StrCat("spare: device ", out.spare,
                                                       " has fewer free ports than the ", need, " ",
                                                       failed_member, " uses"));
    }
    mapped[{failed_ports[i]->onic, failed_ports[i]->port}] = spare_ports[next];
    taken.insert(next);
  }

  for (const std::string& m : members) out.members.push_back(m == failed_member ? out.spare : m);
  std::vector<std::string> phase_names(allocation.phases().begin(), allocation.phases().end());
  if (phase_names.empty()) phase_names.push_back("");
  // Phases on the switch together (the active one and a prepared one) may not share a trunk:
  // the trunks their kept circuits hold, and those their re-made circuits take as they are
  // routed, are taken for all of them.
  std::set<std::string> on_switch_trunks;
  for (const v1::Circuit& c : allocation.circuits()) {
    if (!v1::PhaseOnSwitch(allocation, c.phase()) || mapped.contains(KeyOf(c.source())) ||
        mapped.contains(KeyOf(c.destination()))) {
      continue;
    }
    on_switch_trunks.insert(c.trunks().begin(), c.trunks().end());
  }
  for (const std::string& name : phase_names) {
    const bool on_switch = v1::PhaseOnSwitch(allocation, name);
    ReplacedPhase& phase = out.phases.emplace_back();
    phase.name = name;
    std::vector<v1::Circuit> before;
    // The phase's kept circuits keep their trunks; the re-made ones may reuse the trunks of the
    // circuits they replace, within the bound on switches crossed the request gave the phase.
    uint32_t hops = allocation.request().topology().max_switch_hops();
    for (const v1::Phase& p : allocation.request().phases()) {
      if (p.name() == name) hops = p.topology().max_switch_hops();
    }
    TrunkRouter router(snapshot, hops, allocation.tenant(), allocation.id());
    for (const v1::Circuit& c : allocation.circuits()) {
      if (c.phase() != name || mapped.contains(KeyOf(c.source())) ||
          mapped.contains(KeyOf(c.destination()))) {
        continue;
      }
      for (const std::string& trunk : c.trunks()) router.Take(trunk);
    }
    if (on_switch) {
      for (const std::string& trunk : on_switch_trunks) router.Take(trunk);
    }
    for (const v1::Circuit& c : allocation.circuits()) {
      if (c.phase() != name) continue;
      before.push_back(c);
      auto src = mapped.find(KeyOf(c.source()));
      auto dst = mapped.find(KeyOf(c.destination()));
      if (src == mapped.end() && dst == mapped.end()) {
        phase.circuits.push_back(c);
        continue;
      }
      const OnicPortState* from =
          src != mapped.end() ? src->second : snapshot.Port(c.source().onic(), c.source().port());
      const OnicPortState* to = dst != mapped.end()
                                    ? dst->second
                                    : snapshot.Port(c.destination().onic(), c.destination().port());
      if (from == nullptr || to == nullptr) {
        return absl::NotFoundError(absl::StrCat("circuit ", c.id(),
                                                ": its other end is not in "
                                                "the inventory"));
      }
      ASSIGN_OR_RETURN(Route route,
                       router.RouteCircuit(from->tx, to->rx,
                                           absl::StrCat("circuit ", c.id(), " re-made as ",
                                                        PortName({from->onic, from->port}), " -> ",
                                                        PortName({to->onic, to->port}))));
      v1::Circuit n;
      n.set_allocation_id(c.allocation_id());
      n.mutable_source()->set_onic(from->onic);
      n.mutable_source()->set_port(from->port);
      n.mutable_destination()->set_onic(to->onic);
      n.mutable_destination()->set_port(to->port);
      for (v1::CrossConnect& x : route.cross_connects) *n.add_cross_connects() = std::move(x);
      if (on_switch) on_switch_trunks.insert(route.trunks.begin(), route.trunks.end());
      for (std::string& trunk : route.trunks) n.add_trunks(std::move(trunk));
      n.set_state(v1::CIRCUIT_STATE_PLANNED);
      n.set_phase(c.phase());
      phase.circuits.push_back(std::move(n));
    }
    phase.diff = DiffCircuits(before, phase.circuits);
    for (const v1::Circuit& c : phase.circuits) *out.plan.add_circuits() = c;
    if (v1::PhaseOnSwitch(allocation, name)) {
      for (const v1::Circuit& c : phase.diff.remove) {
        for (const v1::CrossConnect& x : c.cross_connects()) *out.plan.add_remove() = x;
      }
      for (const v1::Circuit& c : phase.diff.add) {
        for (const v1::CrossConnect& x : c.cross_connects()) *out.plan.add_add() = x;
      }
    }
  }
  for (size_t i : used_index) {
    const OnicPortState* p = mapped[{failed_ports[i]->onic, failed_ports[i]->port}];
    v1::OnicPortRef* ref = out.plan.add_ports_used();
    ref->set_onic(p->onic);
    ref->set_port(p->port);
  }
  *out.plan.mutable_members() = {out.members.begin(), out.members.end()};
  return out;
}

}  // namespace fleet::scheduler
