#include "common/yaml_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet {
namespace {

using ::testing::HasSubstr;

TEST(YamlTextTest, ParsesWellFormedText) {
  absl::StatusOr<YAML::Node> node = LoadYaml("a: 1\nb: [x, y]\n", "f.yaml");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)["a"].as<int>(), 1);
  EXPECT_EQ((*node)["b"].size(), 2u);
}

TEST(YamlTextTest, SyntaxErrorNamesFileAndLine) {
  absl::StatusOr<YAML::Node> node = LoadYaml("a: 1\nb: [x, y\n", "f.yaml");
  ASSERT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(node.status().message(), HasSubstr("f.yaml:"));
  EXPECT_THAT(node.status().message(), HasSubstr("YAML syntax error"));
}

TEST(YamlTextTest, TextThatIsNotUtf8IsRefusedWithByteAndPlace) {
  absl::StatusOr<YAML::Node> node = LoadYaml("a: 1\nb: \xff\n", "f.yaml");
  ASSERT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(node.status().message(), HasSubstr("f.yaml:2: not UTF-8 text (byte 0xff"));
}

// Bytes that are UTF-8 yet, with a NUL among the first four, make yaml-cpp read UTF-16BE: here
// "a: x" then 0xD880 (a lone high surrogate), which it would hand back as invalid UTF-8.
TEST(YamlTextTest, NulByteIsRefusedSoTextIsNeverReadAsUtf16) {
  const std::string utf16be("\0a\0:\0 \0x\xd8\x80\0y\0\n", 14);
  absl::StatusOr<YAML::Node> node = LoadYaml(utf16be, "f.yaml");
  ASSERT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(node.status().message(),
              HasSubstr("f.yaml:1: a NUL byte is not YAML text (byte 0x00 at column 1)"));
  node = LoadYaml(std::string("a: \"x\"\nb: y\0\n", 14), "f.yaml");
  EXPECT_THAT(node.status().message(), HasSubstr("f.yaml:2: a NUL byte is not YAML text"));
}

TEST(YamlTextTest, MissingFileIsNotFoundNamingWhatAndPath) {
  absl::StatusOr<std::string> text = ReadTextFile("/nonexistent/x.yaml", "inventory");
  ASSERT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("cannot read inventory /nonexistent/x.yaml"));
}

}  // namespace
}  // namespace fleet
