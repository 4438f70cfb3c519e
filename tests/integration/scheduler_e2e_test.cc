// The scheduler's request forms end to end: fleetctl sends the request files of
// deploy/examples/ (or ones written here) to a real `fleetd --demo`, and the test reads what
// the emulated switch holds over the emulator's REST API. One fleetd serves every test; each
// test releases what it holds so the next finds the GPU pool free.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fleet/v1/admin.pb.h"
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
using testing::RunCommand;
using CrossConnectSet = std::set<std::pair<uint32_t, uint32_t>>;

const std::string kExamples = std::string(FLEET_SOURCE_DIR) + "/deploy/examples/";

class SchedulerEndToEndTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    state_ = new std::string(testing::FreshDirectory("scheduler-e2e"));
    absl::StatusOr<std::unique_ptr<Daemon>> started =
        Daemon::Start({BinaryPath("fleetd"), "--insecure", "--demo", "--state-dir", *state_,
                       "--grpc-port", "0", "--metrics-port", "0", "--agent-heartbeat-ms", "100"});
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = started->release();
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ");
    ASSERT_TRUE(grpc.ok()) << grpc.status();
    absl::StatusOr<std::string> rest = fleetd_->WaitForLine("rest: ");
    ASSERT_TRUE(rest.ok()) << rest.status();
    grpc_ = new std::string(*grpc);
    rest_ = new std::string(*rest);
    const size_t colon = rest->rfind(':');
    polatis::PolatisSwitchOptions options;
    options.name = "ocs1";
    options.protocol = polatis::Protocol::kRest;
    options.host = rest->substr(0, colon);
    options.port = static_cast<uint16_t>(std::stoi(rest->substr(colon + 1)));
    options.credentials = {"admin", "root"};
    options.insecure_http = true;  // The demo's emulators serve plain HTTP.
    switch_ = polatis::NewPolatisSwitch(options).release();
    // Every agent connected, so links train.
    ASSERT_TRUE(Eventually([] { return testing::ConnectedAgents(*grpc_) == 7; }));
  }
  static void TearDownTestSuite() {
    delete switch_;
    delete fleetd_;
    switch_ = nullptr;
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

  template <typename Response>
  static Response FleetctlJson(std::vector<std::string> args) {
    return testing::FleetctlJson<Response>(*grpc_, std::move(args));
  }

  // `topology request -f FILE --wait`: READY, or the test fails.
  static v1::Allocation RequestReady(const std::string& file) {
    v1::RequestTopologyResponse response =
        FleetctlJson<v1::RequestTopologyResponse>({"topology", "request", "-f", file, "--wait"});
    EXPECT_EQ(response.allocation().state(), v1::ALLOCATION_STATE_READY);
    return response.allocation();
  }

  // `topology phase ID NAME --wait`: READY on that phase, or the test fails.
  static v1::Allocation PhaseReady(const std::string& id, const std::string& phase) {
    v1::ActivatePhaseResponse response =
        FleetctlJson<v1::ActivatePhaseResponse>({"topology", "phase", id, phase, "--wait"});
    EXPECT_EQ(response.allocation().state(), v1::ALLOCATION_STATE_READY);
    EXPECT_EQ(response.allocation().active_phase(), phase);
    return response.allocation();
  }

  static void Release(const std::string& id) {
    CommandResult release = Fleetctl({"topology", "release", id, "--wait"});
    EXPECT_EQ(release.exit_code, 0) << release.err;
  }

  static CrossConnectSet OnSwitch() {
    absl::StatusOr<std::vector<switch_adapters::CrossConnect>> xs = switch_->ReadCrossConnects();
    EXPECT_TRUE(xs.ok()) << xs.status();
    CrossConnectSet out;
    for (const switch_adapters::CrossConnect& x :
         xs.value_or(std::vector<switch_adapters::CrossConnect>{})) {
      out.insert({x.ingress, x.egress});
    }
    return out;
  }

  // The cross-connects of the allocation's circuits in `phase` ("" for every circuit).
  static CrossConnectSet Wanted(const v1::Allocation& a, const std::string& phase = "") {
    CrossConnectSet out;
    for (const v1::Circuit& c : a.circuits()) {
      if (!phase.empty() && c.phase() != phase) continue;
      for (const v1::CrossConnect& x : c.cross_connects()) out.insert({x.ingress(), x.egress()});
    }
    return out;
  }

  static std::string WriteSpec(const std::string& name, const std::string& text) {
    return testing::WriteFile(name, text);
  }

  static inline std::string* state_ = nullptr;
  static inline std::string* grpc_ = nullptr;
  static inline std::string* rest_ = nullptr;  // The emulator's REST port.

  // Cross-connects the emulator has made or removed since it started.
  static int64_t CrossConnectsChanged() {
    return testing::EmulatorCounter(*rest_, "cross_connects_changed");
  }
  static inline Daemon* fleetd_ = nullptr;
  static inline switch_adapters::OpticalSwitch* switch_ = nullptr;
};

