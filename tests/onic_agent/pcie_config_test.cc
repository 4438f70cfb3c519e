// Config-space parsing: capability walks (including broken lists), DSN, Link Status.
#include "onic_agent/pcie_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace fleet::onic_agent::pcie {
namespace {

using ::testing::HasSubstr;

void Put16(std::string& c, size_t offset, uint16_t v) {
  c[offset] = static_cast<char>(v & 0xff);
  c[offset + 1] = static_cast<char>(v >> 8);
}
void Put32(std::string& c, size_t offset, uint32_t v) {
  Put16(c, offset, static_cast<uint16_t>(v & 0xffff));
  Put16(c, offset + 2, static_cast<uint16_t>(v >> 16));
}

// Capabilities: 0x40 PM → 0x50 MSI → 0x60 PCI Express.
std::string ConfigWithCaps(size_t size = 4096) {
  std::string c(size, '\0');
  Put16(c, kStatus, kStatusCapabilitiesList);
  c[kCapabilitiesPointer] = 0x40;
  c[0x40] = 0x01;
  c[0x41] = 0x50;
  c[0x50] = 0x05;
  c[0x51] = 0x60;
  c[0x60] = 0x10;
  c[0x61] = 0x00;
  return c;
}

TEST(PcieConfigTest, FindsACapabilityAlongTheList) {
  const std::string c = ConfigWithCaps();
  absl::StatusOr<std::optional<size_t>> pcie = FindCapability(c, kCapIdPciExpress);
  ASSERT_TRUE(pcie.ok()) << pcie.status();
  EXPECT_EQ(*pcie, std::optional<size_t>(0x60));
  absl::StatusOr<std::optional<size_t>> msi = FindCapability(c, 0x05);
  ASSERT_TRUE(msi.ok()) << msi.status();
  EXPECT_EQ(*msi, std::optional<size_t>(0x50));
  absl::StatusOr<std::optional<size_t>> absent = FindCapability(c, 0x11);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->has_value());
}

TEST(PcieConfigTest, NoCapabilitiesListBitMeansNoCapabilities) {
  std::string c = ConfigWithCaps();
  Put16(c, kStatus, 0);
  absl::StatusOr<std::optional<size_t>> pcie = FindCapability(c, kCapIdPciExpress);
  ASSERT_TRUE(pcie.ok()) << pcie.status();
  EXPECT_FALSE(pcie->has_value());
}

TEST(PcieConfigTest, ACapabilityLoopIsAnErrorNotAHang) {
  std::string c = ConfigWithCaps();
  c[0x60] = 0x11;  // Not PCIe, and pointing back to PM: 0x40 → 0x50 → 0x60 → 0x40 …
  c[0x61] = 0x40;
  absl::StatusOr<std::optional<size_t>> pcie = FindCapability(c, kCapIdPciExpress);
  EXPECT_EQ(pcie.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pcie.status().message()), HasSubstr("a loop"));
}

TEST(PcieConfigTest, APointerIntoTheHeaderIsAnError) {
  std::string c = ConfigWithCaps();
  c[0x51] = 0x10;
  absl::StatusOr<std::optional<size_t>> pcie = FindCapability(c, kCapIdPciExpress);
  EXPECT_EQ(pcie.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pcie.status().message()),
              HasSubstr("capability pointer 0x10 at 0x51 is outside 0x40..0xfc"));
}

TEST(PcieConfigTest, ShortConfigSpaceIsAnError) {
  absl::StatusOr<std::optional<size_t>> pcie =
      FindCapability(ConfigWithCaps().substr(0, 64), kCapIdPciExpress);
  EXPECT_EQ(pcie.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pcie.status().message()), HasSubstr("64 bytes, need 256"));
}

TEST(PcieConfigTest, ReadsTheDeviceSerialNumberFromTheExtendedList) {
  std::string c = ConfigWithCaps();
  Put32(c, 0x100, 0x14020001);  // AER → 0x140
  Put32(c, 0x140, 0x00010003);  // DSN, last
  Put32(c, 0x144, 0x89abcdef);
  Put32(c, 0x148, 0x01234567);
  absl::StatusOr<std::optional<uint64_t>> dsn = DeviceSerialNumber(c);
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  EXPECT_EQ(*dsn, std::optional<uint64_t>(0x0123456789abcdefULL));
  absl::StatusOr<std::optional<size_t>> aer = FindExtendedCapability(c, 0x0001);
  ASSERT_TRUE(aer.ok()) << aer.status();
  EXPECT_EQ(*aer, std::optional<size_t>(0x100));
}

TEST(PcieConfigTest, NoExtendedSpaceOrNoDsnCapabilityMeansNoSerialNumber) {
  std::string c = ConfigWithCaps();
  Put32(c, 0x100, 0x00020001);  // AER only.
  absl::StatusOr<std::optional<uint64_t>> dsn = DeviceSerialNumber(c);
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  EXPECT_FALSE(dsn->has_value());
  // A 256-byte (conventional) config space has no extended capabilities at all.
  dsn = DeviceSerialNumber(ConfigWithCaps(256));
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  EXPECT_FALSE(dsn->has_value());
  // All ones: the function stopped answering.
  Put32(c, 0x100, 0xffffffffu);
  dsn = DeviceSerialNumber(c);
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  EXPECT_FALSE(dsn->has_value());
}

TEST(PcieConfigTest, AnExtendedCapabilityLoopOrBadPointerIsAnError) {
  std::string c = ConfigWithCaps();
  Put32(c, 0x100, 0x14020001);  // AER → 0x140
  Put32(c, 0x140, 0x10010002);  // VC → 0x100: a loop.
  absl::StatusOr<std::optional<uint64_t>> dsn = DeviceSerialNumber(c);
  EXPECT_EQ(dsn.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(dsn.status().message()), HasSubstr("a loop"));

  Put32(c, 0x140, 0x08010002);  // VC → 0x080, into conventional space.
  dsn = DeviceSerialNumber(c);
  EXPECT_EQ(dsn.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(dsn.status().message()),
              HasSubstr("extended capability pointer 0x080 at 0x140 is outside 0x100..0xffc"));
}

TEST(PcieConfigTest, DecodesLinkStatus) {
  // 16 GT/s x16, DL Link Active.
  LinkStatusFields f = DecodeLinkStatus(0x2104);
  EXPECT_EQ(f.speed_code, 4);
  EXPECT_EQ(f.speed_mts, 16000u);
  EXPECT_EQ(f.width, 16u);
  EXPECT_TRUE(f.dll_active);
  EXPECT_FALSE(f.training);
  // Training, 2.5 GT/s x1.
  f = DecodeLinkStatus(0x0811);
  EXPECT_EQ(f.speed_mts, 2500u);
  EXPECT_EQ(f.width, 1u);
  EXPECT_TRUE(f.training);
  EXPECT_FALSE(f.dll_active);

  EXPECT_EQ(LinkSpeedMts(2), 5000u);
  EXPECT_EQ(LinkSpeedMts(3), 8000u);
  EXPECT_EQ(LinkSpeedMts(5), 32000u);
  EXPECT_EQ(LinkSpeedMts(6), 64000u);
  EXPECT_EQ(LinkSpeedMts(0), 0u);
  EXPECT_EQ(LinkSpeedMts(7), 0u);
}

}  // namespace
}  // namespace fleet::onic_agent::pcie
