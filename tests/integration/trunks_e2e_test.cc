// Several switches end to end: a real `fleetd --demo` on the two-cluster site
// (deploy/inventory/fleet-2cluster.yaml), one polatis-emu per switch with their trunk fibers
// joined, emulated agents on both clusters. Requests go through fleetctl; the test reads what
// each emulated switch holds, and the light each receiver sees, over the emulators' own APIs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "controller/inventory/inventory.h"
#include "fleet/v1/topology.pb.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using testing::Daemon;
using testing::Eventually;
using ::testing::HasSubstr;
using ::testing::SizeIs;
// (switch, ingress, egress)
using CrossConnectSet = std::set<std::tuple<std::string, uint32_t, uint32_t>>;

const std::string kSite = std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-2cluster.yaml";

class TrunksEndToEndTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    absl::StatusOr<v1::Inventory> site = inventory::ReadInventoryFile(kSite);
    ASSERT_TRUE(site.ok()) << site.status();
    site_ = new v1::Inventory(*site);
    absl::StatusOr<std::unique_ptr<Daemon>> started =
        // No switch monitor: its reads would take the refusal a test injects for a request.
        Daemon::Start({BinaryPath("fleetd"), "--insecure", "--demo", "--demo-site", kSite,
                       "--state-dir", testing::FreshDirectory("trunks-e2e"), "--grpc-port", "0",
                       "--metrics-port", "0", "--agent-heartbeat-ms", "100",
                       "--monitor-interval-ms", "0"});
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = started->release();
    // fleetd shows its address once the demo has started every agent: 14 of them on the
    // two-switch site take longer than the default wait under the sanitizers.
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ", absl::Seconds(120));
    ASSERT_TRUE(grpc.ok()) << grpc.status();
    grpc_ = new std::string(*grpc);
    // One `rest: HOST:PORT SWITCH` line per switch.
    rest_ = new std::map<std::string, std::string>();
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::string> line = fleetd_->WaitForLine("rest: ");
      ASSERT_TRUE(line.ok()) << line.status();
      const size_t space = line->find(' ');
      ASSERT_NE(space, std::string::npos) << *line;
      const std::string address = line->substr(0, space), id = line->substr(space + 1);
      (*rest_)[id] = address;
      const size_t colon = address.rfind(':');
      polatis::PolatisSwitchOptions options;
      options.name = id;
      options.protocol = polatis::Protocol::kRest;
      options.host = address.substr(0, colon);
      options.port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
      options.credentials = {"admin", "root"};
      options.insecure_http = true;  // The demo's emulators serve plain HTTP.
      switches_[id] = polatis::NewPolatisSwitch(options).release();
    }
    ASSERT_EQ(rest_->size(), 2u);
    // Every agent of both clusters connected, so links train.
    ASSERT_TRUE(Eventually([] { return testing::ConnectedAgents(*grpc_) == 14; }));
  }
  static void TearDownTestSuite() {
    for (auto& [id, sw] : switches_) delete sw;
    switches_.clear();
    delete fleetd_;
    fleetd_ = nullptr;
  }
  void SetUp() override {
    if (fleetd_ == nullptr || grpc_ == nullptr || switches_.size() != 2) {
      GTEST_SKIP() << "fleetd did not start";
    }
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- fleetd stderr:\n" << fleetd_->Stderr();
  }

  static CommandResult Fleetctl(std::vector<std::string> args) {
    return testing::Fleetctl(*grpc_, std::move(args));
  }

  static v1::Allocation RequestReady(const std::string& spec) {
    const v1::RequestTopologyResponse response = testing::FleetctlJson<v1::RequestTopologyResponse>(
        *grpc_, {"topology", "request", "-f", testing::WriteFile("spec", spec), "--wait"});
    EXPECT_EQ(response.allocation().state(), v1::ALLOCATION_STATE_READY)
        << response.allocation().reason();
    return response.allocation();
  }

  static CommandResult RequestRefused(const std::string& spec) {
    CommandResult result =
        Fleetctl({"topology", "request", "-f", testing::WriteFile("spec", spec)});
    EXPECT_NE(result.exit_code, 0) << result.out;
    return result;
  }

  static void Release(const std::string& id) {
    CommandResult release = Fleetctl({"topology", "release", id, "--wait"});
    EXPECT_EQ(release.exit_code, 0) << release.err;
  }

  // What both switches hold.
  static CrossConnectSet OnSwitches() {
    CrossConnectSet out;
    for (const auto& [id, sw] : switches_) {
      absl::StatusOr<std::vector<switch_adapters::CrossConnect>> xs = sw->ReadCrossConnects();
      EXPECT_TRUE(xs.ok()) << xs.status();
      for (const switch_adapters::CrossConnect& x :
           xs.value_or(std::vector<switch_adapters::CrossConnect>{})) {
        out.insert({id, x.ingress, x.egress});
      }
    }
    return out;
  }

  static CrossConnectSet Wanted(const v1::Allocation& a) {
    CrossConnectSet out;
    for (const v1::Circuit& c : a.circuits()) {
      for (const v1::CrossConnect& x : c.cross_connects()) {
        out.insert({x.switch_id(), x.ingress(), x.egress()});
      }
    }
    return out;
  }

  // Cross-connects each emulator has made or removed, by switch.
  static std::map<std::string, int64_t> Counters() {
    std::map<std::string, int64_t> out;
    for (const auto& [id, address] : *rest_) {
      out[id] = testing::EmulatorCounter(address, "cross_connects_changed");
    }
    return out;
  }

  // Every circuit's destination receives its source's light ("SERIAL/PORT"), across trunks,
  // and the switch's own power monitor at that egress (what fleetd's switch monitor reads
  // to judge a trained circuit) sees it there.
  static void ExpectLightArrives(const v1::Allocation& a) {
    std::map<std::string, const v1::Onic*> onics;
    for (const v1::Onic& o : site_->onics()) onics[o.id()] = &o;
    for (const v1::Circuit& c : a.circuits()) {
      const v1::Onic* source = onics.at(c.source().onic());
      const v1::Onic* destination = onics.at(c.destination().onic());
      const v1::SwitchPortRef& rx = destination->ports(c.destination().port() - 1).rx();
      absl::StatusOr<std::string> light =
          testing::HttpGet(rest_->at(rx.switch_id()), absl::StrCat("/sim/v1/light/", rx.port()));
      ASSERT_TRUE(light.ok()) << light.status();
      EXPECT_THAT(*light, HasSubstr(absl::StrCat("\"signal\":\"", source->serial(), "/",
                                                 c.source().port(), "\"")))
          << c.ShortDebugString();
      absl::StatusOr<std::vector<switch_adapters::PortPower>> power =
          switches_.at(rx.switch_id())->ReadPower({rx.port()});
      ASSERT_TRUE(power.ok()) << power.status();
      ASSERT_THAT(*power, SizeIs(1));
      EXPECT_GT(power->front().dbm, switch_adapters::PortPower::kNoLight) << c.ShortDebugString();
    }
  }

  static inline v1::Inventory* site_ = nullptr;
  static inline std::string* grpc_ = nullptr;
  static inline std::map<std::string, std::string>* rest_ = nullptr;  // Switch → REST address.
  static inline Daemon* fleetd_ = nullptr;
  static inline std::map<std::string, switch_adapters::OpticalSwitch*> switches_;
};