TEST_F(SchedulerEndToEndTest, PhasedJobSwitchesFromDataToTensorParallel) {
  v1::Allocation a = RequestReady(kExamples + "phased-dp-tp.yaml");
  ASSERT_FALSE(a.id().empty());
  EXPECT_THAT(a.phases(), ::testing::ElementsAre("dp", "tp"));
  EXPECT_EQ(a.active_phase(), "dp");
  EXPECT_EQ(OnSwitch(), Wanted(a, "dp"));

  // The plan summary, then each state change to READY.
  CommandResult phase = Fleetctl({"topology", "phase", a.id(), "tp", "--wait"});
  ASSERT_EQ(phase.exit_code, 0) << phase.err;
  EXPECT_THAT(phase.out, HasSubstr(absl::StrCat(a.id(), " phase tp: ")));
  EXPECT_THAT(phase.out, HasSubstr("cross-connects removed"));
  EXPECT_THAT(phase.out, HasSubstr(absl::StrCat(a.id(), " ready")));
  EXPECT_THAT(phase.out, HasSubstr("tp (active)"));

  // Exactly tp's circuits are on the switch: four duplex links, eight cross-connects.
  const CrossConnectSet tp = Wanted(a, "tp");
  EXPECT_EQ(tp.size(), 8u);
  EXPECT_EQ(OnSwitch(), tp);
  CommandResult describe = Fleetctl({"describe", "allocation", a.id()});
  EXPECT_THAT(describe.out, HasSubstr("tp (active)"));
  EXPECT_THAT(describe.out, HasSubstr("phase tp"));

  // And back: the ring again.
  PhaseReady(a.id(), "dp");
  EXPECT_EQ(OnSwitch(), Wanted(a, "dp"));
  Release(a.id());
  EXPECT_TRUE(OnSwitch().empty());
}

