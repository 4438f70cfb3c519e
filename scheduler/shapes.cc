#include "scheduler/shapes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fleet/v1/names.h"

namespace fleet::scheduler {
namespace {

class ArcList {
 public:
  explicit ArcList(uint32_t width) : width_(std::max(1u, width)) {}

  void Link(int a, int b, bool duplex) {
    for (uint32_t k = 0; k < width_; ++k) {
      arcs_.push_back({a, b});
      if (duplex) arcs_.push_back({b, a});
    }
  }
  // a→b, or b→a when reversed.
  void Directed(int a, int b, bool reverse, bool duplex) {
    reverse ? Link(b, a, duplex) : Link(a, b, duplex);
  }
  std::vector<Arc> Take() { return std::move(arcs_); }

 private:
  const uint32_t width_;
  std::vector<Arc> arcs_;
};

absl::Status Torus(const v1::TemplateSpec& t, int n, size_t rank, ArcList& arcs) {
  const std::string field = "topology.template.dimensions";
  if (static_cast<size_t>(t.dimensions_size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": a ", rank, "-D torus needs ", rank,
                                                   " dimensions, got ", t.dimensions_size()));
  }
  std::vector<int> dims(t.dimensions().begin(), t.dimensions().end());
  int64_t product = 1;
  for (int d : dims) {
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat(field, ": a dimension is 0"));
    product *= d;
  }
  if (product != n) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", absl::StrJoin(dims, "x"), " is ",
                                                   product, " positions for ", n, " members"));
  }
  for (int i = 0; i < n; ++i) {
    int stride = 1;
    for (int d : dims) {
      const int coordinate = (i / stride) % d;
      // A dimension of two has one link between its positions, not a double one.
      if (d >= 3 || (d == 2 && coordinate == 0)) {
        const int next = i + (((coordinate + 1) % d) - coordinate) * stride;
        arcs.Link(i, next, true);
      }
      stride *= d;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Arc>> TemplateArcs(const v1::TemplateSpec& t, int n, int hub) {
  const v1::TemplateKind kind = t.kind();
  if (kind == v1::TEMPLATE_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("topology.template.kind is not set");
  }
  const bool torus = kind == v1::TEMPLATE_KIND_TORUS_2D || kind == v1::TEMPLATE_KIND_TORUS_3D;
  if (n < 2 && !torus) {
    const bool ring = kind == v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL ||
                      kind == v1::TEMPLATE_KIND_RING_BIDIRECTIONAL;
    return absl::InvalidArgumentError(absl::StrCat("topology.template.members: a ",
                                                   ring ? "ring" : v1::Name(kind),
                                                   " needs at least 2 devices, got ", n));
  }
  ArcList arcs(t.width());
  switch (kind) {
    case v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL:
      for (int i = 0; i < n; ++i) arcs.Link(i, (i + 1) % n, false);
      break;
    case v1::TEMPLATE_KIND_RING_BIDIRECTIONAL:
      // Of two members, both "neighbours" are the same member: a double link.
      for (int i = 0; i < (n == 2 ? 2 : n); ++i) arcs.Link(i % n, (i + 1) % n, true);
      break;
    case v1::TEMPLATE_KIND_CHAIN:
      for (int i = 0; i + 1 < n; ++i) arcs.Directed(i, i + 1, t.reverse(), t.duplex());
      break;
    case v1::TEMPLATE_KIND_STAR:
      for (int i = 0; i < n; ++i) {
        if (i != hub) arcs.Directed(hub, i, t.reverse(), t.duplex());
      }
      break;
    case v1::TEMPLATE_KIND_TREE: {
      const int fanout = t.fanout() == 0 ? 2 : static_cast<int>(t.fanout());
      for (int i = 1; i < n; ++i) arcs.Directed((i - 1) / fanout, i, t.reverse(), t.duplex());
      break;
    }
    case v1::TEMPLATE_KIND_TORUS_2D:
    case v1::TEMPLATE_KIND_TORUS_3D: {
      absl::Status status = Torus(t, n, kind == v1::TEMPLATE_KIND_TORUS_2D ? 2 : 3, arcs);
      if (!status.ok()) return status;
      break;
    }
    case v1::TEMPLATE_KIND_FULL_MESH:
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) arcs.Link(i, j, true);
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("topology.template.kind: ", static_cast<int>(kind), " is not a template"));
  }
  return arcs.Take();
}

std::vector<std::vector<Arc>> AllToAllRounds(int n, int ports) {
  std::vector<int> shifts;
  for (int s = 1; 2 * s <= n; ++s) {
    shifts.push_back(s);
    if (2 * s != n) shifts.push_back(n - s);
  }
  std::vector<std::vector<Arc>> rounds;
  const size_t per_round = std::max(1, ports);  // Never loop forever on a broken caller.
  for (size_t first = 0; first < shifts.size(); first += per_round) {
    std::vector<Arc>& round = rounds.emplace_back();
    for (size_t k = first; k < std::min(shifts.size(), first + per_round); ++k) {
      for (int i = 0; i < n; ++i) round.push_back({i, (i + shifts[k]) % n});
    }
  }
  return rounds;
}

std::vector<std::vector<PortSlot>> MemberSlots(int members, const std::vector<Arc>& arcs) {
  std::vector<std::vector<int>> outs(members), ins(members);
  for (int a = 0; a < static_cast<int>(arcs.size()); ++a) {
    outs[arcs[a].from].push_back(a);
    ins[arcs[a].to].push_back(a);
  }
  std::vector<std::vector<PortSlot>> slots(members);
  for (int m = 0; m < members; ++m) {
    std::vector<bool> paired(ins[m].size(), false);
    std::vector<int> lone_outs;
    for (int out : outs[m]) {
      bool found = false;
      for (size_t k = 0; k < ins[m].size() && !found; ++k) {
        if (!paired[k] && arcs[ins[m][k]].from == arcs[out].to) {
          paired[k] = found = true;
          slots[m].push_back({out, ins[m][k]});
        }
      }
      if (!found) lone_outs.push_back(out);
    }
    size_t next_in = 0;
    auto next_unpaired_in = [&]() -> int {
      while (next_in < ins[m].size() && paired[next_in]) ++next_in;
      if (next_in == ins[m].size()) return -1;
      paired[next_in] = true;
      return ins[m][next_in];
    };
    for (int out : lone_outs) slots[m].push_back({out, next_unpaired_in()});
    for (int in = next_unpaired_in(); in != -1; in = next_unpaired_in()) {
      slots[m].push_back({-1, in});
    }
  }
  return slots;
}

}  // namespace fleet::scheduler
