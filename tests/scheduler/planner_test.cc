#include "scheduler/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "controller/inventory/inventory.h"
#include "tests/scheduler/plan_checks.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler {
namespace {

using testing::AddTrunks;
using testing::AllPorts;
using testing::ClusterShape;
using ::testing::ElementsAre;
using testing::ExpectLegal;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;
using testing::SyntheticSite;

v1::Inventory Site(const std::string& name) {
  absl::StatusOr<v1::Inventory> site =
      inventory::ReadInventoryFile(std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/" + name);
  EXPECT_TRUE(site.ok()) << site.status();
  return site.value_or(v1::Inventory());
}

// Every port of every switch, enabled and not failed unless listed.
std::vector<v1::SwitchPort> Ports(const v1::Inventory& site,
                                  const std::set<std::string>& drained = {}) {
  std::vector<v1::SwitchPort> out;
  for (const v1::Switch& s : site.switches()) {
    for (uint32_t p = 1; p <= s.ingress_ports() + s.egress_ports(); ++p) {
      v1::SwitchPort& port = out.emplace_back();
      port.mutable_ref()->set_switch_id(s.id());
      port.mutable_ref()->set_port(p);
      port.set_admin_state(drained.contains(s.id() + "/" + std::to_string(p))
                               ? v1::ADMIN_STATE_DRAINED
                               : v1::ADMIN_STATE_ENABLED);
    }
  }
  return out;
}

v1::TopologySpec Ring(v1::TemplateKind kind, std::vector<std::string> members, uint32_t width = 0) {
  v1::TopologySpec spec;
  spec.mutable_template_()->set_kind(kind);
  spec.mutable_template_()->set_width(width);
  for (const std::string& m : members) spec.mutable_template_()->mutable_members()->add_devices(m);
  return spec;
}

v1::Endpoint Device(const std::string& id) {
  v1::Endpoint e;
  e.set_device(id);
  return e;
}

v1::Endpoint OnicPort(const std::string& onic, uint32_t port) {
  v1::Endpoint e;
  e.mutable_onic_port()->set_onic(onic);
  e.mutable_onic_port()->set_port(port);
  return e;
}

v1::TopologySpec Link(v1::Endpoint a, v1::Endpoint b, bool duplex, uint32_t width = 0) {
  v1::TopologySpec spec;
  v1::Link* link = spec.mutable_links()->add_links();
  *link->mutable_a() = std::move(a);
  *link->mutable_b() = std::move(b);
  link->set_duplex(duplex);
  link->set_width(width);
  return spec;
}

// A circuit of another allocation, gpu1-n0 port 1 → gpu2-n0 port 1.
v1::Circuit HeldCircuit(const std::string& allocation) {
  v1::Circuit c;
  c.set_id("held");
  c.set_allocation_id(allocation);
  c.mutable_source()->set_onic("gpu1-n0");
  c.mutable_source()->set_port(1);
  c.mutable_destination()->set_onic("gpu2-n0");
  c.mutable_destination()->set_port(1);
  c.set_state(v1::CIRCUIT_STATE_ACTIVE);
  return c;
}

v1::Allocation Owned(const std::string& id, const std::string& tenant) {
  v1::Allocation a;
  a.set_id(id);
  a.set_tenant(tenant);
  return a;
}

class PlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    site_ = Site("fleet-gen1.yaml");
    snapshot_ = FabricSnapshot::Build(site_, Ports(site_), {}, {});
  }
  absl::StatusOr<v1::Plan> PlanFor(const v1::TopologySpec& spec, const std::string& tenant = "a") {
    return PlanTopology(snapshot_, {tenant, spec});
  }

  v1::Inventory site_;
  FabricSnapshot snapshot_;
};

