// TL1 text handling of the emulator: command and port-list grammar, parse-error offsets,
// stream splitting and the exact GR-831 response bytes.
#include "switch_adapters/polatis/emulator/tl1_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet::polatis_emu {
namespace {

using ::testing::ElementsAre;

Tl1Command Parsed(const std::string& text) {
  Tl1ParseResult result = ParseTl1Command(text);
  EXPECT_TRUE(result.command.has_value()) << text << " fails at " << result.error_offset;
  return result.command.value_or(Tl1Command{});
}

// The offset of the parse error in `text` (npos if it parses).
size_t ErrorOffset(const std::string& text) {
  Tl1ParseResult result = ParseTl1Command(text);
  return result.command ? std::string::npos : result.error_offset;
}

TEST(Tl1CommandTest, ParsesEveryCommandFormOfTheSwitch) {
  Tl1Command login = Parsed("ACT-USER::admin:123::root;");
  EXPECT_EQ(login.verb, "ACT-USER");
  EXPECT_THAT(login.blocks, ElementsAre("ACT-USER", "", "admin", "123", "", "root"));
  EXPECT_EQ(login.aid(), "admin");
  EXPECT_EQ(login.ctag(), "123");
  EXPECT_EQ(login.block(5), "root");
  EXPECT_EQ(login.block(9), "");
  EXPECT_THAT(login.offsets, ElementsAre(0, 9, 10, 16, 20, 21));

  EXPECT_THAT(Parsed("CANC-USER::admin:124:;").blocks,
              ElementsAre("CANC-USER", "", "admin", "124", ""));
  EXPECT_EQ(Parsed("ENT-PATCH::1&&3,385&&387:127:;").aid(), "1&&3,385&&387");
  EXPECT_EQ(Parsed("DLT-PATCH::ALL:129:;").aid(), "ALL");
  Tl1Command all = Parsed("RTRV-PATCH:::130:;");
  EXPECT_EQ(all.aid(), "");
  EXPECT_EQ(all.ctag(), "130");
  EXPECT_THAT(Parsed("RTRV-EQPT::SYSTEM:132:::PARAMETER=SIZE;").blocks,
              ElementsAre("RTRV-EQPT", "", "SYSTEM", "132", "", "", "PARAMETER=SIZE"));
  EXPECT_EQ(Parsed("RTRV-PORT-SHUTTER::5:137:;").verb, "RTRV-PORT-SHUTTER");
  EXPECT_EQ(Parsed("RTRV-ALM-ALL::ALL:139:;").aid(), "ALL");
  // A TID, no trailing ':' after the ctag, lower-case verbs, alphanumeric ctags.
  Tl1Command tid = Parsed("rtrv-patch:OCS-1::A7;");
  EXPECT_EQ(tid.verb, "RTRV-PATCH");
  EXPECT_EQ(tid.blocks[0], "rtrv-patch");
  EXPECT_EQ(tid.blocks[1], "OCS-1");
  EXPECT_EQ(tid.ctag(), "A7");
}

TEST(Tl1CommandTest, MalformedCommandsReportTheOffsetOfTheFirstError) {
  EXPECT_EQ(ErrorOffset("RTRV-PATCH:::1:"), 15u);  // no ';'
  EXPECT_EQ(ErrorOffset(""), 0u);
  EXPECT_EQ(ErrorOffset(";"), 0u);                  // no verb
  EXPECT_EQ(ErrorOffset("1RTRV-PATCH:::1:;"), 0u);  // verb starts with a digit
  EXPECT_EQ(ErrorOffset("RTRVPATCH:::1:;"), 9u);    // no noun
  EXPECT_EQ(ErrorOffset("RTRV-:::1:;"), 5u);        // empty noun
  EXPECT_EQ(ErrorOffset("RTRV--PATCH:::1:;"), 5u);
  EXPECT_EQ(ErrorOffset("ENT_PATCH::1,17:1:;"), 3u);
  EXPECT_EQ(ErrorOffset("RTRV-PATCH:O_S::1:;"), 12u);   // bad TID character
  EXPECT_EQ(ErrorOffset("ENT-PATCH::1, 17:1:;"), 13u);  // space in the AID
  EXPECT_EQ(ErrorOffset("RTRV-PATCH::;"), 12u);         // ctag missing: the ';' is reached
  EXPECT_EQ(ErrorOffset("RTRV-PATCH::::;"), 13u);       // empty ctag
  EXPECT_EQ(ErrorOffset("RTRV-PATCH:::1-2:;"), 14u);    // bad ctag character
  EXPECT_EQ(ErrorOffset("RTRV-PATCH:::" + std::string(33, '7') + ":;"), 13u + 32u);
  EXPECT_EQ(ErrorOffset("ACT-USER::admin:1::ro\x01ot;"), 21u);  // control character
  EXPECT_EQ(ErrorOffset("RTRV-PATCH:::1:\n;"), 15u);
}

TEST(Tl1CommandTest, CtagOfAMalformedCommandIsKeptWhenReadable) {
  EXPECT_EQ(ParseTl1Command("ENT_PATCH::1,17:55:;").ctag, "55");
  EXPECT_EQ(ParseTl1Command("ENT_PATCH::1,17:5-5:;").ctag, "0");
  EXPECT_EQ(ParseTl1Command("garbage;").ctag, "0");
}

TEST(Tl1CommandTest, FormatGivesBackTheCommand) {
  for (const char* text : {"ACT-USER::admin:123::root;", "RTRV-PATCH:::130:;",
                           "rtrv-eqpt:T1:SYSTEM:9:::PARAMETER=SIZE;", "CANC-USER::admin:1;"}) {
    Tl1Command command = Parsed(text);
    EXPECT_EQ(FormatTl1Command(command), text);
    EXPECT_EQ(Parsed(FormatTl1Command(command)), command);
  }
}

TEST(Tl1CommandTest, TakeSplitsAStreamIntoCommands) {
  std::string buffer = "\r\nACT-USER::admin:1::root;  RTRV-PATCH:::2:;\nRTRV-PA";
  EXPECT_EQ(TakeTl1Command(&buffer), "ACT-USER::admin:1::root;");
  EXPECT_EQ(TakeTl1Command(&buffer), "RTRV-PATCH:::2:;");
  EXPECT_EQ(TakeTl1Command(&buffer), std::nullopt);
  EXPECT_EQ(buffer, "RTRV-PA");  // waits for the rest
  buffer += "TCH:::3:;\r\n";
  EXPECT_EQ(TakeTl1Command(&buffer), "RTRV-PATCH:::3:;");
  EXPECT_EQ(TakeTl1Command(&buffer), std::nullopt);
  EXPECT_EQ(buffer, "");
}

PortList List(const std::string& text) {
  PortListParseResult result = ParsePortList(text);
  EXPECT_TRUE(result.list.has_value()) << text << " fails at " << result.error_offset;
  return result.list.value_or(PortList{});
}

size_t ListErrorOffset(const std::string& text) {
  PortListParseResult result = ParsePortList(text);
  return result.list ? std::string::npos : result.error_offset;
}

TEST(PortListTest, ListsRangesAndAll) {
  EXPECT_THAT(List("5").ranges, ElementsAre(PortRange{5, 5}));
  EXPECT_THAT(List("1&2&3").ranges, ElementsAre(PortRange{1, 1}, PortRange{2, 2}, PortRange{3, 3}));
  EXPECT_THAT(List("385&&387").ranges, ElementsAre(PortRange{385, 387}));
  EXPECT_THAT(List("1&&3&7&10&&9").ranges,
              ElementsAre(PortRange{1, 3}, PortRange{7, 7}, PortRange{10, 9}));
  EXPECT_TRUE(List("ALL").all);
  EXPECT_TRUE(List("all").all);
  EXPECT_THAT(ExpandPortList(List("1&&3&7&10&&9")), ElementsAre(1, 2, 3, 7, 10, 9));
  EXPECT_EQ(PortCount(List("1&&3&7&10&&9")), 6);
  EXPECT_EQ(PortCount(List("1&&999999999")), 999999999);  // counted, never expanded
}

TEST(PortListTest, MalformedListsReportTheOffset) {
  EXPECT_EQ(ListErrorOffset(""), 0u);
  EXPECT_EQ(ListErrorOffset("&1"), 0u);
  EXPECT_EQ(ListErrorOffset("1&"), 2u);
  EXPECT_EQ(ListErrorOffset("1&&"), 3u);
  EXPECT_EQ(ListErrorOffset("1&&&2"), 3u);
  EXPECT_EQ(ListErrorOffset("1,2"), 1u);
  EXPECT_EQ(ListErrorOffset("12a"), 2u);
  EXPECT_EQ(ListErrorOffset("-1"), 0u);
  EXPECT_EQ(ListErrorOffset("1234567890"), 9u);  // ten digits
  EXPECT_EQ(ListErrorOffset("ALL&1"), 0u);
}

TEST(PortListTest, FormatRoundTrips) {
  for (const char* text : {"1", "1&2&3", "1&&384", "384&&1&7", "ALL"}) {
    EXPECT_EQ(FormatPortList(List(text)), text);
  }
  EXPECT_EQ(FormatPortList(List("007&&007")), "7");
}

TEST(Tl1ResponseTest, Gr831Framing) {
  const absl::Time time = absl::FromUnixSeconds(1'700'000'000);  // 2023-11-14 22:13:20 UTC
  EXPECT_EQ(Tl1Completed("POLATIS-EMU", time, "130", {"1,385", "2,386"}),
            "\r\n\n   POLATIS-EMU 23-11-14 22:13:20\r\nM  130 COMPLD\r\n"
            "   \"1,385\"\r\n   \"2,386\"\r\n;");
  EXPECT_EQ(Tl1Completed("SW", time, "1", {}), "\r\n\n   SW 23-11-14 22:13:20\r\nM  1 COMPLD\r\n;");
  EXPECT_EQ(Tl1Denied("POLATIS-EMU", time, "7", "IDNV", "Invalid OXC port: 1000"),
            "\r\n\n   POLATIS-EMU 23-11-14 22:13:20\r\nM  7 DENY\r\n   IDNV\r\n"
            "   /* Invalid OXC port: 1000 */\r\n;");
}

}  // namespace
}  // namespace fleet::polatis_emu
