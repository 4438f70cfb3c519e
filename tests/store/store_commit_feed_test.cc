// CommitFeed (controller/store/commit_feed.h) of the SQLite store: the allocation commits it
// keeps, the newest committed sequence, and waiting for the next event.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "controller/store/store.h"
#include "tests/store/store_test_util.h"

// Filters are built with designated initializers naming only the fields a test sets; the
// others keep their documented defaults, which is what this warning would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fleet::store {
namespace {

using namespace ::fleet::store::testing_util;  // The fixture, its builders and matchers.

// ---------------------------------------------------------------------------------------
// Allocation commits
// Watchers follow allocations through the commits the store keeps: each with what a read
// would have returned right after it, in order, and none left out while they are kept.
// Every write that appends an event about an allocation is one, with the allocation.
TEST_F(StoreTest, AllocationCommitsAreKeptInOrderWithWhatEachLeft) {
  WriteSite();
  const uint64_t start = store_->LastEventSequence();  // Inventory events: not allocations'.
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  std::optional<std::vector<Store::AllocationCommit>> commits =
      store_->AllocationCommitsAfter(start);
  ASSERT_TRUE(commits.has_value());
  ASSERT_THAT(*commits, SizeIs(1));
  EXPECT_EQ((*commits)[0].id, "a1");
  EXPECT_EQ((*commits)[0].sequence, store_->LastEventSequence());
  ASSERT_NE((*commits)[0].allocation, nullptr);
  EXPECT_THAT(*(*commits)[0].allocation, EqualsProto(*store_->GetAllocation("a1")));
  std::optional<Store::AllocationCommit> last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->allocation, (*commits)[0].allocation);
  // A read of the database says which commits it reflects.
  ASSERT_OK_AND_ASSIGN(Store::AllocationCommit read, store_->ReadAllocation("a1"));
  EXPECT_EQ(read.sequence, store_->LastEventSequence());
  ASSERT_NE(read.allocation, nullptr);
  EXPECT_THAT(*read.allocation, EqualsProto(*store_->GetAllocation("a1")));
  EXPECT_THAT(store_->ReadAllocation("a9"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a9")));
  // So does a read of many: the filter's allocations, each with the sequence the read saw.
  ASSERT_OK_AND_ASSIGN(std::vector<Store::AllocationCommit> many,
                       store_->ReadAllocations({"tenant-a", {}, false}));
  ASSERT_THAT(many, SizeIs(1));
  EXPECT_EQ(many[0].id, "a1");
  EXPECT_EQ(many[0].sequence, store_->LastEventSequence());
  ASSERT_NE(many[0].allocation, nullptr);
  EXPECT_THAT(*many[0].allocation, EqualsProto(*store_->GetAllocation("a1")));
  ASSERT_OK_AND_ASSIGN(many, store_->ReadAllocations({"nobody", {}, false}));
  EXPECT_THAT(many, IsEmpty());

  AllocationUpdate update;
  update.id = "a1";
  update.state = v1::ALLOCATION_STATE_TRAINING;
  update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_PROGRAMMED};
  ASSERT_OK_AND_ASSIGN(v1::Allocation training, store_->UpdateAllocation(update, "engine"));
  const uint64_t training_event = store_->LastEventSequence();
  ASSERT_OK_AND_ASSIGN(v1::Allocation stored, store_->GetAllocation("a1"));
  EXPECT_THAT(training, EqualsProto(stored));
  last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->sequence, training_event);
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_THAT(*last->allocation, EqualsProto(stored));

  // A refused update commits nothing.
  AllocationUpdate wrong;
  wrong.id = "a1";
  wrong.state = v1::ALLOCATION_STATE_READY;
  wrong.circuits["c-none"] = {.state = v1::CIRCUIT_STATE_ACTIVE};
  EXPECT_THAT(store_->UpdateAllocation(wrong, "engine"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("c-none")));
  EXPECT_THAT(store_->AllocationCommitsAfter(training_event), Optional(IsEmpty()));

