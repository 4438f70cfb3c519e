#include "controller/engine/ranks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace fleet::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A site of `gpus` pooled GPUs (gpuN with O-NIC gpuN-n0) and hosts server1, server2, each
// with one CPU (serverN-cpu0) and two O-NICs (sN-n0 at 0000:1N:00.0, sN-n1 at 0000:2N:00.0).
v1::Inventory Site(int gpus) {
  v1::Inventory site;
  for (int i = 1; i <= gpus; ++i) {
    v1::Device* d = site.add_devices();
    d->set_id("gpu" + std::to_string(i));
    d->set_kind(v1::DEVICE_KIND_GPU);
    d->add_onics(d->id() + "-n0");
    v1::Onic* o = site.add_onics();
    o->set_id(d->id() + "-n0");
    o->set_device(d->id());
  }
  for (int h = 1; h <= 2; ++h) {
    v1::Device* d = site.add_devices();
    const std::string n = std::to_string(h);
    d->set_id("server" + n + "-cpu0");
    d->set_kind(v1::DEVICE_KIND_CPU);
    d->set_host("server" + n);
    for (int k = 0; k < 2; ++k) {
      v1::Onic* o = site.add_onics();
      o->set_id("s" + n + "-n" + std::to_string(k));
      o->set_device(d->id());
      o->set_pcie_address("0000:" + std::to_string(k + 1) + n + ":00.0");
      d->add_onics(o->id());
    }
  }
  return site;
}

v1::Allocation Allocation(std::vector<std::string> members) {
  v1::Allocation a;
  a.set_id("alloc-1");
  a.set_tenant("team-a");
  a.set_state(v1::ALLOCATION_STATE_READY);
  for (std::string& m : members) a.add_members(std::move(m));
  return a;
}

void AddCircuit(v1::Allocation& a, const std::string& from, const std::string& to,
                const std::string& phase = "") {
  v1::Circuit* c = a.add_circuits();
  c->mutable_source()->set_onic(from);
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic(to);
  c->mutable_destination()->set_port(1);
  c->set_phase(phase);
}

std::vector<std::string> Devices(const v1::GetRanksResponse& r) {
  std::vector<std::string> out;
  for (const v1::Rank& rank : r.ranks()) out.push_back(rank.device());
  return out;
}

TEST(RankOrderTest, AUnidirectionalRingIsFollowedTheWayItsLightGoes) {
  // Members in request order gpu1..gpu4, but the circuits run 1 → 3 → 2 → 4 → 1.
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3", "gpu4"});
  AddCircuit(a, "gpu1-n0", "gpu3-n0");
  AddCircuit(a, "gpu3-n0", "gpu2-n0");
  AddCircuit(a, "gpu2-n0", "gpu4-n0");
  AddCircuit(a, "gpu4-n0", "gpu1-n0");
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(4), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_RING);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu3", "gpu2", "gpu4"));
  EXPECT_EQ(r->ranks(1).member_index(), 2u);
  // No device has a host: one host entry, empty, holding every rank.
  ASSERT_EQ(r->hosts_size(), 1);
  EXPECT_EQ(r->hosts(0).host(), "");
  EXPECT_THAT(r->hosts(0).ranks(), ElementsAre(0, 1, 2, 3));
}

TEST(RankOrderTest, ADuplexRingStartsTowardMemberOneAndWidthCountsOnce) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3"});
  for (auto [x, y] : std::vector<std::pair<int, int>>{{1, 2}, {2, 3}, {3, 1}}) {
    for (int width = 0; width < 2; ++width) {
      AddCircuit(a, "gpu" + std::to_string(x) + "-n0", "gpu" + std::to_string(y) + "-n0");
      AddCircuit(a, "gpu" + std::to_string(y) + "-n0", "gpu" + std::to_string(x) + "-n0");
    }
  }
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(3), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_RING);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2", "gpu3"));
}

