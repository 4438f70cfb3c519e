#include "common/wording.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(WordingTest, CountedPicksTheNounsNumber) {
  EXPECT_EQ(Counted(1, "switch", "switches"), "1 switch");
  EXPECT_EQ(Counted(2, "switch", "switches"), "2 switches");
  EXPECT_EQ(Counted(0, "circuit"), "0 circuits");
  EXPECT_EQ(Counted(1, "circuit"), "1 circuit");
  EXPECT_EQ(Counted(-1, "circuit"), "-1 circuits");
}

TEST(WordingTest, NearestWordForgivesASlipButNotAnotherWord) {
  const std::vector<std::string> verbs = {"get", "describe", "drain", "undrain", "events"};
  EXPECT_EQ(NearestWord("gett", verbs), "get");           // A letter too many.
  EXPECT_EQ(NearestWord("descirbe", verbs), "describe");  // Two letters swapped.
  EXPECT_EQ(NearestWord("evnts", verbs), "events");       // A letter missing.
  EXPECT_EQ(NearestWord("undrian", verbs), "undrain");
  EXPECT_EQ(NearestWord("set", verbs), "get");  // One letter of three is a slip.
  EXPECT_EQ(NearestWord("xyz", verbs), "");     // Not a slip of anything.
  EXPECT_EQ(NearestWord("drain", verbs), "");   // Known: nothing to suggest.
  // Ties go to the earlier word; a word further than a third of its letters is never taken.
  EXPECT_EQ(NearestWord("ab", {"ax", "ay"}), "ax");
  EXPECT_EQ(NearestWord("switchs", {"switches"}), "switches");
  EXPECT_EQ(NearestWord("host", {"port"}), "");
}

TEST(WordingTest, DidYouMeanIsEmptyWithoutASuggestion) {
  EXPECT_EQ(DidYouMean("--colr", {"--color", "--config"}), " (did you mean '--color'?)");
  EXPECT_EQ(DidYouMean("--zzzzzz", {"--color"}), "");
}

}  // namespace
}  // namespace fleet
