// `fleetctl topology` (request, --wait, release, phase, keepalive), end to end.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;

class FleetctlTopologyTest : public FleetctlTest {
 protected:
  void SetUp() override {
    FleetctlTest::SetUp();
    spec_ = WriteFile("ring.yaml",
                      "tenant: team-a\n"
                      "name: ring\n"
                      "lease: 30m\n"
                      "topology:\n"
                      "  template:\n"
                      "    kind: ring-unidirectional\n"
                      "    members: [gpu1, gpu2]\n");
  }

  std::string spec_;
};

// What `topology request` prints for the fake's allocation a2 over gpu1 and gpu2.
std::string RingAllocationText(absl::string_view state, absl::string_view reason = "-",
                               absl::string_view circuit_state = "planned") {
  return absl::StrCat(
      "ID:      a2\n"
      "Tenant:  team-a\n"
      "Name:    ring\n"
      "State:   ",
      state,
      "\n"
      "Reason:  ",
      reason,
      "\n"
      "Members:\n"
      "  gpu1\n"
      "  gpu2\n"
      "Circuits:\n"
      "  c10  gpu1-n0/1 → gpu2-n0/1  via ocs1:10→401  ",
      circuit_state,
      "\n"
      "  c11  gpu2-n0/1 → gpu1-n0/1  via ocs1:11→400  ",
      circuit_state, "\n");
}

TEST_F(FleetctlTopologyTest, RequestPrintsTheAdmittedAllocation) {
  EXPECT_EQ(Run({"topology", "request", "-f", spec_}), kExitOk) << err();
  EXPECT_EQ(out(), RingAllocationText("pending"));
  ASSERT_EQ(topology_.requests().size(), 1u);
  EXPECT_FALSE(topology_.requests()[0].dry_run());
  EXPECT_EQ(topology_.watches_started(), 0);
}

TEST_F(FleetctlTopologyTest, DryRunPrintsThePlanAndStoresNothing) {
  EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "dry run: nothing was changed\n"
            "members: gpu1, gpu2\n"
            "2 circuits, 2 cross-connects to make, 0 to remove, 2 O-NIC ports\n"
            "SOURCE     DESTINATION  CROSS-CONNECTS\n"
            "gpu1-n0/1  gpu2-n0/1    ocs1:10→401\n"
            "gpu2-n0/1  gpu1-n0/1    ocs1:11→400\n");
  ASSERT_EQ(topology_.requests().size(), 1u);
  EXPECT_TRUE(topology_.requests()[0].dry_run());
  EXPECT_EQ(topology_.versions("a2"), 0u);
}

TEST_F(FleetctlTopologyTest, LeaseComesFromTheFileUnlessTheFlagOverridesIt) {
  ASSERT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run"}), kExitOk) << err();
  ASSERT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run", "--lease", "1h30m"}), kExitOk)
      << err();
  ASSERT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run", "--lease=0"}), kExitOk) << err();
  std::vector<v1::RequestTopologyRequest> requests = topology_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].lease().seconds(), 30 * 60);
  EXPECT_EQ(requests[1].lease().seconds(), 90 * 60);
  EXPECT_EQ(requests[2].lease().seconds(), 0);  // The server's default.
}

