#include "controller/inventory/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/build_id.h"
#include "common/clock.h"
#include "controller/inventory/field_diff.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/scratch.h"

namespace fleet::inventory {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const char* const kSwitch = R"(
switches:
  - id: ocs1
    model: polatis-7000-8x8
    size: 8x8
    address: 127.0.0.1
    protocol: tl1
    trunk_reserved: ["7-8", "15-16"]
)";

// A small valid site: one 8x8 switch, one host with a CPU of one O-NIC, one GPU.
std::string SmallSite() {
  return absl::StrCat("site: test\n", kSwitch, R"(
hosts:
  - {name: h1}
devices:
  - id: h1-cpu0
    kind: cpu
    host: h1
    onics:
      - id: n1
        serial: S1
        ports:
          - {tx: ocs1/1, rx: ocs1/9}
          - {tx: ocs1/2, rx: ocs1/10}
  - id: gpu1
    kind: gpu
    onics:
      - id: n2
        serial: S2
        ports:
          - {tx: ocs1/3, rx: ocs1/11}
          - {tx: ocs1/4, rx: ocs1/12}
)");
}

v1::Inventory MustParse(const std::string& text) {
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(text, "test.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : v1::Inventory();
}

// Problems ValidateInventory finds after replacing `from` with `to` in the small site.
std::vector<std::string> ProblemsWith(const std::string& from, const std::string& to) {
  std::string text = SmallSite();
  EXPECT_THAT(text, HasSubstr(from));
  return ValidateInventory(MustParse(absl::StrReplaceAll(text, {{from, to}})));
}

TEST(ParseInventoryTest, SmallSiteIsValid) {
  v1::Inventory site = MustParse(SmallSite());
  EXPECT_EQ(site.site(), "test");
  ASSERT_THAT(site.switches(), SizeIs(1));
  EXPECT_EQ(site.switches(0).ingress_ports(), 8u);
  EXPECT_EQ(site.switches(0).egress_ports(), 8u);
  EXPECT_EQ(site.switches(0).protocol(), v1::SWITCH_PROTOCOL_TL1);
  EXPECT_THAT(site.switches(0).trunk_reserved_ports(), ::testing::ElementsAre(7, 8, 15, 16));
  ASSERT_THAT(site.onics(), SizeIs(2));
  EXPECT_EQ(site.onics(0).device(), "h1-cpu0");
  EXPECT_EQ(site.onics(0).ports(1).index(), 2u);
  EXPECT_EQ(site.onics(0).ports(1).rx().port(), 10u);
  EXPECT_THAT(ValidateInventory(site), IsEmpty());
}

TEST(ParseInventoryTest, ADevicesPcieIdentityIsHexAndEachPartOptional) {
  v1::Inventory site = MustParse(
      absl::StrReplaceAll(SmallSite(), {{"kind: gpu",
                                         "kind: gpu\n    pcie: {vendor: 0x10de, device: 20b5, dsn: "
                                         "ff-ee-00-00-00-00-00-01}"}}));
  ASSERT_THAT(site.devices(), SizeIs(2));
  EXPECT_FALSE(site.devices(0).has_pcie());
  EXPECT_EQ(site.devices(1).pcie().vendor(), 0x10deu);
  EXPECT_EQ(site.devices(1).pcie().device(), 0x20b5u);
  EXPECT_EQ(site.devices(1).pcie().dsn(), 0xffee000000000001ULL);
  site = MustParse(absl::StrReplaceAll(SmallSite(), {{"kind: gpu", "kind: gpu\n    pcie: {}"}}));
  EXPECT_FALSE(site.devices(1).has_pcie());  // Nothing said: nothing checked, as stored.

  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(
      absl::StrReplaceAll(
          SmallSite(), {{"kind: gpu", "kind: gpu\n    pcie: {vendor: 0x110de, dsn: x1, bus: 3}"}}),
      "site.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              AllOf(HasSubstr("device gpu1 pcie: 'vendor' '0x110de' is not a non-zero hex number "
                              "of at most 16 bits"),
                    HasSubstr("device gpu1 pcie: 'dsn' 'x1' is not a non-zero hex number"),
                    HasSubstr("device gpu1 pcie: unknown key 'bus'")));
}

TEST(ValidateInventoryTest, APcieIdentityIsAPooledDevicesOfSixteenBitIds) {
  v1::Inventory site = MustParse(SmallSite());
  site.mutable_devices(0)->mutable_pcie()->set_vendor(0x8086);   // h1-cpu0
  site.mutable_devices(1)->mutable_pcie()->set_device(0x120b5);  // gpu1, as an RPC could send
  EXPECT_THAT(ValidateInventory(site),
              ::testing::ElementsAre(HasSubstr("device h1-cpu0: a cpu has no pcie identity"),
                                     HasSubstr("device gpu1: pcie vendor 0x0 / device 0x120b5 is "
                                               "more than 16 bits")));
}