  // An event the engine records about the allocation is a commit of it too, unchanged.
  v1::Event note;
  note.set_kind("allocation.quiesce_skipped");
  note.set_object_kind("allocation");
  note.set_object_id("a1");
  note.set_message("no connected agent");
  ASSERT_THAT(store_->AppendEvent(note), IsOk());
  last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->sequence, store_->LastEventSequence());
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_THAT(*last->allocation, EqualsProto(training));

  update.state = v1::ALLOCATION_STATE_READY;
  update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_ACTIVE};
  ASSERT_OK_AND_ASSIGN(v1::Allocation ready, store_->UpdateAllocation(update, "engine"));
  commits = store_->AllocationCommitsAfter(training_event);
  ASSERT_TRUE(commits.has_value());
  ASSERT_THAT(*commits, SizeIs(2));  // The note, then READY: each state, in order.
  EXPECT_LT((*commits)[0].sequence, (*commits)[1].sequence);
  ASSERT_NE((*commits)[0].allocation, nullptr);
  EXPECT_EQ((*commits)[0].allocation->state(), v1::ALLOCATION_STATE_TRAINING);
  ASSERT_NE((*commits)[1].allocation, nullptr);
  EXPECT_THAT(*(*commits)[1].allocation, EqualsProto(ready));

  // ReplaceCircuits reads it back too.
  CircuitReplacement r;
  r.allocation_id = "a1";
  r.remove = {"c-up"};
  r.add = {
      MakeCircuit("c-new", "n-cpu", 1, "n-cpu", 2, {Xc("s1", 1, 10)}, v1::CIRCUIT_STATE_PLANNED)};
  r.members = {"h1-cpu0"};
  ASSERT_OK_AND_ASSIGN(v1::Allocation replaced, store_->ReplaceCircuits(r, kOperator));
  ASSERT_OK_AND_ASSIGN(stored, store_->GetAllocation("a1"));
  EXPECT_THAT(replaced, EqualsProto(stored));
  last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_THAT(*last->allocation, EqualsProto(stored));

  // Only the most recent commits are kept: a watcher further behind is told to read.
  const uint64_t recent = store_->LastEventSequence();
  for (int i = 0; i < 1030; ++i) ASSERT_THAT(store_->AppendEvent(note), IsOk());
  EXPECT_EQ(store_->AllocationCommitsAfter(start), std::nullopt);
  EXPECT_EQ(store_->AllocationCommitsAfter(recent), std::nullopt);
  commits = store_->AllocationCommitsAfter(store_->LastEventSequence() - 10);
  ASSERT_TRUE(commits.has_value());
  EXPECT_THAT(*commits, SizeIs(10));
}

// ---------------------------------------------------------------------------------------
// Following the event log