TEST_F(PlannerTest, DuplexLinkBetweenDevicesTakesOnePortAtEachEnd) {
  absl::StatusOr<v1::Plan> plan = PlanFor(Link(Device("gpu1"), Device("gpu2"), true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_THAT(plan->circuits(), SizeIs(2));
  ExpectLegal(*plan, snapshot_);
  EXPECT_EQ(plan->circuits(0).source().onic(), "gpu1-n0");
  EXPECT_EQ(plan->circuits(0).destination().onic(), "gpu2-n0");
  EXPECT_EQ(plan->circuits(1).source().onic(), "gpu2-n0");
  EXPECT_THAT(plan->members(), ElementsAre("gpu1", "gpu2"));
  EXPECT_THAT(plan->ports_used(), SizeIs(2));
  // gpu1-n0 port 1's tx enters ingress 49 in Gen1; gpu2-n0 port 1's rx leaves egress 435.
  EXPECT_EQ(plan->add(0).ingress(), 49u);
  EXPECT_EQ(plan->add(0).egress(), 435u);
}

TEST_F(PlannerTest, DirectedLinkBetweenNamedPorts) {
  absl::StatusOr<v1::Plan> plan =
      PlanFor(Link(OnicPort("nvme1-n0", 2), OnicPort("s2c1-n2", 1), false));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_THAT(plan->circuits(), SizeIs(1));
  EXPECT_EQ(plan->circuits(0).source().port(), 2u);
  EXPECT_EQ(plan->circuits(0).destination().onic(), "s2c1-n2");
  ExpectLegal(*plan, snapshot_);
}

TEST_F(PlannerTest, UnidirectionalRingOfEightGpusIsOneCycle) {
  std::vector<std::string> gpus;
  for (int i = 1; i <= 8; ++i) gpus.push_back("gpu" + std::to_string(i));
  absl::StatusOr<v1::Plan> plan = PlanFor(Ring(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL, gpus));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_THAT(plan->circuits(), SizeIs(8));
  ExpectLegal(*plan, snapshot_);
  // Following destination → the same O-NIC's outgoing circuit visits all 8 and returns.
  std::map<std::string, std::string> next;
  for (const v1::Circuit& c : plan->circuits()) next[c.source().onic()] = c.destination().onic();
  std::string at = "gpu1-n0";
  std::set<std::string> visited;
  for (int i = 0; i < 8; ++i) {
    visited.insert(at);
    at = next[at];
  }
  EXPECT_EQ(at, "gpu1-n0");
  EXPECT_THAT(visited, SizeIs(8));
}

TEST_F(PlannerTest, BidirectionalRingsUseTwoPortsPerMember) {
  absl::StatusOr<v1::Plan> four =
      PlanFor(Ring(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL,
                   {"server1-cpu0", "server2-cpu0", "server3-cpu0", "server4-cpu0"}));
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_THAT(four->circuits(), SizeIs(8));
  EXPECT_THAT(four->ports_used(), SizeIs(8));
  ExpectLegal(*four, snapshot_);
  // A GPU has one O-NIC, two ports: a ring of three GPUs fits, a ring of two is a double link.
  EXPECT_TRUE(PlanFor(Ring(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL, {"gpu1", "gpu2", "gpu3"})).ok());
  absl::StatusOr<v1::Plan> two =
      PlanFor(Ring(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL, {"gpu1", "gpu2"}));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(two->circuits(), SizeIs(4));
}

TEST_F(PlannerTest, WidthGivesParallelCircuitsUntilPortsRunOut) {
  absl::StatusOr<v1::Plan> three =
      PlanFor(Link(Device("server1-cpu0"), Device("server2-cpu0"), true, 3));
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_THAT(three->circuits(), SizeIs(6));
  ExpectLegal(*three, snapshot_);
  // A GPU has 1 O-NIC = 2 ports: width 3 cannot fit.
  absl::StatusOr<v1::Plan> three_gpus = PlanFor(Link(Device("gpu1"), Device("gpu2"), true, 3));
  EXPECT_EQ(three_gpus.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(three_gpus.status().message()),
              HasSubstr("device gpu1 has no port with tx and rx free"));
  EXPECT_THAT(std::string(three_gpus.status().message()), HasSubstr("used twice by this request"));
  // A CPU has 3 O-NICs = 6 ports, the most of any device: width 7 fits no device at all.
  absl::StatusOr<v1::Plan> seven =
      PlanFor(Link(Device("server1-cpu0"), Device("server2-cpu0"), true, 7));
  EXPECT_EQ(seven.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(seven.status().message()),
              HasSubstr("topology.links[0].width: 7 parallel circuits need as many ports of a "
                        "device, and no device of the site has more than 6"));
}

TEST_F(PlannerTest, UnknownThingsAreNotFound) {
  EXPECT_THAT(std::string(PlanFor(Link(Device("gpu9"), Device("gpu1"), true)).status().message()),
              HasSubstr("topology.links[0].a: device gpu9 not found"));
  EXPECT_EQ(PlanFor(Link(OnicPort("nope", 1), Device("gpu1"), false)).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<v1::Plan> bad_port = PlanFor(Link(OnicPort("gpu1-n0", 3), Device("gpu2"), false));
  EXPECT_EQ(bad_port.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(bad_port.status().message()), HasSubstr("has no port 3"));
}

TEST_F(PlannerTest, PortsInCircuitsAreRefusedNamingTheHolder) {
  FabricSnapshot busy =
      FabricSnapshot::Build(site_, Ports(site_), {HeldCircuit("alloc-1")}, {Owned("alloc-1", "a")});
  absl::StatusOr<v1::Plan> mine =
      PlanTopology(busy, {"a", Link(OnicPort("gpu1-n0", 1), Device("gpu3"), false)});
  EXPECT_EQ(mine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mine.status().message()),
              HasSubstr("onic gpu1-n0/1 cannot be used: tx is in a circuit of alloc-1"));
  absl::StatusOr<v1::Plan> theirs =
      PlanTopology(busy, {"b", Link(OnicPort("gpu1-n0", 1), Device("gpu3"), false)});
  EXPECT_EQ(theirs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(theirs.status().message()), HasSubstr("belongs to another tenant"));
  EXPECT_THAT(std::string(theirs.status().message()), ::testing::Not(HasSubstr("alloc-1")));
  // Its rx is free, and a device endpoint skips the busy port for the next one.
  EXPECT_TRUE(PlanTopology(busy, {"a", Link(Device("gpu3"), OnicPort("gpu1-n0", 1), false)}).ok());
  absl::StatusOr<v1::Plan> skip =
      PlanTopology(busy, {"a", Link(Device("gpu1"), Device("gpu3"), true)});
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ(skip->circuits(0).source().port(), 2u);
}

// Admission adds the circuits to one snapshot of the inventory for every request: the
// ports they hold are held in the copy only, and the copy plans as a Build with them would.
TEST_F(PlannerTest, CircuitsAddedToASnapshotHoldPortsInTheCopyOnly) {
  const FabricSnapshot held =
      snapshot_.WithCircuits({HeldCircuit("alloc-1")}, {Owned("alloc-1", "a")});
  EXPECT_EQ(held.Port("gpu1-n0", 1)->tx_holder, "alloc-1");
  EXPECT_EQ(held.Port("gpu2-n0", 1)->rx_holder, "alloc-1");
  EXPECT_EQ(held.TenantOf("alloc-1"), "a");
  std::vector<const OnicPortState*> ports = held.DevicePorts("gpu1");
  ASSERT_THAT(ports, SizeIs(2));
  EXPECT_EQ(ports[0]->tx_holder, "alloc-1");
  EXPECT_TRUE(ports[1]->Free());
  // The snapshot it was made from is unchanged, and plans on the port.
  EXPECT_TRUE(snapshot_.Port("gpu1-n0", 1)->Free());
  EXPECT_TRUE(snapshot_.Port("gpu2-n0", 1)->Free());
  EXPECT_EQ(snapshot_.TenantOf("alloc-1"), "");
  EXPECT_TRUE(
      PlanTopology(snapshot_, {"a", Link(OnicPort("gpu1-n0", 1), Device("gpu3"), false)}).ok());
  absl::StatusOr<v1::Plan> refused =
      PlanTopology(held, {"a", Link(OnicPort("gpu1-n0", 1), Device("gpu3"), false)});
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("onic gpu1-n0/1 cannot be used: tx is in a circuit of alloc-1"));
}

TEST_F(PlannerTest, DrainedPortsAreRefused) {
  // gpu4-n0 port 1's tx enters ingress 55; drain that switch port.
  FabricSnapshot drained = FabricSnapshot::Build(site_, Ports(site_, {"ocs1/55"}), {}, {});
  absl::StatusOr<v1::Plan> plan =
      PlanTopology(drained, {"a", Link(OnicPort("gpu4-n0", 1), Device("gpu5"), false)});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("switch port ocs1/55 is drained"));
}

