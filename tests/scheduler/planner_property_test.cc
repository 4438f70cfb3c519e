// Randomized, seeded property tests: every plan over random sites with random busy, drained
// and failed ports is checked against the invariants and against a reference model of each
// shape written independently of the planner.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/planner.h"
#include "tests/scheduler/plan_checks.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler::testing {
namespace {

using ::testing::HasSubstr;
using Arcs = std::vector<std::pair<int, int>>;

// A random site of one cluster with up to `max_busy` of its ports busy (held by tenant b's
// allocation or by tenant a's other allocation), and some drained or failed.
struct RandomFabric {
  v1::Inventory site;
  FabricSnapshot snapshot;
  std::vector<std::string> devices;  // Every device id.
};

RandomFabric MakeFabric(std::mt19937& rng, ClusterShape shape, double max_busy) {
  RandomFabric f;
  const double busy = std::uniform_real_distribution<double>(0, max_busy)(rng);
  f.site = SyntheticSite({shape});
  std::vector<const v1::OnicPort*> ports;
  std::vector<std::string> onic_of;
  for (const v1::Onic& o : f.site.onics()) {
    for (const v1::OnicPort& p : o.ports()) {
      ports.push_back(&p);
      onic_of.push_back(o.id());
    }
  }
  std::uniform_real_distribution<double> unit(0, 1);
  std::set<std::string> drained, failed;
  std::vector<v1::Circuit> circuits;
  std::vector<size_t> order(ports.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<size_t> rx_order = order;
  std::shuffle(rx_order.begin(), rx_order.end(), rng);
  for (size_t k = 0; k < ports.size(); ++k) {
    const v1::OnicPort& p = *ports[order[k]];
    const double roll = unit(rng);
    if (roll < busy) {
      v1::Circuit& c = circuits.emplace_back();
      c.set_allocation_id(unit(rng) < 0.5 ? "theirs" : "mine");
      c.mutable_source()->set_onic(onic_of[order[k]]);
      c.mutable_source()->set_port(p.index());
      c.mutable_destination()->set_onic(onic_of[rx_order[k]]);
      c.mutable_destination()->set_port(ports[rx_order[k]]->index());
      c.set_state(v1::CIRCUIT_STATE_ACTIVE);
    } else if (roll < busy * 1.15) {
      drained.insert(absl::StrCat(p.rx().switch_id(), "/", p.rx().port()));
    } else if (roll < busy * 1.3) {
      failed.insert(absl::StrCat(p.tx().switch_id(), "/", p.tx().port()));
    }
  }
  v1::Allocation theirs, mine;
  theirs.set_id("theirs");
  theirs.set_tenant("b");
  mine.set_id("mine");
  mine.set_tenant("a");
  f.snapshot =
      FabricSnapshot::Build(f.site, AllPorts(f.site, drained, failed), circuits, {theirs, mine});
  for (const v1::Device& d : f.site.devices()) f.devices.push_back(d.id());
  return f;
}

std::vector<std::string> Sample(std::mt19937& rng, std::vector<std::string> from, int n) {
  std::shuffle(from.begin(), from.end(), rng);
  from.resize(std::min<size_t>(n, from.size()));
  return from;
}

int Uniform(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Free sides of a device's ports for a new request: both, tx only, rx only.
struct Capacity {
  int both = 0, tx_only = 0, rx_only = 0;
};
Capacity CapacityOf(const FabricSnapshot& snapshot, const std::string& device) {
  Capacity c;
  for (const OnicPortState* p : snapshot.DevicePorts(device)) {
    if (!p->unusable.empty()) continue;
    const bool tx = p->tx_holder.empty(), rx = p->rx_holder.empty();
    c.both += tx && rx;
    c.tx_only += tx && !rx;
    c.rx_only += rx && !tx;
  }
  return c;
}

// Whether a member with `out` outgoing and `in` incoming circuits fits: pairs of them share
// a port with both sides free; the rest take a one-sided port or a whole one.
bool Fits(const Capacity& c, int out, int in) {
  const int pairs = std::min(out, in);
  if (pairs > c.both) return false;
  const int spare = c.both - pairs;
  return std::max(0, out - pairs - c.tx_only) + std::max(0, in - pairs - c.rx_only) <= spare;
}

// The reference model of each template: its member-level arcs, sorted.
Arcs ExpectedArcs(const v1::TemplateSpec& t, int n, int hub) {
  Arcs arcs;
  const int width = std::max(1u, t.width());
  auto link = [&](int a, int b, bool duplex) {
    for (int k = 0; k < width; ++k) {
      arcs.push_back({a, b});
      if (duplex) arcs.push_back({b, a});
    }
  };
  auto directed = [&](int parent, int child) {
    t.reverse() ? link(child, parent, t.duplex()) : link(parent, child, t.duplex());
  };
  switch (t.kind()) {
    case v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL:
      for (int i = 0; i < n; ++i) link(i, (i + 1) % n, false);
      break;
    case v1::TEMPLATE_KIND_RING_BIDIRECTIONAL:
      if (n == 2) {
        link(0, 1, true);
        link(0, 1, true);
      } else {
        for (int i = 0; i < n; ++i) link(i, (i + 1) % n, true);
      }
      break;
    case v1::TEMPLATE_KIND_CHAIN:
      for (int i = 0; i + 1 < n; ++i) directed(i, i + 1);
      break;
    case v1::TEMPLATE_KIND_STAR:
      for (int i = 0; i < n; ++i) {
        if (i != hub) directed(hub, i);
      }
      break;
    case v1::TEMPLATE_KIND_TREE:
      for (int i = 1; i < n; ++i) directed((i - 1) / (t.fanout() ? t.fanout() : 2), i);
      break;
    case v1::TEMPLATE_KIND_TORUS_2D:
    case v1::TEMPLATE_KIND_TORUS_3D: {
      // Neighbours by coordinates: ±1 in one dimension, wrapping; a pair once.
      std::vector<int> dims(t.dimensions().begin(), t.dimensions().end());
      auto coordinates = [&](int i) {
        std::vector<int> c;
        for (int d : dims) {
          c.push_back(i % d);
          i /= d;
        }
        return c;
      };
      std::set<std::pair<int, int>> pairs;
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
          std::vector<int> a = coordinates(i), b = coordinates(j);
          int differing = 0, step = 0;
          for (size_t d = 0; d < dims.size(); ++d) {
            if (a[d] == b[d]) continue;
            ++differing;
            const int delta = (b[d] - a[d] + dims[d]) % dims[d];
            step = delta == 1 || delta == dims[d] - 1;
          }
          if (differing == 1 && step) pairs.insert({i, j});
        }
      }
      for (auto [i, j] : pairs) link(i, j, true);
      break;
    }
    case v1::TEMPLATE_KIND_FULL_MESH:
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) link(i, j, true);
      }
      break;
    default:
      break;
  }
  std::sort(arcs.begin(), arcs.end());
  return arcs;
}

