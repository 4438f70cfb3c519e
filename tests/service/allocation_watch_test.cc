// AllocationWatch over a real in-memory store, stepped as the watch hub steps it: what a
// watcher is sent, in what order, and when the watch ends.
#include "controller/service/allocation_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"

namespace fleet::service {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using Seen = std::pair<std::string, v1::AllocationState>;

class AllocationWatchTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = store::OpenSqliteStore({":memory:", &clock_}).value(); }

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

  // One step of `watch` up to the newest committed event, as the hub takes it; what it sent
  // is added to seen_.
  WatchStep Step(AllocationWatch& watch) {
    std::vector<v1::Allocation> out;
    WatchStep step = watch.Step(store_->LastEventSequence(), &out);
    for (const v1::Allocation& a : out) seen_.push_back({a.id(), a.state()});
    return step;
  }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::vector<Seen> seen_;
};

TEST_F(AllocationWatchTest, OneAllocationIsSentEachStateInOrderAndTheWatchEndsWithIt) {
  Create("a1", "tenant-a");
  AllocationWatch watch(store_.get(), store_.get(), "a1", "");
  EXPECT_FALSE(Step(watch).over.has_value());
  // An event about it that changes nothing is not a new state.
  v1::Event note;
  note.set_kind("allocation.quiesce_skipped");
  note.set_object_kind("allocation");
  note.set_object_id("a1");
  ASSERT_TRUE(store_->AppendEvent(note).ok());
  EXPECT_FALSE(Step(watch).over.has_value());
  Move("a1", v1::ALLOCATION_STATE_PROGRAMMING);
  Move("a1", v1::ALLOCATION_STATE_READY);
  EXPECT_FALSE(Step(watch).over.has_value());
  Move("a1", v1::ALLOCATION_STATE_RELEASING);
  Move("a1", v1::ALLOCATION_STATE_RELEASED);
  const WatchStep last = Step(watch);
  ASSERT_TRUE(last.over.has_value());
  EXPECT_TRUE(last.over->ok()) << last.over->error_message();  // Ended with the allocation.
  EXPECT_THAT(seen_, ElementsAre(Pair("a1", v1::ALLOCATION_STATE_PENDING),
                                 Pair("a1", v1::ALLOCATION_STATE_PROGRAMMING),
                                 Pair("a1", v1::ALLOCATION_STATE_READY),
                                 Pair("a1", v1::ALLOCATION_STATE_RELEASING),
                                 Pair("a1", v1::ALLOCATION_STATE_RELEASED)));
}

TEST_F(AllocationWatchTest, ATenantsWatchSeesOnlyItsTenantAndGoesOn) {
  Create("a1", "tenant-a");
  Create("b1", "tenant-b");
  AllocationWatch watch(store_.get(), store_.get(), "", "tenant-b");
  Step(watch);
  Move("a1", v1::ALLOCATION_STATE_PROGRAMMING);
  Move("b1", v1::ALLOCATION_STATE_PROGRAMMING);
  Create("b2", "tenant-b");
  Move("b1", v1::ALLOCATION_STATE_FAILED);
  EXPECT_FALSE(Step(watch).over.has_value());  // A tenant's watch outlives its allocations.
  EXPECT_THAT(seen_, ElementsAre(Pair("b1", v1::ALLOCATION_STATE_PENDING),
                                 Pair("b1", v1::ALLOCATION_STATE_PROGRAMMING),
                                 Pair("b2", v1::ALLOCATION_STATE_PENDING),
                                 Pair("b1", v1::ALLOCATION_STATE_FAILED)));
}

TEST_F(AllocationWatchTest, AWatcherBehindTheKeptCommitsReadsTheLogAndTheAllocationAsItIs) {
  Create("a1", "tenant-a");
  AllocationWatch watch(store_.get(), store_.get(), "a1", "");
  Step(watch);
  Move("a1", v1::ALLOCATION_STATE_PROGRAMMING);
  // More commits than the feed keeps (1024), so the next step cannot follow them in memory.
  for (int i = 0; i < 1100; ++i) Create(absl::StrCat("other-", i), "tenant-b");
  Move("a1", v1::ALLOCATION_STATE_READY);
  ASSERT_FALSE(store_->AllocationCommitsAfter(1).has_value());
  const WatchStep step = Step(watch);
  EXPECT_FALSE(step.over.has_value());
  EXPECT_EQ(step.position, store_->LastEventSequence());
  // The in-between PROGRAMMING was superseded by what the database holds now.
  EXPECT_THAT(seen_, ElementsAre(Pair("a1", v1::ALLOCATION_STATE_PENDING),
                                 Pair("a1", v1::ALLOCATION_STATE_READY)));
}

TEST_F(AllocationWatchTest, AnUnknownAllocationIsNotFound) {
  AllocationWatch watch(store_.get(), store_.get(), "nosuch", "");
  const WatchStep step = Step(watch);
  ASSERT_TRUE(step.over.has_value());
  EXPECT_EQ(step.over->error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(seen_.empty());
}

}  // namespace
}  // namespace fleet::service