TEST_F(PlannerTest, MalformedRequestsNameTheField) {
  EXPECT_THAT(std::string(PlanFor(Link(Device("gpu1"), Device("gpu1"), true)).status().message()),
              HasSubstr("a and b are the same endpoint"));
  EXPECT_THAT(
      std::string(
          PlanFor(Ring(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL, {"gpu1"})).status().message()),
      HasSubstr("a ring needs at least 2 devices"));
  EXPECT_THAT(std::string(PlanFor(Ring(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL, {"gpu1", "gpu1"}))
                              .status()
                              .message()),
              HasSubstr("device gpu1 is named twice"));
  EXPECT_THAT(
      std::string(
          PlanFor(Link(OnicPort("gpu1-n0", 1), Device("gpu2"), true, 2)).status().message()),
      HasSubstr("need device endpoints"));
  EXPECT_EQ(PlanFor(Link(Device("gpu1"), Device("gpu2"), true), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanFor(v1::TopologySpec()).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TopologySpec torus = Ring(v1::TEMPLATE_KIND_TORUS_2D, {"gpu1", "gpu2", "gpu3", "gpu4"});
  torus.mutable_template_()->add_dimensions(3);
  torus.mutable_template_()->add_dimensions(2);
  EXPECT_THAT(std::string(PlanFor(torus).status().message()),
              HasSubstr("topology.template.dimensions: 3x2 is 6 positions for 4 members"));
  v1::TopologySpec all;
  all.mutable_all_to_all()->mutable_members()->add_devices("gpu1");
  EXPECT_EQ(PlanFor(all).status().code(), absl::StatusCode::kUnimplemented);
}

TEST_F(PlannerTest, PlansAreDeterministic) {
  v1::TopologySpec ring = Ring(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL, {"gpu5", "gpu6", "gpu7"});
  EXPECT_EQ(PlanFor(ring)->SerializeAsString(), PlanFor(ring)->SerializeAsString());
}

TEST_F(PlannerTest, FullMeshWhereDegreeAllowsElseRefusedNamingTheMember) {
  // CPUs have 6 ports: a mesh of 7 fits; a GPU has 2: it cannot join a mesh of 4.
  absl::StatusOr<v1::Plan> cpus = PlanFor(Ring(
      v1::TEMPLATE_KIND_FULL_MESH, {"server1-cpu0", "server1-cpu1", "server2-cpu0", "server2-cpu1",
                                    "server3-cpu0", "server3-cpu1", "server4-cpu0"}));
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_THAT(cpus->circuits(), SizeIs(7 * 6));
  ExpectLegal(*cpus, snapshot_);
  absl::StatusOr<v1::Plan> gpus = PlanFor(
      Ring(v1::TEMPLATE_KIND_FULL_MESH, {"server1-cpu0", "server2-cpu0", "gpu3", "server3-cpu0"}));
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(gpus.status().message()),
              HasSubstr("topology.template.members[2] (gpu3): the full-mesh needs 3 ports of "
                        "device gpu3 and it has 2 with tx and rx free"));
}

TEST_F(PlannerTest, StarOnAHubWithWidth) {
  v1::TopologySpec star = Ring(v1::TEMPLATE_KIND_STAR, {"gpu1", "gpu2", "server1-cpu0"}, 2);
  star.mutable_template_()->set_hub("server1-cpu0");
  star.mutable_template_()->set_duplex(true);
  absl::StatusOr<v1::Plan> plan = PlanFor(star);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->circuits(), SizeIs(8));  // 2 leaves × width 2 × both ways.
  EXPECT_THAT(plan->ports_used(), SizeIs(8));
  star.mutable_template_()->set_hub("gpu9");
  EXPECT_THAT(std::string(PlanFor(star).status().message()),
              HasSubstr("topology.template.hub: gpu9 is not one of the named members"));
}

