// The tables of `get`, the followed event stream, link status and agents.
#include "controller/cli/tables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "controller/cli/object_text.h"
#include "controller/cli/output.h"

namespace fleet::cli {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
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
  EXPECT_EQ(
      lines[1],
      "s1c0-n0  server1-cpu0  -     -       -     ocs1/1→ocs1/385  ocs1/2→ocs1/386  enabled  -");
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
