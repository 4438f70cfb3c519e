// O-NIC discovery (onic_agent/onic_discovery.h) on a fake sysfs tree: O-NICs as PCIe switches
// whose upstream port matches a pattern, their two downstream ports below them.
#include "onic_agent/onic_discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "testing/fake_clock.h"
#include "tests/onic_agent/fake_pcie_sysfs.h"

namespace fleet::onic_agent {
namespace {

using ::fleet::onic_agent::testing::FakeFunction;
using ::fleet::onic_agent::testing::FakePcieSysfs;
using ::fleet::onic_agent::testing::FakePortSpec;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr uint16_t kOnicVendor = 0x10ee;
constexpr uint16_t kOnicDevice = 0x9038;

FakePortSpec Downstream(const std::string& bdf, uint8_t port_number = 0) {
  FakePortSpec spec;
  spec.bdf = bdf;
  spec.port_type = 6;
  spec.port_number = port_number;
  return spec;
}

FakeFunction Upstream(const std::string& bdf, uint16_t device = kOnicDevice) {
  FakeFunction fn;
  fn.bdf = bdf;
  fn.vendor = kOnicVendor;
  fn.device = device;
  return fn;
}

OnicDiscovery Discovery(std::string serial = "{host}-n{index}") {
  OnicDiscovery discovery;
  discovery.match.push_back(*ParseOnicMatch("10ee:9038"));
  discovery.serial = std::move(serial);
  return discovery;
}

class OnicDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = std::filesystem::temp_directory_path() / "fleet-onic-discovery-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    root_ = dir;
    fake_ = std::make_unique<FakePcieSysfs>(root_, &clock_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // An O-NIC at `bdf` whose downstream ports are `ports`.
  void AddOnic(const FakeFunction& upstream, const std::vector<std::string>& ports) {
    for (const std::string& port : ports) fake_->AddPort(Downstream(port));
    fake_->AddUpstreamPort(upstream, ports);
  }

  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> Find(const OnicDiscovery& discovery,
                                                                 const std::string& host = "srv1") {
    return FindOnics(*fake_, root_, discovery, host);
  }

  std::string root_;
  fleet::testing::FakeClock clock_;
  std::unique_ptr<FakePcieSysfs> fake_;
};

TEST_F(OnicDiscoveryTest, FindsEachMatchingUpstreamPortWithItsTwoDownstreamPortsInAddressOrder) {
  // Listed out of order on purpose: discovery sorts by address.
  AddOnic(Upstream("0000:81:00.0"), {"0000:82:01.0", "0000:82:00.0"});
  AddOnic(Upstream("0000:17:00.0"), {"0000:18:00.0", "0000:18:01.0"});
  // Not an O-NIC: another device of another vendor, with ports of its own.
  FakeFunction other = Upstream("0000:40:00.0");
  other.vendor = 0x8086;
  AddOnic(other, {"0000:41:00.0", "0000:41:01.0"});

  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery());
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_THAT(*found, SizeIs(2));
  EXPECT_EQ((*found)[0].serial, "srv1-n0");
  EXPECT_EQ((*found)[0].pcie_address, "0000:17:00.0");
  EXPECT_EQ((*found)[0].port_bdfs[0], "0000:18:00.0");
  EXPECT_EQ((*found)[0].port_bdfs[1], "0000:18:01.0");
  EXPECT_EQ((*found)[1].serial, "srv1-n1");
  EXPECT_EQ((*found)[1].pcie_address, "0000:81:00.0");
  EXPECT_EQ((*found)[1].port_bdfs[0], "0000:82:00.0");
  EXPECT_EQ((*found)[1].port_bdfs[1], "0000:82:01.0");

  // What it found is what the backend takes.
  PcieSysfsBackend::Options options;
  options.sysfs_root = root_;
  options.onics = *found;
  EXPECT_TRUE(PcieSysfsBackend::ValidateOptions(options).ok());
}

TEST_F(OnicDiscoveryTest, SerialsFromTheDeviceSerialNumberOrTheAddress) {
  FakeFunction onic = Upstream("0000:17:00.0");
  onic.dsn = 0x48b02d0300a1b2c3ULL;
  AddOnic(onic, {"0000:18:00.0", "0000:18:01.0"});

  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery("FLT-{dsn}"));
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_THAT(*found, SizeIs(1));
  EXPECT_EQ((*found)[0].serial, "FLT-48-b0-2d-03-00-a1-b2-c3");

  found = Find(Discovery("{host}@{bdf}"));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)[0].serial, "srv1@0000:17:00.0");
}