TEST_F(PlannerTest, AttachSpreadsDevicesOverTheHostsOnics) {
  v1::TopologySpec spec;
  spec.mutable_attach()->set_host("server1");
  spec.mutable_attach()->mutable_devices()->add_devices("nvme1");
  v1::DeviceCount* gpus = spec.mutable_attach()->mutable_devices()->add_counts();
  gpus->set_kind(v1::DEVICE_KIND_GPU);
  gpus->set_count(2);
  absl::StatusOr<v1::Plan> plan = PlanFor(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, snapshot_);
  EXPECT_THAT(plan->members(), ElementsAre("nvme1", "gpu1", "gpu2", "server1-cpu0"));
  // Port 1 of three different O-NICs of the host.
  std::set<std::string> host_onics;
  for (const v1::Circuit& c : plan->circuits()) {
    if (c.source().onic().starts_with("s1")) {
      host_onics.insert(c.source().onic());
      EXPECT_EQ(c.source().port(), 1u);
    }
  }
  EXPECT_THAT(host_onics, SizeIs(3));
  spec.mutable_attach()->set_width(3);  // A GPU has 2 ports.
  EXPECT_THAT(std::string(PlanFor(spec).status().message()),
              HasSubstr("topology.attach.devices.counts[0]: 2 gpu devices wanted on switch ocs1, "
                        "but only 0 there have 3 free ports"));
  v1::TopologySpec seven;  // 7 GPUs × width 2 > the host's 12 ports.
  seven.mutable_attach()->set_host("server1");
  seven.mutable_attach()->set_width(2);
  for (int i = 1; i <= 7; ++i) {
    seven.mutable_attach()->mutable_devices()->add_devices("gpu" + std::to_string(i));
  }
  absl::StatusOr<v1::Plan> wide = PlanFor(seven);
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(wide.status().message()),
              HasSubstr("host server1 has 12 O-NIC ports with tx and rx free and attaching 7 "
                        "devices with width 2 needs 14"));
  spec.mutable_attach()->set_width(0);
  spec.mutable_attach()->mutable_devices()->add_devices("server2-cpu0");
  EXPECT_THAT(std::string(PlanFor(spec).status().message()),
              HasSubstr("belongs to host server2; only pooled devices attach"));
  spec.mutable_attach()->set_host("server9");
  EXPECT_EQ(PlanFor(spec).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PlannerTest, CountsPreferHalfUsedDevicesThenBetterLight) {
  // gpu2's port 1 is held: a unidirectional ring needs one port per member, so gpu2 is the
  // best fit (no port stranded); among whole GPUs the ones reading more light win.
  v1::Circuit held = HeldCircuit("alloc-1");
  held.mutable_source()->set_onic("gpu2-n0");
  held.mutable_destination()->set_onic("gpu2-n0");
  FabricSnapshot busy = FabricSnapshot::Build(
      site_, Ports(site_), {held}, {Owned("alloc-1", "b")},
      {{"gpu7-n0", 1, -3.0}, {"gpu7-n0", 2, -2.5}, {"gpu5-n0", 1, -9.0}, {"gpu4-n0", 1, -4.0}});
  v1::TopologySpec ring;
  ring.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  v1::DeviceCount* gpus = ring.mutable_template_()->mutable_members()->add_counts();
  gpus->set_kind(v1::DEVICE_KIND_GPU);
  gpus->set_count(4);
  absl::StatusOr<v1::Plan> plan = PlanTopology(busy, {"a", ring});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, busy);
  EXPECT_THAT(plan->members(), ElementsAre("gpu2", "gpu7", "gpu4", "gpu5"));
  gpus->set_count(9);
  absl::StatusOr<v1::Plan> nine = PlanTopology(busy, {"a", ring});
  EXPECT_EQ(nine.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(nine.status().message()),
              HasSubstr("topology.template.members.counts[0]: 9 gpu devices wanted on switch ocs1, "
                        "but only 8 there have 1 free port"));
}

