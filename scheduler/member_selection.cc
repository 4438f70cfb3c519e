#include "scheduler/member_selection.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fleet/v1/names.h"

namespace fleet::scheduler {
namespace {

std::string SwitchOf(const FabricSnapshot& snapshot, const std::string& device) {
  std::vector<const OnicPortState*> ports = snapshot.DevicePorts(device);
  return ports.empty() ? "" : ports.front()->tx.switch_id();
}

struct Candidate {
  std::string id;
  std::string group;  // Chassis, or host.
  int ports = 0;
  int free = 0;
  bool healthy = true;
  bool spare = false;                    // A spare, when spares may be picked (preferred).
  std::optional<double> weakest_rx_dbm;  // Over its free ports that have a reading.
  int group_free = 0;                    // Wholly free candidates in its group.
  int away = 0;  // Switch hops to the home switch and back over trunks (0: on it).

  bool Fits(int need) const {
    return need == kWholeDevice ? free == ports && free > 0 : free >= need;
  }
  int Stranded(int need) const { return need == kWholeDevice ? 0 : free - need; }
  // Lower is better; see PickMembers.
  auto Rank(int need) const {
    return std::make_tuple(!healthy, away, !spare, Stranded(need), group_free,
                           !weakest_rx_dbm.has_value(), -weakest_rx_dbm.value_or(0), id);
  }
};

// Trunk hops from `from` to every switch trunks reach, breadth first.
std::map<std::string, int> TrunkHops(const FabricSnapshot& snapshot, const std::string& from) {
  std::map<std::string, int> hops{{from, 0}};
  std::vector<std::string> frontier{from};
  while (!frontier.empty()) {
    std::vector<std::string> next;
    for (const std::string& at : frontier) {
      for (const std::string& to : snapshot.TrunkNeighbours(at)) {
        if (hops.emplace(to, hops[at] + 1).second) next.push_back(to);
      }
    }
    frontier = std::move(next);
  }
  return hops;
}

// Devices for `count` on switch `on_switch`; or, when `home` is given instead, on any switch
// trunks join to `home` both ways (`away` is the longer of the two ways, in trunk hops).
std::vector<Candidate> Candidates(const FabricSnapshot& snapshot, const v1::DeviceCount& count,
                                  const std::string& on_switch, const std::string& home,
                                  const PickOptions& options) {
  std::map<std::string, int> away;  // Switch → hops there and back; absent when unreachable.
  if (!home.empty()) {
    for (const auto& [sw, there] : TrunkHops(snapshot, home)) {
      const std::map<std::string, int> back = TrunkHops(snapshot, sw);
      if (auto it = back.find(home); it != back.end()) away[sw] = std::max(there, it->second);
    }
  }
  std::vector<Candidate> out;
  std::map<std::string, int> group_free;
  for (const auto& [id, device] : snapshot.devices()) {
    if (device.kind() != count.kind() || device.admin_state() == v1::ADMIN_STATE_DRAINED) continue;
    if (device.spare() && !options.spares) continue;
    std::vector<const OnicPortState*> ports = snapshot.DevicePorts(id);
    if (ports.empty()) continue;
    const std::string& sw = ports.front()->tx.switch_id();
    if (home.empty() ? sw != on_switch : !away.contains(sw)) continue;
    if (!count.cluster().empty() && ports.front()->cluster != count.cluster()) continue;
    if (!count.host().empty() && device.host() != count.host()) continue;
    Candidate c;
    c.id = id;
    c.group = !device.chassis().empty() ? device.chassis() : device.host();
    c.ports = ports.size();
    c.away = home.empty() ? 0 : away[sw];
    c.spare = device.spare();
    c.healthy = device.health() != v1::DEVICE_HEALTH_SUSPECT;
    for (const OnicPortState* p : ports) {
      c.healthy = c.healthy && p->unusable.empty();
      if (!p->Free()) continue;
      ++c.free;
      if (p->rx_power_dbm) {
        c.weakest_rx_dbm = std::min(c.weakest_rx_dbm.value_or(*p->rx_power_dbm), *p->rx_power_dbm);
      }
    }
    if (c.free == c.ports) ++group_free[c.group];
    out.push_back(std::move(c));
  }
  for (Candidate& c : out) c.group_free = group_free[c.group];
  return out;
}

struct Picks {
  std::vector<std::string> members;
  int stranded = 0;
  int away = 0;  // Trunk hops of the picks from the home switch, summed.
};

// Picks on switch `on_switch`; or, with `home` given instead, on any switch, preferring home.
absl::StatusOr<Picks> PickOn(const FabricSnapshot& snapshot, const v1::MemberSet& members,
                             const std::vector<int>& need, const std::string& on_switch,
                             const std::string& home, const std::string& field,
                             const PickOptions& options) {
  Picks picks;
  picks.members.assign(members.devices().begin(), members.devices().end());
  std::set<std::string> taken(picks.members.begin(), picks.members.end());
  int first = members.devices_size();
  for (int k = 0; k < members.counts_size(); ++k) {
    const v1::DeviceCount& count = members.counts(k);
    // limits.h bounds every count by the site's devices before planning, so it fits an int.
    const int wanted = static_cast<int>(count.count());
    std::vector<Candidate> candidates = Candidates(snapshot, count, on_switch, home, options);
    // Positions needing more ports choose first, so that small needs do not take the only
    // devices big enough for the large ones. A whole device is the largest need.
    std::vector<int> positions;
    for (int i = first; i < first + wanted; ++i) positions.push_back(i);
    auto size = [&](int i) { return need[i] == kWholeDevice ? 1 << 30 : need[i]; };
    std::stable_sort(positions.begin(), positions.end(),
                     [&](int a, int b) { return size(a) > size(b); });
    picks.members.resize(static_cast<size_t>(first + wanted));
    int found = 0;
    for (int position : positions) {
      const Candidate* best = nullptr;
      for (const Candidate& c : candidates) {
        if (taken.contains(c.id) || !c.Fits(need[position])) continue;
        if (best == nullptr || c.Rank(need[position]) < best->Rank(need[position])) best = &c;
      }
      if (best == nullptr) {
        const std::string ports =
            need[position] == kWholeDevice
                ? "all ports free"
                : absl::StrCat(need[position], " free port", need[position] == 1 ? "" : "s");
        return absl::ResourceExhaustedError(absl::StrCat(
            field, ".counts[", k, "]: ", count.count(), " ", v1::Name(count.kind()),
            " devices wanted", count.cluster().empty() ? "" : " in cluster " + count.cluster(),
            count.host().empty() ? "" : " of host " + count.host(),
            home.empty() ? " on switch " + on_switch : " on any switch", ", but only ", found,
            " there have ", ports, " and are neither drained, ", options.spares ? "" : "spares, ",
            "nor already members"));
      }
      taken.insert(best->id);
      ++found;
      picks.members[position] = best->id;
      picks.stranded += best->Stranded(need[position]);
      picks.away += best->away;
    }
    first += wanted;
  }
  return picks;
}

// The switch with the most free ports on devices that `members` counts (of a kind, and in a
// cluster when the count names one); ties: id.
std::string BusiestSwitch(const FabricSnapshot& snapshot, const v1::MemberSet& members) {
  std::map<std::string, int> free;
  for (const auto& [id, device] : snapshot.devices()) {
    const std::vector<const OnicPortState*> ports = snapshot.DevicePorts(id);
    if (ports.empty() || device.admin_state() == v1::ADMIN_STATE_DRAINED) continue;
    bool counted = false;
    for (const v1::DeviceCount& c : members.counts()) {
      counted |= c.kind() == device.kind() &&
                 (c.cluster().empty() || c.cluster() == ports.front()->cluster) &&
                 (c.host().empty() || c.host() == device.host());
    }
    if (!counted) continue;
    for (const OnicPortState* p : ports) free[p->tx.switch_id()] += p->Free();
  }
  std::string best;
  for (const auto& [sw, n] : free) {
    if (best.empty() || n > free[best]) best = sw;
  }
  return best;
}

}  // namespace

int MemberCount(const v1::MemberSet& members) {
  // Summed wide and saturated: limits.h bounds the counts before planning, but a wrapped
  // sum must never read as a small or negative member count.
  uint64_t n = static_cast<uint64_t>(members.devices_size());
  for (const v1::DeviceCount& c : members.counts()) n += c.count();
  return static_cast<int>(std::min<uint64_t>(n, std::numeric_limits<int>::max()));
}

absl::StatusOr<std::vector<std::string>> PickMembers(
    const FabricSnapshot& snapshot, const v1::MemberSet& members, const std::vector<int>& need,
    const std::string& on_switch, const std::string& field, const PickOptions& options) {
  std::set<std::string> seen;
  for (int i = 0; i < members.devices_size(); ++i) {
    const std::string& name = members.devices(i);
    if (!snapshot.HasDevice(name)) {
      return absl::NotFoundError(absl::StrCat(field, "[", i, "]: device ", name, " not found"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": device ", name, " is named twice"));
    }
  }
  for (int k = 0; k < members.counts_size(); ++k) {
    if (members.counts(k).kind() == v1::DEVICE_KIND_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".counts[", k, "].kind is not set"));
    }
    if (members.counts(k).count() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".counts[", k, "].count is 0"));
    }
  }
  if (members.counts().empty()) {
    return std::vector<std::string>(members.devices().begin(), members.devices().end());
  }
  std::vector<std::string> switches;
  if (!on_switch.empty()) {
    switches.push_back(on_switch);
  } else if (!members.devices().empty()) {
    switches.push_back(SwitchOf(snapshot, members.devices(0)));
  } else {
    std::set<std::string> all;
    for (const auto& [id, device] : snapshot.devices()) all.insert(SwitchOf(snapshot, id));
    all.erase("");
    switches.assign(all.begin(), all.end());
  }
  std::optional<Picks> best;
  std::vector<std::string> refusals;
  for (const std::string& sw : switches) {
    absl::StatusOr<Picks> picks = PickOn(snapshot, members, need, sw, "", field, options);
    if (!picks.ok()) {
      refusals.push_back(std::string(picks.status().message()));
    } else if (!best || picks->stranded < best->stranded) {
      best = std::move(*picks);
    }
  }
  if (best) return best->members;
  // No one switch has them: with trunks between switches, members may span them, as few and
  // as near as possible away from the home switch: the bound one, or else each switch is tried
  // as home and the picks with the fewest trunk hops, then stranded ports, win (ties: the
  // switch with the most free ports of the kinds asked for, then id).
  if (snapshot.HasTrunks() && !switches.empty() && options.span_switches) {
    std::vector<std::string> homes = switches;
    if (homes.size() > 1) {
      const std::string busiest = BusiestSwitch(snapshot, members);
      std::stable_partition(homes.begin(), homes.end(),
                            [&](const std::string& sw) { return sw == busiest; });
    }
    std::optional<Picks> spanning;
    std::string refusal;
    for (const std::string& home : homes) {
      absl::StatusOr<Picks> picks = PickOn(snapshot, members, need, "", home, field, options);
      if (!picks.ok()) {
        if (refusal.empty()) refusal = std::string(picks.status().message());
      } else if (!spanning || std::tie(picks->away, picks->stranded) <
                                  std::tie(spanning->away, spanning->stranded)) {
        spanning = std::move(*picks);
      }
    }
    if (spanning) return spanning->members;
    refusals.push_back(refusal);
  }
  if (refusals.size() == 1) return absl::ResourceExhaustedError(refusals.front());
  return absl::ResourceExhaustedError(
      absl::StrCat(field, ": no single switch has the devices asked for: ",
                   refusals.empty() ? "no switch has devices" : absl::StrJoin(refusals, "; ")));
}

}  // namespace fleet::scheduler