TEST(ParseInventoryTest, SyntaxErrorNamesTheLine) {
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml("site: x\nswitches: [\n", "bad.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("bad.yaml:"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("syntax error"));
}

TEST(ParseInventoryTest, ListsEveryShapeProblemWithLineNumbers) {
  std::string text =
      absl::StrReplaceAll(SmallSite(), {{"protocol: tl1", "protocol: snmp"},
                                        {"{tx: ocs1/1, rx: ocs1/9}", "{tx: ocs1-1, rx: ocs1/9}"},
                                        {"kind: gpu", "kind: gpu\n    colour: red"}});
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(text, "site.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              AllOf(HasSubstr("3 problem(s)"),
                    HasSubstr("'protocol' is 'snmp'; expected one of: tl1, rest"),
                    HasSubstr("must be SWITCH/PORT (e.g. ocs1/17), not 'ocs1-1'"),
                    HasSubstr("site.yaml:25: device gpu1: unknown key 'colour'"),
                    HasSubstr("site.yaml:8: switch ocs1:")));
}

TEST(ParseInventoryTest, TrunkReservedRangeBeyondTheSwitchIsRefusedNotExpanded) {
  // Checked against the switch before it is expanded port by port: up to 2^32-1 the port
  // counter would wrap and never end.
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(
      absl::StrReplaceAll(SmallSite(), {{R"("15-16"])", R"("15-16", "1-4294967295"])"}}),
      "site.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("site.yaml:9: switch ocs1: trunk_reserved entry '1-4294967295' is "
                        "outside the switch (ports 1..16)"));
}

TEST(ParseInventoryTest, SwitchSideAboveTheLimitIsRefused) {
  // Every port is a store row, and a reserved range is expanded port by port.
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(
      absl::StrReplaceAll(SmallSite(), {{"size: 8x8", "size: 4000000000x8"}}), "site.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("site.yaml:6: switch ocs1: size must be NxM with 0 < N, M <= 4096 (e.g. "
                        "384x384), not '4000000000x8'"));

  v1::Inventory site = MustParse(SmallSite());
  site.mutable_switches(0)->set_ingress_ports(4096);
  site.mutable_switches(0)->set_egress_ports(4097);
  EXPECT_THAT(ValidateInventory(site),
              ::testing::Contains("switch ocs1: size 4096x4097 must be NxM with 0 < N, M <= 4096"));
}

