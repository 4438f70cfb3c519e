// A site of four clusters end to end (docs/scale.md): `deploy/inventory/generate.py
// --clusters 4` (4 switches on a 2x2 torus, 256 GPUs, 128 agents), run by a real
// `fleetd --insecure --demo --demo-site`: four polatis-emu processes with their trunks joined, and
// the 128 emulated agents sharing two processes. Requests go through fleetctl.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "fleet/v1/topology.pb.h"
#include "tests/integration/subprocess.h"
#include "tests/scratch.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using testing::Daemon;
using testing::Eventually;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr int kClusters = 4;
constexpr int kAgents = 32 * kClusters;

class ScaleEndToEndTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    const std::string dir = testing::FreshDirectory("scale-e2e");
    const std::string site = dir + "/site.yaml";
    const std::string generate =
        absl::StrCat("python3 ", FLEET_SOURCE_DIR, "/deploy/inventory/generate.py --clusters ",
                     kClusters, " --output ", site);
    ASSERT_EQ(std::system(generate.c_str()), 0) << generate;
    state_ = new std::string(dir + "/state");
    absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(
        {BinaryPath("fleetd"), "--insecure", "--demo", "--demo-site", site, "--state-dir", *state_,
         "--grpc-port", "0", "--metrics-port", "0", "--monitor-interval-ms", "200"});
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = started->release();
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ");
    ASSERT_TRUE(grpc.ok()) << grpc.status();
    grpc_ = new std::string(*grpc);
    absl::StatusOr<std::string> metrics = fleetd_->WaitForLine("metrics: ");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = new std::string(*metrics);
    for (int i = 0; i < kClusters; ++i) {
      absl::StatusOr<std::string> line = fleetd_->WaitForLine("rest: ");
      ASSERT_TRUE(line.ok()) << line.status();
    }
    ASSERT_TRUE(
        Eventually([] { return testing::ConnectedAgents(*grpc_) == kAgents; }, absl::Seconds(60)))
        << testing::ConnectedAgents(*grpc_) << " of " << kAgents << " agents connected";
  }
  static void TearDownTestSuite() {
    delete fleetd_;
    fleetd_ = nullptr;
  }
  void SetUp() override {
    if (fleetd_ == nullptr || grpc_ == nullptr) GTEST_SKIP() << "fleetd did not start";
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- fleetd stderr:\n" << fleetd_->Stderr();
  }

  static CommandResult Fleetctl(std::vector<std::string> args) {
    return testing::Fleetctl(*grpc_, std::move(args));
  }

  // A unidirectional ring of `members`, READY.
  static v1::Allocation Ring(const std::vector<std::string>& members) {
    std::string spec =
        "tenant: demo\ntopology:\n  template:\n    kind: ring_unidirectional\n"
        "    members: [";
    for (size_t i = 0; i < members.size(); ++i) absl::StrAppend(&spec, i ? ", " : "", members[i]);
    absl::StrAppend(&spec, "]\n");
    const v1::RequestTopologyResponse response = testing::FleetctlJson<v1::RequestTopologyResponse>(
        *grpc_, {"topology", "request", "-f", testing::WriteFile("ring", spec), "--wait"});
    EXPECT_EQ(response.allocation().state(), v1::ALLOCATION_STATE_READY)
        << response.allocation().reason();
    return response.allocation();
  }

  // Power reads the switch monitor has made of `switch_id` so far (fleetd's metrics).
  static int PowerReads(const std::string& switch_id) {
    absl::StatusOr<std::string> text = testing::HttpGet(*metrics_, "/metrics");
    if (!text.ok()) return -1;
    const std::string series = absl::StrCat("fleet_switch_commands_total{operation=\"read_power\",",
                                            "protocol=\"tl1\",switch=\"", switch_id, "\"} ");
    const size_t at = text->find(series);
    return at == std::string::npos ? 0 : std::atoi(text->c_str() + at + series.size());
  }

  static inline std::string* state_ = nullptr;
  static inline std::string* metrics_ = nullptr;
  static inline std::string* grpc_ = nullptr;
  static inline Daemon* fleetd_ = nullptr;
};

