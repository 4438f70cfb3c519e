#include "controller/engine/retry_scheduler.h"
#include "testing/fake_clock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

class RetrySchedulerTest : public ::testing::Test {
 protected:
  fleet::testing::FakeClock clock_;
  int wakes_ = 0;
  RetryScheduler retries_{&clock_, absl::Seconds(1), absl::Seconds(5), [this] { ++wakes_; }};
};

TEST_F(RetrySchedulerTest, TheWaitDoublesUpToTheMaximum) {
  const absl::Time t0 = clock_.Now();
  retries_.RetryLater("a");
  EXPECT_THAT(retries_.DueForTest("a"), Optional(t0 + absl::Seconds(1)));
  for (absl::Duration want :
       {absl::Seconds(2), absl::Seconds(4), absl::Seconds(5), absl::Seconds(5)}) {
    retries_.RetryLater("a");
    EXPECT_THAT(retries_.DueForTest("a"), Optional(t0 + want));
  }
  EXPECT_EQ(wakes_, 0);
}

TEST_F(RetrySchedulerTest, OnlyTheRetriesDueByNowAreDue) {
  retries_.ScheduleAt("now", clock_.Now());
  retries_.RetryLater("later");
  EXPECT_THAT(retries_.Due(), ElementsAre("now"));
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(retries_.Due(), ElementsAre("later", "now"));
}

TEST_F(RetrySchedulerTest, ARunningAttemptIsNotDueUntilItAsksForTheNext) {
  retries_.ScheduleAt("a", clock_.Now());
  retries_.Running("a");
  clock_.Advance(absl::Hours(1));
  EXPECT_THAT(retries_.Due(), IsEmpty());
  retries_.RetryLater("a");
  EXPECT_THAT(retries_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(2)));
}

TEST_F(RetrySchedulerTest, ScheduleAtStartsTheBackoffAgain) {
  retries_.RetryLater("a");
  retries_.RetryLater("a");
  retries_.ScheduleAt("a", clock_.Now());
  retries_.RetryLater("a");
  EXPECT_THAT(retries_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(2)));
}

TEST_F(RetrySchedulerTest, AnAgentConnectingMakesEveryRetryDueAndRerunsARunningOne) {
  retries_.RetryLater("waiting");
  retries_.ScheduleAt("running", clock_.Now());
  retries_.Running("running");
  retries_.AgentConnected();
  EXPECT_EQ(wakes_, 1);
  EXPECT_THAT(retries_.Due(), ElementsAre("waiting"));
  // The running attempt may have missed the agent: its next one is at once.
  retries_.RetryLater("running");
  EXPECT_EQ(wakes_, 2);
  EXPECT_THAT(retries_.DueForTest("running"), Optional(clock_.Now()));
  // And only that next one.
  retries_.RetryLater("running");
  EXPECT_THAT(retries_.DueForTest("running"), Optional(clock_.Now() + absl::Seconds(2)));
}

TEST_F(RetrySchedulerTest, ForgottenRetriesAreNotDue) {
  retries_.ScheduleAt("a", clock_.Now());
  retries_.Forget("a");
  EXPECT_THAT(retries_.Due(), IsEmpty());
  EXPECT_EQ(retries_.DueForTest("a"), std::nullopt);
}

}  // namespace
}  // namespace fleet::engine