bool IsDuplex(const v1::TemplateSpec& t) {
  switch (t.kind()) {
    case v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL:
      return false;
    case v1::TEMPLATE_KIND_CHAIN:
    case v1::TEMPLATE_KIND_STAR:
    case v1::TEMPLATE_KIND_TREE:
      return t.duplex();
    default:
      return true;
  }
}

v1::TemplateSpec RandomTemplate(std::mt19937& rng, const std::vector<std::string>& devices,
                                int* hub) {
  v1::TemplateSpec t;
  t.set_kind(static_cast<v1::TemplateKind>(Uniform(rng, 1, 8)));
  t.set_width(Uniform(rng, 0, 3) == 0 ? 2 : Uniform(rng, 0, 1));
  t.set_duplex(Uniform(rng, 0, 1));
  t.set_reverse(Uniform(rng, 0, 1));
  int n = Uniform(rng, 2, 8);
  if (t.kind() == v1::TEMPLATE_KIND_TORUS_2D) {
    t.add_dimensions(Uniform(rng, 1, 4));
    t.add_dimensions(Uniform(rng, 2, 3));
  } else if (t.kind() == v1::TEMPLATE_KIND_TORUS_3D) {
    t.add_dimensions(Uniform(rng, 1, 2));
    t.add_dimensions(Uniform(rng, 1, 2));
    t.add_dimensions(Uniform(rng, 2, 3));
  }
  if (!t.dimensions().empty()) {
    n = 1;
    for (uint32_t d : t.dimensions()) n *= d;
  }
  if (t.kind() == v1::TEMPLATE_KIND_TREE) t.set_fanout(Uniform(rng, 0, 3));
  for (const std::string& d : Sample(rng, devices, n)) t.mutable_members()->add_devices(d);
  *hub = 0;
  if (t.kind() == v1::TEMPLATE_KIND_STAR && Uniform(rng, 0, 1)) {
    *hub = Uniform(rng, 0, t.members().devices_size() - 1);
    t.set_hub(t.members().devices(*hub));
  }
  return t;
}

