#include "common/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Parsed {
  std::string name = "default";
  int64_t count = 3;
  bool verbose = false;
  FlagSet flags{"tool ARG [flags]"};
  Parsed() {
    flags.String("name,n", &name, "a name");
    flags.Int("count", &count, "how many");
    flags.Bool("verbose", &verbose, "say more");
  }
};

TEST(FlagsTest, AcceptsEveryFormAndKeepsPositionalsInOrder) {
  Parsed p;
  absl::StatusOr<std::vector<std::string>> rest =
      p.flags.Parse({"a", "--name=x", "b", "--count", "7", "--verbose", "--", "--c"});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_THAT(*rest, ElementsAre("a", "b", "--c"));
  EXPECT_EQ(p.name, "x");
  EXPECT_EQ(p.count, 7);
  EXPECT_TRUE(p.verbose);
  EXPECT_TRUE(p.flags.IsSet("count"));
}

TEST(FlagsTest, ShortNameAndDefaults) {
  Parsed p;
  ASSERT_TRUE(p.flags.Parse({"-n", "y"}).ok());
  EXPECT_EQ(p.name, "y");
  EXPECT_EQ(p.count, 3);
  EXPECT_FALSE(p.flags.IsSet("count"));
  EXPECT_THAT(p.flags.Help(), HasSubstr("tool ARG [flags]"));
}

TEST(FlagsTest, ErrorsNameTheFlag) {
  Parsed unknown;
  EXPECT_THAT(unknown.flags.Parse({"--colour", "red"}).status().message(), HasSubstr("colour"));
  Parsed malformed;
  absl::Status bad = malformed.flags.Parse({"--count", "many"}).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("count"));
  Parsed missing;
  EXPECT_THAT(missing.flags.Parse({"--name"}).status().message(), HasSubstr("name"));
}

TEST(FlagsTest, UnknownFlagSuggestsTheNearest) {
  Parsed p;
  EXPECT_EQ(p.flags.Parse({"--cuont", "2"}).status().message(),
            "unknown flag --cuont (did you mean '--count'?); see --help");
  EXPECT_EQ(p.flags.Parse({"-name=x"}).status().message(),
            "unknown flag -name=x (did you mean '--name'?); see --help");
  EXPECT_EQ(p.flags.Parse({"--wholly-else"}).status().message(),
            "unknown flag --wholly-else; see --help");
}

TEST(FlagsTest, AliasSetsTheFlagAndIsListedWithIt) {
  Parsed p;
  p.flags.Alias("number", "count");
  ASSERT_TRUE(p.flags.Parse({"--number=9"}).ok());
  EXPECT_EQ(p.count, 9);
  EXPECT_TRUE(p.flags.IsSet("count"));
  EXPECT_THAT(p.flags.Help(), HasSubstr("--count VALUE"));
  EXPECT_THAT(p.flags.Help(), HasSubstr("how many (default 3) (also --number)\n"));
}

TEST(FlagsTest, ShownDefaultReplacesTheValueInHelp) {
  int64_t days = 0, retries = 5;
  FlagSet flags{"tool [flags]"};
  flags.Int("days", &days, "validity (default 365)", /*shown_default=*/"");
  flags.Int("retries", &retries, "how often", "five");
  EXPECT_THAT(flags.Help(), HasSubstr("validity (default 365)\n"));
  EXPECT_THAT(flags.Help(), ::testing::Not(HasSubstr("(default 0)")));
  EXPECT_THAT(flags.Help(), HasSubstr("how often (default five)\n"));
}

}  // namespace
}  // namespace fleet
