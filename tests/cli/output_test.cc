#include "controller/cli/output.h"
#include "controller/cli/descriptions.h"
#include "controller/cli/object_text.h"
#include "controller/cli/tables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(TableTest, AlignsColumnsTwoSpacesApartWithUpperCaseHeader) {
  Table table({"id", "model", "cluster"});
  table.AddRow({"ocs1", "polatis-7000-384x384", "gen1"});
  table.AddRow({"ocs10", "p", "gen2"});
  EXPECT_EQ(table.Render(),
            "ID     MODEL                 CLUSTER\n"
            "ocs1   polatis-7000-384x384  gen1\n"
            "ocs10  p                     gen2\n");
}

TEST(TableTest, ShowsDashForEmptyAndMissingCells) {
  Table table({"id", "host", "chassis"});
  table.AddRow({"gpu3", "", "jbog1"});
  table.AddRow({"gpu4"});
  EXPECT_EQ(table.Render(),
            "ID    HOST  CHASSIS\n"
            "gpu3  -     jbog1\n"
            "gpu4  -     -\n");
}

TEST(TableTest, NoLineEndsInSpaces) {
  Table table({"a", "longer-header"});
  table.AddRow({"a-very-long-cell", "x"});
  for (const std::string& line : Lines(table.Render())) {
    EXPECT_NE(line.back(), ' ') << "'" << line << "'";
  }
}

TEST(TableTest, CountsMultiByteArrowAsOneColumn) {
  Table table({"port1", "admin"});
  table.AddRow({"ocs1/1→ocs1/385", "enabled"});
  // "ocs1/1→ocs1/385" is 15 columns wide (17 bytes); ADMIN starts two columns after it.
  EXPECT_EQ(table.Render(),
            "PORT1            ADMIN\n"
            "ocs1/1→ocs1/385  enabled\n");
}

TEST(TableTest, ShowsNewlineInsideCellAsSpace) {
  Table table({"message"});
  table.AddRow({"first\nsecond"});
  EXPECT_EQ(table.Render(), "MESSAGE\nfirst second\n");
}

TEST(TableTest, EmptyUntilARowIsAdded) {
  Table table({"id"});
  EXPECT_TRUE(table.empty());
  table.AddRow({"x"});
  EXPECT_FALSE(table.empty());
}

TEST(DescriptionTest, AlignsValuesAndIndentsListItems) {
  Description d;
  d.Field("ID", "s1c0-n0");
  d.Field("Serial", "");
  d.List("Ports", {"port 1\nfiber detail", "port 2"});
  d.List("Circuits", {});
  EXPECT_EQ(d.Render(),
            "ID:        s1c0-n0\n"
            "Serial:    -\n"
            "Ports:\n"
            "  port 1\n"
            "    fiber detail\n"
            "  port 2\n"
            "Circuits:  (none)\n");
}

TEST(JsonTest, UsesProtoFieldNamesAndLeavesOutDefaults) {
  v1::ListSwitchesResponse response;
  v1::Switch* sw = response.add_switches();
  sw->set_id("ocs1");
  sw->set_ingress_ports(384);
  sw->set_protocol(v1::SWITCH_PROTOCOL_TL1);
  absl::StatusOr<std::string> json = ToJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"switches\": ["));
  EXPECT_THAT(*json, HasSubstr("\"ingress_ports\": 384"));
  EXPECT_THAT(*json, HasSubstr("\"protocol\": \"SWITCH_PROTOCOL_TL1\""));
  EXPECT_THAT(*json, Not(HasSubstr("egress_ports")));
  EXPECT_EQ(json->back(), '\n');
  EXPECT_NE(json->at(json->size() - 2), '\n');
}

TEST(YamlTest, PrintsTheJsonAsBlockYaml) {
  v1::ListSwitchesResponse response;
  v1::Switch* sw = response.add_switches();
  sw->set_id("ocs1");
  sw->set_ingress_ports(384);
  sw->add_trunk_reserved_ports(289);
  sw->add_trunk_reserved_ports(290);
  absl::StatusOr<std::string> yaml = ToYaml(response);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml,
            "switches:\n"
            "  - id: ocs1\n"
            "    ingress_ports: 384\n"
            "    trunk_reserved_ports:\n"
            "      - 289\n"
            "      - 290\n");
}

