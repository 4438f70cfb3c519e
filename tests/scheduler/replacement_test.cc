// Member replacement: unit cases and randomized, seeded property tests over busy two-switch
// sites. Every replacement must be legal on the fabric without the allocation, change only
// the failed member's circuits, and pick a spare that was free and of the same kind.
#include "scheduler/replacement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/member_selection.h"
#include "scheduler/planner.h"
#include "tests/scheduler/plan_checks.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler::testing {
namespace {

using ::testing::HasSubstr;

struct Site {
  v1::Inventory inventory;
  std::vector<v1::SwitchPort> ports;
  std::vector<v1::Circuit> others;  // Circuits of other allocations.
  std::vector<v1::Allocation> holders;
};

// Admits `spec` for tenant a as allocation "job" on `site`: its circuits with ids, ACTIVE.
v1::Allocation Admit(const Site& site, const v1::TopologySpec& spec) {
  FabricSnapshot snapshot =
      FabricSnapshot::Build(site.inventory, site.ports, site.others, site.holders);
  absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {"a", spec});
  EXPECT_TRUE(plan.ok()) << plan.status();
  v1::Allocation a;
  a.set_id("job");
  a.set_tenant("a");
  if (!plan.ok()) return a;
  *a.mutable_members() = plan->members();
  for (int i = 0; i < plan->circuits_size(); ++i) {
    v1::Circuit* c = a.add_circuits();
    *c = plan->circuits(i);
    c->set_id(absl::StrCat("job-c", i + 1));
    c->set_allocation_id("job");
    c->set_state(v1::CIRCUIT_STATE_ACTIVE);
  }
  return a;
}

FabricSnapshot With(const Site& site, const v1::Allocation& a) {
  std::vector<v1::Circuit> circuits = site.others;
  circuits.insert(circuits.end(), a.circuits().begin(), a.circuits().end());
  std::vector<v1::Allocation> holders = site.holders;
  holders.push_back(a);
  return FabricSnapshot::Build(site.inventory, site.ports, circuits, holders);
}

bool Touches(const v1::Circuit& c, const FabricSnapshot& s, const std::string& device) {
  const OnicPortState* src = s.Port(c.source().onic(), c.source().port());
  const OnicPortState* dst = s.Port(c.destination().onic(), c.destination().port());
  return (src && src->device == device) || (dst && dst->device == device);
}