TEST_F(PlannerTest, CountsOfAHostPickThatHostsDevicesInTheGivenOrder) {
  // A ring over three nodes of a batch job: one CPU of each, in the job's node order.
  v1::TopologySpec ring;
  ring.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  for (const char* host : {"server3", "server1", "server2"}) {
    v1::DeviceCount* cpu = ring.mutable_template_()->mutable_members()->add_counts();
    cpu->set_kind(v1::DEVICE_KIND_CPU);
    cpu->set_count(1);
    cpu->set_host(host);
  }
  absl::StatusOr<v1::Plan> plan = PlanFor(ring);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, snapshot_);
  ASSERT_THAT(plan->members(), SizeIs(3));
  EXPECT_THAT(plan->members(0), StartsWith("server3-cpu"));
  EXPECT_THAT(plan->members(1), StartsWith("server1-cpu"));
  EXPECT_THAT(plan->members(2), StartsWith("server2-cpu"));
  // Each Gen1 server has two CPUs: a third is refused naming the host.
  ring.mutable_template_()->mutable_members()->mutable_counts(0)->set_count(3);
  absl::StatusOr<v1::Plan> three = PlanFor(ring);
  EXPECT_EQ(three.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(three.status().message()),
              HasSubstr("counts[0]: 3 cpu devices wanted of host server3 on switch ocs1, but "
                        "only 2"));
}