TEST(YamlTest, KeepsStringsThatLookLikeOtherTypesQuoted) {
  v1::Host host;
  host.set_name("123");
  host.set_address("true");
  host.set_cluster("gen1");
  absl::StatusOr<std::string> yaml = ToYaml(host);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_THAT(*yaml, HasSubstr("name: \"123\""));
  EXPECT_THAT(*yaml, HasSubstr("address: \"true\""));
  EXPECT_THAT(*yaml, HasSubstr("cluster: gen1"));
}

TEST(YamlTest, EnumsAppearAsProtoJsonNames) {
  v1::Host host;
  host.set_admin_state(v1::ADMIN_STATE_DRAINED);
  absl::StatusOr<std::string> yaml = ToYaml(host);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml, "admin_state: ADMIN_STATE_DRAINED\n");
}

TEST(FormatTest, AgeIsPreciseWhileSmallAndCoarserAsItGrows) {
  EXPECT_EQ(FormatAge(absl::Seconds(5)), "5s");
  EXPECT_EQ(FormatAge(absl::Seconds(119)), "119s");
  EXPECT_EQ(FormatAge(absl::Minutes(3) + absl::Seconds(12)), "3m12s");
  EXPECT_EQ(FormatAge(absl::Minutes(3)), "3m");
  EXPECT_EQ(FormatAge(absl::Minutes(42) + absl::Seconds(30)), "42m");
  EXPECT_EQ(FormatAge(absl::Hours(2) + absl::Minutes(59)), "179m");
  EXPECT_EQ(FormatAge(absl::Hours(5) + absl::Minutes(30)), "5h30m");
  EXPECT_EQ(FormatAge(absl::Hours(2) + absl::Seconds(59)), "120m");
  EXPECT_EQ(FormatAge(absl::Hours(36) + absl::Minutes(5)), "36h");
  EXPECT_EQ(FormatAge(absl::Hours(24 * 3 + 4)), "3d4h");
  EXPECT_EQ(FormatAge(absl::Hours(24 * 5)), "5d");
  EXPECT_EQ(FormatAge(absl::Hours(24 * 90 + 7)), "90d");
  EXPECT_EQ(FormatAge(absl::Hours(24 * (365 * 2 + 10))), "2y10d");
  EXPECT_EQ(FormatAge(absl::Hours(24 * 365 * 9)), "9y");
  EXPECT_EQ(FormatAge(-absl::Seconds(3)), "0s");  // Clock skew between client and server.
}

TEST(FormatTest, TimeIsUtcRfc3339AndEmptyWhenUnset) {
  google::protobuf::Timestamp t;
  EXPECT_EQ(FormatTime(t), "");
  t.set_seconds(1'700'000'000);
  EXPECT_EQ(FormatTime(t), "2023-11-14T22:13:20Z");
}

TEST(FormatTest, PortRangesFoldRuns) {
  EXPECT_EQ(PortRanges({}), "");
  EXPECT_EQ(PortRanges({7}), "7");
  EXPECT_EQ(PortRanges({1, 2, 3, 7, 9, 10}), "1-3, 7, 9-10");
}

TEST(FormatTest, WiringNamesTheFiberEnd) {
  v1::SwitchPort port;
  EXPECT_EQ(WiringText(port), "");
  port.set_direction(v1::PORT_DIRECTION_INGRESS);
  port.mutable_wiring()->mutable_onic_port()->set_onic("s1c0-n0");
  port.mutable_wiring()->mutable_onic_port()->set_port(1);
  EXPECT_EQ(WiringText(port), "onic s1c0-n0/1 tx");
  port.set_direction(v1::PORT_DIRECTION_EGRESS);
  EXPECT_EQ(WiringText(port), "onic s1c0-n0/1 rx");
  port.mutable_wiring()->set_trunk("ocs1-ocs2-01");
  EXPECT_EQ(WiringText(port), "trunk ocs1-ocs2-01");
}

TEST(TablesTest, SwitchesShowSizeProtocolTextAndReservedCount) {
  v1::ListSwitchesResponse response;
  v1::Switch* sw = response.add_switches();
  sw->set_id("ocs1");
  sw->set_model("polatis");
  sw->set_ingress_ports(384);
  sw->set_egress_ports(384);
  sw->set_address("192.0.2.10");
  sw->set_protocol(v1::SWITCH_PROTOCOL_TL1);
  for (uint32_t p = 289; p <= 292; ++p) sw->add_trunk_reserved_ports(p);
  EXPECT_EQ(SwitchesTable(response).Render(),
            "ID    MODEL    SIZE     ADDRESS     PROTOCOL  CLUSTER  RESERVED\n"
            "ocs1  polatis  384x384  192.0.2.10  tl1       -        4\n");
}

TEST(TablesTest, OnicsShowEachPortsTxToRxFibers) {
  v1::ListOnicsResponse response;
  v1::Onic* onic = response.add_onics();
  onic->set_id("s1c0-n0");
  onic->set_device("server1-cpu0");
  onic->set_admin_state(v1::ADMIN_STATE_ENABLED);
  for (uint32_t i = 1; i <= 2; ++i) {
    v1::OnicPort* port = onic->add_ports();
    port->set_index(i);
    port->mutable_tx()->set_switch_id("ocs1");
    port->mutable_tx()->set_port(i);
    port->mutable_rx()->set_switch_id("ocs1");
    port->mutable_rx()->set_port(384 + i);
  }
  std::vector<std::string> lines = Lines(OnicsTable(response).Render());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "s1c0-n0  server1-cpu0  -     -       -     ocs1/1→ocs1/385  ocs1/2→ocs1/386  enabled");
}

