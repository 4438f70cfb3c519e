#include "scheduler/limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/planner.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler {
namespace {

using ::testing::HasSubstr;

// Two CPUs (three O-NICs each: six ports, the most of any device) and four GPUs (one
// O-NIC each: two ports) on one switch.
FabricSnapshot Site() {
  const v1::Inventory site = testing::SyntheticSite({{.prefix = "", .cpus = 2, .gpus = 4}});
  return FabricSnapshot::Build(site, testing::AllPorts(site), {}, {});
}

v1::TopologySpec Ring(uint32_t width, std::vector<uint32_t> counts) {
  v1::TopologySpec t;
  t.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
  t.mutable_template_()->set_width(width);
  for (uint32_t n : counts) {
    v1::DeviceCount* c = t.mutable_template_()->mutable_members()->add_counts();
    c->set_kind(v1::DEVICE_KIND_GPU);
    c->set_count(n);
  }
  return t;
}

TEST(LimitsTest, TheSiteIsMeasuredFromItsInventory) {
  const FabricSnapshot site = Site();
  const SiteLimits& limits = site.limits();
  EXPECT_EQ(limits.devices, 6u);
  EXPECT_EQ(limits.onic_ports, 2u * 6 + 4u * 2);
  EXPECT_EQ(limits.max_device_ports, 6u);
  EXPECT_EQ(limits.switches, 1u);
}

TEST(LimitsTest, EachBoundIsTheSitesOwnAndOneMoreIsRefused) {
  const FabricSnapshot site = Site();
  EXPECT_TRUE(CheckTopologyLimits(site, Ring(6, {1})).ok());
  absl::Status wide = CheckTopologyLimits(site, Ring(7, {1}));
  EXPECT_EQ(wide.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(wide.message()),
              HasSubstr("topology.template.width: 7 parallel circuits need as many ports of a "
                        "device, and no device of the site has more than 6"));
  absl::Status many = CheckTopologyLimits(site, Ring(1, {4, 3}));
  EXPECT_EQ(many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(many.message()),
              HasSubstr("topology.template.members: 7 members (named plus counted) is more than "
                        "the 6 devices of the site"));
  // Two counts of 2^31 each sum past any int: still counted, still refused.
  absl::Status wrapped = CheckTopologyLimits(site, Ring(1, {2147483648u, 2147483648u}));
  EXPECT_EQ(wrapped.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(wrapped.message()), HasSubstr("counts[0].count: 2147483648"));

  v1::TopologySpec hops = Ring(1, {2});
  hops.set_max_switch_hops(kMaxSwitchHops);  // More than the site's one switch: any path.
  EXPECT_TRUE(CheckTopologyLimits(site, hops).ok());
  hops.set_max_switch_hops(kMaxSwitchHops + 1);
  EXPECT_EQ(CheckTopologyLimits(site, hops).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LimitsTest, AShapeWithMoreCircuitsThanTheSiteHasPortsIsRefusedBeforeItsArcsAreBuilt) {
  const FabricSnapshot site = Site();  // 20 O-NIC ports.
  v1::TopologySpec mesh;
  mesh.mutable_template_()->set_kind(v1::TEMPLATE_KIND_FULL_MESH);
  for (int i = 1; i <= 4; ++i) mesh.mutable_template_()->mutable_members()->add_devices("d");
  EXPECT_TRUE(CheckTopologyLimits(site, mesh).ok());  // 12 circuits.
  mesh.mutable_template_()->mutable_members()->add_devices("d");
  absl::Status big = CheckTopologyLimits(site, mesh);  // 20 circuits: still fits.
  EXPECT_TRUE(big.ok()) << big;
  mesh.mutable_template_()->mutable_members()->add_devices("d");
  big = CheckTopologyLimits(site, mesh);  // 30 circuits.
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.message()),
              HasSubstr("topology.template: full-mesh over 6 members of width 1 is up to 30 "
                        "circuits, and the site has 20 O-NIC ports"));
}

TEST(LimitsTest, AnAllToAllNeedingMoreRoundsThanPhasesIsRefused) {
  // 200 GPUs of two ports each: n members need at least ceil((n-1)/2) rounds.
  const v1::Inventory inventory = testing::SyntheticSite({{.prefix = "", .gpus = 200}});
  const FabricSnapshot site =
      FabricSnapshot::Build(inventory, testing::AllPorts(inventory), {}, {});
  const auto all_to_all = [](uint32_t n) {
    v1::TopologySpec t;
    v1::DeviceCount* c = t.mutable_all_to_all()->mutable_members()->add_counts();
    c->set_kind(v1::DEVICE_KIND_GPU);
    c->set_count(n);
    return t;
  };
  EXPECT_TRUE(CheckTopologyLimits(site, all_to_all(2 * kMaxPhases + 1)).ok());
  absl::Status many = CheckTopologyLimits(site, all_to_all(2 * kMaxPhases + 2));
  EXPECT_EQ(many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(many.message()),
              HasSubstr("all-to-all over 130 members takes at least 65 rounds"));
}

TEST(LimitsTest, ThePlannerChecksTheLimitsItself) {
  // Every caller of the planner is bounded, not only admission.
  absl::StatusOr<v1::Plan> plan = PlanTopology(Site(), {"team-a", Ring(1000000, {2})});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("width: 1000000"));
}

TEST(LimitsTest, NamesPastTheirLengthAreRefusedNamingTheField) {
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  *r.mutable_topology() = Ring(1, {2});
  r.mutable_topology()->mutable_template_()->mutable_members()->add_devices(
      std::string(kMaxNameBytes + 1, 'g'));
  absl::Status named = CheckRequestLimits(Site(), r);
  EXPECT_EQ(named.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(named.message()),
              HasSubstr("topology.template.members.devices[0]: 129 bytes long; at most 128"));
}

}  // namespace
}  // namespace fleet::scheduler