TEST_F(PlannerTest, TrafficAwarePlanReportsItsDirectShare) {
  v1::TopologySpec spec;
  for (const char* gpu : {"gpu1", "gpu2", "gpu3", "gpu4"}) {
    spec.mutable_traffic()->mutable_members()->add_devices(gpu);
  }
  // Each GPU has two ports; five pairs have traffic, and 0-3 carries the least.
  for (auto [s, d, bytes] : std::vector<std::tuple<int, int, double>>{
           {0, 1, 40}, {1, 2, 30}, {2, 3, 20}, {3, 0, 15}, {0, 2, 5}}) {
    v1::TrafficEntry* e = spec.mutable_traffic()->add_matrix();
    e->set_source(s);
    e->set_destination(d);
    e->set_bytes(bytes);
  }
  absl::StatusOr<v1::Plan> plan = PlanFor(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, snapshot_);
  EXPECT_THAT(plan->circuits(), SizeIs(8));  // The ring 0-1-2-3-0: 105 of 110 bytes.
  EXPECT_DOUBLE_EQ(plan->direct_traffic_share(), 105.0 / 110.0);
  spec.mutable_traffic()->mutable_matrix(0)->set_source(7);
  EXPECT_THAT(std::string(PlanFor(spec).status().message()),
              HasSubstr("topology.traffic.matrix[0]: 7 -> 1 is not between members 0..3"));
}

// The shipped two-cluster site: ocs-a and ocs-b joined by trunks a-b-01..16 (ocs-a egress
// 673.. -> ocs-b ingress 289..) and b-a-01..16 back.
class PlannerTwoClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { site_ = Site("fleet-2cluster.yaml"); }
  FabricSnapshot Snapshot(const std::vector<v1::Circuit>& circuits = {},
                          const std::set<std::string>& drained = {}) {
    return FabricSnapshot::Build(site_, Ports(site_, drained), circuits,
                                 {Owned("theirs", "b"), Owned("mine", "a")});
  }
  // A circuit of `allocation` over trunk `trunk`, between two ports of b-gpu8.
  static v1::Circuit OverTrunk(const std::string& allocation, const std::string& trunk) {
    v1::Circuit c;
    c.set_allocation_id(allocation);
    c.mutable_source()->set_onic("b-gpu8-n0");
    c.mutable_destination()->set_onic("b-gpu8-n0");
    c.add_trunks(trunk);
    return c;
  }

  v1::Inventory site_;
};

TEST_F(PlannerTwoClusterTest, ACircuitBetweenSwitchesCrossesOneTrunk) {
  const FabricSnapshot snapshot = Snapshot();
  absl::StatusOr<v1::Plan> plan =
      PlanTopology(snapshot, {"a", Link(Device("a-gpu1"), Device("b-gpu1"), true)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, snapshot);
  ASSERT_THAT(plan->circuits(), SizeIs(2));
  const OnicPortState* a = snapshot.Port("a-gpu1-n0", 1);
  const OnicPortState* b = snapshot.Port("b-gpu1-n0", 1);
  const v1::Circuit& there = plan->circuits(0);
  EXPECT_THAT(there.trunks(), ElementsAre("a-b-01"));
  ASSERT_THAT(there.cross_connects(), SizeIs(2));
  EXPECT_EQ(there.cross_connects(0).switch_id(), "ocs-a");
  EXPECT_EQ(there.cross_connects(0).ingress(), a->tx.port());
  EXPECT_EQ(there.cross_connects(0).egress(), 673u);
  EXPECT_EQ(there.cross_connects(1).switch_id(), "ocs-b");
  EXPECT_EQ(there.cross_connects(1).ingress(), 289u);
  EXPECT_EQ(there.cross_connects(1).egress(), b->rx.port());
  EXPECT_THAT(plan->circuits(1).trunks(), ElementsAre("b-a-01"));
  EXPECT_THAT(plan->add(), SizeIs(4));
  // On one switch, no trunk.
  absl::StatusOr<v1::Plan> local =
      PlanTopology(snapshot, {"a", Link(Device("b-gpu1"), Device("b-gpu2"), true)});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(local->circuits(0).cross_connects(), SizeIs(1));
  EXPECT_THAT(local->circuits(0).trunks(), SizeIs(0));
}

TEST_F(PlannerTwoClusterTest, EachTrunkCarriesOneCircuitAndHeldOnesAreSkipped) {
  // a-b-01 is theirs, a-b-02 is drained at ocs-b's ingress: the next circuits take 03, 04.
  const FabricSnapshot snapshot = Snapshot({OverTrunk("theirs", "a-b-01")}, {"ocs-b/290"});
  v1::TopologySpec spec = Link(Device("a-server1-cpu0"), Device("b-server1-cpu0"), false, 2);
  absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {"a", spec});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, snapshot);
  ASSERT_THAT(plan->circuits(), SizeIs(2));
  EXPECT_THAT(plan->circuits(0).trunks(), ElementsAre("a-b-03"));
  EXPECT_THAT(plan->circuits(1).trunks(), ElementsAre("a-b-04"));
}

