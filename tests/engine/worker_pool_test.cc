#include "controller/engine/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "testing/fake_clock.h"
#include "tests/eventually.h"

namespace fleet::engine {
namespace {

TEST(WorkerPoolTest, AClaimHasOneHolderUntilLetGo) {
  WorkerPool pool;
  EXPECT_TRUE(pool.Claim("a"));
  EXPECT_FALSE(pool.Claim("a"));
  EXPECT_TRUE(pool.Claim("b"));
  EXPECT_EQ(pool.Claims(), (std::set<std::string>{"a", "b"}));
  pool.Unclaim("a");
  EXPECT_TRUE(pool.Claim("a"));
}

// Claim waits give up on the pool's clock: a test moves a fake one instead of waiting.
TEST(WorkerPoolTest, ClaimWaitsGiveUpWhenThePoolsClockPassesTheirDeadline) {
  fleet::testing::FakeClock clock;
  WorkerPool pool({}, &clock);
  ASSERT_TRUE(pool.Claim("a"));
  const absl::Time give_up = clock.Now() + absl::Hours(1);
  std::atomic<int> done{0};
  WorkerPool::Claimed claimed = WorkerPool::Claimed::kClaimed;
  bool claimed_when_free = true;
  std::thread waiters([&] {
    claimed = pool.WaitAndClaim("a", give_up);
    ++done;
    claimed_when_free = pool.ClaimWhenFree("a", give_up, [] { return true; });
    ++done;
    pool.WaitUnclaimed({"a"}, give_up);
    ++done;
  });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(done, 0);  // An hour on the fake clock has not passed.
  clock.Advance(absl::Minutes(59));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(done, 0);
  clock.Advance(absl::Minutes(1));
  waiters.join();  // Each gives up as the clock reaches the hour.
  EXPECT_EQ(done, 3);
  EXPECT_EQ(claimed, WorkerPool::Claimed::kBusy);
  EXPECT_FALSE(claimed_when_free);

  // A claim let go wakes a waiter at once, whatever the clock says.
  std::thread waiter([&] { claimed = pool.WaitAndClaim("a", clock.Now() + absl::Hours(1)); });
  pool.Unclaim("a");
  waiter.join();
  EXPECT_EQ(claimed, WorkerPool::Claimed::kClaimed);
}

TEST(WorkerPoolTest, ATaskRunsHoldingItsClaimAndDropsItOnceDone) {
  WorkerPool pool;
  ASSERT_TRUE(pool.Claim("a"));
  absl::Notification go;
  std::atomic<bool> ran{false};
  ASSERT_TRUE(pool.Spawn("a", [&] {
    go.WaitForNotification();
    ran = true;
  }));
  EXPECT_FALSE(pool.Claim("a"));
  go.Notify();
  pool.WaitIdle();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(pool.Claim("a"));
}

TEST(WorkerPoolTest, AnIdleWorkerTakesTheNextTaskAndLeavesAfterItsLinger) {
  WorkerPool pool({.linger = absl::Milliseconds(200)});
  ASSERT_TRUE(pool.Spawn("", [] {}));
  pool.WaitIdle();
  ASSERT_TRUE(pool.Spawn("", [] {}));
  pool.WaitIdle();
  EXPECT_LE(pool.WorkersForTest(), 1);
  EXPECT_TRUE(fleet::testing::Eventually([&] { return pool.WorkersForTest() == 0; }));
  // A task after every worker left gets a new one.
  std::atomic<bool> ran{false};
  ASSERT_TRUE(pool.Spawn("", [&] { ran = true; }));
  pool.WaitIdle();
  EXPECT_TRUE(ran);
}

TEST(WorkerPoolTest, PastItsBoundTasksWaitForAWorkerInOrder) {
  WorkerPool pool({.max_workers = 1, .max_queued = 2});
  absl::Notification go;
  std::atomic<int> started{0};
  std::vector<int> order;  // Written by one worker at a time.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pool.Spawn("", [&, i] {
      started.fetch_add(1);
      go.WaitForNotification();
      order.push_back(i);
    }));
  }
  EXPECT_TRUE(fleet::testing::Eventually([&] { return started.load() == 1; }));
  EXPECT_EQ(pool.WorkersForTest(), 1);
  // Three wait; the bound says two may: no room for more.
  EXPECT_FALSE(pool.HasRoom());
  go.Notify();
  pool.WaitIdle();
  EXPECT_EQ(pool.PeakWorkers(), 1);
  EXPECT_TRUE(pool.HasRoom());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(WorkerPoolTest, AFullPoolStillRunsATaskItsTasksWaitFor) {
  WorkerPool pool({.max_workers = 1});
  absl::Notification helped;
  ASSERT_TRUE(pool.Spawn("", [&] {
    // Every worker is busy (this one): the awaited task gets its own, so this one ends.
    ASSERT_TRUE(pool.SpawnAwaited([&] { helped.Notify(); }));
    helped.WaitForNotification();
  }));
  pool.WaitIdle();
  EXPECT_TRUE(helped.HasBeenNotified());
  EXPECT_EQ(pool.PeakWorkers(), 2);
}