TEST_F(FleetctlTopologyTest, MalformedLeaseFlagIsUsageErrorAndSendsNothing) {
  for (const char* lease : {"ten minutes", "10", "-5m"}) {
    EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--lease", lease}), kExitUsage) << lease;
    EXPECT_THAT(err(), HasSubstr(absl::StrCat("error: --lease: '", lease, "'")));
    EXPECT_THAT(err(), HasSubstr("fleetctl topology --help"));
  }
  EXPECT_THAT(err(), HasSubstr("'-5m' is negative"));
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, MalformedLeaseInTheFileNamesFileAndLine) {
  std::string path = WriteFile("bad-lease.yaml",
                               "tenant: team-a\n"
                               "lease: soon\n"
                               "topology:\n"
                               "  template: {kind: ring-unidirectional, members: [gpu1, gpu2]}\n");
  EXPECT_EQ(Run({"topology", "request", "-f", path}), kExitFailed);
  EXPECT_EQ(err(), absl::StrCat("error: INVALID_ARGUMENT: ", path,
                                ":2: lease: 'soon' is not a duration such as 90s, 10m or 1h30m\n"));
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, RequestRefusedPrintsTheServersError) {
  std::string path = WriteFile("gpu9.yaml",
                               "tenant: team-a\n"
                               "topology:\n"
                               "  template: {kind: ring-unidirectional, members: [gpu1, gpu9]}\n");
  EXPECT_EQ(Run({"topology", "request", "-f", path, "--wait"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: device gpu9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTopologyTest, WaitPrintsEachStateChangeUntilReady) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_PROGRAMMING);
  topology_.SetState("a2", v1::ALLOCATION_STATE_TRAINING);
  topology_.SetState("a2", v1::ALLOCATION_STATE_DEGRADED, "link gpu2-n0/1 did not train");
  topology_.SetState("a2", v1::ALLOCATION_STATE_READY);
  // Ready ends the wait although the server keeps the stream open: fleetctl cancels it.
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("a2 pending\n"
                                "a2 programming\n"
                                "a2 training\n"
                                "a2 degraded link gpu2-n0/1 did not train\n"
                                "a2 ready\n",
                                RingAllocationText("ready")));
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTopologyTest, WaitForFailedExitsOneWithTheReason) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_PROGRAMMING);
  topology_.SetState("a2", v1::ALLOCATION_STATE_FAILED, "switch ocs1 refused: port 10 is held");
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(out(), "a2 pending\na2 programming\na2 failed switch ocs1 refused: port 10 is held\n");
  EXPECT_EQ(err(), "error: allocation a2 failed: switch ocs1 refused: port 10 is held\n");
}

TEST_F(FleetctlTopologyTest, WaitForReleasedInsteadOfReadyExitsOne) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_RELEASED, "lease expired");
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(err(), "error: allocation a2 was released: lease expired\n");
}

// The one test that waits for real time to pass: --timeout takes whole seconds.
TEST_F(FleetctlTopologyTest, WaitPastTheTimeoutNamesTheLastState) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"topology", "request", "-f", spec_, "--wait", "--timeout", "1"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_TRAINING);
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(out(), "a2 pending\na2 training\n");
  EXPECT_EQ(err(), "error: DEADLINE_EXCEEDED: allocation a2 is still training after 1s\n");
}

TEST_F(FleetctlTopologyTest, WatchEndedByTheServerBeforeAnEndStateExitsOne) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_PROGRAMMING);
  topology_.EndWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(err(),
            "error: UNAVAILABLE: the server ended the watch of allocation a2 while it was "
            "programming\n");
}

TEST_F(FleetctlTopologyTest, WaitNeedsNoWatchWhenAdmittedReady) {
  topology_.set_admit_state(v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--wait"}), kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("a2 ready\n", RingAllocationText("ready")));
  EXPECT_EQ(topology_.watches_started(), 0);
}

TEST_F(FleetctlTopologyTest, WaitWithJsonKeepsStdoutForTheFinalResponse) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"topology", "request", "-f", spec_, "--wait", "-o", "json"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_READY);
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(err(), "a2 pending\na2 ready\n");
  v1::RequestTopologyResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.allocation().id(), "a2");
  EXPECT_EQ(parsed.allocation().state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(parsed.plan().circuits_size(), 2);
}

TEST_F(FleetctlTopologyTest, WaitWithDryRunIsUsageError) {
  EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run", "--wait"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--wait has nothing to wait for with --dry-run"));
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, ReleasePrintsTheResultingState) {
  EXPECT_EQ(Run({"topology", "release", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), "a1 releasing\n");
  EXPECT_EQ(topology_.watches_started(), 0);
}

TEST_F(FleetctlTopologyTest, ReleaseWaitFollowsUntilReleased) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "release", "a1", "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a1", v1::ALLOCATION_STATE_RELEASED);
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(out(), "a1 releasing\na1 released\n");
}