// Make before break: the ring takes each GPU's port 1 and the pairs its port 2, both phases
// are programmed and trained at admission, and a phase switch sends the switch nothing.
TEST_F(SchedulerEndToEndTest, APreparedPhaseIsActivatedWithoutASwitchCommand) {
  v1::Allocation a = RequestReady(kExamples + "prepared-ring-pairs.yaml");
  ASSERT_FALSE(a.id().empty());
  EXPECT_EQ(a.active_phase(), "dp");
  const CrossConnectSet dp = Wanted(a, "dp"), tp = Wanted(a, "tp");
  EXPECT_EQ(dp.size(), 8u);  // A unidirectional ring of eight.
  EXPECT_EQ(tp.size(), 8u);  // Four duplex pairs.
  CrossConnectSet both = dp;
  both.insert(tp.begin(), tp.end());
  ASSERT_EQ(both.size(), 16u) << "the phases share a switch port";
  EXPECT_EQ(OnSwitch(), both);
  for (const v1::Circuit& c : a.circuits()) {
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE) << c.id() << " of phase " << c.phase();
    EXPECT_EQ(c.source().port(), c.phase() == "dp" ? 1u : 2u) << c.id();
  }
  EXPECT_THAT(Fleetctl({"describe", "allocation", a.id()}).out, HasSubstr("tp (prepared)"));

  const int64_t changed = CrossConnectsChanged();
  CommandResult phase = Fleetctl({"topology", "phase", a.id(), "tp", "--wait"});
  ASSERT_EQ(phase.exit_code, 0) << phase.err;
  EXPECT_THAT(phase.out, HasSubstr(absl::StrCat(a.id(), " phase tp: prepared, no switch command")));
  const v1::Allocation on_tp = PhaseReady(a.id(), "tp");
  for (const v1::Circuit& c : on_tp.circuits()) {
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE) << c.id() << " of phase " << c.phase();
  }
  PhaseReady(a.id(), "dp");
  EXPECT_EQ(CrossConnectsChanged(), changed);
  EXPECT_EQ(OnSwitch(), both);
  Release(a.id());
  EXPECT_TRUE(OnSwitch().empty());
}

// When a member has no second free port the phases cannot be on the switch together: they
// switch in place, as without prepare_next_phase, and the allocation says so.
TEST_F(SchedulerEndToEndTest, PhasesThatCannotBeOnTheSwitchTogetherSwitchInPlace) {
  const std::string file = WriteSpec("prepared-bidirectional.yaml", R"(tenant: team-a
phases:
  - name: dp
    topology: {template: {kind: ring-bidirectional, members: [gpu1, gpu2, gpu3, gpu4]}}
  - name: tp
    topology: {links: [{a: gpu1, b: gpu2, duplex: true}, {a: gpu3, b: gpu4, duplex: true}]}
prepare_next_phase: true
)");
  v1::Allocation a = RequestReady(file);
  ASSERT_FALSE(a.id().empty());
  EXPECT_EQ(OnSwitch(), Wanted(a, "dp"));
  EXPECT_THAT(Fleetctl({"describe", "allocation", a.id()}).out, HasSubstr("tp (in place)"));
  const int64_t changed = CrossConnectsChanged();
  PhaseReady(a.id(), "tp");
  EXPECT_GT(CrossConnectsChanged(), changed);
  EXPECT_EQ(OnSwitch(), Wanted(a, "tp"));
  Release(a.id());
}

TEST_F(SchedulerEndToEndTest, AttachedGpusAreReadyAndOneDetaches) {
  v1::Allocation a = RequestReady(kExamples + "attach-gpus.yaml");
  ASSERT_FALSE(a.id().empty());
  // Four GPUs and a CPU of server1 among the members; a duplex circuit per GPU.
  EXPECT_EQ(a.circuits_size(), 8);
  EXPECT_EQ(OnSwitch(), Wanted(a));

  // Detaching one GPU takes its two circuits off; the other three stay as they are.
  const std::string gpu = a.members(0);
  CommandResult detached = Fleetctl({"topology", "detach", a.id(), gpu, "--wait"});
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  EXPECT_THAT(detached.out,
              HasSubstr(absl::StrCat(a.id(), " detached ", gpu, ": 2 cross-connects removed")));
  EXPECT_THAT(detached.out, HasSubstr(absl::StrCat(a.id(), " ready")));
  const v1::Allocation after = FleetctlJson<v1::Allocation>({"describe", "allocation", a.id()});
  EXPECT_EQ(after.circuits_size(), 6);
  EXPECT_THAT(after.members(), ::testing::Not(::testing::Contains(gpu)));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  // Every attached GPU cannot go: that is a release.
  std::vector<std::string> all = {"topology", "detach", a.id()};
  for (const std::string& m : after.members()) {
    if (m.rfind("gpu", 0) == 0) all.push_back(m);
  }
  CommandResult refused = Fleetctl(all);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(refused.err, HasSubstr("release allocation"));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  Release(a.id());
}

