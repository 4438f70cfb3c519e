#include "common/backoff.h"

#include <random>

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(BackoffTest, DoublesFromInitialUpToMax) {
  Backoff backoff(absl::Milliseconds(100), absl::Milliseconds(500));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(200));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(400));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(500));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(500));
}

TEST(BackoffTest, ResetStartsAgainFromInitial) {
  Backoff backoff(absl::Seconds(1), absl::Seconds(60));
  backoff.Next();
  backoff.Next();
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Seconds(1));
  EXPECT_EQ(backoff.Next(), absl::Seconds(2));
}

TEST(BackoffTest, MaxBelowInitialIsTheCeiling) {
  Backoff backoff(absl::Seconds(10), absl::Seconds(3));
  EXPECT_EQ(backoff.Next(), absl::Seconds(3));
  EXPECT_EQ(backoff.Next(), absl::Seconds(3));
}

TEST(BackoffTest, JitterStaysWithinHalfAndOneAndAHalf) {
  std::mt19937_64 random(7);
  absl::Duration lowest = absl::InfiniteDuration();
  absl::Duration highest = absl::ZeroDuration();
  for (int i = 0; i < 1000; ++i) {
    const absl::Duration d = Jittered(absl::Seconds(2), random);
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
  }
  EXPECT_GE(lowest, absl::Seconds(1));
  EXPECT_LT(highest, absl::Seconds(3));
  EXPECT_LT(lowest, absl::Milliseconds(1100));  // Spread over the range, not a constant.
  EXPECT_GT(highest, absl::Milliseconds(2900));
}

}  // namespace
}  // namespace fleet