TEST_F(PlannerTwoClusterTest, AFullTrunkGroupIsRefusedNamingTheGroupAndItsHolders) {
  std::vector<v1::Circuit> held;
  for (int k = 2; k <= 16; ++k) {
    held.push_back(
        OverTrunk(k % 2 ? "theirs" : "mine", absl::StrCat("a-b-", k < 10 ? "0" : "", k)));
  }
  const FabricSnapshot snapshot = Snapshot(held, {"ocs-a/673"});
  absl::StatusOr<v1::Plan> plan =
      PlanTopology(snapshot, {"a", Link(Device("a-gpu1"), Device("b-gpu1"), false)});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("circuit a-gpu1-n0/1 -> b-gpu1-n0/1: its tx fiber enters switch ocs-a "
                        "and its rx fiber leaves switch ocs-b: trunk group ocs-a->ocs-b is full "
                        "(16 trunks: 7 in a circuit of another tenant; 8 in a circuit of mine; "
                        "1 switch port ocs-a/673 is drained)"));
  // The other direction still has room.
  EXPECT_TRUE(PlanTopology(snapshot, {"a", Link(Device("b-gpu1"), Device("a-gpu1"), false)}).ok());
  // Sixteen circuits fill a free group; the seventeenth is refused.
  const FabricSnapshot empty = Snapshot();
  v1::TopologySpec sixteen;
  for (int g = 1; g <= 8; ++g) {
    v1::Link* link = sixteen.mutable_links()->add_links();
    link->mutable_a()->set_device(absl::StrCat("a-gpu", g));
    link->mutable_b()->set_device(absl::StrCat("b-gpu", g));
    link->set_width(2);
  }
  absl::StatusOr<v1::Plan> full = PlanTopology(empty, {"a", sixteen});
  ASSERT_TRUE(full.ok()) << full.status();
  ExpectLegal(*full, empty);
  v1::Link* more = sixteen.mutable_links()->add_links();
  more->mutable_a()->set_device("a-server1-cpu0");
  more->mutable_b()->set_device("b-server1-cpu0");
  absl::StatusOr<v1::Plan> seventeen = PlanTopology(empty, {"a", sixteen});
  EXPECT_EQ(seventeen.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(seventeen.status().message()),
              HasSubstr("trunk group ocs-a->ocs-b is full (16 trunks: 16 used by this request)"));
}

TEST_F(PlannerTwoClusterTest, TheHopBoundRefusesTrunksWhenItIsOne) {
  v1::TopologySpec spec = Link(Device("a-gpu1"), Device("b-gpu1"), true);
  spec.set_max_switch_hops(1);
  absl::StatusOr<v1::Plan> plan = PlanTopology(Snapshot(), {"a", spec});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("the shortest trunk path crosses 2 switches (ocs-a -> ocs-b) and "
                        "max_switch_hops is 1"));
}