TEST_F(TrunksEndToEndTest, ARingAcrossTwoSwitchesIsReadyWithLightOverItsTrunks) {
  const v1::Allocation a = RequestReady(
      "tenant: demo\n"
      "topology:\n"
      "  template:\n"
      "    kind: ring_bidirectional\n"
      "    members: [a-gpu1, a-gpu2, b-gpu1, b-gpu2]\n");
  ASSERT_THAT(a.circuits(), SizeIs(8));
  // The ring crosses between clusters twice, each way: four circuits over one trunk each.
  int over_trunks = 0;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.trunks().empty()) continue;
    ++over_trunks;
    ASSERT_THAT(c.cross_connects(), SizeIs(2));
    EXPECT_NE(c.cross_connects(0).switch_id(), c.cross_connects(1).switch_id());
  }
  EXPECT_EQ(over_trunks, 4);
  EXPECT_EQ(OnSwitches(), Wanted(a));
  ExpectLightArrives(a);

  // fleetctl shows the path, and reconciliation finds both switches as they should be.
  CommandResult describe = Fleetctl({"describe", "allocation", a.id()});
  EXPECT_THAT(describe.out, HasSubstr("trunks a-b-01"));
  CommandResult reconcile = Fleetctl({"reconcile"});
  EXPECT_EQ(reconcile.exit_code, 0) << reconcile.err;
  EXPECT_THAT(reconcile.out, HasSubstr("no drift"));

  // Replacing a member on the far side re-routes its circuits over trunks too.
  CommandResult replace =
      Fleetctl({"allocation", "replace", a.id(), "b-gpu1", "--wait", "-o", "json"});
  ASSERT_EQ(replace.exit_code, 0) << replace.err;
  const v1::ListAllocationsResponse all =
      testing::FleetctlJson<v1::ListAllocationsResponse>(*grpc_, {"get", "allocations"});
  ASSERT_THAT(all.allocations(), SizeIs(1));
  const v1::Allocation& replaced = all.allocations(0);
  EXPECT_EQ(replaced.state(), v1::ALLOCATION_STATE_READY) << replaced.reason();
  EXPECT_THAT(replaced.members(), ::testing::Not(::testing::Contains("b-gpu1")));
  EXPECT_EQ(OnSwitches(), Wanted(replaced));
  ExpectLightArrives(replaced);

  Release(a.id());
  EXPECT_TRUE(OnSwitches().empty());
}