TEST_F(OnicDiscoveryTest, AnyDeviceOfAVendorMatchesWithAStarButOnlyUpstreamPortsAreOnics) {
  // The card's downstream ports carry its vendor's ids too, as many switches' do.
  for (const char* port : {"0000:18:00.0", "0000:18:01.0"}) {
    FakePortSpec spec = Downstream(port);
    spec.vendor = kOnicVendor;
    spec.device = 0x9999;
    fake_->AddPort(spec);
  }
  fake_->AddUpstreamPort(Upstream("0000:17:00.0", 0x9999), {"0000:18:00.0", "0000:18:01.0"});
  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, IsEmpty());
  OnicDiscovery any = Discovery();
  any.match = {*ParseOnicMatch("0x10ee:*")};
  found = Find(any);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_THAT(*found, SizeIs(1));
  EXPECT_EQ((*found)[0].pcie_address, "0000:17:00.0");
}

TEST_F(OnicDiscoveryTest, PortOneIsTheSwitchsLowerPortNumber) {
  fake_->AddPort(Downstream("0000:18:00.0", 9));
  fake_->AddPort(Downstream("0000:18:01.0", 8));
  fake_->AddUpstreamPort(Upstream("0000:17:00.0"), {"0000:18:00.0", "0000:18:01.0"});
  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery());
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_THAT(*found, SizeIs(1));
  EXPECT_EQ((*found)[0].port_bdfs[0], "0000:18:01.0");
  EXPECT_EQ((*found)[0].port_bdfs[1], "0000:18:00.0");
}

TEST_F(OnicDiscoveryTest, TwoOnicsGivenOneSerialOrAZeroSerialNumberAreRefused) {
  for (const char* bdf : {"0000:17:00.0", "0000:81:00.0"}) {
    FakeFunction onic = Upstream(bdf);
    onic.dsn = 0x48b02d0300a1b2c3ULL;  // One serial number on both: a vendor's default.
    const std::string bus = std::string(bdf).substr(0, 5) + (bdf[6] == '1' ? "18" : "82");
    AddOnic(onic, {bus + ":00.0", bus + ":01.0"});
  }
  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery("{dsn}"));
  EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("O-NICs 0000:17:00.0 and 0000:81:00.0 both get serial "
                        "'48-b0-2d-03-00-a1-b2-c3'"));
}

TEST_F(OnicDiscoveryTest, ASerialNumberOfZeroIsNoSerialNumber) {
  FakeFunction onic = Upstream("0000:17:00.0");
  onic.dsn = 0;
  AddOnic(onic, {"0000:18:00.0", "0000:18:01.0"});
  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery("{dsn}"));
  EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("has no Device Serial Number (it reads 0)"));
}

TEST_F(OnicDiscoveryTest, AMatchWithoutTwoDownstreamPortsIsRefusedNamingIt) {
  FakeFunction onic = Upstream("0000:17:00.0");
  FakeFunction endpoint;
  endpoint.bdf = "0000:18:02.0";
  onic.children.push_back(endpoint);
  AddOnic(onic, {"0000:18:00.0"});
  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("O-NIC 0000:17:00.0 (10ee:9038) matches onic_discovery.match but has 1 "
                        "PCIe downstream ports below it (0000:18:00.0; other functions: "
                        "0000:18:02.0)"));
}

TEST_F(OnicDiscoveryTest, DsnWithoutOneAndHostWithoutOneAreRefused) {
  AddOnic(Upstream("0000:17:00.0"), {"0000:18:00.0", "0000:18:01.0"});
  absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found = Find(Discovery("{dsn}"));
  EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("O-NIC 0000:17:00.0 (10ee:9038) has no Device Serial Number"));
  found = Find(Discovery(), "");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(found.status().message()), HasSubstr("uses {host}, but no host is set"));
}

TEST(OnicDiscoveryRulesTest, PatternsAndTemplatesAreCheckedNamingTheValueAndTheRule) {
  EXPECT_TRUE(ParseOnicMatch("10ee:9038").ok());
  ASSERT_TRUE(ParseOnicMatch("10ee:*").ok());
  EXPECT_EQ(ParseOnicMatch("10ee:9038")->device, 0x9038);
  EXPECT_EQ(ParseOnicMatch("10ee:*")->device, std::nullopt);
  for (const char* bad : {"10ee", "10ee:9038:1", "xyz:9038", "10ee:", "12345:1", "-1:2"}) {
    absl::StatusOr<OnicMatch> match = ParseOnicMatch(bad);
    EXPECT_EQ(match.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(match.status().message()),
                HasSubstr(absl::StrCat("onic_discovery.match '", bad, "'")));
  }
  for (const char* good : {"{host}-n{index}", "{dsn}", "X-{bdf}"}) {
    EXPECT_TRUE(CheckSerialTemplate(good).ok()) << good;
  }
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"{host}", "it needs {index}, {dsn} or {bdf}"},
           {"fixed", "it needs {index}, {dsn} or {bdf}"},
           {"{host}-{slot}", "unknown placeholder {slot}"},
           {"{index", "unbalanced braces"},
           {"index}", "unbalanced braces"},
           {"{{index}}", "unbalanced braces"}}) {
    absl::Status checked = CheckSerialTemplate(bad);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(checked.message()),
                HasSubstr(absl::StrCat("onic_discovery.serial '", bad, "': ", why)));
  }
}

}  // namespace
}  // namespace fleet::onic_agent
