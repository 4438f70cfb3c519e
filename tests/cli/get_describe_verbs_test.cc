// `fleetctl get` (with --watch) and `fleetctl describe`, end to end against the fakes.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST_F(FleetctlTest, GetSwitchesPrintsTable) {
  EXPECT_EQ(Run({"get", "switches"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID    MODEL                 SIZE     ADDRESS     PROTOCOL  CLUSTER  RESERVED\n"
            "ocs1  polatis-7000-384x384  384x384  192.0.2.10  tl1       gen1     1\n");
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTest, GetAcceptsSingularKind) {
  EXPECT_EQ(Run({"get", "switch"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("ocs1"));
}

TEST_F(FleetctlTest, GetSwitchesJsonPrintsTheListResponse) {
  EXPECT_EQ(Run({"get", "switches", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("{\n \"switches\": [\n"));
  EXPECT_THAT(out(), HasSubstr("\"ingress_ports\": 384"));
  EXPECT_THAT(out(), HasSubstr("\"protocol\": \"SWITCH_PROTOCOL_TL1\""));
}

TEST_F(FleetctlTest, GetSwitchesYamlPrintsBlockYaml) {
  EXPECT_EQ(Run({"get", "switches", "--output=yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("switches:\n  - id: ocs1\n"));
  EXPECT_THAT(out(), HasSubstr("    protocol: SWITCH_PROTOCOL_TL1\n"));
}

TEST_F(FleetctlTest, GetPortsPassesSwitchFilterAndShowsWiring) {
  EXPECT_EQ(Run({"get", "ports", "--switch", "ocs1"}), kExitOk) << err();
  EXPECT_EQ(inventory_.last_port_filter(), "ocs1");
  // USED-BY: the allocation of the port's circuit; WHY: a drain's reason, then the health's.
  EXPECT_EQ(out(),
            "SWITCH  PORT  DIR      ADMIN    OPER      RESERVED  WIRED-TO           CIRCUIT  "
            "USED-BY  WHY\n"
            "ocs1    1     ingress  enabled  up        -         onic s1c0-n0/1 tx  c1       "
            "a1       -\n"
            "ocs1    5     ingress  drained  degraded  -         -                  -        "
            "-        drained: fiber swap; -31.20 dBm, below -20.00 dBm\n");
}

TEST_F(FleetctlTest, GetDevicesFiltersByKind) {
  EXPECT_EQ(Run({"get", "devices", "--kind", "gpu"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID    KIND  HOST  CHASSIS  MODEL  ONICS  ADMIN    HEALTH  SPARE  USED-BY\n"
            "gpu3  gpu   -     jbog1    -      1      enabled  -       -      a1\n");
  EXPECT_EQ(Run({"get", "devices", "--kind", "nvme"}), kExitOk) << err();
  EXPECT_EQ(out(), "");
  EXPECT_EQ(err(), "no devices found\n");
}

TEST_F(FleetctlTest, GetOnicsShowsTheAllocationUsingEach) {
  EXPECT_EQ(Run({"get", "onics"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID       DEVICE  HOST  SERIAL    PCIE          PORT1            PORT2            "
            "ADMIN    USED-BY\n"
            "gpu3-n0  gpu3    -     FLT-G3-0  0000:17:00.0  ocs1/3→ocs1/387  ocs1/4→ocs1/388  "
            "enabled  a1\n");
}

TEST_F(FleetctlTest, GetAllocationsAllListsTheReleasedToo) {
  topology_.SetState("a1", v1::ALLOCATION_STATE_RELEASED);
  EXPECT_EQ(Run({"get", "allocations"}), kExitOk) << err();
  EXPECT_EQ(err(), "no allocations found\n");
  EXPECT_EQ(Run({"get", "allocations", "--all"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID  TENANT    NAME   STATE     MEMBERS  CIRCUITS  AGE  REASON\n"
            "a1  tenant-a  train  released  2        0         3m   -\n");
  EXPECT_EQ(Run({"get", "devices", "--all"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--all does not apply to devices"));
}

TEST_F(FleetctlTest, GetDevicesRejectsUnknownDeviceKind) {
  EXPECT_EQ(Run({"get", "devices", "--kind", "tpu"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown device kind 'tpu'; kinds: cpu, gpu, nvme, fpga, other"));
}

TEST_F(FleetctlTest, GetCircuitsShowsCrossConnects) {
  EXPECT_EQ(Run({"get", "circuits"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID  ALLOCATION  SOURCE     DESTINATION  CROSS-CONNECTS  STATE   PHASE\n"
            "c1  a1          s1c0-n0/1  gpu3-n0/1    ocs1:1→387      active  -\n");
}

TEST_F(FleetctlTest, GetAllocationsShowsAgeFromTheClock) {
  EXPECT_EQ(Run({"get", "allocations", "--tenant", "tenant-a"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID  TENANT    NAME   STATE  MEMBERS  CIRCUITS  AGE  REASON\n"
            "a1  tenant-a  train  ready  2        0         3m   -\n");
}

TEST_F(FleetctlTest, GetUnknownKindIsUsageError) {
  EXPECT_EQ(Run({"get", "switchs"}), kExitUsage);
  EXPECT_EQ(out(), "");
  EXPECT_THAT(err(), HasSubstr("error: unknown kind 'switchs'; kinds: switches, ports, hosts, "
                               "agents, devices, onics, trunks, circuits, allocations, events\n"));
  EXPECT_THAT(err(), HasSubstr("fleetctl get --help"));
}

TEST_F(FleetctlTest, GetRejectsFilterTheKindDoesNotTake) {
  EXPECT_EQ(Run({"get", "switches", "--host", "server1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--host does not apply to switches"));
}

TEST_F(FleetctlTest, DescribeMissingSwitchIsNotFound) {
  EXPECT_EQ(Run({"describe", "switch", "ocs9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: switch ocs9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, DescribeSwitchSummarisesItsPorts) {
  EXPECT_EQ(Run({"describe", "switch", "ocs1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Size:             384x384 (ingress 1-384, egress 385-768)\n"));
  EXPECT_THAT(out(), HasSubstr("Trunk reserved:   289\n"));
  EXPECT_THAT(out(), HasSubstr("In circuits:      1: 1\n"));
  EXPECT_THAT(out(), HasSubstr("Drained ports:    5\n"));
  EXPECT_THAT(out(), HasSubstr("Degraded ports:   5\n"));
  // The credentials fleetd logs in with, not the inventory's unread `credentials:` note.
  EXPECT_THAT(out(), HasSubstr("Credentials:      /etc/fleet/switch-credentials.yaml (fleetd's "
                               "switch_credentials)\n"));
  EXPECT_THAT(out(), Not(HasSubstr("/etc/fleet/credentials/ocs1.yaml")));
}

TEST_F(FleetctlTest, DescribeOnicShowsPortsFibersAndCircuits) {
  EXPECT_EQ(Run({"describe", "onic", "gpu3-n0"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Serial:   FLT-G3-0\n"));
  EXPECT_THAT(out(), HasSubstr("  port 1  tx ocs1/3  rx ocs1/387  admin enabled  oper up\n"));
  EXPECT_THAT(out(), HasSubstr("Circuits:\n  c1  s1c0-n0/1 → gpu3-n0/1  via ocs1:1→387  active\n"));
}

TEST_F(FleetctlTest, DescribeJsonPrintsTheObjectOnly) {
  EXPECT_EQ(Run({"describe", "onic", "gpu3-n0", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("{\n \"id\": \"gpu3-n0\",\n"));
}

TEST_F(FleetctlTest, DescribeNeedsKindAndName) {
  EXPECT_EQ(Run({"describe", "switch"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("describe needs KIND and NAME, got 'switch'"));
}

TEST_F(FleetctlTest, GetAgentsPrintsTable) {
  EXPECT_EQ(Run({"get", "agents"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "HOST     CONNECTED  BACKEND     VERSION  ONICS  LAST-HEARTBEAT  MISMATCHES\n"
            "server1  yes        emulated    0.2.0    2      2s              -\n"
            "server2  no         pcie-sysfs  0.1.9    1      3h              2\n");
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTest, GetAgentsJsonParsesBackToTheListResponse) {
  EXPECT_EQ(Run({"get", "agent", "-o", "json"}), kExitOk) << err();
  v1::ListAgentsResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  ASSERT_EQ(parsed.agents_size(), 2);
  EXPECT_EQ(parsed.agents(0).host(), "server1");
  EXPECT_TRUE(parsed.agents(0).connected());
  EXPECT_EQ(parsed.agents(0).onic_serials_size(), 2);
  EXPECT_EQ(parsed.agents(1).inventory_mismatches_size(), 2);
  EXPECT_EQ(parsed.agents(1).last_heartbeat().seconds(),
            absl::ToUnixSeconds(clock_.Now() - absl::Hours(3)));
}

TEST_F(FleetctlTest, GetAgentsWithoutAgentRegistryFails) {
  inventory_.set_agents_unimplemented();
  EXPECT_EQ(Run({"get", "agents"}), kExitFailed);
  EXPECT_EQ(err(), "error: UNIMPLEMENTED: no agent registry\n");
}

TEST_F(FleetctlTest, DescribeAgentShowsEachMismatchOnItsOwnLine) {
  EXPECT_EQ(Run({"describe", "agent", "server2"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "Host:            server2\n"
            "Connected:       no\n"
            "Last heartbeat:  2023-11-14T19:13:20Z (3h ago)\n"
            "Backend:         pcie-sysfs\n"
            "Version:         0.1.9\n"
            "Capabilities:    (none)\n"
            "O-NIC serials:\n"
            "  FLT-S2C0-N0\n"
            "Inventory mismatches:\n"
            "  onic FLT-S2C0-N1 is in the inventory, not on the host\n"
            "  onic FLT-ZZ-9 is on the host, not in the inventory\n");
}

TEST_F(FleetctlTest, DescribeConnectedAgentShowsSince) {
  EXPECT_EQ(Run({"describe", "agent", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Connected:             yes\n"
                               "Connected since:       2023-11-14T22:08:20Z (5m ago)\n"));
  EXPECT_THAT(out(), HasSubstr("O-NIC serials:\n  FLT-S1C0-N0\n  FLT-G3-0\n"));
  EXPECT_THAT(out(), HasSubstr("Inventory mismatches:  (none)\n"));
  EXPECT_THAT(out(), HasSubstr("Capabilities:          armed-retrain\n"));
}

TEST_F(FleetctlTest, DescribeAgentJsonPrintsTheAgent) {
  EXPECT_EQ(Run({"describe", "agent", "server2", "-o", "json"}), kExitOk) << err();
  v1::Agent parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.host(), "server2");
  EXPECT_EQ(parsed.backend(), "pcie-sysfs");
}

TEST_F(FleetctlTest, DescribeAbsentAgentIsNotFound) {
  EXPECT_EQ(Run({"describe", "agent", "server9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: agent server9 has never connected\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, DescribeHostShowsItsAgent) {
  EXPECT_EQ(Run({"describe", "host", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Agent:    connected since 2023-11-14T22:08:20Z; emulated backend, "
                               "version 0.2.0\n"));
}

TEST_F(FleetctlTest, DescribeHostWithoutAgentRegistryStillWorks) {
  inventory_.set_agents_unimplemented();
  EXPECT_EQ(Run({"describe", "host", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Agent:    never registered\n"));
  EXPECT_THAT(out(), HasSubstr("Devices:\n  server1-cpu0  cpu"));
}

// a1 attaches gpu3 to server1 (and holds server1's CPU for it).
TEST_F(FleetctlTest, DescribeHostListsTheDevicesAttachedToIt) {
  EXPECT_EQ(Run({"describe", "host", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Devices:\n  server1-cpu0  cpu  -  O-NICs -  used by a1\n"
                               "Attached devices:\n  gpu3  allocation a1\n"));
  topology_.SetState("a1", v1::ALLOCATION_STATE_RELEASED);
  EXPECT_EQ(Run({"describe", "host", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("Attached")));
}

TEST_F(FleetctlTest, DescribeDeviceAndOnicSayWhoUsesThem) {
  EXPECT_EQ(Run({"describe", "device", "gpu3"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Used by:  a1\n"));
  EXPECT_EQ(Run({"describe", "onic", "gpu3-n0"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Used by:  a1\n"));
}

TEST_F(FleetctlTest, GetAndDescribeHelpMentionAgents) {
  EXPECT_EQ(Run({"get", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("\n  agents  "));
  EXPECT_EQ(Run({"describe", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("Kinds: switch, host, agent, device, onic, allocation"));
}

TEST_F(FleetctlTest, DescribeAllocationShowsItsEvents) {
  EXPECT_EQ(Run({"describe", "allocation", "a1"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("ID:             a1\n"
                                "Tenant:         tenant-a\n"
                                "Name:           train\n"
                                "State:          ready\n"
                                "Reason:         -\n"));
  EXPECT_THAT(out(), HasSubstr("Lease expires:  2023-11-14T22:15:20Z (in 2m)\n"));
  EXPECT_THAT(out(), HasSubstr("Members:\n  server1-cpu0\n  gpu3\n"));
  EXPECT_THAT(out(), HasSubstr("Events:\n"
                               "  SEQ  AGE  PRINCIPAL  KIND              "
                               "OBJECT         MESSAGE\n"
                               "  2    0s   fleetd     allocation.state  "
                               "allocation/a1  allocation a1 is ready\n"));
  EXPECT_THAT(out(), Not(HasSubstr("switch ocs1 connected")));
}

TEST_F(FleetctlTest, DescribeAllocationJsonPrintsTheAllocationOnly) {
  EXPECT_EQ(Run({"describe", "allocation", "a1", "-o", "json"}), kExitOk) << err();
  v1::Allocation parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.id(), "a1");
  EXPECT_EQ(parsed.members_size(), 2);
  EXPECT_EQ(Run({"describe", "allocation", "a9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a9 not found\n");
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST_F(FleetctlTest, GetWatchReprintsTheListWhenItChangesUntilTheStreamEnds) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "allocations", "--watch"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  // An event that leaves the list as it was prints nothing; the next one, after a1 degraded,
  // prints the list again.
  admin_.AppendEvent("switch.connected", "switch", "ocs1", "switch ocs1 connected again");
  topology_.SetState("a1", v1::ALLOCATION_STATE_DEGRADED, "link gpu3-n0/1 did not train");
  admin_.AppendEvent("allocation.state", "allocation", "a1", "allocation a1 is degraded");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(
      out(),
      "# allocations at 2023-11-14T22:13:20Z\n"
      "ID  TENANT    NAME   STATE  MEMBERS  CIRCUITS  AGE  REASON\n"
      "a1  tenant-a  train  ready  2        0         3m   -\n"
      "\n"
      "# allocations at 2023-11-14T22:13:20Z\n"
      "ID  TENANT    NAME   STATE     MEMBERS  CIRCUITS  AGE  REASON\n"
      "a1  tenant-a  train  degraded  2        0         3m   link gpu3-n0/1 did not train\n");
}

// A keepalive moves a1's lease, which the table does not show: the list printed would be the
// one on screen, so it is not printed again; an age that grew is no change either.
TEST_F(FleetctlTest, GetWatchPrintsOnlyWhenWhatTheTableShowsChanged) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "allocations", "--watch"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  v1::KeepAliveRequest keepalive;
  keepalive.set_id("a1");
  v1::KeepAliveResponse renewed;
  ASSERT_TRUE(topology_.KeepAlive(nullptr, &keepalive, &renewed).ok());
  admin_.AppendEvent("allocation.lease", "allocation", "a1", "allocation a1 lease renewed");
  // The list is asked for once before the watch and once per event: each seen before a1 moves.
  ASSERT_TRUE(topology_.AwaitLists(2));
  clock_.Advance(absl::Seconds(1));
  admin_.AppendEvent("agent.heartbeat", "agent", "server1", "nothing to see");
  ASSERT_TRUE(topology_.AwaitLists(3));
  topology_.SetState("a1", v1::ALLOCATION_STATE_DEGRADED, "link gpu3-n0/1 did not train");
  admin_.AppendEvent("allocation.state", "allocation", "a1", "allocation a1 is degraded");
  // Ctrl-C once that list is in: its unary call completes and is printed before the stream
  // ends.
  ASSERT_TRUE(topology_.AwaitLists(4));
  EXPECT_TRUE(stop_.Stop());
  fleetctl.join();
  ASSERT_EQ(code, kExitOk) << err();
  std::vector<std::string> headers;
  for (const std::string& line : Lines(out())) {
    if (line.rfind("# allocations at", 0) == 0) headers.push_back(line);
  }
  EXPECT_EQ(headers.size(), 2u) << out();
  EXPECT_THAT(out(), HasSubstr("degraded"));
}

TEST_F(FleetctlTest, GetWatchFollowsFromTheNewestEventWithoutReplay) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "hosts", "-w", "-o", "json"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  // The three events recorded before the watch are not replayed: it follows from the newest.
  EXPECT_EQ(admin_.last_watch_after(), 3u);
  std::vector<std::string> lines = Lines(out());
  ASSERT_EQ(lines.size(), 1u) << out();
  v1::ListHostsResponse parsed;
  ASSERT_TRUE(ParsesAs(lines[0], &parsed));
  EXPECT_EQ(parsed.hosts(0).name(), "server1");
}

TEST_F(FleetctlTest, GetWatchJsonPrintsOneListPerLine) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "allocations", "--watch", "-o", "json"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  topology_.SetState("a1", v1::ALLOCATION_STATE_FAILED, "switch ocs1 refused");
  admin_.AppendEvent("allocation.state", "allocation", "a1", "allocation a1 failed");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  std::vector<std::string> lines = Lines(out());
  ASSERT_EQ(lines.size(), 2u) << out();
  v1::ListAllocationsResponse first, second;
  ASSERT_TRUE(ParsesAs(lines[0], &first));
  ASSERT_TRUE(ParsesAs(lines[1], &second));
  EXPECT_EQ(first.allocations(0).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(second.allocations(0).state(), v1::ALLOCATION_STATE_FAILED);
  // Raw timestamps stay in the JSON.
  EXPECT_THAT(lines[1], HasSubstr("\"created\":\"2023-11-14T22:10:20Z\""));
}

TEST_F(FleetctlTest, GetWatchEndsCleanlyWhenStopped) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "switches", "--watch"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  EXPECT_TRUE(stop_.Stop());
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(err(), "");
  EXPECT_THAT(out(), StartsWith("# switches at 2023-11-14T22:13:20Z\nID    MODEL"));
  // Nothing left to stop: main() lets the signal end the process.
  EXPECT_FALSE(stop_.Stop());
}

TEST_F(FleetctlTest, GetEventsWatchFollowsTheLog) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"get", "events", "--watch", "--kind", "allocation"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is programming");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("SEQ     TIME "));
  EXPECT_THAT(out(), HasSubstr("allocation a1 is ready"));
  EXPECT_THAT(out(), HasSubstr("allocation a2 is programming"));
  EXPECT_THAT(out(), Not(HasSubstr("ocs1")));
}

TEST_F(FleetctlTest, GetWatchArgumentsAreChecked) {
  EXPECT_EQ(Run({"get", "events", "--watch", "--limit", "5"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--limit does not apply with --watch"));
  EXPECT_EQ(Run({"get", "widgets", "--watch"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown kind 'widgets'"));
  EXPECT_EQ(Run({"describe", "switch", "ocs1", "--watch"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --watch"));
}

TEST_F(FleetctlTest, GetWatchOfUnreachableServerExitsOne) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"get", "hosts", "--watch", "--server", nowhere, "--timeout", "1"}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: UNAVAILABLE: "));
  EXPECT_EQ(out(), "");
}

}  // namespace
}  // namespace fleet::cli
