// fleetctl's formats and layouts: tables, descriptions, JSON and YAML, ages, times, colour.
#include "controller/cli/output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "fleet/v1/common.pb.h"
#include "fleet/v1/inventory.pb.h"

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

}  // namespace
}  // namespace fleet::cli