TEST_F(TrunksEndToEndTest, AFullTrunkGroupIsRefusedNamingItAndNothingChanges) {
  // Sixteen circuits from cluster a to cluster b take every a->b trunk.
  std::string links = "tenant: demo\ntopology:\n  links:\n";
  for (int g = 1; g <= 8; ++g) {
    absl::StrAppend(&links, "    - {a: a-gpu", g, ", b: b-gpu", g, ", width: 2}\n");
  }
  const v1::Allocation full = RequestReady(links);
  ASSERT_THAT(full.circuits(), SizeIs(16));
  std::set<std::string> trunks;
  for (const v1::Circuit& c : full.circuits()) trunks.insert(c.trunks().begin(), c.trunks().end());
  EXPECT_THAT(trunks, SizeIs(16));
  EXPECT_EQ(OnSwitches(), Wanted(full));
  ExpectLightArrives(full);

  // One more is refused, naming the group and its holder; no switch is touched.
  const std::map<std::string, int64_t> before = Counters();
  CommandResult refused = RequestRefused(
      "tenant: demo\ntopology:\n  links:\n    - {a: a-server1-cpu0, b: b-server1-cpu0}\n");
  EXPECT_THAT(refused.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat("trunk group ocs-a->ocs-b is full (16 trunks: "
                                                  "16 in a circuit of ",
                                                  full.id(), ")")));
  EXPECT_EQ(Counters(), before);
  EXPECT_EQ(OnSwitches(), Wanted(full));
  // The other direction has its own trunks.
  const v1::Allocation back = RequestReady(
      "tenant: demo\ntopology:\n  links:\n    - {a: b-server1-cpu0, b: a-server1-cpu0}\n");
  Release(back.id());
  Release(full.id());
  EXPECT_TRUE(OnSwitches().empty());
}

TEST_F(TrunksEndToEndTest, OneSwitchRefusingUndoesTheOtherAndFailsNamingIt) {
  // ocs-b refuses its next command; ocs-a programs its part at the same time and is undone.
  absl::StatusOr<testing::HttpReply> fault =
      testing::HttpRequest(rest_->at("ocs-b"), "PUT", "/sim/v1/faults", R"({"deny_next":1})");
  ASSERT_TRUE(fault.ok()) << fault.status();
  ASSERT_EQ(fault->status, 200) << fault->body;
  const std::string path =
      testing::WriteFile("ring",
                         "tenant: demo\ntopology:\n  template:\n    kind: ring_bidirectional\n"
                         "    members: [a-gpu1, a-gpu2, b-gpu1, b-gpu2]\n");
  CommandResult ring = Fleetctl({"topology", "request", "-f", path, "--wait"});
  EXPECT_EQ(ring.exit_code, 1) << ring.out;
  EXPECT_THAT(ring.err, HasSubstr("switch ocs-b: "));
  EXPECT_THAT(ring.err, HasSubstr("Injected fault"));
  ASSERT_TRUE(testing::HttpRequest(rest_->at("ocs-b"), "DELETE", "/sim/v1/faults").ok());
  EXPECT_TRUE(OnSwitches().empty());
  // Nothing is held: the same ring is granted next.
  const v1::Allocation again = RequestReady(
      "tenant: demo\ntopology:\n  template:\n    kind: ring_bidirectional\n"
      "    members: [a-gpu1, a-gpu2, b-gpu1, b-gpu2]\n");
  EXPECT_EQ(OnSwitches(), Wanted(again));
  Release(again.id());
}

TEST_F(TrunksEndToEndTest, AHopBoundOfOneKeepsCircuitsOffTrunks) {
  const std::map<std::string, int64_t> before = Counters();
  CommandResult refused = RequestRefused(
      "tenant: demo\ntopology:\n  max_switch_hops: 1\n  links:\n"
      "    - {a: a-gpu1, b: b-gpu1, duplex: true}\n");
  EXPECT_THAT(refused.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(refused.err, HasSubstr("the shortest trunk path crosses 2 switches (ocs-a -> "
                                     "ocs-b) and max_switch_hops is 1"));
  EXPECT_EQ(Counters(), before);
  EXPECT_TRUE(OnSwitches().empty());
}

TEST_F(TrunksEndToEndTest, CountedMembersSpanTheSwitchesOnlyWhenOneIsShort) {
  const v1::Allocation eight = RequestReady(
      "tenant: demo\ntopology:\n  template:\n    kind: ring_bidirectional\n"
      "    members:\n      count: [{kind: gpu, count: 8}]\n");
  for (const v1::Circuit& c : eight.circuits()) EXPECT_THAT(c.trunks(), SizeIs(0));
  Release(eight.id());

  const v1::Allocation ten = RequestReady(
      "tenant: demo\ntopology:\n  template:\n    kind: ring_bidirectional\n"
      "    members:\n      count: [{kind: gpu, count: 10}]\n");
  std::map<char, int> per_cluster;
  for (const std::string& m : ten.members()) ++per_cluster[m[0]];
  EXPECT_EQ(per_cluster, (std::map<char, int>{{'a', 8}, {'b', 2}}));
  EXPECT_EQ(OnSwitches(), Wanted(ten));
  ExpectLightArrives(ten);
  Release(ten.id());
  EXPECT_TRUE(OnSwitches().empty());
}

}  // namespace
}  // namespace fleet