TEST(ParseInventoryTest, TextThatIsNotUtf8IsRefusedWithItsLine) {
  // Refused here, naming the line: in the protos' strings it would be refused on the wire,
  // naming nothing.
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(
      absl::StrReplaceAll(SmallSite(), {{"polatis-7000-8x8", "polatis-\xff-8x8"}}), "site.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), "site.yaml:5: not UTF-8 text (byte 0xff at column 20)");
  // Text that is UTF-8 goes through untouched.
  parsed = ParseInventoryYaml(
      absl::StrReplaceAll(SmallSite(), {{"polatis-7000-8x8", "polatis-\xc3\xa9-8x8"}}),
      "site.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->switches(0).model(), "polatis-\xc3\xa9-8x8");
}

TEST(ParseInventoryTest, EmptyFileIsAnError) {
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml("", "empty.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("empty.yaml: the file is empty"));
}

TEST(ParseInventoryTest, MissingFileIsNotFound) {
  absl::StatusOr<v1::Inventory> parsed = ReadInventoryFile("/nonexistent/inventory.yaml");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(parsed.status().message(), HasSubstr("/nonexistent/inventory.yaml"));
}

TEST(ParseInventoryTest, RestSwitchTlsKeys) {
  v1::Inventory site = MustParse(absl::StrReplaceAll(
      SmallSite(), {{"protocol: tl1", "protocol: rest\n    ca_bundle: /etc/fleet/ocs1-ca.pem"}}));
  EXPECT_EQ(site.switches(0).ca_bundle(), "/etc/fleet/ocs1-ca.pem");
  EXPECT_FALSE(site.switches(0).insecure_http());
  EXPECT_THAT(ValidateInventory(site), IsEmpty());

  site = MustParse(absl::StrReplaceAll(
      SmallSite(), {{"protocol: tl1", "protocol: rest\n    insecure_http: true"}}));
  EXPECT_TRUE(site.switches(0).insecure_http());
  EXPECT_EQ(site.switches(0).ca_bundle(), "");
  EXPECT_THAT(ValidateInventory(site), IsEmpty());

  // Absent is HTTPS against the system's CAs.
  site = MustParse(absl::StrReplaceAll(SmallSite(), {{"protocol: tl1", "protocol: rest"}}));
  EXPECT_FALSE(site.switches(0).insecure_http());
  EXPECT_EQ(site.switches(0).ca_bundle(), "");
}

TEST(ParseInventoryTest, InsecureHttpIsTrueOrFalse) {
  absl::StatusOr<v1::Inventory> parsed = ParseInventoryYaml(
      absl::StrReplaceAll(SmallSite(),
                          {{"protocol: tl1", "protocol: rest\n    insecure_http: yes"}}),
      "site.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(
      std::string(parsed.status().message()),
      HasSubstr("site.yaml:9: switch ocs1: 'insecure_http' must be true or false, not 'yes'"));
}

TEST(ValidateInventoryTest, TlsKeysAreForRestSwitchesOnly) {
  EXPECT_THAT(ProblemsWith("protocol: tl1", "protocol: tl1\n    ca_bundle: /etc/fleet/ca.pem"),
              ::testing::ElementsAre(
                  "switch ocs1: ca_bundle '/etc/fleet/ca.pem' is for protocol rest only, not tl1"));
  EXPECT_THAT(
      ProblemsWith("protocol: tl1", "protocol: tl1\n    insecure_http: true"),
      ::testing::ElementsAre("switch ocs1: insecure_http true is for protocol rest only, not tl1"));
  EXPECT_THAT(ProblemsWith("protocol: tl1",
                           "protocol: rest\n    insecure_http: true\n"
                           "    ca_bundle: /etc/fleet/ca.pem"),
              ::testing::ElementsAre("switch ocs1: ca_bundle '/etc/fleet/ca.pem' is unused with "
                                     "insecure_http true (plain HTTP); drop one of them"));
  // false is the default, and says nothing about the protocol.
  EXPECT_THAT(ProblemsWith("protocol: tl1", "protocol: tl1\n    insecure_http: false"), IsEmpty());
}

TEST(ValidateInventoryTest, DuplicateIds) {
  EXPECT_THAT(ProblemsWith("- id: gpu1", "- id: h1-cpu0"),
              ::testing::Contains(HasSubstr("duplicate device id 'h1-cpu0'")));
  EXPECT_THAT(ProblemsWith("- id: n2", "- id: n1"),
              ::testing::Contains(HasSubstr("duplicate onic id 'n1'")));
  EXPECT_THAT(ProblemsWith("serial: S2", "serial: S1"),
              ::testing::Contains(HasSubstr("onic n2: duplicate serial 'S1'")));
}

TEST(ValidateInventoryTest, SwitchPortWiredTwice) {
  EXPECT_THAT(ProblemsWith("{tx: ocs1/3, rx: ocs1/11}", "{tx: ocs1/1, rx: ocs1/11}"),
              ::testing::Contains(HasSubstr(
                  "switch port ocs1/1 is wired twice: onic n1 port 1 tx and onic n2 port 1 tx")));
}

TEST(ValidateInventoryTest, IngressUsedAsEgressAndBack) {
  std::vector<std::string> problems =
      ProblemsWith("{tx: ocs1/1, rx: ocs1/9}", "{tx: ocs1/9, rx: ocs1/1}");
  EXPECT_THAT(
      problems,
      ::testing::Contains(HasSubstr(
          "onic n1 port 1 tx: ocs1/9 is an egress port; it must be an ingress port (1..8)")));
  EXPECT_THAT(
      problems,
      ::testing::Contains(HasSubstr(
          "onic n1 port 1 rx: ocs1/1 is an ingress port; it must be an egress port (9..16)")));
}

TEST(ValidateInventoryTest, PortOutsideTheSwitch) {
  EXPECT_THAT(ProblemsWith("rx: ocs1/12}", "rx: ocs1/17}"),
              ::testing::Contains(HasSubstr("ocs1/17 is outside switch ocs1 (ports 1..16)")));
  EXPECT_THAT(ProblemsWith("{tx: ocs1/4,", "{tx: ocs1/0,"),
              ::testing::Contains(HasSubstr("ocs1/0 is outside switch ocs1")));
}

TEST(ValidateInventoryTest, OnicWithoutTwoPorts) {
  EXPECT_THAT(ProblemsWith("          - {tx: ocs1/4, rx: ocs1/12}\n", ""),
              ::testing::Contains(HasSubstr(
                  "onic n2: has 1 port; every O-NIC has exactly two (port 1 and port 2)")));
  EXPECT_THAT(ProblemsWith(
                  "          - {tx: ocs1/4, rx: ocs1/12}\n",
                  "          - {tx: ocs1/4, rx: ocs1/12}\n          - {tx: ocs1/5, rx: ocs1/13}\n"),
              ::testing::Contains(HasSubstr("onic n2: has 3 ports")));
}

TEST(ValidateInventoryTest, UnknownReferences) {
  EXPECT_THAT(ProblemsWith("host: h1", "host: h9"),
              ::testing::Contains(HasSubstr("device h1-cpu0: host 'h9' is not in the inventory")));
  EXPECT_THAT(
      ProblemsWith("{tx: ocs1/3,", "{tx: ocs7/3,"),
      ::testing::Contains(HasSubstr("onic n2 port 1 tx: switch 'ocs7' is not in the inventory")));
  EXPECT_THAT(
      ProblemsWith("    host: h1\n", ""),
      ::testing::Contains(HasSubstr("device h1-cpu0: a cpu must name the host it belongs to")));
}

TEST(ValidateInventoryTest, TrunkReservationIsRespected) {
  EXPECT_THAT(ProblemsWith("{tx: ocs1/4, rx: ocs1/12}", "{tx: ocs1/7, rx: ocs1/12}"),
              ::testing::Contains(HasSubstr(
                  "onic n2 port 2 tx: ocs1/7 is reserved for trunks; O-NIC fibers cannot use it")));
}

TEST(ValidateInventoryTest, Trunks) {
  std::string two_switches = absl::StrCat(SmallSite(), R"(
trunks:
  - {id: t1, from: ocs1/15, to: ocs2/7}
  - {id: t2, from: ocs1/13, to: ocs2/8}
  - {id: t3, from: ocs1/16, to: ocs1/8}
)");
  two_switches = absl::StrReplaceAll(two_switches, {{"hosts:", R"(  - id: ocs2
    model: polatis-7000-8x8
    size: 8x8
    address: 127.0.0.2
    protocol: rest
    trunk_reserved: ["7-8", "15-16"]
hosts:)"}});
  std::vector<std::string> problems = ValidateInventory(MustParse(two_switches));
  EXPECT_THAT(problems,
              ::testing::Contains(HasSubstr("trunk t2 from: ocs1/13 is not reserved for trunks")));
  EXPECT_THAT(problems,
              ::testing::Contains(HasSubstr("trunk t3: runs from switch ocs1 to itself")));
  EXPECT_THAT(problems, ::testing::Not(::testing::Contains(HasSubstr("trunk t1"))));
}

TEST(ValidateInventoryTest, EveryProblemIsListed) {
  std::string text =
      absl::StrReplaceAll(SmallSite(), {{"- id: gpu1", "- id: h1-cpu0"},
                                        {"{tx: ocs1/3, rx: ocs1/11}", "{tx: ocs1/1, rx: ocs1/99}"},
                                        {"host: h1", "host: nobody"}});
  std::vector<std::string> problems = ValidateInventory(MustParse(text));
  EXPECT_THAT(problems, SizeIs(4)) << ::testing::PrintToString(problems);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ShippedInventoryTest, Gen1IsOneFullCluster) {
  absl::StatusOr<v1::Inventory> site =
      ReadInventoryFile(std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml");
  ASSERT_TRUE(site.ok()) << site.status();
  EXPECT_THAT(ValidateInventory(*site), IsEmpty());
  ASSERT_THAT(site->switches(), SizeIs(1));
  EXPECT_EQ(site->switches(0).ingress_ports(), 384u);
  EXPECT_EQ(site->switches(0).egress_ports(), 384u);
  EXPECT_THAT(site->switches(0).trunk_reserved_ports(), SizeIs(192));  // 96 port pairs.
  EXPECT_THAT(site->hosts(), SizeIs(4));
  int cpus = 0, gpus = 0, nvmes = 0;
  for (const v1::Device& d : site->devices()) {
    cpus += d.kind() == v1::DEVICE_KIND_CPU;
    gpus += d.kind() == v1::DEVICE_KIND_GPU;
    nvmes += d.kind() == v1::DEVICE_KIND_NVME;
  }
  EXPECT_EQ(cpus, 8);
  EXPECT_EQ(gpus, 8);
  EXPECT_EQ(nvmes, 2);
  EXPECT_THAT(site->onics(), SizeIs(8 * 3 + 8 + 2 * 2));
}

TEST(ShippedInventoryTest, TwoClustersJoinedBySixteenTrunksEachWay) {
  absl::StatusOr<v1::Inventory> site =
      ReadInventoryFile(std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-2cluster.yaml");
  ASSERT_TRUE(site.ok()) << site.status();
  EXPECT_THAT(ValidateInventory(*site), IsEmpty());
  EXPECT_THAT(site->switches(), SizeIs(2));
  EXPECT_THAT(site->onics(), SizeIs(72));
  int a_to_b = 0, b_to_a = 0;
  for (const v1::Trunk& t : site->trunks()) {
    a_to_b += t.from().switch_id() == "ocs-a" && t.to().switch_id() == "ocs-b";
    b_to_a += t.from().switch_id() == "ocs-b" && t.to().switch_id() == "ocs-a";
  }
  EXPECT_EQ(a_to_b, 16);
  EXPECT_EQ(b_to_a, 16);
}

// A site written by `deploy/inventory/generate.py --clusters S`, read by the real parser.
v1::Inventory GeneratedSite(int clusters) {
  const std::string path = fleet::testing::FreshDirectory("site") + "/site.yaml";
  const std::string command =
      absl::StrCat("python3 ", FLEET_SOURCE_DIR, "/deploy/inventory/generate.py --clusters ",
                   clusters, " --output ", path);
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  absl::StatusOr<v1::Inventory> site = ReadInventoryFile(path);
  EXPECT_TRUE(site.ok()) << site.status();
  return site.value_or(v1::Inventory());
}

class GeneratedSiteTest : public ::testing::TestWithParam<int> {};

// Every generated site passes the fiber plant's rules, has the promised devices and agents,
// wires at least 80 % of each switch's non-trunk ports, and joins its switches on a torus:
// every trunk port used, as many fibers each way between two neighbours, none elsewhere.
TEST_P(GeneratedSiteTest, IsValidFullAndJoinedOnATorus) {
  const int clusters = GetParam();
  const v1::Inventory site = GeneratedSite(clusters);
  EXPECT_THAT(ValidateInventory(site), IsEmpty());
  ASSERT_THAT(site.switches(), SizeIs(clusters));
  std::set<std::string> chassis;
  int gpus = 0;
  for (const v1::Device& d : site.devices()) {
    gpus += d.kind() == v1::DEVICE_KIND_GPU;
    if (!d.chassis().empty()) chassis.insert(d.chassis());
  }
  EXPECT_EQ(gpus, 64 * clusters);
  EXPECT_EQ(site.hosts_size() + static_cast<int>(chassis.size()), 32 * clusters);  // Agents.

  std::map<std::string, int> wired;  // Ingress ports holding an O-NIC's tx fiber, by switch.
  for (const v1::Onic& onic : site.onics()) {
    for (const v1::OnicPort& port : onic.ports()) ++wired[port.tx().switch_id()];
  }
  std::map<std::pair<std::string, std::string>, int> fibers;  // (from, to) → trunks.
  std::map<std::string, int> trunk_egress, trunk_ingress;
  for (const v1::Trunk& t : site.trunks()) {
    ++fibers[{t.from().switch_id(), t.to().switch_id()}];
    ++trunk_egress[t.from().switch_id()];
    ++trunk_ingress[t.to().switch_id()];
  }
  for (const v1::Switch& sw : site.switches()) {
    EXPECT_GE(wired[sw.id()], 0.8 * (384 - 96)) << sw.id();
    EXPECT_EQ(trunk_egress[sw.id()], clusters == 1 ? 0 : 96) << sw.id();
    EXPECT_EQ(trunk_ingress[sw.id()], clusters == 1 ? 0 : 96) << sw.id();
  }
  // Neighbours on the torus, row-major: ocs01 … ocsNN.
  int rows = 1;
  for (int r = 1; r * r <= clusters; ++r) {
    if (clusters % r == 0) rows = r;
  }
  const int cols = clusters / rows;
  std::set<std::pair<std::string, std::string>> expected;
  for (int i = 0; i < clusters; ++i) {
    const int r = i / cols, c = i % cols;
    for (auto [dr, dc] : {std::pair{-1, 0}, {1, 0}, {0, -1}, {0, 1}}) {
      const int j = ((r + dr + rows) % rows) * cols + (c + dc + cols) % cols;
      if (j != i)
        expected.insert({absl::StrFormat("ocs%02d", i + 1), absl::StrFormat("ocs%02d", j + 1)});
    }
  }
  std::set<std::pair<std::string, std::string>> joined;
  for (const auto& [pair, count] : fibers) {
    joined.insert(pair);
    EXPECT_EQ(count, (fibers[{pair.second, pair.first}])) << pair.first << "->" << pair.second;
  }
  EXPECT_EQ(joined, expected);
}

INSTANTIATE_TEST_SUITE_P(Clusters, GeneratedSiteTest, ::testing::Values(1, 2, 4, 16, 64),
                         [](const ::testing::TestParamInfo<int>& clusters) {
                           return absl::StrCat("S", clusters.param);
                         });

TEST(PlanApplyTest, FirstApplyCreatesAndSecondChangesNothing) {
  v1::Inventory site = MustParse(SmallSite());
  absl::StatusOr<store::InventoryWrite> first = PlanApply(v1::Inventory(), site);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->created, SizeIs(1 + 1 + 2 + 2));
  EXPECT_THAT(first->updated, IsEmpty());

  absl::StatusOr<store::InventoryWrite> again = PlanApply(first->objects, site);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->created, IsEmpty());
  EXPECT_THAT(again->updated, IsEmpty());
  EXPECT_EQ(again->objects.ByteSizeLong(), 0u);
}

TEST(PlanApplyTest, ChangedObjectIsAnUpdate) {
  v1::Inventory site = MustParse(SmallSite());
  v1::Inventory changed =
      MustParse(absl::StrReplaceAll(SmallSite(), {{"serial: S2", "serial: S2b"}}));
  absl::StatusOr<store::InventoryWrite> plan = PlanApply(site, changed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->updated, ::testing::ElementsAre("onic n2"));
  ASSERT_THAT(plan->objects.onics(), SizeIs(1));
  EXPECT_EQ(plan->objects.onics(0).serial(), "S2b");
}

TEST(PlanApplyTest, AnUpdateNamesEachFieldItChangesAndWhichRepointASwitch) {
  v1::Inventory site = MustParse(SmallSite());
  v1::Inventory changed = MustParse(absl::StrReplaceAll(
      SmallSite(), {{"address: 127.0.0.1", "address: 192.0.2.20\n    port: 3083"},
                    {"{tx: ocs1/3, rx: ocs1/11}", "{tx: ocs1/5, rx: ocs1/11}"},
                    {"serial: S2", "serial: S2b"}}));
  absl::StatusOr<store::InventoryWrite> plan = PlanApply(site, changed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->updated, ::testing::ElementsAre("switch ocs1", "onic n2"));
  EXPECT_EQ(plan->changed_fields["switch ocs1"],
            "address 127.0.0.1 -> 192.0.2.20, port (default) -> 3083");
  EXPECT_EQ(plan->changed_fields["onic n2"], "serial S2 -> S2b, ports[1].tx ocs1/3 -> ocs1/5");
  // Only how the switch is reached makes a repoint; an O-NIC's fibers do not.
  EXPECT_EQ(plan->repointed_switches.size(), 1u);
  EXPECT_EQ(plan->repointed_switches["ocs1"],
            "address 127.0.0.1 -> 192.0.2.20, port (default) -> 3083");
  ASSERT_THAT(plan->diff, SizeIs(2));
  EXPECT_EQ(plan->diff[0].kind(), "switch");
  EXPECT_FALSE(plan->diff[0].created());
  ASSERT_THAT(plan->diff[0].fields(), SizeIs(2));
  EXPECT_EQ(plan->diff[0].fields(1).field(), "port");
  EXPECT_EQ(plan->diff[0].fields(1).to(), "3083");
}

TEST(PortRangesTest, RunsFold) {
  EXPECT_EQ(PortRanges({}), "");
  EXPECT_EQ(PortRanges({7}), "7");
  EXPECT_EQ(PortRanges({1, 2, 3, 7, 9, 10}), "1-3, 7, 9-10");
}

TEST(FieldDiffTest, ReservedPortsAreRangesAndEnumsShortNames) {
  v1::Switch before = MustParse(SmallSite()).switches(0);
  v1::Switch after = before;
  after.clear_trunk_reserved_ports();
  for (uint32_t p : {5u, 6u, 7u, 8u, 13u}) after.add_trunk_reserved_ports(p);
  after.set_protocol(v1::SWITCH_PROTOCOL_REST);
  after.set_insecure_http(true);
  EXPECT_EQ(DescribeFieldChanges(DiffFields(before, after)),
            "protocol tl1 -> rest, trunk_reserved 7-8, 15-16 -> 5-8, 13, insecure_http false -> "
            "true");
  for (const v1::FieldChange& f : DiffFields(before, after)) {
    EXPECT_EQ(IsSwitchConnectionField(f.field()), f.field() != "trunk_reserved") << f.field();
  }
}

TEST(FieldDiffTest, PcieIdsAreHexAsTheFileWritesThem) {
  v1::Device before;
  before.set_id("gpu1");
  before.mutable_pcie()->set_vendor(0x10de);
  v1::Device after = before;
  after.mutable_pcie()->set_device(0x2330);
  after.mutable_pcie()->set_dsn(0x48b02d0300a1b2c3ULL);
  EXPECT_EQ(DescribeFieldChanges(DiffFields(before, after)),
            "pcie.device (none) -> 2330, pcie.dsn (none) -> 48-b0-2d-03-00-a1-b2-c3");
}

TEST(PlanApplyTest, IncomingIsValidatedAgainstWhatIsStored) {
  v1::Inventory stored = MustParse(SmallSite());
  // A new O-NIC whose fiber lands on a port a stored O-NIC already holds.
  v1::Inventory incoming = MustParse(R"(
devices:
  - id: gpu2
    kind: gpu
    onics:
      - id: n3
        serial: S3
        ports:
          - {tx: ocs1/1, rx: ocs1/13}
          - {tx: ocs1/5, rx: ocs1/14}
)");
  absl::StatusOr<store::InventoryWrite> plan = PlanApply(stored, incoming);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      plan.status().message(),
      AllOf(
          HasSubstr("nothing stored"),
          HasSubstr("switch port ocs1/1 is wired twice: onic n1 port 1 tx and onic n3 port 1 tx")));
}

TEST(PlanApplyTest, DuplicateWithinTheFileIsReportedOnce) {
  std::string text =
      absl::StrReplaceAll(SmallSite(), {{"- {name: h1}", "- {name: h1}\n  - {name: h1}"}});
  absl::StatusOr<store::InventoryWrite> plan = PlanApply(v1::Inventory(), MustParse(text));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("(1 problem)"));
  EXPECT_THAT(plan.status().message(), HasSubstr("duplicate host id 'h1'"));
}

// --- InventoryApplier over a real SQLite file ---

class ApplierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fleet::testing::FreshDirectory("inventory");
    absl::StatusOr<std::unique_ptr<store::Store>> opened =
        store::OpenSqliteStore({(dir_ / "fleet.db").string(), &clock_});
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
    applier_ = std::make_unique<InventoryApplier>(store_.get());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Every file of the database (main, WAL, shared memory index excluded: it is not state).
  std::string DatabaseBytes() {
    return ReadFile((dir_ / "fleet.db").string()) + "|" +
           ReadFile((dir_ / "fleet.db-wal").string());
  }

  fleet::testing::FakeClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<InventoryApplier> applier_;
};

TEST_F(ApplierTest, ReapplyingTheSameFileChangesNothing) {
  v1::Inventory site = MustParse(SmallSite());
  absl::StatusOr<v1::ApplyInventoryResponse> first = applier_->Apply(site, {}, "operator:test");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->created(), 6u);
  absl::StatusOr<std::vector<v1::Event>> events_before = store_->ListEvents({});
  ASSERT_TRUE(events_before.ok());
  const std::string bytes_before = DatabaseBytes();

  absl::StatusOr<v1::ApplyInventoryResponse> second = applier_->Apply(site, {}, "operator:test");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->created(), 0u);
  EXPECT_EQ(second->updated(), 0u);
  EXPECT_EQ(second->unchanged(), 6u);
  EXPECT_EQ(DatabaseBytes(), bytes_before);
  EXPECT_THAT(*store_->ListEvents({}), SizeIs(events_before->size()));
}