// Checks a replacement of `failed` in `a` planned on `snapshot`.
void ExpectGoodReplacement(const Site& site, const v1::Allocation& a, const std::string& failed,
                           const FabricSnapshot& snapshot, const Replacement& r) {
  EXPECT_EQ(r.failed, failed);
  // The spare: free, same kind, same switch, not a member before.
  ASSERT_TRUE(snapshot.HasDevice(r.spare));
  EXPECT_EQ(snapshot.devices().at(r.spare).kind(), snapshot.devices().at(failed).kind());
  EXPECT_NE(snapshot.devices().at(r.spare).admin_state(), v1::ADMIN_STATE_DRAINED);
  EXPECT_EQ(std::count(a.members().begin(), a.members().end(), r.spare), 0);
  EXPECT_EQ(snapshot.DevicePorts(r.spare).front()->tx.switch_id(),
            snapshot.DevicePorts(failed).front()->tx.switch_id());
  for (const OnicPortState* p : snapshot.DevicePorts(r.spare)) {
    EXPECT_TRUE(p->tx_holder.empty() && p->rx_holder.empty()) << r.spare << " was in use";
  }
  for (const v1::OnicPortRef& p : r.plan.ports_used()) {
    const OnicPortState* st = snapshot.Port(p.onic(), p.port());
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->device, r.spare);
    EXPECT_TRUE(st->Free()) << p.ShortDebugString();
  }
  // Members: the spare in the failed member's place.
  ASSERT_EQ(r.members.size(), static_cast<size_t>(a.members_size()));
  for (int i = 0; i < a.members_size(); ++i) {
    EXPECT_EQ(r.members[i], a.members(i) == failed ? r.spare : a.members(i));
  }
  // Only the failed member's circuits change; each is replaced by one to the spare.
  ASSERT_EQ(r.phases.size(), 1u);
  const ReplacedPhase& phase = r.phases[0];
  ASSERT_EQ(phase.circuits.size(), static_cast<size_t>(a.circuits_size()));
  int touching = 0;
  for (int i = 0; i < a.circuits_size(); ++i) {
    const v1::Circuit& before = a.circuits(i);
    const v1::Circuit& after = phase.circuits[i];
    if (!Touches(before, snapshot, failed)) {
      EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString()) << "kept " << before.id();
      continue;
    }
    ++touching;
    EXPECT_TRUE(after.id().empty());
    EXPECT_TRUE(Touches(after, snapshot, r.spare));
    EXPECT_FALSE(Touches(after, snapshot, failed));
    // The end not on the failed member stays.
    const OnicPortState* src = snapshot.Port(before.source().onic(), before.source().port());
    if (src->device != failed) {
      EXPECT_EQ(after.source().SerializeAsString(), before.source().SerializeAsString());
    }
    const OnicPortState* dst =
        snapshot.Port(before.destination().onic(), before.destination().port());
    if (dst->device != failed) {
      EXPECT_EQ(after.destination().SerializeAsString(), before.destination().SerializeAsString());
    }
  }
  EXPECT_EQ(phase.diff.remove.size(), static_cast<size_t>(touching));
  EXPECT_EQ(phase.diff.add.size(), static_cast<size_t>(touching));
  EXPECT_EQ(phase.diff.kept.size(), static_cast<size_t>(a.circuits_size() - touching));
  for (const v1::Circuit& c : phase.diff.remove) EXPECT_TRUE(Touches(c, snapshot, failed));
  EXPECT_EQ(r.plan.remove_size(), touching);
  EXPECT_EQ(r.plan.add_size(), touching);

  // The whole result is a legal plan on the fabric without the allocation.
  const FabricSnapshot without =
      FabricSnapshot::Build(site.inventory, site.ports, site.others, site.holders);
  v1::Plan whole;
  std::set<std::pair<std::string, uint32_t>> used;
  for (v1::Circuit c : phase.circuits) {
    c.clear_id();
    c.set_state(v1::CIRCUIT_STATE_PLANNED);
    *whole.add_add() = c.cross_connects(0);
    for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
      if (used.insert({end.onic(), end.port()}).second) *whole.add_ports_used() = end;
    }
    *whole.add_circuits() = std::move(c);
  }
  *whole.mutable_members() = {r.members.begin(), r.members.end()};
  ExpectLegal(whole, without);
}

Site GpuSite(int gpus) {
  Site s;
  s.inventory = SyntheticSite({{"a-", 0, gpus, 0, 0}});
  s.ports = AllPorts(s.inventory);
  return s;
}

v1::TopologySpec Ring(int n, v1::TemplateKind kind = v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL) {
  v1::TopologySpec spec;
  spec.mutable_template_()->set_kind(kind);
  v1::DeviceCount* c = spec.mutable_template_()->mutable_members()->add_counts();
  c->set_kind(v1::DEVICE_KIND_GPU);
  c->set_count(n);
  return spec;
}

TEST(PlanReplacement, RingOfFourReplacesOnlyTheFailedMembersCircuits) {
  Site site = GpuSite(8);
  v1::Allocation a = Admit(site, Ring(4));
  ASSERT_EQ(a.members_size(), 4);
  const FabricSnapshot snapshot = With(site, a);
  const std::string failed = a.members(2);
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, failed);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectGoodReplacement(site, a, failed, snapshot, *r);
  // A unidirectional ring: the failed member sends one circuit and hears one.
  EXPECT_EQ(r->plan.remove_size(), 2);
  // GPUs have one O-NIC each: the spare's port 1 stands in for the failed member's port 1.
  ASSERT_EQ(r->plan.ports_used_size(), 1);
  EXPECT_EQ(r->plan.ports_used(0).port(), 1u);
}

TEST(PlanReplacement, SpareIsPickedByMemberSelectionsPreference) {
  Site site = GpuSite(16);
  v1::Allocation a = Admit(site, Ring(4));
  const FabricSnapshot snapshot = With(site, a);
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, a.members(0));
  ASSERT_TRUE(r.ok()) << r.status();
  // Member selection with the members named and one GPU counted picks the same device.
  v1::MemberSet set;
  for (const std::string& m : a.members()) set.add_devices(m);
  set.add_counts()->set_kind(v1::DEVICE_KIND_GPU);
  set.mutable_counts(0)->set_count(1);
  std::vector<int> need(a.members_size(), 0);
  need.push_back(1);
  absl::StatusOr<std::vector<std::string>> picked = PickMembers(
      snapshot, set, need, snapshot.DevicePorts(a.members(0)).front()->tx.switch_id(), "spare");
  ASSERT_TRUE(picked.ok()) << picked.status();
  EXPECT_EQ(r->spare, picked->back());
}