TEST(TablesTest, AllocationsShowCountsAgeAndReason) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  v1::ListAllocationsResponse response;
  v1::Allocation* a = response.add_allocations();
  a->set_id("a1");
  a->set_tenant("tenant-a");
  a->set_state(v1::ALLOCATION_STATE_READY);
  a->add_members("gpu1");
  a->add_members("gpu2");
  a->add_circuits()->set_id("c1");
  a->mutable_created()->set_seconds(1'700'000'000 - 180);
  v1::Allocation* failed = response.add_allocations();
  failed->set_id("a2");
  failed->set_tenant("tenant-b");
  failed->set_name("ring");
  failed->set_state(v1::ALLOCATION_STATE_FAILED);
  failed->set_reason("switch ocs1 refused");
  EXPECT_EQ(AllocationsTable(response, now).Render(),
            "ID  TENANT    NAME  STATE   MEMBERS  CIRCUITS  AGE  REASON\n"
            "a1  tenant-a  -     ready   2        1         3m   -\n"
            "a2  tenant-b  ring  failed  0        0         -    switch ocs1 refused\n");
  // In colour only the state words change; the columns stay where they were.
  EXPECT_EQ(AllocationsTable(response, now).Render(/*color=*/true),
            "ID  TENANT    NAME  STATE   MEMBERS  CIRCUITS  AGE  REASON\n"
            "a1  tenant-a  -     \x1b[32mready\x1b[0m   2        1         3m   -\n"
            "a2  tenant-b  ring  \x1b[31mfailed\x1b[0m  0        0         -    switch ocs1 "
            "refused\n");
}

TEST(ColorTest, StatesAreGreenYellowOrRedByWhatTheyAsk) {
  EXPECT_EQ(ColorState("ready"), "\x1b[32mready\x1b[0m");
  EXPECT_EQ(ColorState("up"), "\x1b[32mup\x1b[0m");
  EXPECT_EQ(ColorState("degraded"), "\x1b[33mdegraded\x1b[0m");
  EXPECT_EQ(ColorState("drained"), "\x1b[33mdrained\x1b[0m");
  EXPECT_EQ(ColorState("failed"), "\x1b[31mfailed\x1b[0m");
  EXPECT_EQ(ColorState("down"), "\x1b[31mdown\x1b[0m");
  EXPECT_EQ(ColorState("pending"), "pending");
  EXPECT_EQ(ColorState("-"), "-");
}

TEST(ColorTest, OnlyStateColumnsAreColouredAndOnlyWhenAsked) {
  Table table({"name", "state", "note"});
  table.MarkStateColumn("state");
  table.AddRow({"failed", "failed", "failed"});
  EXPECT_EQ(table.Render(), "NAME    STATE   NOTE\nfailed  failed  failed\n");
  EXPECT_EQ(table.Render(true), "NAME    STATE   NOTE\nfailed  \x1b[31mfailed\x1b[0m  failed\n");
}