TEST_F(ApplierTest, TlsKeysAreStoredAndAChangeIsAnUpdate) {
  const std::string https = absl::StrReplaceAll(
      SmallSite(), {{"protocol: tl1", "protocol: rest\n    ca_bundle: /etc/fleet/ocs1-ca.pem"}});
  ASSERT_TRUE(applier_->Apply(MustParse(https), {}, "operator:test").ok());
  absl::StatusOr<std::vector<v1::Switch>> stored = store_->ListSwitches();
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_THAT(*stored, SizeIs(1));
  EXPECT_EQ((*stored)[0].ca_bundle(), "/etc/fleet/ocs1-ca.pem");
  EXPECT_FALSE((*stored)[0].insecure_http());
  absl::StatusOr<v1::ApplyInventoryResponse> again =
      applier_->Apply(MustParse(https), {}, "operator:test");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->updated(), 0u);

  absl::StatusOr<v1::ApplyInventoryResponse> plain = applier_->Apply(
      MustParse(absl::StrReplaceAll(
          SmallSite(), {{"protocol: tl1", "protocol: rest\n    insecure_http: true"}})),
      {}, "operator:test");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->updated(), 1u);
  stored = store_->ListSwitches();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ((*stored)[0].ca_bundle(), "");
  EXPECT_TRUE((*stored)[0].insecure_http());
}

