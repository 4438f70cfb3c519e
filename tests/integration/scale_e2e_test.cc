// A site of four clusters end to end (docs/scale.md): `deploy/inventory/generate.py
// --clusters 4` (4 switches on a 2x2 torus, 256 GPUs, 128 agents) run by `fleet-demo-site
// --etcd-members 0` (four polatis-emu processes with their trunks joined, the 128 emulated
// agents sharing two processes, the throwaway PKI), and a real `fleetd --config` against it,
// which a test can stop and start again while the switches keep their cross-connects.
// Requests go through fleetctl over mutual TLS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
    site_dir_ = new std::string(dir + "/site");
    absl::StatusOr<std::unique_ptr<Daemon>> started =
        Daemon::Start({BinaryPath("fleet-demo-site"), "--state-dir", *site_dir_, "--site", site,
                       "--etcd-members", "0", "--replicas", "1"});
    ASSERT_TRUE(started.ok()) << started.status();
    site_ = started->release();
    absl::StatusOr<std::string> ready = site_->WaitForLine("ready", absl::Seconds(120));
    ASSERT_TRUE(ready.ok()) << ready.status() << site_->Stderr();
    for (absl::string_view line : absl::StrSplit(site_->output(), '\n')) {
      std::vector<std::string> words = absl::StrSplit(line, ' ');
      if (words.size() == 3 && words[0] == "replica:") config_ = new std::string(words[2]);
      if (words.size() == 2 && words[0] == "fleetctl-config:") {
        at_ = new testing::FleetdAt(testing::FleetdAt::WithConfig(words[1]));
      }
      if (words.size() == 6 && words[0] == "switch:") rests_.push_back(words[5]);
    }
    ASSERT_TRUE(config_ != nullptr && at_ != nullptr) << site_->output();
    ASSERT_THAT(rests_, SizeIs(kClusters));
    ASSERT_NO_FATAL_FAILURE(StartFleetd());
  }
  static void TearDownTestSuite() {
    delete fleetd_;
    fleetd_ = nullptr;
    if (site_ != nullptr) (void)site_->Stop(SIGTERM);  // It stops its emulators and agents.
    delete site_;
    site_ = nullptr;
  }
  void SetUp() override {
    if (fleetd_ == nullptr || at_ == nullptr) GTEST_SKIP() << "the site did not start";
  }
  void TearDown() override {
    if (HasFailure() && fleetd_ != nullptr)
      std::cerr << "---- fleetd stderr:\n" << fleetd_->Stderr();
  }

  // fleetd started on the site's config, serving, every agent connected.
  static void StartFleetd() {
    absl::StatusOr<std::unique_ptr<Daemon>> started =
        Daemon::Start({BinaryPath("fleetd"), "--config", *config_, "--monitor-interval-ms", "200"});
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = started->release();
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ", absl::Seconds(60));
    ASSERT_TRUE(grpc.ok()) << grpc.status() << fleetd_->Stderr();
    absl::StatusOr<std::string> metrics = fleetd_->WaitForLine("metrics: ");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = metrics.value();
    ASSERT_TRUE(
        Eventually([] { return testing::ConnectedAgents(*at_) == kAgents; }, absl::Seconds(60)))
        << testing::ConnectedAgents(*at_) << " of " << kAgents << " agents connected";
  }

  // `name` summed over the four emulators' counters.
  static int64_t EmulatorsCounter(const std::string& name) {
    int64_t sum = 0;
    for (const std::string& rest : rests_) sum += testing::EmulatorCounter(rest, name);
    return sum;
  }

  static CommandResult Fleetctl(std::vector<std::string> args) {
    return testing::Fleetctl(*at_, std::move(args));
  }

  // A unidirectional ring of `members`, READY.
  static v1::Allocation Ring(const std::vector<std::string>& members) {
    std::string spec =
        "tenant: demo\ntopology:\n  template:\n    kind: ring_unidirectional\n"
        "    members: [";
    for (size_t i = 0; i < members.size(); ++i) absl::StrAppend(&spec, i ? ", " : "", members[i]);
    absl::StrAppend(&spec, "]\n");
    const v1::RequestTopologyResponse response = testing::FleetctlJson<v1::RequestTopologyResponse>(
        *at_, {"topology", "request", "-f", testing::WriteFile("ring", spec), "--wait"});
    EXPECT_EQ(response.allocation().state(), v1::ALLOCATION_STATE_READY)
        << response.allocation().reason();
    return response.allocation();
  }

  // Power reads the switch monitor has made of `switch_id` so far (fleetd's metrics).
  static int PowerReads(const std::string& switch_id) {
    absl::StatusOr<std::string> text = testing::HttpGet(metrics_, "/metrics");
    if (!text.ok()) return -1;
    const std::string series = absl::StrCat("fleet_switch_commands_total{operation=\"read_power\",",
                                            "protocol=\"tl1\",switch=\"", switch_id, "\"} ");
    const size_t at = text->find(series);
    return at == std::string::npos ? 0 : std::atoi(text->c_str() + at + series.size());
  }

  static inline Daemon* site_ = nullptr;
  static inline std::string* site_dir_ = nullptr;
  static inline std::string* config_ = nullptr;
  static inline testing::FleetdAt* at_ = nullptr;
  static inline std::vector<std::string> rests_;  // Each emulator's REST address.
  static inline std::string metrics_;
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
      testing::FleetctlJson<v1::ListAllocationsResponse>(*at_, {"get", "allocations"});
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
  CommandResult again = Fleetctl({"apply", "-f", *site_dir_ + "/inventory.yaml"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("created 0, updated 0,"));
}