TEST(RankOrderTest, AChainStartsWhereItsLightLeaves) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3"});
  AddCircuit(a, "gpu3-n0", "gpu2-n0");  // reverse: m2 → m1 → m0.
  AddCircuit(a, "gpu2-n0", "gpu1-n0");
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(3), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_CHAIN);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu3", "gpu2", "gpu1"));
}

TEST(RankOrderTest, AStarIsInMemberOrder) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3", "gpu4"});
  for (const char* leaf : {"gpu2-n0", "gpu3-n0", "gpu4-n0"}) AddCircuit(a, "gpu1-n0", leaf);
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(4), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_MEMBERS);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
}

TEST(RankOrderTest, TwoSeparateRingsAreNotOneRing) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6"});
  for (auto [x, y] :
       std::vector<std::pair<int, int>>{{1, 2}, {2, 3}, {3, 1}, {4, 5}, {5, 6}, {6, 4}}) {
    AddCircuit(a, "gpu" + std::to_string(x) + "-n0", "gpu" + std::to_string(y) + "-n0");
  }
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(6), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_MEMBERS);
}

TEST(RankOrderTest, ATorusGivesCoordinatesXFastest) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6"});
  v1::TemplateSpec* t = a.mutable_request()->mutable_topology()->mutable_template_();
  t->set_kind(v1::TEMPLATE_KIND_TORUS_2D);
  t->add_dimensions(3);
  t->add_dimensions(2);
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(6), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_TORUS);
  EXPECT_THAT(r->ranks(4).coordinates(), ElementsAre(1, 1));
  EXPECT_THAT(r->ranks(5).coordinates(), ElementsAre(2, 1));
}

TEST(RankOrderTest, PhasesAreFollowedByNameAndUnknownOnesNamed) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3"});
  a.add_phases("dp");
  a.add_phases("pp");
  a.set_active_phase("dp");
  AddCircuit(a, "gpu1-n0", "gpu3-n0", "dp");
  AddCircuit(a, "gpu3-n0", "gpu2-n0", "dp");
  AddCircuit(a, "gpu2-n0", "gpu1-n0", "dp");
  AddCircuit(a, "gpu2-n0", "gpu3-n0", "pp");
  AddCircuit(a, "gpu3-n0", "gpu1-n0", "pp");
  absl::StatusOr<v1::GetRanksResponse> dp = RankOrder(a, "", Site(3), {});
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->phase(), "dp");
  EXPECT_THAT(Devices(*dp), ElementsAre("gpu1", "gpu3", "gpu2"));
  absl::StatusOr<v1::GetRanksResponse> pp = RankOrder(a, "pp", Site(3), {});
  ASSERT_TRUE(pp.ok()) << pp.status();
  EXPECT_EQ(pp->order(), v1::RANK_ORDER_CHAIN);
  EXPECT_THAT(Devices(*pp), ElementsAre("gpu2", "gpu3", "gpu1"));
  absl::StatusOr<v1::GetRanksResponse> tp = RankOrder(a, "tp", Site(3), {});
  EXPECT_EQ(tp.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(tp.status().message()), HasSubstr("no phase 'tp'; its phases: dp, pp"));
}