TEST_F(StoreTest, LastEventSequenceFollowsEveryCommittedWrite) {
  EXPECT_EQ(store_->LastEventSequence(), 0u);
  auto newest = [this] {
    std::vector<v1::Event> events = Events({.limit = 100'000});
    return events.empty() ? uint64_t{0} : events.back().sequence();
  };
  WriteSite();
  EXPECT_EQ(store_->LastEventSequence(), newest());
  EXPECT_EQ(store_->LastEventSequence(), 9u);

  v1::Event event;
  event.set_kind("test.event");
  event.set_message("x");
  ASSERT_THAT(store_->AppendEvent(event), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->UpdateAllocation({.id = "a1", .reason = "x"}, kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "", kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->DeleteObject("trunk", "t2", kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());

  // Refused writes publish nothing.
  const uint64_t last = store_->LastEventSequence();
  EXPECT_FALSE(store_->UpdateAllocation({.id = "a9"}, kOperator).ok());
  EXPECT_FALSE(store_->CreateManualCircuit(Manual(CpuToGpu("m-2")), kOperator).ok());
  EXPECT_FALSE(store_->DeleteObject("host", "h1", kOperator).ok());
  EXPECT_FALSE(store_->SetDrained({.host = "h9"}, true, "", kOperator).ok());
  EXPECT_EQ(store_->LastEventSequence(), last);
  EXPECT_EQ(newest(), last);
  EXPECT_FALSE(store_->WaitForEvent(last, absl::InfinitePast()));
}

TEST_F(StoreTest, LastEventSequenceIsReadFromTheDatabaseAtOpen) {
  ASSERT_TRUE(dir_.ok());
  const std::string path = dir_.File("state.db");
  OpenStore(path);
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  ASSERT_EQ(last, Events().back().sequence());
  OpenStore(path);
  EXPECT_EQ(store_->LastEventSequence(), last);
  EXPECT_TRUE(store_->WaitForEvent(last - 1, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(last, absl::InfinitePast()));
  // The next event continues the sequence.
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "", kOperator), IsOk());
  EXPECT_GT(store_->LastEventSequence(), last);
}

TEST_F(StoreTest, WaitForEventAnswersAtOnceWhenTheDeadlineHasPassed) {
  // No event yet: a past deadline gives up without waiting.
  EXPECT_FALSE(store_->WaitForEvent(0, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(0, absl::Now() - absl::Hours(1)));
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  // An event newer than `after_sequence` is already there: no need to wait at all.
  EXPECT_TRUE(store_->WaitForEvent(0, absl::InfinitePast()));
  EXPECT_TRUE(store_->WaitForEvent(last - 1, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(last, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(last + 5, absl::InfinitePast()));
}

// The deadline is generous: the waits end when the write commits, long before it.
constexpr absl::Duration kGenerous = absl::Seconds(60);

TEST_F(StoreTest, WaitForEventWakesWhenAnotherThreadCommitsAnEvent) {
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  std::thread writer([this] {
    v1::Event event;
    event.set_kind("test.wake");
    event.set_message("wake up");
    EXPECT_THAT(store_->AppendEvent(event), IsOk());
  });
  EXPECT_TRUE(store_->WaitForEvent(last, absl::Now() + kGenerous));
  writer.join();
  std::vector<v1::Event> events = Events({.after_sequence = last});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "test.wake");
}

TEST_F(StoreTest, EveryKindOfWriteWakesWaiters) {
  WriteSite();
  const std::vector<std::pair<std::string, std::function<absl::Status()>>> writes = {
      {"AppendEvent",
       [this] {
         v1::Event e;
         e.set_kind("test");
         return store_->AppendEvent(e);
       }},
      {"WriteInventory",
       [this] {
         InventoryWrite w;
         w.objects.add_hosts()->set_name("h2");
         w.created = {"host h2"};
         return store_->WriteInventory(w, kOperator);
       }},
      {"DeleteObject", [this] { return store_->DeleteObject("host", "h2", kOperator).status(); }},
      {"CreateAllocation",
       [this] {
         return store_->CreateAllocation(
             MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0", "gpu0"},
                            {CpuToGpu()}),
             kOperator);
       }},
      {"UpdateAllocation",
       [this] {
         return store_
             ->UpdateAllocation({.id = "a1", .state = v1::ALLOCATION_STATE_READY}, kOperator)
             .status();
       }},
      {"CreateManualCircuit",
       [this] { return store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator); }},
      {"SetDrained", [this] { return store_->SetDrained({.host = "h1"}, true, "", kOperator); }},
  };
  for (const auto& [name, write] : writes) {
    SCOPED_TRACE(name);
    const uint64_t last = store_->LastEventSequence();
    bool woke = false;
    std::thread waiter([&] { woke = store_->WaitForEvent(last, absl::Now() + kGenerous); });
    EXPECT_THAT(write(), IsOk());
    waiter.join();
    EXPECT_TRUE(woke);
    EXPECT_GT(store_->LastEventSequence(), last);
  }
}

TEST_F(StoreTest, OneCommitWakesEveryWaiter) {
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  constexpr int kWaiters = 4;
  std::vector<int> woke(kWaiters, 0);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back(
        [&, i] { woke[i] = store_->WaitForEvent(last, absl::Now() + kGenerous) ? 1 : 0; });
  }
  ASSERT_THAT(store_->SetDrained({.onic = "n-cpu"}, true, "", kOperator), IsOk());
  for (std::thread& t : waiters) t.join();
  EXPECT_THAT(woke, ::testing::Each(1));
}

}  // namespace
}  // namespace fleet::store
