#include "switch_adapters/polatis/tl1_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet::polatis {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kCompleted[] =
    "\r\n\n   POLATIS 26-11-22 08:00:00\r\nM  130 COMPLD\r\n   \"1,385\"\r\n   \"2,386\"\r\n;";
constexpr char kDenied[] =
    "\r\n\n   POLATIS 26-11-22 08:00:00\r\nM  131 DENY\r\n   IDNV\r\n   /* Invalid OXC port: 1000 "
    "*/\r\n;";

TEST(TakeMessageTest, WaitsForTheTerminatorAndSplitsMessages) {
  std::string buffer = std::string(kCompleted).substr(0, 30);
  EXPECT_FALSE(TakeMessage(buffer).has_value());
  buffer = std::string(kCompleted) + kDenied + "\r\n\n   POL";
  std::optional<std::string> first = TakeMessage(buffer);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, kCompleted);
  std::optional<std::string> second = TakeMessage(buffer);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, kDenied);
  EXPECT_FALSE(TakeMessage(buffer).has_value());
  EXPECT_EQ(buffer, "\r\n\n   POL");
}

TEST(TakeMessageTest, SemicolonsInQuotesAndCommentsDoNotEndAMessage) {
  std::string buffer = "M  1 DENY\r\n   SROF\r\n   /* a; b */\r\n   \"x;y\"\r\n;rest";
  std::optional<std::string> message = TakeMessage(buffer);
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(*message, HasSubstr("\"x;y\""));
  EXPECT_EQ(buffer, "rest");
}

TEST(ParseTl1ResponseTest, CompletedWithData) {
  absl::StatusOr<Tl1Response> r = ParseTl1Response(kCompleted);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ctag, "130");
  EXPECT_TRUE(r->completed);
  EXPECT_THAT(r->data, ElementsAre("1,385", "2,386"));
}

TEST(ParseTl1ResponseTest, DeniedWithCodeAndText) {
  absl::StatusOr<Tl1Response> r = ParseTl1Response(kDenied);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ctag, "131");
  EXPECT_FALSE(r->completed);
  EXPECT_EQ(r->completion, "DENY");
  EXPECT_EQ(r->error_code, "IDNV");
  EXPECT_EQ(r->error_text, "Invalid OXC port: 1000");
}

TEST(ParseTl1ResponseTest, AutonomousMessagesAreMarked) {
  absl::StatusOr<Tl1Response> r =
      ParseTl1Response("\r\n\n   POLATIS 26-11-22 08:00:00\r\nA  77 REPT ALM\r\n   \"5:MJ\"\r\n;");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->autonomous);
}

TEST(ParseTl1ResponseTest, MalformedInputIsAnErrorNotACrash) {
  EXPECT_EQ(ParseTl1Response("garbage;").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTl1Response(";").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ParseTl1Response("M  5\r\n;").status().message()),
              HasSubstr("is not 'M CTAG CODE'"));
  EXPECT_THAT(std::string(ParseTl1Response("M  5 COMPLD\r\n   \"1,385\r\n;").status().message()),
              HasSubstr("no closing quote"));
}

TEST(DataLineTest, PatchAndPortValueLines) {
  EXPECT_EQ(ParsePatchLine("1,385"), std::make_pair(1u, 385u));
  EXPECT_FALSE(ParsePatchLine("1;385").has_value());
  EXPECT_FALSE(ParsePatchLine("1,").has_value());
  EXPECT_FALSE(ParsePatchLine("a,b").has_value());
  EXPECT_EQ(ParsePortValueLine("385:-3.10"), std::make_pair(385u, std::string("-3.10")));
  EXPECT_EQ(ParsePortValueLine("5:MJ,PORT-FAILED,SA"),
            std::make_pair(5u, std::string("MJ,PORT-FAILED,SA")));
  EXPECT_FALSE(ParsePortValueLine("x:1").has_value());
  EXPECT_FALSE(ParsePortValueLine("5").has_value());
}

}  // namespace
}  // namespace fleet::polatis