TEST(RankOrderTest, HostsComeFromCpusAndFromAttachAllocations) {
  // A ring gpu1 → server1-cpu0 → gpu2 → server2-cpu0 → gpu1, with gpu1 attached to server2
  // and gpu2 to server1 by attach allocations (one of them FAILED: it holds no circuits).
  v1::Allocation ring = Allocation({"gpu1", "server1-cpu0", "gpu2", "server2-cpu0"});
  AddCircuit(ring, "gpu1-n0", "s1-n0");
  AddCircuit(ring, "s1-n0", "gpu2-n0");
  AddCircuit(ring, "gpu2-n0", "s2-n0");
  AddCircuit(ring, "s2-n0", "gpu1-n0");
  std::vector<v1::Allocation> attaches(2);
  attaches[0] = Allocation({"server2-cpu0", "gpu1"});
  attaches[0].mutable_request()->mutable_topology()->mutable_attach()->set_host("server2");
  AddCircuit(attaches[0], "gpu1-n0", "s2-n1");
  AddCircuit(attaches[0], "s2-n1", "gpu1-n0");
  attaches[1] = Allocation({"server1-cpu0", "gpu2"});
  attaches[1].mutable_request()->mutable_topology()->mutable_attach()->set_host("server1");
  AddCircuit(attaches[1], "s1-n1", "gpu2-n0");
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(ring, "", Site(2), attaches);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_RING);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "server1-cpu0", "gpu2", "server2-cpu0"));
  EXPECT_EQ(r->ranks(0).host(), "server2");
  EXPECT_EQ(r->ranks(0).pcie_address(), "0000:22:00.0");
  EXPECT_EQ(r->ranks(1).host(), "server1");
  EXPECT_EQ(r->ranks(1).pcie_address(), "");
  EXPECT_EQ(r->ranks(2).host(), "server1");
  EXPECT_EQ(r->ranks(2).pcie_address(), "0000:21:00.0");
  EXPECT_EQ(r->ranks(2).local_rank(), 1u);
  // Hosts by their lowest rank: server2 holds ranks 0 and 3, server1 ranks 1 and 2.
  ASSERT_EQ(r->hosts_size(), 2);
  EXPECT_EQ(r->hosts(0).host(), "server2");
  EXPECT_EQ(r->hosts(0).node_rank(), 0u);
  EXPECT_THAT(r->hosts(0).ranks(), ElementsAre(0, 3));
  EXPECT_EQ(r->hosts(1).host(), "server1");
  EXPECT_THAT(r->hosts(1).ranks(), ElementsAre(1, 2));
}

TEST(RankOrderTest, ACycleWhoseLightDoesNotGoRoundIsOrderedByItsMembers) {
  // x → y is missing: y → x, z → x, y → z. Every member has two neighbours, member 0 only
  // receives, and neither way round has a circuit at every step.
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3"});
  AddCircuit(a, "gpu2-n0", "gpu1-n0");
  AddCircuit(a, "gpu3-n0", "gpu1-n0");
  AddCircuit(a, "gpu2-n0", "gpu3-n0");
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(3), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_RING);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2", "gpu3"));
}

TEST(RankOrderTest, TheLightGoingOneWayRoundWinsOverMemberOrder) {
  // Duplex gpu1↔gpu2, then one-way gpu2 → gpu3 → gpu4 → gpu1: only gpu1, gpu2, gpu3, gpu4
  // has a circuit at every step; the other way round does not.
  v1::Allocation a = Allocation({"gpu1", "gpu4", "gpu3", "gpu2"});
  AddCircuit(a, "gpu1-n0", "gpu2-n0");
  AddCircuit(a, "gpu2-n0", "gpu1-n0");
  AddCircuit(a, "gpu2-n0", "gpu3-n0");
  AddCircuit(a, "gpu3-n0", "gpu4-n0");
  AddCircuit(a, "gpu4-n0", "gpu1-n0");
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(4), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
}

TEST(RankOrderTest, APhasesTorusOverSomeMembersHasNoCoordinates) {
  v1::Allocation a = Allocation({"gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6"});
  a.add_phases("dp");
  a.add_phases("tp");
  a.set_active_phase("tp");
  v1::Phase* tp = a.mutable_request()->add_phases();
  tp->set_name("tp");
  v1::TemplateSpec* t = tp->mutable_topology()->mutable_template_();
  t->set_kind(v1::TEMPLATE_KIND_TORUS_2D);
  t->add_dimensions(2);
  t->add_dimensions(2);
  for (const char* m : {"gpu3", "gpu4", "gpu5", "gpu6"}) t->mutable_members()->add_devices(m);
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(6), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_MEMBERS);
  EXPECT_TRUE(r->ranks(0).coordinates().empty());
}