// Every agent of the four clusters connected (checked in the suite's setup). A ring on one
// switch and a ring over all four are READY, each switch programmed, and they stay READY with
// every port healthy while the switch monitor reads every switch (light over trunks
// included); released, nothing is left.
TEST_F(ScaleEndToEndTest, RingsOnOneSwitchAndOverFourStayReadyAndHealthy) {
  const v1::Allocation local = Ring({"c01-gpu1", "c01-gpu2", "c01-gpu3", "c01-gpu4"});
  // Neighbours on the torus: ocs01 → ocs02 → ocs04 → ocs03 → ocs01, two GPUs on each.
  const v1::Allocation wide = Ring({"c01-gpu9", "c01-gpu10", "c02-gpu9", "c02-gpu10", "c04-gpu9",
                                    "c04-gpu10", "c03-gpu9", "c03-gpu10"});
  std::set<std::string> switches;
  int over_trunks = 0;
  for (const v1::Circuit& c : wide.circuits()) {
    for (const v1::CrossConnect& x : c.cross_connects()) switches.insert(x.switch_id());
    over_trunks += c.trunks().empty() ? 0 : 1;
  }
  EXPECT_THAT(switches, SizeIs(kClusters));
  EXPECT_EQ(over_trunks, 4);

  // Two more passes of the switch monitor over every switch (every 200 ms): no port goes
  // DEGRADED, no allocation leaves READY.
  std::map<std::string, int> before;
  for (const std::string& sw : switches) before[sw] = PowerReads(sw);
  ASSERT_TRUE(Eventually([&] {
    for (const std::string& sw : switches) {
      if (PowerReads(sw) < before[sw] + 2) return false;
    }
    return true;
  }));
  const v1::ListAllocationsResponse all =
      testing::FleetctlJson<v1::ListAllocationsResponse>(*grpc_, {"get", "allocations"});
  ASSERT_THAT(all.allocations(), SizeIs(2));
  for (const v1::Allocation& a : all.allocations()) {
    EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.id() << ": " << a.reason();
  }
  CommandResult ports = Fleetctl({"get", "ports"});
  ASSERT_EQ(ports.exit_code, 0) << ports.err;
  EXPECT_THAT(ports.out, ::testing::Not(HasSubstr("degraded")));

  for (const v1::Allocation* a : {&local, &wide}) {
    CommandResult release = Fleetctl({"topology", "release", a->id(), "--wait"});
    EXPECT_EQ(release.exit_code, 0) << release.err;
  }
}

// The whole site applied again (the demo's own inventory file) changes nothing.
TEST_F(ScaleEndToEndTest, ApplyingTheSameSiteAgainChangesNothing) {
  CommandResult again = Fleetctl({"apply", "-f", *state_ + "/inventory.yaml"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("created 0, updated 0,"));
}

// Many agents share a process only as the emulated hosts of a bench or demo: flags meant for
// one agent, or a real backend, are refused before anything starts, naming what and why.
TEST(SharedAgentProcessTest, RefusesWhatOneAgentAloneMayHave) {
  const std::string a = testing::WriteFile(
      "a", "host: h1\nbackend: emulated\nsimulator: 127.0.0.1:1\ninsecure: true\n");
  const std::string b = testing::WriteFile("b", "host: h2\nbackend: pcie-sysfs\ninsecure: true\n");
  const std::string both = absl::StrCat(a, ",", b);
  const std::string agent = BinaryPath("fleet-onic-agent");
  CommandResult metrics = testing::RunCommand(
      {agent, "--config", both, "--controller", "127.0.0.1:1", "--metrics-port", "0"});
  EXPECT_EQ(metrics.exit_code, 2);
  EXPECT_THAT(metrics.err, HasSubstr("no --metrics-port"));
  CommandResult host =
      testing::RunCommand({agent, "--config", both, "--controller", "127.0.0.1:1", "--host", "h3"});
  EXPECT_EQ(host.exit_code, 2);
  EXPECT_THAT(host.err, HasSubstr("no --host"));
  CommandResult real =
      testing::RunCommand({agent, "--config", both, "--controller", "127.0.0.1:1"});
  EXPECT_EQ(real.exit_code, 2);
  EXPECT_THAT(real.err, HasSubstr(absl::StrCat(b,
                                               ": backend 'pcie-sysfs': several agents share "
                                               "a process only emulated")));
}

}  // namespace
}  // namespace fleet