TEST_F(ApplierTest, BrokenInventoryLeavesTheStoreByteForByte) {
  ASSERT_TRUE(applier_->Apply(MustParse(SmallSite()), {}, "operator:test").ok());
  const std::string bytes_before = DatabaseBytes();

  // Valid changes mixed with invalid ones: none of them may land.
  std::string broken = absl::StrReplaceAll(
      SmallSite(), {{"serial: S2", "serial: S2-new"},
                    {"{tx: ocs1/4, rx: ocs1/12}", "{tx: ocs1/12, rx: ocs1/40}"},
                    {"  - {name: h1}", "  - {name: h1}\n  - {name: h2}\n  - {name: h2}"}});
  absl::StatusOr<v1::ApplyInventoryResponse> result =
      applier_->Apply(MustParse(broken), {}, "operator:test");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      result.status().message(),
      AllOf(HasSubstr("(3 problems)"), HasSubstr("duplicate host id 'h2'"),
            HasSubstr("ocs1/12 is an egress port"), HasSubstr("ocs1/40 is outside switch ocs1")));
  EXPECT_EQ(DatabaseBytes(), bytes_before);
  absl::StatusOr<v1::Onic> n2 = store_->GetOnic("n2");
  ASSERT_TRUE(n2.ok());
  EXPECT_EQ(n2->serial(), "S2");
  EXPECT_EQ(store_->GetHost("h2").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ApplierTest, DryRunReportsAndWritesNothing) {
  const std::string bytes_before = DatabaseBytes();
  absl::StatusOr<v1::ApplyInventoryResponse> result =
      applier_->Apply(MustParse(SmallSite()), {.dry_run = true}, "operator:test");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->created(), 6u);
  EXPECT_THAT(result->changes(), ::testing::Contains("created onic n1"));
  EXPECT_EQ(DatabaseBytes(), bytes_before);
  EXPECT_THAT(*store_->ListSwitches(), IsEmpty());
}

