#include "controller/engine/sync_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace fleet::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

class SyncQueueTest : public ::testing::Test {
 protected:
  SyncQueue Queue(SyncQueue::Options options = {}) {
    options.initial = absl::Seconds(1);
    options.max = absl::Seconds(5);
    return SyncQueue(&clock_, std::move(options), [this] { ++wakes_; });
  }

  fleet::testing::FakeClock clock_;
  int wakes_ = 0;
  SyncQueue queue_ = Queue();
};

TEST_F(SyncQueueTest, TheWaitDoublesUpToTheMaximum) {
  const absl::Time t0 = clock_.Now();
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(t0 + absl::Seconds(1)));
  for (absl::Duration want :
       {absl::Seconds(2), absl::Seconds(4), absl::Seconds(5), absl::Seconds(5)}) {
    queue_.RetryLater("a");
    EXPECT_THAT(queue_.DueForTest("a"), Optional(t0 + want));
  }
  EXPECT_EQ(wakes_, 0);
}

TEST_F(SyncQueueTest, OnlyTheEntriesDueByNowAreDue) {
  ASSERT_TRUE(queue_.Mark("now").ok());
  EXPECT_EQ(wakes_, 1);
  queue_.RetryLater("later");
  EXPECT_THAT(queue_.Due(), ElementsAre("now"));
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(queue_.Due(), ElementsAre("later", "now"));
}

TEST_F(SyncQueueTest, NextDueIsTheEarliestFutureTimeOfAnEntryNotRunning) {
  EXPECT_EQ(queue_.NextDue(), std::nullopt);
  ASSERT_TRUE(queue_.Mark("now").ok());  // Due already: its claim's release runs it.
  EXPECT_EQ(queue_.NextDue(), std::nullopt);
  ASSERT_TRUE(queue_.Mark("in-7s", clock_.Now() + absl::Seconds(7)).ok());
  ASSERT_TRUE(queue_.Mark("in-3s", clock_.Now() + absl::Seconds(3)).ok());
  EXPECT_THAT(queue_.NextDue(), Optional(clock_.Now() + absl::Seconds(3)));
  ASSERT_TRUE(queue_.Mark("in-1s", clock_.Now() + absl::Seconds(1)).ok());
  clock_.Advance(absl::Seconds(1));  // in-1s is due now.
  EXPECT_THAT(queue_.NextDue(), Optional(clock_.Now() + absl::Seconds(2)));
  EXPECT_FALSE(queue_.Running("in-3s"));  // Not due yet: nothing starts.
  ASSERT_TRUE(queue_.Running("now"));
  queue_.RetryAt("now", clock_.Now() + absl::Seconds(1));
  EXPECT_THAT(queue_.NextDue(), Optional(clock_.Now() + absl::Seconds(1)));
  ASSERT_TRUE(queue_.Mark("now").ok());  // Due again now, and then running:
  ASSERT_TRUE(queue_.Running("now"));    // a running attempt is never next.
  EXPECT_THAT(queue_.NextDue(), Optional(clock_.Now() + absl::Seconds(2)));
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(queue_.NextDue(), std::nullopt);
}

TEST_F(SyncQueueTest, AnAllocationMarkedTwiceIsOneEntryDueAtTheEarlierTime) {
  ASSERT_TRUE(queue_.Mark("a", clock_.Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(wakes_, 0);  // Not due yet.
  ASSERT_TRUE(queue_.Mark("a", clock_.Now() + absl::Seconds(3)).ok());
  ASSERT_TRUE(queue_.Mark("a", clock_.Now() + absl::Seconds(7)).ok());
  EXPECT_EQ(queue_.size(), 1u);
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(3)));
}

TEST_F(SyncQueueTest, EnsureAddsOnlyWhatIsNotQueuedAndLeavesTheBackoffAlone) {
  queue_.RetryLater("backing-off");
  queue_.RetryLater("backing-off");  // Due in 2 s, the next wait 4 s.
  ASSERT_TRUE(queue_.Ensure("backing-off").ok());
  ASSERT_TRUE(queue_.Ensure("new").ok());
  EXPECT_THAT(queue_.DueForTest("backing-off"), Optional(clock_.Now() + absl::Seconds(2)));
  EXPECT_THAT(queue_.Due(), ElementsAre("new"));
  queue_.RetryLater("backing-off");
  EXPECT_THAT(queue_.DueForTest("backing-off"), Optional(clock_.Now() + absl::Seconds(4)));
}

TEST_F(SyncQueueTest, ARunningAttemptIsNotDueUntilItAsksForTheNext) {
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.Running("a");
  clock_.Advance(absl::Hours(1));
  EXPECT_THAT(queue_.Due(), IsEmpty());
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(2)));
}