TEST(WorkerPoolTest, OnceStoppingNoTaskIsTakenAndItsClaimIsDropped) {
  WorkerPool pool;
  ASSERT_TRUE(pool.Claim("a"));
  EXPECT_TRUE(pool.Stop());
  EXPECT_FALSE(pool.Stop());
  EXPECT_TRUE(pool.stopping());
  bool ran = false;
  EXPECT_FALSE(pool.Spawn("a", [&] { ran = true; }));
  EXPECT_TRUE(pool.Claims().empty());
  pool.WaitIdle();
  pool.JoinWorkers();
  EXPECT_FALSE(ran);
}

TEST(WorkerPoolTest, TasksQueuedBeforeStoppingStillRun) {
  WorkerPool pool;
  absl::Notification go;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.Spawn("a", [&] {
    go.WaitForNotification();
    ++ran;
  }));
  ASSERT_TRUE(pool.Spawn("b", [&] { ++ran; }));
  pool.Stop();
  go.Notify();
  pool.WaitIdle();
  pool.JoinWorkers();
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(pool.WorkersForTest(), 0);
}

TEST(WorkerPoolTest, WaitAndClaimWaitsForTheHolderUpToItsDeadline) {
  WorkerPool pool;
  ASSERT_TRUE(pool.Claim("a"));
  EXPECT_EQ(pool.WaitAndClaim("a", absl::Now() + absl::Milliseconds(20)),
            WorkerPool::Claimed::kBusy);
  std::thread holder([&] {
    absl::SleepFor(absl::Milliseconds(20));
    pool.Unclaim("a");
  });
  EXPECT_EQ(pool.WaitAndClaim("a", absl::Now() + absl::Seconds(20)), WorkerPool::Claimed::kClaimed);
  holder.join();
  EXPECT_FALSE(pool.Claim("a"));
  pool.Stop();
  EXPECT_EQ(pool.WaitAndClaim("b", absl::InfiniteFuture()), WorkerPool::Claimed::kStopping);
}

TEST(WorkerPoolTest, ClaimWhenFreeWaitsOnlyWhileAskedTo) {
  WorkerPool pool;
  ASSERT_TRUE(pool.Claim("a"));
  int asked = 0;
  EXPECT_FALSE(pool.ClaimWhenFree("a", absl::InfiniteFuture(), [&] {
    ++asked;
    return false;
  }));
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(pool.ClaimWhenFree("a", absl::Now() + absl::Milliseconds(20), [] { return true; }));
  std::thread holder([&] {
    absl::SleepFor(absl::Milliseconds(20));
    pool.Unclaim("a");
  });
  EXPECT_TRUE(pool.ClaimWhenFree("a", absl::Now() + absl::Seconds(20), [] { return true; }));
  holder.join();
}

TEST(WorkerPoolTest, WaitUnclaimedReturnsOnceEveryClaimIsLetGo) {
  WorkerPool pool;
  ASSERT_TRUE(pool.Claim("a"));
  ASSERT_TRUE(pool.Claim("b"));
  std::thread holder([&] {
    pool.Unclaim("a");
    absl::SleepFor(absl::Milliseconds(20));
    pool.Unclaim("b");
  });
  pool.WaitUnclaimed({"a", "b"}, absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(pool.Claims().empty());
  holder.join();
}

}  // namespace
}  // namespace fleet::engine