std::vector<std::string> Names(const v1::MemberSet& members) {
  return {members.devices().begin(), members.devices().end()};
}

TEST(PlannerPropertyTest, TemplatesHaveTheirShapeOrAreRefusedNamingAMemberThatLacksPorts) {
  std::mt19937 rng(20240611);
  int planned = 0, refused = 0;
  for (int site = 0; site < 300; ++site) {
    // At least 12 devices: the largest torus drawn is 12 members.
    ClusterShape shape{"", Uniform(rng, 0, 8), Uniform(rng, 12, 24), Uniform(rng, 0, 3),
                       Uniform(rng, 0, 3)};
    RandomFabric f = MakeFabric(rng, shape, 0.4);
    for (int request = 0; request < 20; ++request) {
      int hub = 0;
      v1::TemplateSpec t = RandomTemplate(rng, f.devices, &hub);
      const std::vector<std::string> members = Names(t.members());
      const int n = members.size();
      v1::TopologySpec spec;
      *spec.mutable_template_() = t;
      SCOPED_TRACE(absl::StrCat("site ", site, " request ", request, ": ", t.ShortDebugString()));
      const Arcs expected = ExpectedArcs(t, n, hub);
      std::vector<int> out(n), in(n);
      for (auto [a, b] : expected) ++out[a], ++in[b];
      std::vector<std::string> lacking;
      for (int i = 0; i < n; ++i) {
        if (!Fits(CapacityOf(f.snapshot, members[i]), out[i], in[i])) lacking.push_back(members[i]);
      }
      absl::StatusOr<v1::Plan> plan = PlanTopology(f.snapshot, {"a", spec});
      // More circuits than the site has ports to send from: refused before any member is
      // looked at (limits.h); tori are not counted there.
      if (t.kind() != v1::TEMPLATE_KIND_TORUS_2D && t.kind() != v1::TEMPLATE_KIND_TORUS_3D &&
          expected.size() > f.snapshot.limits().onic_ports) {
        ++refused;
        ASSERT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << plan.status();
        EXPECT_THAT(std::string(plan.status().message()),
                    HasSubstr("O-NIC ports to send them from"));
        continue;
      }
      if (!lacking.empty()) {
        ++refused;
        ASSERT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << plan.status();
        // The first member in order that lacks ports is the one named.
        EXPECT_THAT(std::string(plan.status().message()),
                    HasSubstr(absl::StrCat("(", lacking.front(), "): the ")));
        continue;
      }
      ASSERT_TRUE(plan.ok()) << plan.status();
      ++planned;
      ExpectLegal(*plan, f.snapshot);
      EXPECT_EQ(MemberArcs(*plan, f.snapshot, members), expected);
      EXPECT_EQ(std::vector<std::string>(plan->members().begin(), plan->members().end()), members);
      // Degree limits: exactly one port per pair of circuits it can share, no more.
      const std::map<int, int> used = PortsPerMember(*plan, f.snapshot, members);
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(used.contains(i) ? used.at(i) : 0, std::max(out[i], in[i])) << members[i];
      }
      if (IsDuplex(t)) ExpectDuplexPorts(*plan, f.snapshot);
      if (t.kind() == v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL && t.width() <= 1) {
        // One cycle through all members: following the successor visits each once.
        std::map<int, int> next;
        for (auto [a, b] : MemberArcs(*plan, f.snapshot, members)) next[a] = b;
        std::set<int> seen;
        int at = 0;
        for (int k = 0; k < n; ++k, at = next[at]) seen.insert(at);
        EXPECT_EQ(at, 0);
        EXPECT_EQ(static_cast<int>(seen.size()), n);
      }
    }
  }
  // The generator must exercise both outcomes, or the test proves little.
  EXPECT_GT(planned, 1200);
  EXPECT_GT(refused, 600);
}