TEST_F(SyncQueueTest, AMarkMakesItDueButLeavesTheBackoffAsItWas) {
  queue_.RetryLater("a");
  queue_.RetryLater("a");  // Due in 2 s, the next wait 4 s.
  ASSERT_TRUE(queue_.Mark("a").ok());
  EXPECT_THAT(queue_.Due(), ElementsAre("a"));
  queue_.Running("a");
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(4)));
  // Only Forget starts it again.
  queue_.Forget("a");
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(1)));
}

TEST_F(SyncQueueTest, AMarkWhileAnAttemptRunsRerunsItAtOnceWhicheverWayItEnds) {
  ASSERT_TRUE(queue_.Mark("failed").ok());
  ASSERT_TRUE(queue_.Mark("synced").ok());
  queue_.Running("failed");
  queue_.Running("synced");
  ASSERT_TRUE(queue_.Mark("failed").ok());
  ASSERT_TRUE(queue_.Mark("synced").ok());
  EXPECT_THAT(queue_.Due(), IsEmpty());  // Still one attempt at a time.
  wakes_ = 0;
  queue_.RetryLater("failed");
  queue_.Forget("synced");
  EXPECT_EQ(wakes_, 2);
  EXPECT_THAT(queue_.Due(), ElementsAre("failed", "synced"));
  // Only that next attempt: the one after it backs off, or is gone.
  queue_.Running("failed");
  queue_.RetryLater("failed");
  EXPECT_THAT(queue_.DueForTest("failed"), Optional(clock_.Now() + absl::Seconds(2)));
  queue_.Running("synced");
  queue_.Forget("synced");
  EXPECT_EQ(queue_.DueForTest("synced"), std::nullopt);
}

TEST_F(SyncQueueTest, AnAgentConnectingMakesEveryEntryDueAndRerunsARunningOne) {
  queue_.RetryLater("waiting");
  ASSERT_TRUE(queue_.Mark("running").ok());
  queue_.Running("running");
  wakes_ = 0;
  queue_.AgentConnected();
  EXPECT_EQ(wakes_, 1);
  EXPECT_THAT(queue_.Due(), ElementsAre("waiting"));
  queue_.RetryLater("running");
  EXPECT_EQ(wakes_, 2);
  EXPECT_THAT(queue_.DueForTest("running"), Optional(clock_.Now()));
}

TEST_F(SyncQueueTest, ADeadlineThatComesWhileAnAttemptRunsBoundsItsNext) {
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.Running("a");
  queue_.DueBy("a", clock_.Now() + absl::Milliseconds(300));
  EXPECT_THAT(queue_.DueForTest("a"), Optional(absl::InfiniteFuture()));
  queue_.RetryLater("a");  // The backoff says 2 s; the deadline says sooner.
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Milliseconds(300)));
  clock_.Advance(absl::Milliseconds(300));
  queue_.Running("a");
  queue_.RetryLater("a");  // Spent: the backoff alone again.
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(4)));
}

TEST_F(SyncQueueTest, RetryAtEndsTheAttemptAtThatTimeWithoutAStepOfBackoff) {
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.Running("a");
  queue_.RetryAt("a", clock_.Now() + absl::Milliseconds(700));
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Milliseconds(700)));
  clock_.Advance(absl::Milliseconds(700));
  queue_.Running("a");
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(2)));
  // Marked while it ran: at once.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(queue_.Running("a"));
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.RetryAt("a", clock_.Now() + absl::Hours(1));
  EXPECT_THAT(queue_.Due(), ElementsAre("a"));
}