TEST_F(SchedulerEndToEndTest, AllToAllRoundsAreEachActivatedReady) {
  v1::Allocation a = RequestReady(kExamples + "all-to-all.yaml");
  ASSERT_FALSE(a.id().empty());
  ASSERT_GE(a.phases_size(), 2);
  EXPECT_EQ(a.phases(0), "round-1");
  EXPECT_EQ(a.active_phase(), "round-1");
  EXPECT_EQ(OnSwitch(), Wanted(a, "round-1"));
  for (int i = 1; i < a.phases_size(); ++i) {
    EXPECT_EQ(a.phases(i), absl::StrCat("round-", i + 1));
    PhaseReady(a.id(), a.phases(i));
    EXPECT_EQ(OnSwitch(), Wanted(a, a.phases(i))) << a.phases(i);
  }
  // The rounds' union links every ordered pair of the four GPUs.
  std::set<std::pair<std::string, std::string>> pairs;
  for (const v1::Circuit& c : a.circuits()) {
    pairs.insert({c.source().onic(), c.destination().onic()});
  }
  EXPECT_GE(pairs.size(), 12u);
  Release(a.id());
}

// The shipped example: a pipeline and its light cross traffic among four GPUs of two ports
// each; the plan links the pipeline and its return directly, the light pairs go round.
TEST_F(SchedulerEndToEndTest, TrafficExampleIsReadyAndShowsItsDirectShare) {
  v1::Allocation a = RequestReady(kExamples + "traffic.yaml");
  ASSERT_FALSE(a.id().empty());
  EXPECT_NEAR(a.direct_traffic_share(), 13e9 / 13.2e9, 1e-6);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  CommandResult described = Fleetctl({"describe", "allocation", a.id()});
  EXPECT_THAT(described.out, HasSubstr("Direct traffic:  98.5% of the bytes on direct circuits\n"));
  Release(a.id());
}

// Two heavy pairs and a light one among four GPUs: the plan links the heavy pairs directly.
TEST_F(SchedulerEndToEndTest, TrafficAwareRequestIsReadyAndReportsItsDirectShare) {
  v1::Allocation a = RequestReady(WriteSpec("traffic",
                                            "tenant: team-a\n"
                                            "topology:\n"
                                            "  traffic:\n"
                                            "    members: [gpu1, gpu2, gpu3, gpu4]\n"
                                            "    matrix:\n"
                                            "      - {source: 0, destination: 1, bytes: 4e9}\n"
                                            "      - {source: 2, destination: 3, bytes: 4e9}\n"
                                            "      - {source: 0, destination: 3, bytes: 1e6}\n"));
  ASSERT_FALSE(a.id().empty());
  EXPECT_GT(a.direct_traffic_share(), 0.99);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  Release(a.id());
}

// A template request written here is READY with `circuits` circuits, exactly those on the
// switch; then released.
void ExpectTemplateReady(const std::string& name, const std::string& template_yaml, int circuits) {
  SCOPED_TRACE(name);
  v1::Allocation a = SchedulerEndToEndTest::RequestReady(SchedulerEndToEndTest::WriteSpec(
      name, absl::StrCat("tenant: team-a\ntopology:\n  template:\n", template_yaml)));
  ASSERT_FALSE(a.id().empty());
  EXPECT_EQ(a.circuits_size(), circuits);
  EXPECT_EQ(SchedulerEndToEndTest::OnSwitch(), SchedulerEndToEndTest::Wanted(a));
  SchedulerEndToEndTest::Release(a.id());
}

TEST_F(SchedulerEndToEndTest, RingOfFourGpusByCountIsReady) {
  ExpectTemplateReady("count-ring",
                      "    kind: ring-unidirectional\n"
                      "    members:\n"
                      "      count: [{kind: gpu, count: 4}]\n",
                      4);
}