TEST_F(ApplierTest, ApplyInPartsMergesWithWhatIsStored) {
  v1::Inventory site = MustParse(SmallSite());
  v1::Inventory switches_only;
  *switches_only.mutable_switches() = site.switches();
  v1::Inventory rest = site;
  rest.clear_switches();
  ASSERT_TRUE(applier_->Apply(switches_only, {}, "operator:a").ok());
  absl::StatusOr<v1::ApplyInventoryResponse> second = applier_->Apply(rest, {}, "operator:b");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->created(), 5u);
  absl::StatusOr<std::vector<v1::SwitchPort>> ports = store_->ListPorts("ocs1");
  ASSERT_TRUE(ports.ok());
  ASSERT_THAT(*ports, SizeIs(16));
  EXPECT_EQ((*ports)[0].wiring().onic_port().onic(), "n1");
  absl::StatusOr<std::vector<v1::Event>> events = store_->ListEvents({0, 100, "onic", "n1"});
  ASSERT_TRUE(events.ok());
  ASSERT_THAT(*events, SizeIs(1));
  EXPECT_EQ((*events)[0].principal(), "operator:b");
}

// --- InventoryApplier::ApplyFile: `fleetd --inventory FILE` at start ---

class ApplyFileTest : public ApplierTest {
 protected:
  void SetUp() override {
    ApplierTest::SetUp();
    file_ = (dir_ / "site.yaml").string();
  }
  void Write(const std::string& text) { std::ofstream(file_) << text; }
  // ApplyFile of the test's file; fails the test unless it succeeds.
  FileApplied MustApplyFile() {
    absl::StatusOr<FileApplied> applied = applier_->ApplyFile(file_, "fleetd:--inventory");
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? *applied : FileApplied{};
  }
  std::string Serial(const std::string& onic) {
    absl::StatusOr<v1::Onic> got = store_->GetOnic(onic);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->serial() : "";
  }

