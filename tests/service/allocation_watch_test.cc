// AllocationWatch over a real in-memory store: what a watcher is sent, in what order, and
// when the watch ends.
#include "controller/service/allocation_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/eventually.h"

namespace fleet::service {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using Seen = std::pair<std::string, v1::AllocationState>;

class AllocationWatchTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = store::OpenSqliteStore({":memory:", &clock_}).value(); }
  void TearDown() override {
    following_ = false;
    if (runner_.joinable()) runner_.join();
  }

  void Create(const std::string& id, const std::string& tenant) {
    v1::Allocation a;
    a.set_id(id);
    a.set_tenant(tenant);
    a.set_state(v1::ALLOCATION_STATE_PENDING);
    ASSERT_TRUE(store_->CreateAllocation(a, "operator:test").ok());
  }
  void Move(const std::string& id, v1::AllocationState state) {
    store::AllocationUpdate update;
    update.id = id;
    update.state = state;
    ASSERT_TRUE(store_->UpdateAllocation(update, "operator:test").ok());
  }

  // Runs a watch of `id` (or of `tenant`) on its own thread, recording what it sends.
  void Start(const std::string& id, const std::string& tenant) {
    runner_ = std::thread([this, id, tenant] {
      AllocationWatch watch(store_.get(), store_.get(), id, tenant);
      absl::StatusOr<bool> over = watch.Run(
          [this](const v1::Allocation& a) {
            absl::MutexLock lock(&mu_);
            seen_.push_back({a.id(), a.state()});
            return true;
          },
          [this] { return following_.load(); });
      absl::MutexLock lock(&mu_);
      over_ = std::move(over);
      done_ = true;
    });
  }
  std::vector<Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  bool done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::atomic<bool> following_ = true;
  std::thread runner_;
  absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
  absl::StatusOr<bool> over_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_F(AllocationWatchTest, OneAllocationIsSentEachStateInOrderAndTheWatchEndsWithIt) {
  Create("a1", "tenant-a");
  Start("a1", "");
  ASSERT_TRUE(fleet::testing::Eventually([&] { return seen().size() == 1; }));
  // An event about it that changes nothing is not a new state.
  v1::Event note;
  note.set_kind("allocation.quiesce_skipped");
  note.set_object_kind("allocation");
  note.set_object_id("a1");
  ASSERT_TRUE(store_->AppendEvent(note).ok());
  Move("a1", v1::ALLOCATION_STATE_PROGRAMMING);
  Move("a1", v1::ALLOCATION_STATE_READY);
  Move("a1", v1::ALLOCATION_STATE_RELEASING);
  Move("a1", v1::ALLOCATION_STATE_RELEASED);
  ASSERT_TRUE(fleet::testing::Eventually([&] { return done(); }));
  EXPECT_THAT(seen(), ElementsAre(Pair("a1", v1::ALLOCATION_STATE_PENDING),
                                  Pair("a1", v1::ALLOCATION_STATE_PROGRAMMING),
                                  Pair("a1", v1::ALLOCATION_STATE_READY),
                                  Pair("a1", v1::ALLOCATION_STATE_RELEASING),
                                  Pair("a1", v1::ALLOCATION_STATE_RELEASED)));
  absl::MutexLock lock(&mu_);
  ASSERT_TRUE(over_.ok()) << over_.status();
  EXPECT_TRUE(*over_);  // Ended with the allocation.
}

TEST_F(AllocationWatchTest, ATenantsWatchSeesOnlyItsTenantAndStopsWhenToldTo) {
  Create("a1", "tenant-a");
  Create("b1", "tenant-b");
  Start("", "tenant-b");
  ASSERT_TRUE(fleet::testing::Eventually([&] { return seen().size() == 1; }));
  Move("a1", v1::ALLOCATION_STATE_PROGRAMMING);
  Move("b1", v1::ALLOCATION_STATE_PROGRAMMING);
  Create("b2", "tenant-b");
  ASSERT_TRUE(fleet::testing::Eventually([&] { return seen().size() == 3; }));
  following_ = false;
  ASSERT_TRUE(fleet::testing::Eventually([&] { return done(); }));
  EXPECT_THAT(seen(), ElementsAre(Pair("b1", v1::ALLOCATION_STATE_PENDING),
                                  Pair("b1", v1::ALLOCATION_STATE_PROGRAMMING),
                                  Pair("b2", v1::ALLOCATION_STATE_PENDING)));
  absl::MutexLock lock(&mu_);
  ASSERT_TRUE(over_.ok()) << over_.status();
  EXPECT_FALSE(*over_);  // Stopped following; nothing ended.
}

TEST_F(AllocationWatchTest, AnUnknownAllocationIsNotFound) {
  AllocationWatch watch(store_.get(), store_.get(), "nosuch", "");
  absl::StatusOr<bool> over =
      watch.Run([](const v1::Allocation&) { return true; }, [] { return true; });
  EXPECT_EQ(over.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AllocationWatchTest, AClientGoneBeforeTheFirstStateEndsTheWatch) {
  Create("a1", "tenant-a");
  AllocationWatch watch(store_.get(), store_.get(), "a1", "");
  int writes = 0;
  absl::StatusOr<bool> over = watch.Run(
      [&](const v1::Allocation&) {
        ++writes;
        return false;
      },
      [] { return true; });
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_TRUE(*over);
  EXPECT_EQ(writes, 1);
}

}  // namespace
}  // namespace fleet::service
