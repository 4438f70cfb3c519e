#include "scheduler/trunk_routing.h"

#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::scheduler {
namespace {

std::string GroupName(const std::string& from, const std::string& to) {
  return absl::StrCat(from, "->", to);
}

v1::CrossConnect MakeCrossConnect(const std::string& switch_id, uint32_t ingress, uint32_t egress) {
  v1::CrossConnect x;
  x.set_switch_id(switch_id);
  x.set_ingress(ingress);
  x.set_egress(egress);
  return x;
}

}  // namespace

TrunkRouter::TrunkRouter(const FabricSnapshot& snapshot, uint32_t max_switch_hops,
                         std::string tenant, std::string own_allocation, HeldBy held_by)
    : snapshot_(snapshot),
      max_switch_hops_(max_switch_hops == 0 ? kDefaultMaxSwitchHops : max_switch_hops),
      tenant_(std::move(tenant)),
      own_allocation_(std::move(own_allocation)),
      held_by_(std::move(held_by)) {}

bool TrunkRouter::Free(const TrunkState& t) const { return WhyNotFree(t).empty(); }

std::string TrunkRouter::WhyNotFree(const TrunkState& t) const {
  if (!t.unusable.empty()) return t.unusable;
  if (taken_.contains(t.id)) return "used by this request";
  if (t.holder.empty() || t.holder == own_allocation_) return "";
  if (held_by_) return held_by_(t.holder);
  const std::string owner = snapshot_.TenantOf(t.holder);
  if (!owner.empty() && owner != tenant_) return "in a circuit of another tenant";
  return "in a circuit of " + t.holder;
}

template <typename Usable>
std::vector<std::string> TrunkRouter::ShortestPath(const std::string& from, const std::string& to,
                                                   Usable usable) const {
  // Breadth-first over switches; neighbours in id order, so the path is deterministic.
  std::map<std::string, std::string> parent{{from, ""}};
  std::deque<std::string> queue{from};
  while (!queue.empty()) {
    const std::string at = queue.front();
    queue.pop_front();
    if (at == to) break;
    for (const std::string& next : snapshot_.TrunkNeighbours(at)) {
      if (parent.contains(next)) continue;
      bool any = false;
      for (const TrunkState* t : snapshot_.Trunks(at, next)) any = any || usable(*t);
      if (!any) continue;
      parent[next] = at;
      queue.push_back(next);
    }
  }
  if (!parent.contains(to)) return {};
  std::vector<std::string> path;
  for (std::string at = to; !at.empty(); at = parent[at]) path.insert(path.begin(), at);
  return path;
}

absl::StatusOr<Route> TrunkRouter::RouteCircuit(const v1::SwitchPortRef& ingress,
                                                const v1::SwitchPortRef& egress,
                                                const std::string& what) {
  const std::string& from = ingress.switch_id();
  const std::string& to = egress.switch_id();
  Route route;
  if (from == to) {
    route.cross_connects.push_back(MakeCrossConnect(from, ingress.port(), egress.port()));
    return route;
  }
  const std::vector<std::string> path =
      ShortestPath(from, to, [&](const TrunkState& t) { return Free(t); });
  if (path.empty() || path.size() > max_switch_hops_) {
    const std::vector<std::string> any =
        ShortestPath(from, to, [](const TrunkState&) { return true; });
    const std::string where = absl::StrCat(what, ": its tx fiber enters switch ", from,
                                           " and its rx fiber leaves switch ", to);
    if (any.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ", and no trunks join ", from, " to ", to));
    }
    if (any.size() > max_switch_hops_) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, "; the shortest trunk path crosses ", any.size(), " switches (",
                       absl::StrJoin(any, " -> "), ") and max_switch_hops is ", max_switch_hops_));
    }
    return absl::ResourceExhaustedError(absl::StrCat(where, ": ", Refusal(any)));
  }
  uint32_t at_port = ingress.port();
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const TrunkState* trunk = nullptr;
    for (const TrunkState* t : snapshot_.Trunks(path[i], path[i + 1])) {
      if (Free(*t)) {
        trunk = t;
        break;
      }
    }
    // ShortestPath only crossed groups with a free trunk.
    route.cross_connects.push_back(MakeCrossConnect(path[i], at_port, trunk->from.port()));
    route.trunks.push_back(trunk->id);
    taken_.insert(trunk->id);
    at_port = trunk->to.port();
  }
  route.cross_connects.push_back(MakeCrossConnect(to, at_port, egress.port()));
  return route;
}

std::string TrunkRouter::Refusal(const std::vector<std::string>& path) const {
  std::vector<std::string> full;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const std::vector<const TrunkState*> group = snapshot_.Trunks(path[i], path[i + 1]);
    std::map<std::string, int> why;  // Reason → trunks.
    for (const TrunkState* t : group) {
      if (std::string reason = WhyNotFree(*t); !reason.empty()) ++why[reason];
    }
    if (why.size() == 0) continue;
    int not_free = 0;
    for (const auto& [reason, n] : why) not_free += n;
    if (not_free < static_cast<int>(group.size())) continue;
    std::vector<std::string> parts;
    for (const auto& [reason, n] : why) parts.push_back(absl::StrCat(n, " ", reason));
    full.push_back(absl::StrCat("trunk group ", GroupName(path[i], path[i + 1]), " is full (",
                                group.size(), " trunks: ", absl::StrJoin(parts, "; "), ")"));
  }
  return absl::StrJoin(full, "; ");
}

}  // namespace fleet::scheduler
