// fleetctl's AdminService verbs (link, health, version, drain, reconcile, events), end to end.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST_F(FleetctlTest, LinkRetrainPrintsTheUpLinkInOneLine) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", "1"}), kExitOk) << err();
  EXPECT_EQ(out(), "s1c0-n0 port 1: up (16000 MT/s x16, rx -1.50 dBm, peer FLT-GPU1-N0/1)\n");
  std::vector<v1::RetrainLinkRequest> retrains = admin_.retrains();
  ASSERT_EQ(retrains.size(), 1u);
  EXPECT_EQ(retrains[0].onic(), "s1c0-n0");
  EXPECT_EQ(retrains[0].port(), 1u);
}

TEST_F(FleetctlTest, LinkRetrainShowsWhyALinkIsNotUp) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", "2"}), kExitOk) << err();
  EXPECT_EQ(out(), "s1c0-n0 port 2: down: no light\n");
  ASSERT_EQ(admin_.retrains().size(), 1u);
  EXPECT_EQ(admin_.retrains()[0].port(), 2u);
}

TEST_F(FleetctlTest, LinkRetrainJsonParsesBackToTheLinkState) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", "1", "-o", "json"}), kExitOk) << err();
  v1::LinkState parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(parsed.link_width(), 16u);
  EXPECT_DOUBLE_EQ(parsed.rx_power_dbm(), -1.5);
  EXPECT_EQ(parsed.peer_seen(), "FLT-GPU1-N0/1");
}

TEST_F(FleetctlTest, LinkRetrainRejectsPortOtherThanOneOrTwo) {
  for (const char* port : {"0", "3", "12", "one", "1x"}) {
    EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", port}), kExitUsage) << port;
    EXPECT_THAT(err(), HasSubstr(std::string("error: PORT must be 1 or 2, got '") + port + "'"));
    EXPECT_THAT(err(), HasSubstr("fleetctl link --help"));
    EXPECT_EQ(out(), "");
  }
  EXPECT_TRUE(admin_.retrains().empty());
}