TEST_F(PlannerTwoClusterTest, CountsStayOnOneSwitchAndSpanTwoOnlyWhenOneIsShort) {
  const FabricSnapshot snapshot = Snapshot();
  v1::TopologySpec ring;
  ring.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
  v1::DeviceCount* gpus = ring.mutable_template_()->mutable_members()->add_counts();
  gpus->set_kind(v1::DEVICE_KIND_GPU);
  gpus->set_count(8);
  absl::StatusOr<v1::Plan> eight = PlanTopology(snapshot, {"a", ring});
  ASSERT_TRUE(eight.ok()) << eight.status();
  for (const v1::Circuit& c : eight->circuits()) EXPECT_THAT(c.trunks(), SizeIs(0));
  // Each cluster has 8 GPUs: 10 take all of one switch's and 2 of the other's.
  gpus->set_count(10);
  absl::StatusOr<v1::Plan> ten = PlanTopology(snapshot, {"a", ring});
  ASSERT_TRUE(ten.ok()) << ten.status();
  ExpectLegal(*ten, snapshot);
  std::map<char, int> per_cluster;
  for (const std::string& m : ten->members()) ++per_cluster[m[0]];
  EXPECT_EQ(per_cluster, (std::map<char, int>{{'a', 8}, {'b', 2}}));
  int over_trunks = 0;
  for (const v1::Circuit& c : ten->circuits()) over_trunks += c.trunks_size();
  EXPECT_GE(over_trunks, 2);  // The ring enters and leaves cluster b at least once each way.
  // More than the site has is refused, saying where it looked.
  gpus->set_count(17);
  EXPECT_THAT(std::string(PlanTopology(snapshot, {"a", ring}).status().message()),
              HasSubstr("17 gpu devices wanted on any switch, but only 16 there have"));
}

TEST(PlannerTrunkPathTest, CountsSpanOnlySwitchesTrunksJoin) {
  // x and y are joined both ways; z has the most GPUs but no trunk.
  v1::Inventory site = SyntheticSite({{"x", 0, 3, 0, 0}, {"y", 0, 3, 0, 0}, {"z", 0, 4, 0, 0}});
  AddTrunks(site, "xocs", "yocs", 4);
  AddTrunks(site, "yocs", "xocs", 4);
  const FabricSnapshot snapshot = FabricSnapshot::Build(site, AllPorts(site), {}, {});
  v1::TopologySpec ring;
  ring.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  v1::DeviceCount* gpus = ring.mutable_template_()->mutable_members()->add_counts();
  gpus->set_kind(v1::DEVICE_KIND_GPU);
  gpus->set_count(4);
  absl::StatusOr<v1::Plan> four = PlanTopology(snapshot, {"a", ring});
  ASSERT_TRUE(four.ok()) << four.status();
  for (const std::string& m : four->members()) EXPECT_EQ(m[0], 'z') << m;  // One switch.
  gpus->set_count(5);
  absl::StatusOr<v1::Plan> five = PlanTopology(snapshot, {"a", ring});
  ASSERT_TRUE(five.ok()) << five.status();
  ExpectLegal(*five, snapshot);
  std::map<char, int> per_switch;
  for (const std::string& m : five->members()) ++per_switch[m[0]];
  EXPECT_EQ(per_switch, (std::map<char, int>{{'x', 3}, {'y', 2}}));
  gpus->set_count(7);
  EXPECT_EQ(PlanTopology(snapshot, {"a", ring}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(PlannerTrunkPathTest, PathsOfSeveralSwitchesNeedTheBoundRaised) {
  // x -> y -> z, and no trunk from x to z.
  v1::Inventory site = SyntheticSite({{"x", 0, 2, 0, 0}, {"y", 0, 2, 0, 0}, {"z", 0, 2, 0, 0}});
  AddTrunks(site, "xocs", "yocs", 2);
  AddTrunks(site, "yocs", "zocs", 2);
  const FabricSnapshot snapshot = FabricSnapshot::Build(site, AllPorts(site), {}, {});
  v1::TopologySpec spec = Link(Device("xgpu1"), Device("zgpu1"), false);
  absl::StatusOr<v1::Plan> refused = PlanTopology(snapshot, {"a", spec});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("crosses 3 switches (xocs -> yocs -> zocs) and max_switch_hops is 2"));
  spec.set_max_switch_hops(3);
  absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {"a", spec});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectLegal(*plan, snapshot, 3);
  EXPECT_THAT(plan->circuits(0).trunks(), ElementsAre("xocs-yocs-1", "yocs-zocs-1"));
  ASSERT_THAT(plan->circuits(0).cross_connects(), SizeIs(3));
  EXPECT_EQ(plan->circuits(0).cross_connects(1).switch_id(), "yocs");
  // Back from z to x there is no trunk at all.
  absl::StatusOr<v1::Plan> back =
      PlanTopology(snapshot, {"a", Link(Device("zgpu1"), Device("xgpu1"), false)});
  EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("and no trunks join zocs to xocs"));
}

}  // namespace
}  // namespace fleet::scheduler