  std::string file_;  // In the test's own directory.
};

TEST_F(ApplyFileTest, TheSameFileOnTheSameInventoryIsNotReadAgain) {
  Write(SmallSite());
  FileApplied first = MustApplyFile();
  EXPECT_FALSE(first.skipped);
  EXPECT_EQ(first.response.created(), 6u);
  const std::string bytes_before = DatabaseBytes();

  FileApplied second = MustApplyFile();
  EXPECT_TRUE(second.skipped);
  EXPECT_EQ(second.response.created() + second.response.updated(), 0u);
  EXPECT_EQ(DatabaseBytes(), bytes_before);  // Not even the record is written again.

  // What an operator or the monitor changes beside the file does not count: drain, health.
  store::DrainTargetRef host;
  host.host = "h1";
  ASSERT_TRUE(store_->SetDrained(host, true, "maintenance", "operator:test").ok());
  ASSERT_TRUE(
      store_->SetDeviceHealth("gpu1", v1::DEVICE_HEALTH_FAILED, "Xid 79", "operator:test").ok());
  store::PortHealth degraded;
  degraded.state = v1::OPER_STATE_DEGRADED;
  degraded.reason = "low power";
  degraded.ref.set_switch_id("ocs1");
  degraded.ref.set_port(9);
  ASSERT_TRUE(store_->SetPortHealth({degraded}).ok());
  EXPECT_TRUE(MustApplyFile().skipped);
}

