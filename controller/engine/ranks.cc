#include "controller/engine/ranks.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fleet/v1/names.h"

namespace fleet::engine {
namespace {

// The members' links in one phase, each counted once whatever its width.
struct Links {
  std::set<std::pair<int, int>> directed;  // (from, to) member indices.
  std::vector<std::set<int>> neighbours;   // Undirected.
};

Links PhaseLinks(const v1::Allocation& a, const std::string& phase,
                 const std::map<std::string, int>& member_of_onic) {
  Links links;
  links.neighbours.resize(static_cast<size_t>(a.members_size()));
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() != phase) continue;
    auto from = member_of_onic.find(c.source().onic());
    auto to = member_of_onic.find(c.destination().onic());
    if (from == member_of_onic.end() || to == member_of_onic.end()) continue;
    if (from->second == to->second) continue;
    links.directed.insert({from->second, to->second});
    links.neighbours[static_cast<size_t>(from->second)].insert(to->second);
    links.neighbours[static_cast<size_t>(to->second)].insert(from->second);
  }
  return links;
}

// Walks from `start` along undirected links, never back to where it came from; `first` is
// the first step. Returns the members visited in order.
std::vector<int> Walk(const Links& links, int start, int first) {
  std::vector<int> order = {start};
  int previous = start;
  int at = first;
  while (at != start && order.size() < links.neighbours.size()) {
    order.push_back(at);
    int next = -1;
    for (int n : links.neighbours[static_cast<size_t>(at)]) {
      if (n != previous) next = n;
    }
    if (next < 0) break;  // An end of a chain.
    previous = at;
    at = next;
  }
  return order;
}

// Whether every step order[i] → order[i+1] (and, for a ring, the last back to the first) has
// a circuit that way.
bool LightFollows(const Links& links, const std::vector<int>& order, bool ring) {
  for (size_t i = 0; i + 1 < order.size() + (ring ? 1 : 0); ++i) {
    if (!links.directed.contains({order[i], order[(i + 1) % order.size()]})) return false;
  }
  return true;
}

// Of the two ways along a cycle or path, the one the light takes; when it goes both ways (or
// neither way throughout), `preferred`.
std::vector<int> WayOfTheLight(const Links& links, std::vector<int> preferred,
                               std::vector<int> other, bool ring) {
  if (!LightFollows(links, preferred, ring) && LightFollows(links, other, ring)) return other;
  return preferred;
}

// Ring or chain order over every member, if the links form one cycle or one path.
std::optional<std::pair<v1::RankOrder, std::vector<int>>> CycleOrPath(const Links& links) {
  const int n = static_cast<int>(links.neighbours.size());
  if (n < 2) return std::nullopt;
  std::vector<int> ends;
  for (int i = 0; i < n; ++i) {
    const size_t degree = links.neighbours[static_cast<size_t>(i)].size();
    if (degree == 1) {
      ends.push_back(i);
    } else if (degree != 2) {
      return std::nullopt;
    }
  }
  if (n == 2) {
    // Two members linked: a ring when the light goes both ways, else a chain.
    const bool both = links.directed.contains({0, 1}) && links.directed.contains({1, 0});
    if (both) return std::make_pair(v1::RANK_ORDER_RING, std::vector<int>{0, 1});
    const int first = links.directed.begin()->first;
    return std::make_pair(v1::RANK_ORDER_CHAIN, std::vector<int>{first, 1 - first});
  }
  if (ends.empty()) {
    // Round the cycle from member 0, toward member 1 when it is a neighbour (else the lower
    // index), unless the light only goes the other way.
    const std::set<int>& around = links.neighbours[0];
    const int toward = around.contains(1) ? 1 : *around.begin();
    const int away = *around.begin() == toward ? *around.rbegin() : *around.begin();
    std::vector<int> order = Walk(links, 0, toward);
    if (static_cast<int>(order.size()) != n) return std::nullopt;  // Several cycles.
    return std::make_pair(v1::RANK_ORDER_RING,
                          WayOfTheLight(links, std::move(order), Walk(links, 0, away), true));
  }
  if (ends.size() != 2) return std::nullopt;
  // From the lower-indexed end, unless the light only goes from the other.
  std::vector<int> order =
      Walk(links, ends[0], *links.neighbours[static_cast<size_t>(ends[0])].begin());
  if (static_cast<int>(order.size()) != n) return std::nullopt;  // A path and a cycle apart.
  std::vector<int> reversed(order.rbegin(), order.rend());
  return std::make_pair(v1::RANK_ORDER_CHAIN,
                        WayOfTheLight(links, std::move(order), std::move(reversed), false));
}