TEST_F(SchedulerEndToEndTest, StarAroundACpuIsReady) {
  ExpectTemplateReady("star",
                      "    kind: star\n"
                      "    members: [server1-cpu0, gpu5, gpu6, gpu7]\n"
                      "    duplex: true\n",
                      6);
}

// Wrap-around links in both dimensions over four CPUs.
TEST_F(SchedulerEndToEndTest, TwoByTwoTorusOfCpusIsReady) {
  ExpectTemplateReady("torus",
                      "    kind: torus-2d\n"
                      "    members: [server1-cpu0, server2-cpu0, server3-cpu0, server4-cpu0]\n"
                      "    dimensions: [2, 2]\n",
                      8);
}

// A ring of four named GPUs; gpu3 fails and `allocation replace` swaps in a spare: the
// allocation is READY again with the spare as a member, exactly its circuits on the switch, and
// the two circuits not touching gpu3 still there as they were.
TEST_F(SchedulerEndToEndTest, ReplanningAnUnchangedRequestChangesNothing) {
  // A request sent twice with the same request_id (a job's retry) is one allocation, and the
  // switch is not touched the second time.
  const std::string spec = WriteSpec("same-request",
                                     "tenant: team-a\nrequest_id: step-42\ntopology:\n"
                                     "  template:\n    kind: ring-bidirectional\n"
                                     "    members: [gpu1, gpu2, gpu3, gpu4]\n");
  const v1::Allocation a = RequestReady(spec);
  ASSERT_FALSE(a.id().empty());
  const int64_t changed = CrossConnectsChanged();
  const v1::Allocation again = RequestReady(spec);
  EXPECT_EQ(again.id(), a.id());
  EXPECT_EQ(CrossConnectsChanged(), changed);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  Release(a.id());

  // Activating the phase that is already active changes nothing either.
  const v1::Allocation phased = RequestReady(kExamples + "phased-dp-tp.yaml");
  const int64_t before = CrossConnectsChanged();
  PhaseReady(phased.id(), "dp");
  EXPECT_EQ(CrossConnectsChanged(), before);
  Release(phased.id());
}

TEST_F(SchedulerEndToEndTest, ReplacingARingMemberSwapsInASpareAndKeepsTheOtherCircuits) {
  v1::Allocation a = RequestReady(WriteSpec("replace-ring",
                                            "tenant: team-a\ntopology:\n  template:\n"
                                            "    kind: ring-unidirectional\n"
                                            "    members:\n"
                                            "      devices: [gpu1, gpu2, gpu3, gpu4]\n"));
  ASSERT_FALSE(a.id().empty());
  const CrossConnectSet before = Wanted(a);
  EXPECT_EQ(OnSwitch(), before);

  // The plan, then (with --wait) the allocation once READY again.
  v1::ReplaceMemberResponse replaced =
      FleetctlJson<v1::ReplaceMemberResponse>({"allocation", "replace", a.id(), "gpu3", "--wait"});
  EXPECT_EQ(replaced.plan().remove_size(), 2);
  EXPECT_EQ(replaced.plan().add_size(), 2);
  const v1::Allocation& after = replaced.allocation();
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY);
  ASSERT_EQ(after.members_size(), 4);
  EXPECT_EQ(after.members(0), "gpu1");
  EXPECT_EQ(after.members(1), "gpu2");
  EXPECT_NE(after.members(2), "gpu3");
  EXPECT_EQ(after.members(3), "gpu4");
  const CrossConnectSet wanted = Wanted(after);
  EXPECT_EQ(OnSwitch(), wanted);
  // gpu1→gpu2 and gpu4→gpu1 are kept.
  CrossConnectSet kept;
  std::set_intersection(before.begin(), before.end(), wanted.begin(), wanted.end(),
                        std::inserter(kept, kept.begin()));
  EXPECT_EQ(kept.size(), 2u);
  Release(a.id());
}

}  // namespace
}  // namespace fleet