TEST_F(ApplyFileTest, AnEditedFileIsReadAndApplied) {
  Write(SmallSite());
  MustApplyFile();
  Write(absl::StrReplaceAll(SmallSite(), {{"serial: S2", "serial: S2-new"}}));
  FileApplied edited = MustApplyFile();
  EXPECT_FALSE(edited.skipped);
  EXPECT_EQ(edited.response.updated(), 1u);
  EXPECT_EQ(Serial("n2"), "S2-new");
  EXPECT_TRUE(MustApplyFile().skipped);  // And recorded again.
}

TEST_F(ApplyFileTest, AnInventoryChangedSinceIsGivenTheFileAgain) {
  Write(SmallSite());
  MustApplyFile();
  // An apply over the API changes what the file set: the next start puts the file back.
  ASSERT_TRUE(
      applier_
          ->Apply(MustParse(absl::StrReplaceAll(SmallSite(), {{"serial: S1", "serial: X1"}})), {},
                  "operator:test")
          .ok());
  FileApplied again = MustApplyFile();
  EXPECT_FALSE(again.skipped);
  EXPECT_EQ(again.response.updated(), 1u);
  EXPECT_EQ(Serial("n1"), "S1");

  // An object deleted since is created again.
  ASSERT_TRUE(store_->DeleteObject("onic", "n2", "operator:test").ok());
  FileApplied recreated = MustApplyFile();
  EXPECT_FALSE(recreated.skipped);
  EXPECT_EQ(recreated.response.created(), 1u);
  EXPECT_EQ(Serial("n2"), "S2");

  // An object the file does not name, added since, is part of what the record covers.
  v1::Inventory extra;
  extra.add_hosts()->set_name("h9");
  ASSERT_TRUE(applier_->Apply(extra, {}, "operator:test").ok());
  FileApplied with_extra = MustApplyFile();
  EXPECT_FALSE(with_extra.skipped);
  EXPECT_EQ(with_extra.response.created() + with_extra.response.updated(), 0u);
  EXPECT_TRUE(MustApplyFile().skipped);
}

TEST_F(ApplyFileTest, ABrokenFileIsRefusedByPathAndTheRecordStands) {
  Write(SmallSite());
  MustApplyFile();
  const std::string bytes_before = DatabaseBytes();
  Write(absl::StrReplaceAll(SmallSite(),
                            {{"{tx: ocs1/4, rx: ocs1/12}", "{tx: ocs1/12, rx: ocs1/40}"}}));
  absl::StatusOr<FileApplied> broken = applier_->ApplyFile(file_, "fleetd:--inventory");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(broken.status().message(),
              AllOf(HasSubstr(file_ + ": "), HasSubstr("ocs1/40 is outside switch ocs1")));
  EXPECT_EQ(DatabaseBytes(), bytes_before);
  Write(SmallSite());
  EXPECT_TRUE(MustApplyFile().skipped);

  std::filesystem::remove(file_);
  absl::StatusOr<FileApplied> missing = applier_->ApplyFile(file_, "fleetd:--inventory");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(file_));
}

TEST_F(ApplyFileTest, ARecordOfAnotherBuildOrOfNothingMeansAFullApply) {
  Write(SmallSite());
  MustApplyFile();
  absl::StatusOr<std::string> record = store_->AppliedInventoryFile();
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_THAT(*record, AllOf(HasSubstr(" build " + ExecutableBuildId() + ";"),
                             HasSubstr("file sha256 "), HasSubstr("inventory sha256 ")));

  // Another build may read a file into other objects: it is applied (nothing changes here).
  ASSERT_TRUE(
      store_->RecordAppliedInventoryFile(absl::StrReplaceAll(*record, {{" build ", " build 00"}}))
          .ok());
  FileApplied other = MustApplyFile();
  EXPECT_FALSE(other.skipped);
  EXPECT_EQ(other.response.unchanged(), 6u);
  EXPECT_EQ(*store_->AppliedInventoryFile(), *record);

  ASSERT_TRUE(store_->RecordAppliedInventoryFile("").ok());
  EXPECT_FALSE(MustApplyFile().skipped);
  EXPECT_TRUE(MustApplyFile().skipped);
}

// The record only saves a parse: one that cannot be read or written never stops the apply.
TEST_F(ApplyFileTest, ARecordThatCannotBeReadOrWrittenStillAppliesTheFile) {
  Write(SmallSite());
  MustApplyFile();
  // Its table gone behind the store's back (a damaged or hand-edited database).
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "fleet.db").c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DROP TABLE inventory_file", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  ASSERT_FALSE(store_->AppliedInventoryFile().ok());

  Write(absl::StrReplaceAll(SmallSite(), {{"serial: S2", "serial: S2-new"}}));
  FileApplied edited = MustApplyFile();
  EXPECT_FALSE(edited.skipped);
  EXPECT_EQ(edited.response.updated(), 1u);
  EXPECT_EQ(Serial("n2"), "S2-new");
  // Not recorded, so every apply reads the file in full; it changes nothing more.
  FileApplied again = MustApplyFile();
  EXPECT_FALSE(again.skipped);
  EXPECT_EQ(again.response.unchanged(), 6u);
}

}  // namespace
}  // namespace fleet::inventory
