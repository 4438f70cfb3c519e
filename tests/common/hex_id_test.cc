#include "common/hex_id.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet {
namespace {

using ::testing::HasSubstr;

TEST(HexIdTest, TakesIdsAndSerialNumbersAsOperatorsWriteThem) {
  EXPECT_EQ(ParseHexId("10de", 16, "vendor").value(), 0x10deu);
  EXPECT_EQ(ParseHexId("0x10DE", 16, "vendor").value(), 0x10deu);
  EXPECT_EQ(ParseHexId("ffff", 16, "vendor").value(), 0xffffu);
  EXPECT_EQ(ParseHexId("0xffee000000000001", 64, "dsn").value(), 0xffee000000000001ULL);
  EXPECT_EQ(ParseHexId("52-54-00-ff-ff-12-34-56", 64, "dsn").value(), 0x525400ffff123456ULL);
  EXPECT_EQ(ParseHexId("52:54:00:FF:FF:12:34:56", 64, "dsn").value(), 0x525400ffff123456ULL);
}

TEST(HexIdTest, WritesIdsAndSerialNumbersAsItReadsThem) {
  EXPECT_EQ(PcieIdText(0x10de), "10de");
  EXPECT_EQ(PcieIdText(0x1b), "001b");
  EXPECT_EQ(ParseHexId(PcieIdText(0x8086), 16, "vendor").value(), 0x8086u);
  EXPECT_EQ(DsnText(0x48b02d0300a1b2c3ULL), "48-b0-2d-03-00-a1-b2-c3");
  EXPECT_EQ(ParseHexId(DsnText(0x0000000000000001ULL), 64, "dsn").value(), 1u);
}

TEST(HexIdTest, RefusesWhatIsNotOneExactHexNumberNamingItAndTheRule) {
  for (const char* bad : {"", "0x", "0", "-1", "+1", "10-de", "10de ", "x10de", "10000", "g1"}) {
    absl::StatusOr<uint64_t> parsed = ParseHexId(bad, 16, "--expect-vendor");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(std::string(parsed.status().message()),
                HasSubstr(std::string("--expect-vendor '") + bad +
                          "' is not a non-zero hex number of at most 16 bits (e.g. 0x10de)"));
  }
  // Bytes: all eight, two digits each, one separator; a dropped zero would be another DSN.
  for (const char* bad : {"48-b0-2d-3-00-a1-b2-c3", "48-b0-2d-03-00-a1-b2",
                          "48-b0:2d-03-00-a1-b2-c3", "-48b02d0300a1b2c3", "10000000000000000"}) {
    absl::StatusOr<uint64_t> parsed = ParseHexId(bad, 64, "dsn");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("at most 64 bits"));
  }
}

}  // namespace
}  // namespace fleet