// The topology the phase was requested with; null for a generated phase (all-to-all rounds).
const v1::TopologySpec* PhaseTopology(const v1::Allocation& a, const std::string& phase) {
  if (a.request().phases().empty()) return &a.request().topology();
  for (const v1::Phase& p : a.request().phases()) {
    if (p.name() == phase) return &p.topology();
  }
  return nullptr;
}

// A torus over every member in member order: its coordinates are the planner's layout. (A
// phase's torus over a subset, or in another order, is ranked by its circuits instead.)
bool IsTorusOfMembers(const v1::Allocation& a, const v1::TopologySpec* spec) {
  if (spec == nullptr || !spec->has_template_()) return false;
  const v1::TemplateSpec& t = spec->template_();
  if (t.kind() != v1::TEMPLATE_KIND_TORUS_2D && t.kind() != v1::TEMPLATE_KIND_TORUS_3D) {
    return false;
  }
  uint64_t positions = 1;
  for (uint32_t d : t.dimensions()) positions *= d;
  if (positions != static_cast<uint64_t>(a.members_size())) return false;
  if (a.request().phases().empty()) return true;
  // A phase's members by name only, exactly the allocation's, in order.
  return t.members().counts().empty() && t.members().devices_size() == a.members_size() &&
         std::equal(t.members().devices().begin(), t.members().devices().end(),
                    a.members().begin());
}

// Where an attached device runs: the attach's host, and the PCIe address of the host O-NIC
// at the other end of one of its circuits.
struct Attached {
  std::string host;
  std::string pcie_address;
};