TEST_F(FleetctlTopologyTest, PhasePrintsTheCrossConnectsThatDiffer) {
  EXPECT_EQ(Run({"topology", "phase", "a1", "tp"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "a1 phase tp: 1 cross-connect removed, 1 added\n"
            "  removed  ocs1:1→401\n"
            "  added    ocs1:2→402\n"
            "a1 programming\n");
  EXPECT_EQ(Run({"topology", "phase", "a1", "pp"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a1 has no phase 'pp'; its phases are dp, tp\n");
  EXPECT_EQ(Run({"topology", "phase", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology phase needs an ID and a phase NAME, got 'phase a1'"));
}

TEST_F(FleetctlTopologyTest, PhaseWaitFollowsUntilReadyAndShowsThePhases) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "phase", "a1", "tp", "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a1", v1::ALLOCATION_STATE_TRAINING);
  topology_.SetState("a1", v1::ALLOCATION_STATE_READY);
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("a1 phase tp: 1 cross-connect removed, 1 added\n"));
  EXPECT_THAT(out(), HasSubstr("a1 programming\na1 training\na1 ready\n"));
  EXPECT_THAT(out(), HasSubstr("dp\n"));
  EXPECT_THAT(out(), HasSubstr("tp (active)"));
}

TEST_F(FleetctlTopologyTest, ReleaseOfUnknownAllocationIsNotFound) {
  EXPECT_EQ(Run({"topology", "release", "a9", "--wait"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTopologyTest, KeepAlivePrintsTheNewExpiry) {
  EXPECT_EQ(Run({"topology", "keepalive", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), "a1 lease expires 2023-11-14T22:18:20Z (in 5m)\n");
  EXPECT_EQ(Run({"topology", "keepalive", "a1", "-o", "json"}), kExitOk) << err();
  v1::KeepAliveResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.lease_expires().seconds(), absl::ToUnixSeconds(clock_.Now() + absl::Minutes(5)));
  EXPECT_EQ(Run({"topology", "keepalive", "a9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a9 not found\n");
}

TEST_F(FleetctlTopologyTest, SubcommandsAndTheirFlagsAreChecked) {
  EXPECT_EQ(Run({"topology"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology needs a subcommand: request -f FILE, phase ID NAME, "
                               "detach ID DEVICE..., release ID, keepalive ID, ranks ID or fabric "
                               "[DEVICE...] [--allocation ID]"));
  EXPECT_EQ(Run({"topology", "renew", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown topology subcommand 'renew'; subcommands: request, "
                               "phase, detach, release, keepalive"));
  EXPECT_EQ(Run({"topology", "detach", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology detach needs an ID and one or more DEVICEs (and no -f "
                               "or --lease), got 'detach a1'"));
  EXPECT_EQ(Run({"topology", "detach", "a1", "gpu1", "--lease", "5m"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology detach needs an ID and one or more DEVICEs"));
  EXPECT_EQ(Run({"topology", "request"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology request needs -f FILE"));
  EXPECT_EQ(Run({"topology", "release"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology release needs one ID, got 'release'"));
  EXPECT_EQ(Run({"topology", "release", "a1", "--lease", "5m"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("-f and --lease apply to topology request only, --dry-run to "
                               "request and detach"));
  EXPECT_EQ(Run({"topology", "keepalive", "a1", "--wait"}), kExitUsage);
  EXPECT_THAT(err(),
              HasSubstr("--wait applies to topology request, phase, detach and release only"));
  EXPECT_EQ(topology_.versions("a1"), 1u);  // Nothing reached the server.
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, HelpShowsEverySubcommand) {
  EXPECT_EQ(Run({"topology", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("  request -f FILE  "));
  EXPECT_THAT(out(), HasSubstr("  phase ID NAME  "));
  EXPECT_THAT(out(), HasSubstr("  release ID  "));
  EXPECT_THAT(out(), HasSubstr("  keepalive ID  "));
  EXPECT_THAT(out(), HasSubstr("--lease VALUE"));
  EXPECT_THAT(out(), HasSubstr("--wait"));
}

}  // namespace
}  // namespace fleet::cli