TEST(PlannerPropertyTest, AttachGivesEachDeviceItsWidthOfDuplexLinksToTheHost) {
  std::mt19937 rng(7);
  int planned = 0;
  for (int site = 0; site < 80; ++site) {
    RandomFabric f = MakeFabric(rng, {"", Uniform(rng, 2, 6), Uniform(rng, 2, 12), 2, 1}, 0.3);
    std::vector<std::string> pooled;
    for (const v1::Device& d : f.site.devices()) {
      if (d.host().empty()) pooled.push_back(d.id());
    }
    for (int request = 0; request < 10; ++request) {
      v1::TopologySpec spec;
      v1::AttachSpec& a = *spec.mutable_attach();
      a.set_host(absl::StrCat("server", Uniform(rng, 1, f.site.hosts_size())));
      a.set_width(Uniform(rng, 0, 2));
      const std::vector<std::string> devices = Sample(rng, pooled, Uniform(rng, 1, 5));
      for (const std::string& d : devices) a.mutable_devices()->add_devices(d);
      SCOPED_TRACE(a.ShortDebugString());
      const int width = std::max(1u, a.width());
      int host_free = 0;
      for (const std::string& cpu : f.snapshot.HostDevices(a.host())) {
        host_free += CapacityOf(f.snapshot, cpu).both;
      }
      bool fits = host_free >= width * static_cast<int>(devices.size());
      for (const std::string& d : devices) fits = fits && CapacityOf(f.snapshot, d).both >= width;
      absl::StatusOr<v1::Plan> plan = PlanTopology(f.snapshot, {"a", spec});
      if (!fits) {
        EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << plan.status();
        continue;
      }
      ASSERT_TRUE(plan.ok()) << plan.status();
      ++planned;
      ExpectLegal(*plan, f.snapshot);
      ExpectDuplexPorts(*plan, f.snapshot);
      EXPECT_EQ(plan->circuits_size(), 2 * width * static_cast<int>(devices.size()));
      std::map<std::string, int> links;
      for (const v1::Circuit& c : plan->circuits()) {
        const OnicPortState* src = f.snapshot.Port(c.source().onic(), c.source().port());
        const OnicPortState* dst = f.snapshot.Port(c.destination().onic(), c.destination().port());
        if (src->host.empty()) {
          EXPECT_EQ(dst->host, a.host());
          ++links[src->device];
        } else {
          EXPECT_EQ(src->host, a.host());
          EXPECT_TRUE(dst->host.empty());
        }
      }
      for (const std::string& d : devices) EXPECT_EQ(links[d], width) << d;
      for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
        EXPECT_EQ(plan->members(i), devices[i]);
      }
    }
  }
  EXPECT_GT(planned, 300);
}