TEST_F(SyncQueueTest, AMarkThatChangedNothingLeavesTheNextAttemptWhenItWas) {
  queue_.RetryLater("a");
  queue_.RetryLater("a");  // Due in 2 s.
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.Running("a");
  queue_.NothingNew("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(2)));
  // With nothing scheduled before the mark: after the backoff.
  ASSERT_TRUE(queue_.Mark("b").ok());
  queue_.Running("b");
  queue_.NothingNew("b");
  EXPECT_THAT(queue_.DueForTest("b"), Optional(clock_.Now() + absl::Seconds(2)));
}

TEST_F(SyncQueueTest, AMarkWhileATransactionRunsOutlivesItsForget) {
  // A transaction holds the allocation (no attempt of the queue's runs); a fault is marked;
  // the transaction ends READY and forgets the retries: the mark stays due.
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.Forget("a");
  queue_.Forget("a");
  EXPECT_THAT(queue_.Due(), ElementsAre("a"));
  // Once attempted, a Forget ends it.
  queue_.Running("a");
  queue_.Forget("a");
  EXPECT_EQ(queue_.DueForTest("a"), std::nullopt);
}

TEST_F(SyncQueueTest, AnAttemptStartsOnlyWhenDueAndNoneRuns) {
  EXPECT_FALSE(queue_.Running("unknown"));
  queue_.RetryLater("later");
  EXPECT_FALSE(queue_.Running("later"));  // Another attempt ran between Due() and the claim.
  ASSERT_TRUE(queue_.Mark("a").ok());
  EXPECT_TRUE(queue_.Running("a"));
  EXPECT_FALSE(queue_.Running("a"));
  EXPECT_EQ(queue_.size(), 2u);
}

TEST_F(SyncQueueTest, AnAttemptThatEndedNothingEndsAsAFailedOne) {
  ASSERT_TRUE(queue_.Mark("a").ok());
  ASSERT_TRUE(queue_.Running("a"));
  queue_.EndIfRunning("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(2)));
  // One that ended itself is left as it ended.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(queue_.Running("a"));
  queue_.Forget("a");
  queue_.EndIfRunning("a");
  EXPECT_EQ(queue_.DueForTest("a"), std::nullopt);
}

TEST_F(SyncQueueTest, AMarkOutlivesATransactionsRetryAndItsReleasesForget) {
  // A fault is marked while a transaction holds the allocation; the transaction ends
  // DEGRADED (RetryLater), then a release forgets it: the mark is still to be seen.
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.Due(), ElementsAre("a"));
  queue_.Forget("a");
  EXPECT_THAT(queue_.Due(), ElementsAre("a"));
}

TEST_F(SyncQueueTest, ADeadlineAlsoBoundsTheRetryAMarkThatChangedNothingGoesBackTo) {
  queue_.RetryLater("a");
  queue_.RetryLater("a");  // Due in 2 s.
  queue_.DueBy("a", clock_.Now() + absl::Milliseconds(500));
  ASSERT_TRUE(queue_.Mark("a").ok());
  ASSERT_TRUE(queue_.Running("a"));
  queue_.NothingNew("a");
  EXPECT_THAT(queue_.DueForTest("a"), Optional(clock_.Now() + absl::Milliseconds(500)));
}

TEST_F(SyncQueueTest, AMarkDuringAnAttemptSurvivesATransactionThatEndsBeforeTheRerun) {
  ASSERT_TRUE(queue_.Mark("a").ok());
  ASSERT_TRUE(queue_.Running("a"));
  ASSERT_TRUE(queue_.Mark("a").ok());  // A fault, while the sync runs.
  queue_.RetryAt("a", clock_.Now() + absl::Seconds(1));
  // A transaction takes the allocation before the rerun and ends DEGRADED: the rerun stays due.
  queue_.RetryLater("a");
  EXPECT_THAT(queue_.Due(), ElementsAre("a"));
}

TEST_F(SyncQueueTest, TheJitterScalesEachWait) {
  double factor = 0.5;
  SyncQueue::Options options;
  options.jitter = [&] { return factor; };
  SyncQueue queue = Queue(std::move(options));
  queue.RetryLater("a");
  EXPECT_THAT(queue.DueForTest("a"), Optional(clock_.Now() + absl::Milliseconds(500)));
  factor = 1.5;
  queue.RetryLater("a");
  EXPECT_THAT(queue.DueForTest("a"), Optional(clock_.Now() + absl::Seconds(3)));
}

TEST_F(SyncQueueTest, PastItsBoundANewAllocationIsRefusedNamingTheQueueAndCounted) {
  int refused = 0;
  SyncQueue::Options options;
  options.max_entries = 2;
  options.refused = [&] { ++refused; };
  SyncQueue queue = Queue(std::move(options));
  ASSERT_TRUE(queue.Mark("a").ok());
  ASSERT_TRUE(queue.Mark("b").ok());
  const absl::Status full = queue.Mark("c");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("sync queue holds 2 allocations"));
  EXPECT_THAT(full.message(), HasSubstr("allocation c"));
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(queue.DueForTest("c"), std::nullopt);
  // One already there is marked again, full or not; once one leaves, another gets in.
  EXPECT_TRUE(queue.Mark("a").ok());
  queue.Running("b");
  queue.Forget("b");
  EXPECT_TRUE(queue.Mark("c").ok());
  EXPECT_EQ(refused, 1);
}

TEST_F(SyncQueueTest, ForgottenEntriesAreNotDue) {
  ASSERT_TRUE(queue_.Mark("a").ok());
  queue_.Running("a");
  queue_.Forget("a");
  EXPECT_THAT(queue_.Due(), IsEmpty());
  EXPECT_EQ(queue_.DueForTest("a"), std::nullopt);
  EXPECT_EQ(queue_.size(), 0u);
}

}  // namespace
}  // namespace fleet::engine