TEST(PlanReplacement, BidirectionalRingKeepsPortIndices) {
  Site site;
  site.inventory = SyntheticSite({{"a-", 0, 0, 6, 0}});  // NVMe: two O-NICs each.
  site.ports = AllPorts(site.inventory);
  v1::TopologySpec spec = Ring(4, v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
  spec.mutable_template_()->mutable_members()->mutable_counts(0)->set_kind(v1::DEVICE_KIND_NVME);
  v1::Allocation a = Admit(site, spec);
  ASSERT_EQ(a.members_size(), 4);
  const FabricSnapshot snapshot = With(site, a);
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, a.members(1));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectGoodReplacement(site, a, a.members(1), snapshot, *r);
  EXPECT_EQ(r->plan.remove_size(), 4);  // Two duplex links.
  // Same port index on the spare as the failed member used.
  std::vector<std::pair<std::string, uint32_t>> failed_ports, spare_ports;
  for (const OnicPortState* p : snapshot.DevicePorts(a.members(1))) {
    if (!p->Free()) failed_ports.push_back({p->onic.substr(p->onic.rfind("-n")), p->port});
  }
  for (const v1::OnicPortRef& p : r->plan.ports_used()) {
    spare_ports.push_back({p.onic().substr(p.onic().rfind("-n")), p.port()});
  }
  EXPECT_EQ(failed_ports, spare_ports);
}

TEST(PlanReplacement, RefusesWithoutSpareNamingKindAndSwitch) {
  Site site = GpuSite(4);
  v1::Allocation a = Admit(site, Ring(4));
  const FabricSnapshot snapshot = With(site, a);
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, a.members(3));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("no free spare of kind gpu on switch a-ocs"));
  EXPECT_THAT(r.status().message(), HasSubstr(a.members(3)));
}

TEST(PlanReplacement, RefusesANonMember) {
  Site site = GpuSite(8);
  v1::Allocation a = Admit(site, Ring(4));
  const FabricSnapshot snapshot = With(site, a);
  std::string outsider = "a-gpu1";
  for (int g = 1; std::count(a.members().begin(), a.members().end(), outsider); ++g) {
    outsider = absl::StrCat("a-gpu", g);
  }
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, outsider);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("has no member " + outsider));
}

TEST(PlanReplacement, NamedSpare) {
  Site site = GpuSite(8);
  v1::Allocation a = Admit(site, Ring(4));
  const FabricSnapshot snapshot = With(site, a);
  std::string spare;
  for (const auto& [id, d] : snapshot.devices()) {
    if (std::count(a.members().begin(), a.members().end(), id) == 0) spare = id;
  }
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, a.members(0), spare);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spare, spare);
  ExpectGoodReplacement(site, a, a.members(0), snapshot, *r);
  EXPECT_EQ(PlanReplacement(snapshot, a, a.members(0), a.members(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanReplacement(snapshot, a, a.members(0), "nope").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PlanReplacement, EveryPhaseIsReplaced) {
  Site site = GpuSite(8);
  v1::Allocation a = Admit(site, Ring(4));
  // A second phase over the same members: the ring reversed, stored INACTIVE.
  a.add_phases("fwd");
  a.add_phases("back");
  a.set_active_phase("fwd");
  const int n = a.circuits_size();
  for (int i = 0; i < n; ++i) {
    a.mutable_circuits(i)->set_phase("fwd");
    v1::Circuit back = a.circuits(i);
    back.set_id(absl::StrCat("job-b", i + 1));
    back.set_phase("back");
    back.set_state(v1::CIRCUIT_STATE_INACTIVE);
    std::swap(*back.mutable_source(), *back.mutable_destination());
    *a.add_circuits() = back;  // Cross-connects are not checked by this test.
  }
  const FabricSnapshot snapshot = With(site, a);
  absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, a.members(1));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->phases.size(), 2u);
  EXPECT_EQ(r->phases[0].name, "fwd");
  EXPECT_EQ(r->phases[1].name, "back");
  for (const ReplacedPhase& p : r->phases) {
    EXPECT_EQ(p.diff.remove.size(), 2u) << p.name;
    EXPECT_EQ(p.diff.kept.size(), 2u) << p.name;
    for (const v1::Circuit& c : p.circuits) {
      EXPECT_EQ(c.phase(), p.name);
      EXPECT_FALSE(Touches(c, snapshot, a.members(1)));
    }
  }
  EXPECT_EQ(r->plan.remove_size(), 2);  // Only the active phase's go to the switch now.
  EXPECT_EQ(r->plan.circuits_size(), 2 * n);
}

