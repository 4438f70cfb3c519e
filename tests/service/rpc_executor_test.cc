// RpcExecutor: calls run on at most its threads, wait in order past them, are refused naming
// the queue past its bound, and are refused once it stops, those still waiting included.
#include "controller/service/rpc_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "tests/eventually.h"

namespace fleet::service {
namespace {

// A refusal that must not happen.
void NotRefused(const grpc::Status& s) { ADD_FAILURE() << "refused: " << s.error_message(); }

TEST(RpcExecutorTest, CallsPastTheThreadsWaitAndPastTheQueueAreRefused) {
  std::atomic<int> refused = 0;
  absl::Notification release;
  std::atomic<int> running = 0;
  std::atomic<int> done = 0;
  RpcExecutor rpcs({.threads = 2, .max_queued = 2, .refused = [&] { ++refused; }});
  absl::Cleanup unblock = [&] {  // Before rpcs joins its threads, even when a test fails.
    if (!release.HasBeenNotified()) release.Notify();
  };
  auto call = [&] {
    ++running;
    release.WaitForNotification();
    ++done;
  };
  ASSERT_TRUE(rpcs.Submit(call, NotRefused).ok());
  ASSERT_TRUE(rpcs.Submit(call, NotRefused).ok());
  ASSERT_TRUE(fleet::testing::Eventually([&] { return running == 2; }));
  ASSERT_TRUE(rpcs.Submit(call, NotRefused).ok());  // Two wait.
  ASSERT_TRUE(rpcs.Submit(call, NotRefused).ok());
  const grpc::Status full = rpcs.Submit(call, NotRefused);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(full.error_message(),
            "the rpc queue is full (2 calls wait for one of 2 threads); retry later");
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(rpcs.threads_started(), 2);
  EXPECT_EQ(running, 2);  // The other two wait for a thread.

  release.Notify();
  ASSERT_TRUE(fleet::testing::Eventually([&] { return done == 4; }));
  EXPECT_EQ(rpcs.threads_started(), 2);  // No thread past the bound, ever.
}

TEST(RpcExecutorTest, OneThreadRunsCallsInTheOrderTheyCame) {
  absl::Notification release;
  absl::Mutex mu;
  std::vector<int> order;
  RpcExecutor rpcs({.threads = 1});
  absl::Cleanup unblock = [&] {
    if (!release.HasBeenNotified()) release.Notify();
  };
  ASSERT_TRUE(rpcs.Submit([&] { release.WaitForNotification(); }, NotRefused).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(rpcs.Submit(
                        [&, i] {
                          absl::MutexLock lock(&mu);
                          order.push_back(i);
                        },
                        NotRefused)
                    .ok());
  }
  release.Notify();
  ASSERT_TRUE(fleet::testing::Eventually([&] { return rpcs.idle(); }));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(RpcExecutorTest, ThreadsStartOnlyAsCallsNeedThem) {
  RpcExecutor rpcs({.threads = 8});
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(fleet::testing::Eventually([&] { return rpcs.idle(); }));
    ASSERT_TRUE(rpcs.Submit([] {}, NotRefused).ok());
  }
  ASSERT_TRUE(fleet::testing::Eventually([&] { return rpcs.idle(); }));
  EXPECT_EQ(rpcs.threads_started(), 1);  // Each call found the one thread idle.
}

TEST(RpcExecutorTest, AStopRefusesTheCallsStillWaitingAndNewOnes) {
  absl::Notification started, release;
  std::atomic<int> ran = 0;
  std::vector<grpc::StatusCode> refusals;
  RpcExecutor rpcs({.threads = 1});
  ASSERT_TRUE(rpcs.Submit(
                      [&] {
                        started.Notify();
                        release.WaitForNotification();
                        ++ran;
                      },
                      NotRefused)
                  .ok());
  started.WaitForNotification();
  ASSERT_TRUE(rpcs.Submit([&] { ++ran; },
                          [&](const grpc::Status& s) { refusals.push_back(s.error_code()); })
                  .ok());
  std::thread stopper([&] { rpcs.Stop(); });  // Waits for the running call.
  ASSERT_TRUE(fleet::testing::Eventually([&] {
    // One taken before the stop waits, and is refused with the others.
    return rpcs.Submit([&] { ++ran; }, [](const grpc::Status&) {}).error_code() ==
           grpc::StatusCode::UNAVAILABLE;
  }));
  release.Notify();
  stopper.join();
  EXPECT_EQ(ran, 1);  // The running call finished; the waiting one was refused.
  EXPECT_EQ(refusals, (std::vector<grpc::StatusCode>{grpc::StatusCode::UNAVAILABLE}));
}

}  // namespace
}  // namespace fleet::service