std::map<std::string, Attached> AttachedDevices(
    const std::vector<v1::Allocation>& attaches,
    const std::map<std::string, const v1::Onic*>& onics,
    const std::map<std::string, const v1::Device*>& devices) {
  std::map<std::string, Attached> out;
  auto device_of = [&](const std::string& onic) -> const v1::Device* {
    auto o = onics.find(onic);
    if (o == onics.end()) return nullptr;
    auto d = devices.find(o->second->device());
    return d == devices.end() ? nullptr : d->second;
  };
  for (const v1::Allocation& a : attaches) {
    if (!a.request().topology().has_attach() || a.state() == v1::ALLOCATION_STATE_FAILED ||
        a.state() >= v1::ALLOCATION_STATE_RELEASING) {
      continue;
    }
    const std::string& host = a.request().topology().attach().host();
    for (const v1::Circuit& c : a.circuits()) {
      const v1::Device* from = device_of(c.source().onic());
      const v1::Device* to = device_of(c.destination().onic());
      if (from == nullptr || to == nullptr) continue;
      // The pooled end is the one without a host; the other is the host's O-NIC.
      const bool pooled_from = from->host().empty() && to->host() == host;
      const bool pooled_to = to->host().empty() && from->host() == host;
      if (!pooled_from && !pooled_to) continue;
      const v1::Device* pooled = pooled_from ? from : to;
      const std::string& host_onic = pooled_from ? c.destination().onic() : c.source().onic();
      // The first attach holding the device gives both its host and its address.
      out.try_emplace(pooled->id(), Attached{host, onics.at(host_onic)->pcie_address()});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::GetRanksResponse> RankOrder(const v1::Allocation& allocation,
                                               const std::string& phase, const v1::Inventory& site,
                                               const std::vector<v1::Allocation>& attaches) {
  const v1::Allocation& a = allocation;
  if (a.state() == v1::ALLOCATION_STATE_FAILED || a.state() == v1::ALLOCATION_STATE_RELEASED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation ", a.id(), " is ", v1::Name(a.state()), " and holds no circuits to rank"));
  }
  const std::string followed = phase.empty() ? a.active_phase() : phase;
  if (!followed.empty() &&
      std::find(a.phases().begin(), a.phases().end(), followed) == a.phases().end()) {
    return absl::NotFoundError(absl::StrCat(
        "phase: allocation ", a.id(), " has no phase '", followed, "'",
        a.phases().empty() ? "; it is single-phase"
                           : absl::StrCat("; its phases: ", absl::StrJoin(a.phases(), ", "))));
  }

  std::map<std::string, const v1::Onic*> onics;
  for (const v1::Onic& o : site.onics()) onics[o.id()] = &o;
  std::map<std::string, const v1::Device*> devices;
  for (const v1::Device& d : site.devices()) devices[d.id()] = &d;
  std::map<std::string, int> member_of_onic;
  for (int i = 0; i < a.members_size(); ++i) {
    auto d = devices.find(a.members(i));
    if (d == devices.end()) continue;
    for (const std::string& onic : d->second->onics()) member_of_onic[onic] = i;
  }

  v1::GetRanksResponse out;
  out.set_allocation_id(a.id());
  out.set_phase(followed);
  std::vector<int> order;
  const v1::TopologySpec* spec = PhaseTopology(a, followed);
  const v1::AttachSpec* attach = spec != nullptr && spec->has_attach() ? &spec->attach() : nullptr;
  if (attach != nullptr) {
    // The attached devices, which the job runs on; the host's own devices only lend their
    // O-NIC ports. No order among them to follow.
    out.set_order(v1::RANK_ORDER_MEMBERS);
    for (int i = 0; i < a.members_size(); ++i) {
      auto d = devices.find(a.members(i));
      const bool hosts_own =
          d != devices.end() && !d->second->host().empty() && d->second->host() == attach->host();
      if (!hosts_own) order.push_back(i);
    }
  } else if (IsTorusOfMembers(a, spec)) {
    out.set_order(v1::RANK_ORDER_TORUS);
  } else if (auto walked = CycleOrPath(PhaseLinks(a, followed, member_of_onic))) {
    out.set_order(walked->first);
    order = std::move(walked->second);
  } else {
    out.set_order(v1::RANK_ORDER_MEMBERS);
  }
  if (order.empty() && attach == nullptr) {
    for (int i = 0; i < a.members_size(); ++i) order.push_back(i);
  }

  const std::map<std::string, Attached> attached = AttachedDevices(attaches, onics, devices);
  std::map<std::string, v1::RankHost*> hosts;  // Host → its entry in `out.hosts`.
  for (size_t r = 0; r < order.size(); ++r) {
    const int member = order[r];
    v1::Rank* rank = out.add_ranks();
    rank->set_rank(static_cast<uint32_t>(r));
    rank->set_device(a.members(member));
    rank->set_member_index(static_cast<uint32_t>(member));
    if (auto d = devices.find(rank->device()); d != devices.end() && !d->second->host().empty()) {
      rank->set_host(d->second->host());
    } else if (auto at = attached.find(rank->device()); at != attached.end()) {
      rank->set_host(at->second.host);
      rank->set_pcie_address(at->second.pcie_address);
    } else if (attach != nullptr) {
      rank->set_host(attach->host());  // Not yet programmed: no circuit names the O-NIC.
    }
    if (out.order() == v1::RANK_ORDER_TORUS) {
      uint32_t stride = 1;
      for (uint32_t dimension : spec->template_().dimensions()) {
        rank->add_coordinates((static_cast<uint32_t>(member) / stride) % dimension);
        stride *= dimension;
      }
    }
    v1::RankHost*& host = hosts[rank->host()];
    if (host == nullptr) {
      host = out.add_hosts();
      host->set_host(rank->host());
      host->set_node_rank(static_cast<uint32_t>(out.hosts_size() - 1));
    }
    rank->set_local_rank(static_cast<uint32_t>(host->ranks_size()));
    host->add_ranks(rank->rank());
  }
  return out;
}

}  // namespace fleet::engine