TEST_F(FleetctlTest, LinkRetrainServerErrorExitsOne) {
  EXPECT_EQ(Run({"link", "retrain", "gpu3-n0", "1"}), kExitFailed);
  EXPECT_EQ(err(), "error: UNAVAILABLE: agent on host jbog1 is not connected\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, LinkRetrainNeedsOnicAndPort) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("link retrain needs ONIC and PORT, got 'retrain s1c0-n0'"));
  EXPECT_TRUE(admin_.retrains().empty());
}

TEST_F(FleetctlTest, LinkStatusPrintsBothPorts) {
  EXPECT_EQ(Run({"link", "status", "s1c0-n0"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "PORT  STATUS  SPEED       WIDTH  RX-DBM  TX-DBM  PEER           DETAIL\n"
            "1     up      16000 MT/s  x16    -1.50   0.80    FLT-GPU1-N0/1  -\n"
            "2     down    -           -      -       0.50    -              no light\n");
}

TEST_F(FleetctlTest, LinkStatusJsonAndYamlPrintTheResponse) {
  EXPECT_EQ(Run({"link", "status", "s1c0-n0", "-o", "json"}), kExitOk) << err();
  v1::GetLinkStatusResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  ASSERT_EQ(parsed.ports_size(), 2);
  EXPECT_EQ(parsed.ports(1).status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ(parsed.ports(1).detail(), "no light");
  EXPECT_EQ(Run({"link", "status", "s1c0-n0", "-o", "yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("ports:\n  - onic_serial: FLT-S1C0-N0\n"));
  EXPECT_THAT(out(), HasSubstr("status: LINK_STATUS_DOWN\n"));
}

TEST_F(FleetctlTest, LinkStatusUnknownOnicExitsOne) {
  EXPECT_EQ(Run({"link", "status", "s9c9-n9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: onic s9c9-n9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, LinkNeedsAKnownSubcommand) {
  EXPECT_EQ(Run({"link"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("link needs a subcommand: retrain ONIC PORT, or status ONIC"));
  EXPECT_EQ(Run({"link", "reset", "s1c0-n0"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown link subcommand 'reset'; subcommands: retrain, status"));
  EXPECT_EQ(Run({"link", "status"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("link status needs one ONIC, got 'status'"));
}

TEST_F(FleetctlTest, LinkHelpShowsBothSubcommands) {
  EXPECT_EQ(Run({"link", "--help"}), kExitOk);
  EXPECT_THAT(out(),
              StartsWith("Usage: fleetctl link (retrain ONIC PORT | status ONIC) [flags]\n"));
  EXPECT_THAT(out(), HasSubstr("  retrain ONIC PORT  Retrain one port (1 or 2)"));
  EXPECT_THAT(out(), HasSubstr("  status ONIC        Show both ports"));
  std::string link_help = out();
  EXPECT_EQ(Run({"link", "retrain", "--help"}), kExitOk);
  EXPECT_EQ(out(), link_help);
  EXPECT_EQ(Run({"help", "link"}), kExitOk);
  EXPECT_EQ(out(), link_help);
  EXPECT_TRUE(connected_to_.empty());
  EXPECT_TRUE(admin_.retrains().empty());
}

TEST_F(FleetctlTest, HealthPrintsComponentsAndOverall) {
  EXPECT_EQ(Run({"health"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "COMPONENT    STATE  DETAIL\n"
            "store        ok     -\n"
            "switch/ocs1  down   connection refused\n"
            "overall: degraded\n");
}

TEST_F(FleetctlTest, VersionPrintsClientAndServer) {
  EXPECT_EQ(Run({"version"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("fleetctl "));
  EXPECT_THAT(out(), HasSubstr("\nserver 0.1.0-test\n"));
}

TEST_F(FleetctlTest, VersionWithUnreachableServerStillExitsZero) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"version", "--server", nowhere}), kExitOk);
  EXPECT_THAT(out(), StartsWith("fleetctl "));
  EXPECT_THAT(out(), HasSubstr("server: unreachable (UNAVAILABLE: "));
}

TEST_F(FleetctlTest, DrainPortSendsTheTargetAndPrintsItsAllocations) {
  EXPECT_EQ(Run({"drain", "port", "ocs1/1", "--reason", "fiber swap"}), kExitOk) << err();
  EXPECT_EQ(out(), "drained port ocs1/1: fiber swap\nallocations still using it: a1\n");
  std::vector<v1::DrainRequest> drains = admin_.drains();
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0].target().switch_port().switch_id(), "ocs1");
  EXPECT_EQ(drains[0].target().switch_port().port(), 1u);
  EXPECT_FALSE(drains[0].evict());
  EXPECT_EQ(drains[0].reason(), "fiber swap");
}

TEST_F(FleetctlTest, DrainWithEvictSaysTheAllocationsMoved) {
  EXPECT_EQ(Run({"drain", "onic", "s1c0-n0", "--evict"}), kExitOk) << err();
  EXPECT_EQ(out(), "drained onic s1c0-n0\nallocation a1 moved: gpu3 -> gpu9\n");
  ASSERT_EQ(admin_.drains().size(), 1u);
  EXPECT_EQ(admin_.drains()[0].target().onic(), "s1c0-n0");
  EXPECT_TRUE(admin_.drains()[0].evict());
}

TEST_F(FleetctlTest, DrainOfUnusedHostSaysSo) {
  EXPECT_EQ(Run({"drain", "host", "server2"}), kExitOk) << err();
  EXPECT_EQ(out(), "drained host server2\nno allocation uses it\n");
  EXPECT_EQ(Run({"drain", "host", "server2", "-o", "json"}), kExitOk) << err();
  EXPECT_EQ(out(), "{}\n");
}

TEST_F(FleetctlTest, DrainOfUnknownOnicExitsOne) {
  EXPECT_EQ(Run({"drain", "onic", "s9c9-n9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: onic s9c9-n9 not found\n");
}

TEST_F(FleetctlTest, DrainArgumentsAreChecked) {
  for (const char* port : {"ocs1", "ocs1/", "/5", "ocs1/0", "ocs1/x"}) {
    EXPECT_EQ(Run({"drain", "port", port}), kExitUsage) << port;
    EXPECT_THAT(err(),
                HasSubstr(absl::StrCat("a port is SWITCH/PORT, such as ocs1/5; got '", port, "'")));
  }
  EXPECT_EQ(Run({"drain", "switch", "ocs1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown kind 'switch'; kinds: port, onic, host"));
  EXPECT_EQ(Run({"drain", "port"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("drain needs KIND and NAME"));
  EXPECT_EQ(Run({"undrain", "host", "server1", "--evict"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --evict"));
  EXPECT_TRUE(admin_.drains().empty());
  EXPECT_TRUE(admin_.undrains().empty());
}

TEST_F(FleetctlTest, UndrainSendsTheTarget) {
  EXPECT_EQ(Run({"undrain", "ports", "ocs1/5"}), kExitOk) << err();
  EXPECT_EQ(out(), "undrained port ocs1/5\n");
  ASSERT_EQ(admin_.undrains().size(), 1u);
  EXPECT_EQ(admin_.undrains()[0].target().switch_port().port(), 5u);
}

TEST_F(FleetctlTest, ReconcileDryRunReportsDriftAndChangesNothing) {
  EXPECT_EQ(Run({"reconcile", "--dry-run", "--remove-unknown"}), kExitOk) << err();
  const std::string report =
      "dry run: nothing was changed\n"
      "KIND     SWITCH  INGRESS  EGRESS  CIRCUIT  ACTION\n"
      "missing  ocs1    3        388     c2       reported\n"
      "unknown  ocs1    2        390     -        reported\n"
      "repaired 0, resumed 0 transactions, rolled back 0 transactions\n";
  EXPECT_EQ(out(), report);
  EXPECT_EQ(Run({"reconcile", "--dry-run", "--remove-unknown"}), kExitOk) << err();
  EXPECT_EQ(out(), report);
  ASSERT_EQ(admin_.reconciles().size(), 2u);
  EXPECT_TRUE(admin_.reconciles()[0].dry_run());
  EXPECT_EQ(admin_.reconciles()[0].unknown(), v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE);
}

TEST_F(FleetctlTest, ReconcileRepairsAndRemovesThenFindsNoDrift) {
  EXPECT_EQ(Run({"reconcile", "--switch", "ocs1", "--remove-unknown"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "KIND     SWITCH  INGRESS  EGRESS  CIRCUIT  ACTION\n"
            "missing  ocs1    3        388     c2       repaired\n"
            "unknown  ocs1    2        390     -        removed\n"
            "repaired 1, resumed 0 transactions, rolled back 0 transactions\n");
  EXPECT_EQ(Run({"reconcile", "--switch", "ocs1"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "no drift on ocs1\n"
            "repaired 0, resumed 0 transactions, rolled back 0 transactions\n");
  EXPECT_EQ(admin_.reconciles()[1].unknown(), v1::UNKNOWN_CROSS_CONNECT_POLICY_UNSPECIFIED);
}

TEST_F(FleetctlTest, ReconcileAdoptsUnknownAsJson) {
  EXPECT_EQ(Run({"reconcile", "--adopt-unknown", "-o", "json"}), kExitOk) << err();
  v1::ReconcileResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  ASSERT_EQ(parsed.drift_size(), 2);
  EXPECT_EQ(parsed.drift(1).kind(), v1::Drift::KIND_UNKNOWN);
  EXPECT_EQ(parsed.drift(1).action(), "adopted");
  EXPECT_EQ(parsed.repaired(), 1u);
}

TEST_F(FleetctlTest, ReconcileWithBothPoliciesIsUsageError) {
  EXPECT_EQ(Run({"reconcile", "--adopt-unknown", "--remove-unknown"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--adopt-unknown and --remove-unknown exclude each other"));
  EXPECT_THAT(err(), HasSubstr("fleetctl reconcile --help"));
  EXPECT_EQ(Run({"reconcile", "ocs1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unexpected argument 'ocs1'; a switch goes after --switch"));
  EXPECT_TRUE(admin_.reconciles().empty());
}

TEST_F(FleetctlTest, ReconcileOfUnknownSwitchExitsOne) {
  EXPECT_EQ(Run({"reconcile", "--switch", "ocs9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: switch ocs9 not found\n");
}

TEST_F(FleetctlTest, EventsWithoutFollowIsGetEvents) {
  ASSERT_EQ(Run({"get", "events", "--kind", "allocation", "--object", "a1"}), kExitOk) << err();
  const std::string listed = out();
  EXPECT_THAT(listed, HasSubstr("allocation a1 is ready"));
  EXPECT_THAT(listed, Not(HasSubstr("ocs1")));
  EXPECT_EQ(Run({"events", "--kind", "allocation", "--object", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), listed);
  // --object-kind, the old name, still works.
  EXPECT_EQ(Run({"events", "--object-kind", "allocation", "--object", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), listed);
  EXPECT_EQ(Run({"events", "--after", "2"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("switch ocs1 connected"));
  EXPECT_THAT(out(), Not(HasSubstr("allocation a1 is ready")));
}

TEST_F(FleetctlTest, EventsFollowPrintsRowsAsTheyArriveUntilTheStreamEnds) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"events", "--follow", "--after", "1"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is programming");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(out(),
            "SEQ     TIME                  PRINCIPAL           KIND                    OBJECT    "
            "                MESSAGE\n"
            "2       2023-11-14T22:13:21Z  fleetd              allocation.state        "
            "allocation/a1             allocation a1 is ready\n"
            "3       2023-11-14T22:13:22Z  fleetd              switch.connected        "
            "switch/ocs1               switch ocs1 connected over TL1\n"
            "4       2023-11-14T22:13:23Z  fleetd              allocation.state        "
            "allocation/a2             allocation a2 is programming\n");
}

TEST_F(FleetctlTest, EventsFollowJsonPrintsOneObjectPerLine) {
  int code = -1;
  std::thread fleetctl = RunInBackground(
      {"events", "--follow", "--after", "0", "--kind", "allocation", "-o", "json"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is ready");
  admin_.AppendEvent("switch.disconnected", "switch", "ocs1", "switch ocs1 disconnected");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  std::vector<std::string> lines = absl::StrSplit(out(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out();
  v1::Event first, second;
  ASSERT_TRUE(ParsesAs(lines[0], &first));
  ASSERT_TRUE(ParsesAs(lines[1], &second));
  EXPECT_EQ(first.object_id(), "a1");
  EXPECT_EQ(second.object_id(), "a2");
  EXPECT_EQ(second.sequence(), 4u);
}

// `events --follow` is for what happens next: the three events recorded before it are not
// replayed (the fake's watch sends what comes after the sequence asked for).
TEST_F(FleetctlTest, EventsFollowStartsFromNow) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"events", "--follow"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is programming");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(admin_.last_watch_after(), 3u);
  EXPECT_THAT(out(), HasSubstr("allocation a2 is programming"));
  EXPECT_THAT(out(), Not(HasSubstr("allocation a1 is ready")));
}

// The fake's events are one second apart from the clock's start: 1 at +0s, 2 at +1s, 3 at +2s.
TEST_F(FleetctlTest, EventsSinceStartsThatLongAgo) {
  clock_.Advance(absl::Seconds(10));
  ASSERT_EQ(Run({"events", "--since", "9s"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("inventory applied")));
  EXPECT_THAT(out(), HasSubstr("allocation a1 is ready"));
  EXPECT_THAT(out(), HasSubstr("switch ocs1 connected"));
  ASSERT_EQ(Run({"events", "--since", "1m"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("inventory applied"));
  ASSERT_EQ(Run({"events", "--since", "5s"}), kExitOk) << err();
  EXPECT_EQ(out(), "");
  EXPECT_EQ(err(), "no events found\n");

  int code = -1;
  std::thread fleetctl = RunInBackground({"events", "--follow", "--since", "8500ms"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(admin_.last_watch_after(), 2u);  // Event 3, at +2s, is the first since +1.5s.
  EXPECT_THAT(out(), HasSubstr("switch ocs1 connected"));
  EXPECT_THAT(out(), Not(HasSubstr("allocation a1 is ready")));
}

TEST_F(FleetctlTest, EventsSinceIsAPositiveDurationAndNotWithAfter) {
  EXPECT_EQ(Run({"events", "--since", "10"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--since: '10' is not a positive duration such as 90s, 10m"));
  EXPECT_EQ(Run({"events", "--since", "-5m"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--since: '-5m' is not a positive duration"));
  EXPECT_EQ(Run({"events", "--since", "5m", "--after", "2"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--after and --since exclude each other"));
  EXPECT_EQ(Run({"events", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("--kind VALUE"));
  EXPECT_THAT(out(), HasSubstr("(also --object-kind)"));
  EXPECT_THAT(out(), HasSubstr("with --follow, only events recorded from now on)\n"));
}

TEST_F(FleetctlTest, EventsRejectsNegativeAfterAndArguments) {
  EXPECT_EQ(Run({"events", "--follow", "--after", "-1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--after must be 0 or more, got -1"));
  EXPECT_THAT(err(), HasSubstr("fleetctl events --help"));
  EXPECT_EQ(Run({"events", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unexpected argument 'a1'"));
}

TEST_F(FleetctlTest, EventsFollowFromUnreachableServerExitsOne) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"events", "--follow", "--server", nowhere}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: UNAVAILABLE: "));
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, EventsFollowEndsCleanlyWhenStopped) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"events", "--follow"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  EXPECT_TRUE(stop_.Stop());
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTest, HealthColoursComponentsAndOverall) {
  EXPECT_EQ(Run({"health", "--color=always"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("store        \x1b[32mok\x1b[0m     -\n"));
  EXPECT_THAT(out(), HasSubstr("switch/ocs1  \x1b[31mdown\x1b[0m   connection refused\n"));
  EXPECT_THAT(out(), HasSubstr("overall: \x1b[33mdegraded\x1b[0m\n"));
}

TEST_F(FleetctlTest, VersionJsonHasClientAndServer) {
  EXPECT_EQ(Run({"version", "-o", "json"}), kExitOk) << err();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_FALSE(parsed.fields().at("client").string_value().empty());
  EXPECT_EQ(parsed.fields().at("server").string_value(), "0.1.0-test");
  EXPECT_EQ(Run({"version", "-o", "yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("server: 0.1.0-test\n"));
}

}  // namespace
}  // namespace fleet::cli