// Random busy two-switch sites: another tenant holds random ports, some are drained or
// failed; a random template over GPUs or NVMe drives, one random member fails.
TEST(PlanReplacementProperty, RandomBusySites) {
  std::mt19937 rng(20261122);
  int planned = 0, refused = 0;
  for (int round = 0; round < 300; ++round) {
    Site site;
    site.inventory = SyntheticSite({{"a-", 2, 24, 6, 0}, {"b-", 2, 16, 4, 0}});
    // Random busy, drained and failed ports.
    std::uniform_real_distribution<double> unit(0, 1);
    const double busy = unit(rng) * 0.7;
    std::set<std::string> drained, failed;
    std::vector<std::pair<std::string, uint32_t>> free_tx, free_rx;
    for (const v1::Onic& o : site.inventory.onics()) {
      for (const v1::OnicPort& p : o.ports()) {
        const double roll = unit(rng);
        if (roll < busy) {
          free_tx.push_back({o.id(), p.index()});
        } else if (roll < busy + 0.05) {
          drained.insert(absl::StrCat(p.rx().switch_id(), "/", p.rx().port()));
        } else if (roll < busy + 0.08) {
          failed.insert(absl::StrCat(p.tx().switch_id(), "/", p.tx().port()));
        }
      }
    }
    free_rx = free_tx;
    std::shuffle(free_rx.begin(), free_rx.end(), rng);
    for (size_t k = 0; k < free_tx.size(); ++k) {
      v1::Circuit& c = site.others.emplace_back();
      c.set_id(absl::StrCat("theirs-c", k));
      c.set_allocation_id("theirs");
      c.mutable_source()->set_onic(free_tx[k].first);
      c.mutable_source()->set_port(free_tx[k].second);
      c.mutable_destination()->set_onic(free_rx[k].first);
      c.mutable_destination()->set_port(free_rx[k].second);
      c.set_state(v1::CIRCUIT_STATE_ACTIVE);
    }
    site.holders.emplace_back().set_id("theirs");
    site.holders.back().set_tenant("b");
    site.ports = AllPorts(site.inventory, drained, failed);

    const bool nvme = unit(rng) < 0.3;
    const int n = std::uniform_int_distribution<int>(2, nvme ? 4 : 8)(rng);
    v1::TopologySpec spec = Ring(n, unit(rng) < 0.5 ? v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL
                                                    : v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
    spec.mutable_template_()->mutable_members()->mutable_counts(0)->set_kind(
        nvme ? v1::DEVICE_KIND_NVME : v1::DEVICE_KIND_GPU);
    FabricSnapshot before =
        FabricSnapshot::Build(site.inventory, site.ports, site.others, site.holders);
    if (!PlanTopology(before, {"a", spec}).ok()) continue;  // The site is too busy for it.
    v1::Allocation a = Admit(site, spec);
    const FabricSnapshot snapshot = With(site, a);
    const std::string failed_member =
        a.members(std::uniform_int_distribution<int>(0, a.members_size() - 1)(rng));
    absl::StatusOr<Replacement> r = PlanReplacement(snapshot, a, failed_member);
    SCOPED_TRACE(absl::StrCat("round ", round, " failed ", failed_member));
    if (!r.ok()) {
      ++refused;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
      EXPECT_THAT(r.status().message(), HasSubstr("no free spare of kind"));
      // Really no device of the kind on the switch with enough wholly free ports.
      continue;
    }
    ++planned;
    ExpectGoodReplacement(site, a, failed_member, snapshot, *r);
    // Deterministic.
    absl::StatusOr<Replacement> again = PlanReplacement(snapshot, a, failed_member);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->plan.SerializeAsString(), r->plan.SerializeAsString());
  }
  EXPECT_GT(planned, 100);
  EXPECT_GT(refused + planned, 150);
}

}  // namespace
}  // namespace fleet::scheduler::testing