// Every switch holding a ring of all its 64 GPUs, fleetd is stopped and started again: it
// reads every switch, finds what it stored, and changes no cross-connect on any of them; the
// rings are still READY with the circuits they had, and every agent is back.
TEST_F(ScaleEndToEndTest, RestartWithEverySwitchHoldingCircuitsChangesNothing) {
  const int64_t before = EmulatorsCounter("cross_connects");
  std::vector<v1::Allocation> held;
  for (int c = 1; c <= kClusters; ++c) {
    std::vector<std::string> members;
    for (int g = 1; g <= 64; ++g) members.push_back(absl::StrCat("c0", c, "-gpu", g));
    held.push_back(Ring(members));
  }
  const int64_t cross_connects = EmulatorsCounter("cross_connects");
  EXPECT_EQ(cross_connects, before + 64 * kClusters);
  const int64_t changed = EmulatorsCounter("cross_connects_changed");

  absl::StatusOr<int> stopped = fleetd_->Stop(SIGTERM);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, 0);
  delete fleetd_;
  fleetd_ = nullptr;
  ASSERT_NO_FATAL_FAILURE(StartFleetd());
  // The site's inventory file, as the first start applied it, is not parsed again.
  EXPECT_THAT(fleetd_->Stderr(),
              HasSubstr("inventory as when it was last applied; not parsed again"))
      << "the restart applied the unchanged inventory file again";
  // What the agents' return sets off (a sync of every allocation) and two passes of the
  // switch monitor over every switch run before anything is checked.
  std::map<std::string, int> reads;
  for (int c = 1; c <= kClusters; ++c)
    reads[absl::StrCat("ocs0", c)] = PowerReads(absl::StrCat("ocs0", c));
  ASSERT_TRUE(Eventually([&] {
    for (const auto& [sw, before_reads] : reads) {
      if (PowerReads(sw) < before_reads + 2) return false;
    }
    return true;
  }));

  EXPECT_EQ(EmulatorsCounter("cross_connects_changed"), changed);
  EXPECT_EQ(EmulatorsCounter("cross_connects"), cross_connects);
  const v1::ListAllocationsResponse after =
      testing::FleetctlJson<v1::ListAllocationsResponse>(*at_, {"get", "allocations"});
  std::map<std::string, v1::Allocation> now;
  for (const v1::Allocation& a : after.allocations()) now[a.id()] = a;
  for (const v1::Allocation& a : held) {
    ASSERT_TRUE(now.contains(a.id())) << a.id();
    EXPECT_EQ(now[a.id()].state(), v1::ALLOCATION_STATE_READY)
        << a.id() << ": " << now[a.id()].reason();
    ASSERT_EQ(now[a.id()].circuits_size(), a.circuits_size()) << a.id();
    for (int i = 0; i < a.circuits_size(); ++i) {
      EXPECT_EQ(now[a.id()].circuits(i).cross_connects(0).DebugString(),
                a.circuits(i).cross_connects(0).DebugString())
          << a.id() << " circuit " << i;
    }
    CommandResult release = Fleetctl({"topology", "release", a.id(), "--wait"});
    EXPECT_EQ(release.exit_code, 0) << release.err;
  }
  EXPECT_EQ(EmulatorsCounter("cross_connects"), before);
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