TEST(DescribeTest, AllocationListsMembersCircuitsAndStageTimings) {
  v1::Allocation a;
  a.set_id("a1");
  a.set_state(v1::ALLOCATION_STATE_READY);
  a.add_members("gpu1");
  a.add_phases("dp");
  a.add_phases("tp");
  a.set_active_phase("tp");
  v1::Circuit* c = a.add_circuits();
  c->set_id("c1");
  c->mutable_source()->set_onic("gpu1-n0");
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic("gpu2-n0");
  c->mutable_destination()->set_port(1);
  v1::CrossConnect* xc = c->add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(1);
  xc->set_egress(390);
  c->set_state(v1::CIRCUIT_STATE_ACTIVE);
  v1::StageTiming* t = a.add_stage_timings();
  t->set_stage("program");
  t->mutable_duration()->set_nanos(12'345'678);
  t = a.add_stage_timings();
  t->set_stage("retrain");
  t->mutable_duration()->set_seconds(2);
  std::string text = DescribeAllocation(a, {}, absl::FromUnixSeconds(1'700'000'000));
  EXPECT_THAT(text, HasSubstr("State:"));
  EXPECT_THAT(text, HasSubstr("  tp (active)\n"));
  EXPECT_THAT(text, HasSubstr("Members:\n  gpu1\n"));
  EXPECT_THAT(text, HasSubstr("  c1  gpu1-n0/1 → gpu2-n0/1  via ocs1:1→390  active\n"));
  EXPECT_THAT(text, HasSubstr("Stage timings:\n  program  12.346 ms\n  retrain  2000.000 ms\n"));
  EXPECT_THAT(text, HasSubstr("Events:         (none)\n"));
}

TEST(DescribeTest, AllocationShowsReasonLeaseAndEvents) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  v1::Allocation a;
  a.set_id("a2");
  a.set_state(v1::ALLOCATION_STATE_DEGRADED);
  a.set_reason("link gpu2-n0/1 did not train");
  a.mutable_lease_expires()->set_seconds(1'700'000'000 + 600);
  v1::Circuit* c = a.add_circuits();
  c->set_id("c7");
  c->set_state(v1::CIRCUIT_STATE_DEGRADED);
  c->set_reason("no light at gpu2-n0/1");
  v1::Event event;
  event.set_sequence(41);
  event.mutable_time()->set_seconds(1'700'000'000);
  event.set_principal("fleetd");
  event.set_kind("allocation.state");
  event.set_object_kind("allocation");
  event.set_object_id("a2");
  event.set_message("allocation a2 is degraded");
  std::string text = DescribeAllocation(a, {event}, now);
  EXPECT_THAT(text, HasSubstr("Reason:         link gpu2-n0/1 did not train\n"));
  EXPECT_THAT(text, HasSubstr("Lease expires:  2023-11-14T22:23:20Z (in 10m)\n"));
  EXPECT_THAT(text, HasSubstr("  c7  - → -  via -  degraded  (no light at gpu2-n0/1)\n"));
  EXPECT_THAT(text, HasSubstr("Events:\n"
                              "  SEQ  AGE  PRINCIPAL  KIND              OBJECT         MESSAGE\n"
                              "  41   0s   fleetd     allocation.state  "
                              "allocation/a2  allocation a2 is degraded\n"));
}

TEST(AllocationTextTest, ShowsIdentityMembersAndCircuits) {
  v1::Allocation a;
  a.set_id("a2");
  a.set_tenant("team-a");
  a.set_state(v1::ALLOCATION_STATE_PENDING);
  a.add_members("gpu1");
  v1::Circuit* c = a.add_circuits();
  c->set_id("c1");
  c->mutable_source()->set_onic("gpu1-n0");
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic("gpu2-n0");
  c->mutable_destination()->set_port(2);
  for (uint32_t hop = 0; hop < 2; ++hop) {
    v1::CrossConnect* xc = c->add_cross_connects();
    xc->set_switch_id(hop == 0 ? "ocs1" : "ocs2");
    xc->set_ingress(1 + hop);
    xc->set_egress(390 + hop);
  }
  c->add_trunks("ocs1-ocs2-01");
  c->set_state(v1::CIRCUIT_STATE_PLANNED);
  EXPECT_EQ(
      AllocationText(a),
      "ID:      a2\n"
      "Tenant:  team-a\n"
      "Name:    -\n"
      "State:   pending\n"
      "Reason:  -\n"
      "Members:\n"
      "  gpu1\n"
      "Circuits:\n"
      "  c1  gpu1-n0/1 → gpu2-n0/2  via ocs1:1→390,ocs2:2→391 trunks ocs1-ocs2-01  planned\n");
}

TEST(AllocationTextTest, StateLineCarriesTheReason) {
  v1::Allocation a;
  a.set_id("a2");
  a.set_state(v1::ALLOCATION_STATE_PROGRAMMING);
  EXPECT_EQ(AllocationStateLine(a), "a2 programming");
  a.set_state(v1::ALLOCATION_STATE_FAILED);
  a.set_reason("switch ocs1 refused");
  EXPECT_EQ(AllocationStateLine(a), "a2 failed switch ocs1 refused");
}

TEST(AllocationTextTest, LeaseLineShowsTimeUntilExpiry) {
  google::protobuf::Timestamp expires;
  EXPECT_EQ(LeaseLine("a1", expires, absl::FromUnixSeconds(1'700'000'000)), "a1 lease expires -");
  expires.set_seconds(1'700'000'000 + 300);
  EXPECT_EQ(LeaseLine("a1", expires, absl::FromUnixSeconds(1'700'000'000)),
            "a1 lease expires 2023-11-14T22:18:20Z (in 5m)");
}

TEST(PlanTextTest, ShowsMembersCountsAndCrossConnects) {
  v1::Plan plan;
  plan.add_members("gpu1");
  plan.add_members("gpu2");
  v1::Circuit* c = plan.add_circuits();
  c->mutable_source()->set_onic("gpu1-n0");
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic("gpu2-n0");
  c->mutable_destination()->set_port(1);
  v1::CrossConnect* xc = c->add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(49);
  xc->set_egress(435);
  *plan.add_add() = *xc;
  *plan.add_ports_used() = c->source();
  EXPECT_EQ(PlanText(plan),
            "members: gpu1, gpu2\n"
            "1 circuits, 1 cross-connects to make, 0 to remove, 1 O-NIC ports\n"
            "SOURCE     DESTINATION  CROSS-CONNECTS\n"
            "gpu1-n0/1  gpu2-n0/1    ocs1:49→435\n");
}

TEST(EventsStreamTest, RowsLineUpWithTheHeaderAndLongCellsPushRight) {
  v1::Event event;
  event.set_sequence(7);
  event.mutable_time()->set_seconds(1'700'000'000);
  event.set_principal("operator:alice");
  event.set_kind("port.drained");
  event.set_object_kind("port");
  event.set_object_id("ocs1/5");
  event.set_message("port ocs1/5 drained\nfiber swap");
  EXPECT_EQ(EventsStreamHeader(),
            "SEQ     TIME                  PRINCIPAL           KIND                    "
            "OBJECT                    MESSAGE\n");
  EXPECT_EQ(EventsStreamRow(event),
            "7       2023-11-14T22:13:20Z  operator:alice      port.drained            "
            "port/ocs1/5               port ocs1/5 drained fiber swap\n");
  event.set_principal("operator:a-very-long-principal");
  event.clear_message();
  EXPECT_EQ(EventsStreamRow(event),
            "7       2023-11-14T22:13:20Z  operator:a-very-long-principal  port.drained            "
            "port/ocs1/5               -\n");
}

TEST(JsonTest, StreamedJsonIsOneLinePerMessage) {
  v1::Event event;
  event.set_sequence(3);
  event.set_kind("allocation.state");
  absl::StatusOr<std::string> json = FormatStreamedMessage(OutputFormat::kJson, event);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, "{\"sequence\":\"3\",\"kind\":\"allocation.state\"}\n");
  absl::StatusOr<std::string> yaml = FormatStreamedMessage(OutputFormat::kYaml, event);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml, "---\nsequence: \"3\"\nkind: allocation.state\n");
}

TEST(DrainTextTest, NamesTheTargetAndTheAllocationsUsingIt) {
  v1::DrainRequest request;
  request.mutable_target()->mutable_switch_port()->set_switch_id("ocs1");
  request.mutable_target()->mutable_switch_port()->set_port(5);
  v1::DrainResponse response;
  EXPECT_EQ(DrainText(request, response), "drained port ocs1/5\nno allocation uses it\n");
  response.add_affected_allocations("a1");
  response.add_affected_allocations("a4");
  EXPECT_EQ(DrainText(request, response),
            "drained port ocs1/5\nallocations still using it: a1, a4\n");
  request.set_evict(true);
  request.set_reason("fiber swap");
  EXPECT_EQ(DrainText(request, response),
            "drained port ocs1/5: fiber swap\nallocations failed: a1, a4\n");
  v1::DrainTarget host;
  host.set_host("server1");
  EXPECT_EQ(DrainTargetText(host), "host server1");
  EXPECT_EQ(DrainTargetText(v1::DrainTarget()), "nothing");
}

TEST(ReconcileTextTest, ShowsDriftAndCounts) {
  v1::ReconcileRequest request;
  v1::ReconcileResponse response;
  response.set_resumed_transactions(1);
  response.set_rolled_back_transactions(2);
  EXPECT_EQ(ReconcileText(request, response),
            "no drift\nrepaired 0, resumed 1 transactions, rolled back 2 transactions\n");
  v1::Drift* drift = response.add_drift();
  drift->set_kind(v1::Drift::KIND_WRONG);
  drift->mutable_cross_connect()->set_switch_id("ocs2");
  drift->mutable_cross_connect()->set_ingress(4);
  drift->mutable_cross_connect()->set_egress(400);
  drift->set_circuit_id("c9");
  drift->set_action("repaired");
  response.set_repaired(1);
  request.set_dry_run(true);
  EXPECT_EQ(ReconcileText(request, response),
            "dry run: nothing was changed\n"
            "KIND   SWITCH  INGRESS  EGRESS  CIRCUIT  ACTION\n"
            "wrong  ocs2    4        400     c9       repaired\n"
            "repaired 1, resumed 1 transactions, rolled back 2 transactions\n");
}

TEST(LinkStateLineTest, NamesOtherStatesWithTheirDetail) {
  v1::LinkState state;
  state.set_port(2);
  state.set_status(v1::LINK_STATUS_QUIESCED);
  state.set_rx_power_dbm(-3.0);
  state.set_detail("out of service for c7");
  EXPECT_EQ(LinkStateLine("gpu3-n0", state), "gpu3-n0 port 2: quiesced: out of service for c7");
  state.set_status(v1::LINK_STATUS_TRAINING);
  state.clear_detail();
  EXPECT_EQ(LinkStateLine("gpu3-n0", state), "gpu3-n0 port 2: training");
  state.set_status(v1::LINK_STATUS_UNSPECIFIED);
  EXPECT_EQ(LinkStateLine("gpu3-n0", state), "gpu3-n0 port 2: unknown");
}

TEST(LinkStateLineTest, UpLinkLeavesOutWhatIsNotKnown) {
  v1::LinkState state;
  state.set_port(1);
  state.set_status(v1::LINK_STATUS_UP);
  state.set_rx_power_dbm(kNoPowerReadingDbm);
  EXPECT_EQ(LinkStateLine("s1c0-n0", state), "s1c0-n0 port 1: up");
  state.set_peer_seen("FLT-G3-0/1");
  EXPECT_EQ(LinkStateLine("s1c0-n0", state), "s1c0-n0 port 1: up (peer FLT-G3-0/1)");
}

TEST(LinkStatusTableTest, ShowsStatusWordAndBlankPowerWithoutReading) {
  v1::GetLinkStatusResponse response;
  v1::LinkState* state = response.add_ports();
  state->set_port(1);
  state->set_status(v1::LINK_STATUS_QUIESCED);
  state->set_rx_power_dbm(kNoPowerReadingDbm);
  state->set_tx_power_dbm(-0.25);
  EXPECT_EQ(LinkStatusTable(response).Render(),
            "PORT  STATUS    SPEED  WIDTH  RX-DBM  TX-DBM  PEER  DETAIL\n"
            "1     quiesced  -      -      -       -0.25   -     -\n");
}

TEST(AgentsTableTest, ShowsDashForNoHeartbeatAndNoMismatches) {
  v1::ListAgentsResponse response;
  v1::Agent* agent = response.add_agents();
  agent->set_host("server3");
  EXPECT_EQ(AgentsTable(response, absl::FromUnixSeconds(1'700'000'000)).Render(),
            "HOST     CONNECTED  BACKEND  VERSION  ONICS  LAST-HEARTBEAT  MISMATCHES\n"
            "server3  no         -        -        0      -               -\n");
}

}  // namespace
}  // namespace fleet::cli