TEST(PlannerPropertyTest, CountedMembersAreFreeDevicesOfTheKindStrandingFewestPorts) {
  std::mt19937 rng(99);
  int planned = 0;
  for (int site = 0; site < 120; ++site) {
    RandomFabric f = MakeFabric(rng, {"", Uniform(rng, 0, 4), Uniform(rng, 4, 24), 2, 2}, 0.3);
    v1::TopologySpec spec;
    v1::TemplateSpec& t = *spec.mutable_template_();
    t.set_kind(Uniform(rng, 0, 1) ? v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL
                                  : v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
    const int count = Uniform(rng, 3, 6);
    v1::DeviceCount& c = *t.mutable_members()->add_counts();
    c.set_kind(v1::DEVICE_KIND_GPU);
    c.set_count(count);
    const int need = t.kind() == v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL ? 1 : 2;
    // The reference: stranded ports of each healthy GPU wholly able to serve.
    std::vector<int> stranded;
    for (const v1::Device& d : f.site.devices()) {
      if (d.kind() != v1::DEVICE_KIND_GPU) continue;
      int free = 0;
      bool healthy = true;
      for (const OnicPortState* p : f.snapshot.DevicePorts(d.id())) {
        free += p->Free();
        healthy = healthy && p->unusable.empty();
      }
      if (healthy && free >= need) stranded.push_back(free - need);
    }
    std::sort(stranded.begin(), stranded.end());
    absl::StatusOr<v1::Plan> plan = PlanTopology(f.snapshot, {"a", spec});
    SCOPED_TRACE(absl::StrCat("site ", site));
    if (static_cast<int>(stranded.size()) < count) continue;  // Unhealthy ones may still serve.
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++planned;
    ExpectLegal(*plan, f.snapshot);
    std::vector<std::string> members(plan->members().begin(), plan->members().end());
    ASSERT_EQ(static_cast<int>(members.size()), count);
    std::vector<int> picked;
    for (const std::string& m : members) {
      EXPECT_EQ(f.snapshot.devices().at(m).kind(), v1::DEVICE_KIND_GPU);
      int free = 0;
      for (const OnicPortState* p : f.snapshot.DevicePorts(m)) free += p->Free();
      picked.push_back(free - need);
    }
    std::sort(picked.begin(), picked.end());
    EXPECT_EQ(picked, std::vector<int>(stranded.begin(), stranded.begin() + count));
    EXPECT_EQ(PlanTopology(f.snapshot, {"a", spec})->SerializeAsString(),
              plan->SerializeAsString());
  }
  EXPECT_GT(planned, 60);
}

TEST(PlannerPropertyTest, AllToAllRoundsCoverEveryOrderedPairOnceWithinPortLimits) {
  std::mt19937 rng(4242);
  int planned = 0;
  for (int site = 0; site < 100; ++site) {
    RandomFabric f = MakeFabric(rng, {"", Uniform(rng, 0, 10), Uniform(rng, 2, 20), 2, 0}, 0.25);
    const std::vector<std::string> members = Sample(rng, f.devices, Uniform(rng, 2, 14));
    const int n = members.size();
    v1::AllToAllSpec spec;
    for (const std::string& m : members) spec.mutable_members()->add_devices(m);
    SCOPED_TRACE(spec.ShortDebugString());
    int ports = 1 << 30;
    for (const std::string& m : members) ports = std::min(ports, CapacityOf(f.snapshot, m).both);
    absl::StatusOr<std::vector<PlannedPhase>> rounds = PlanAllToAllRounds(f.snapshot, "a", spec);
    if (ports == 0) {
      EXPECT_EQ(rounds.status().code(), absl::StatusCode::kResourceExhausted);
      continue;
    }
    ASSERT_TRUE(rounds.ok()) << rounds.status();
    ++planned;
    EXPECT_EQ(static_cast<int>(rounds->size()), (n - 1 + ports - 1) / ports);
    std::map<std::pair<int, int>, int> covered;
    for (size_t r = 0; r < rounds->size(); ++r) {
      const PlannedPhase& round = (*rounds)[r];
      EXPECT_EQ(round.name, absl::StrCat("round-", r + 1));
      ExpectLegal(round.plan, f.snapshot);
      std::vector<int> out(n), in(n);
      for (auto [a, b] : MemberArcs(round.plan, f.snapshot, members)) {
        ++covered[{a, b}];
        ++out[a];
        ++in[b];
      }
      for (int i = 0; i < n; ++i) {
        EXPECT_LE(out[i], ports);
        EXPECT_LE(in[i], ports);
      }
      for (const v1::Circuit& c : round.plan.circuits()) EXPECT_EQ(c.phase(), round.name);
    }
    EXPECT_EQ(static_cast<int>(covered.size()), n * (n - 1));
    for (const auto& [pair, times] : covered) EXPECT_EQ(times, 1);
  }
  EXPECT_GT(planned, 50);
}

// Rings over members of two or three switches joined by random trunk groups, some trunks held
// by another tenant or drained, under random hop bounds. With a bound of at most 2 a circuit
// between two switches needs a trunk of their own group, so the outcome is known exactly:
// walking the ring's circuits in order, the first one that needs a trunk where the bound
// allows none or the site has none is FAILED_PRECONDITION, and the first one beyond its
// group's free trunks is RESOURCE_EXHAUSTED. With a bound of 3, plans are checked for
// legality (paths, trunks used once, the bound) and refusals for their codes.
TEST(PlannerPropertyTest, CircuitsBetweenSwitchesUseFreeTrunksWithinTheHopBound) {
  std::mt19937 rng(11);
  int planned = 0, exhausted = 0, impossible = 0, multi_hop = 0;
  for (int site_index = 0; site_index < 150; ++site_index) {
    const int switches = Uniform(rng, 2, 3);
    std::vector<ClusterShape> shapes;
    for (int k = 0; k < switches; ++k) shapes.push_back({std::string(1, 'p' + k), 0, 6, 0, 0});
    v1::Inventory site = SyntheticSite(shapes);
    std::vector<std::string> ids;
    for (const v1::Switch& sw : site.switches()) ids.push_back(sw.id());
    std::map<std::pair<std::string, std::string>, int> group_size;
    for (const std::string& from : ids) {
      for (const std::string& to : ids) {
        if (from == to || Uniform(rng, 0, 4) == 0) continue;  // Some pairs have no trunks.
        group_size[{from, to}] = Uniform(rng, 1, 4);
        AddTrunks(site, from, to, group_size[{from, to}]);
      }
    }
    // Each trunk: held by another tenant, drained at one end, or free.
    std::vector<v1::Circuit> held;
    std::set<std::string> drained;
    std::map<std::pair<std::string, std::string>, int> free_trunks;
    for (const v1::Trunk& t : site.trunks()) {
      const int roll = Uniform(rng, 0, 5);
      if (roll == 0) {
        v1::Circuit& c = held.emplace_back();
        c.set_allocation_id("theirs");
        c.add_trunks(t.id());
      } else if (roll == 1) {
        drained.insert(absl::StrCat(t.to().switch_id(), "/", t.to().port()));
      } else {
        ++free_trunks[{t.from().switch_id(), t.to().switch_id()}];
      }
    }
    v1::Allocation theirs;
    theirs.set_id("theirs");
    theirs.set_tenant("b");
    const FabricSnapshot snapshot =
        FabricSnapshot::Build(site, AllPorts(site, drained), held, {theirs});
    std::vector<std::string> devices;
    for (const v1::Device& d : site.devices()) devices.push_back(d.id());
    for (int request = 0; request < 20; ++request) {
      const std::vector<std::string> members = Sample(rng, devices, Uniform(rng, 2, 8));
      const uint32_t bound = Uniform(rng, 0, 3);
      v1::TopologySpec spec;
      spec.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
      for (const std::string& m : members)
        spec.mutable_template_()->mutable_members()->add_devices(m);
      spec.set_max_switch_hops(bound);
      SCOPED_TRACE(
          absl::StrCat("site ", site_index, " request ", request, ": ", spec.ShortDebugString()));
      const absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {"a", spec});
      const uint32_t hops = bound == 0 ? 2 : bound;
      if (hops <= 2) {
        absl::StatusCode expected = absl::StatusCode::kOk;
        std::map<std::pair<std::string, std::string>, int> used;
        const int n = members.size();
        for (int i = 0; i < n && expected == absl::StatusCode::kOk; ++i) {
          const std::string from = snapshot.DevicePorts(members[i]).front()->tx.switch_id();
          const std::string to = snapshot.DevicePorts(members[(i + 1) % n]).front()->rx.switch_id();
          if (from == to) continue;
          if (hops == 1 || !group_size.contains({from, to})) {
            expected = absl::StatusCode::kFailedPrecondition;
          } else if (++used[{from, to}] > free_trunks[{from, to}]) {
            expected = absl::StatusCode::kResourceExhausted;
          }
        }
        ASSERT_EQ(plan.status().code(), expected) << plan.status();
      }
      if (!plan.ok()) {
        const bool full = plan.status().code() == absl::StatusCode::kResourceExhausted;
        ASSERT_TRUE(full || plan.status().code() == absl::StatusCode::kFailedPrecondition)
            << plan.status();
        EXPECT_THAT(std::string(plan.status().message()),
                    HasSubstr(full ? "trunk group" : "switch"));
        ++(full ? exhausted : impossible);
        continue;
      }
      ++planned;
      ExpectLegal(*plan, snapshot, hops);
      for (const v1::Circuit& c : plan->circuits()) multi_hop += c.cross_connects_size() > 2;
    }
  }
  // Every outcome must be exercised, or the test proves little.
  EXPECT_GT(planned, 500);
  EXPECT_GT(exhausted, 100);
  EXPECT_GT(impossible, 100);
  EXPECT_GT(multi_hop, 10);
}

}  // namespace
}  // namespace fleet::scheduler::testing