// An attach of gpu1 and gpu2 to server1, each on one of its two O-NICs; `members` in the
// order given.
v1::Allocation AttachToServer1(std::vector<std::string> members) {
  v1::Allocation a = Allocation(std::move(members));
  a.mutable_request()->mutable_topology()->mutable_attach()->set_host("server1");
  AddCircuit(a, "gpu1-n0", "s1-n0");
  AddCircuit(a, "s1-n0", "gpu1-n0");
  AddCircuit(a, "gpu2-n0", "s1-n1");
  AddCircuit(a, "s1-n1", "gpu2-n0");
  return a;
}

TEST(RankOrderTest, AnAttachRanksItsAttachedDevicesNotTheHostsOwn) {
  // Members as the planner lists them: the attached devices, then the host's device whose
  // ports they use. A path gpu1 — cpu — gpu2, but an attach: the job runs on the GPUs, so
  // the CPU is no rank.
  const v1::Allocation a = AttachToServer1({"gpu1", "gpu2", "server1-cpu0"});
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(2), {a});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->order(), v1::RANK_ORDER_MEMBERS);
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2"));
  EXPECT_EQ(r->ranks(0).member_index(), 0u);
  EXPECT_EQ(r->ranks(1).member_index(), 1u);
  EXPECT_EQ(r->ranks(0).host(), "server1");
  EXPECT_EQ(r->ranks(0).pcie_address(), "0000:11:00.0");
  EXPECT_EQ(r->ranks(1).pcie_address(), "0000:21:00.0");
  EXPECT_EQ(r->ranks(1).local_rank(), 1u);
  ASSERT_EQ(r->hosts_size(), 1);
  EXPECT_EQ(r->hosts(0).host(), "server1");
  EXPECT_THAT(r->hosts(0).ranks(), ElementsAre(0, 1));
}

TEST(RankOrderTest, AnAttachLeavesOutTheHostsDevicesWhereverTheyStand) {
  // The host's CPU first among the members: still no rank; member_index stays its index.
  const v1::Allocation a = AttachToServer1({"server1-cpu0", "gpu1", "gpu2"});
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(2), {a});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2"));
  EXPECT_EQ(r->ranks(0).rank(), 0u);
  EXPECT_EQ(r->ranks(0).member_index(), 1u);
  EXPECT_EQ(r->ranks(1).member_index(), 2u);
  ASSERT_EQ(r->hosts_size(), 1);
  EXPECT_THAT(r->hosts(0).ranks(), ElementsAre(0, 1));
}

TEST(RankOrderTest, AnAttachNotYetProgrammedRunsOnItsHostWithoutAddresses) {
  // PENDING: no circuits stored yet, so no O-NIC names the PCIe address.
  v1::Allocation a = AttachToServer1({"gpu1", "gpu2", "server1-cpu0"});
  a.clear_circuits();
  a.set_state(v1::ALLOCATION_STATE_PENDING);
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(2), {a});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Devices(*r), ElementsAre("gpu1", "gpu2"));
  EXPECT_EQ(r->ranks(0).host(), "server1");
  EXPECT_EQ(r->ranks(1).host(), "server1");
  EXPECT_EQ(r->ranks(0).pcie_address(), "");
  ASSERT_EQ(r->hosts_size(), 1);
  EXPECT_THAT(r->hosts(0).ranks(), ElementsAre(0, 1));
}

TEST(RankOrderTest, AReleasedAllocationHasNoRanks) {
  v1::Allocation a = Allocation({"gpu1"});
  a.set_state(v1::ALLOCATION_STATE_RELEASED);
  absl::StatusOr<v1::GetRanksResponse> r = RankOrder(a, "", Site(1), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("alloc-1 is released"));
}

}  // namespace
}  // namespace fleet::engine
