// Retention of the state database (controller/store/retention.h): what Store::PruneEvents and
// Store::PruneEndedAllocations take and keep, the database's own refusal of any other change
// to the event log, pruning in small transactions, readers of a pruned log, and the file
// handing pruned pages back.
#include "controller/store/retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/store/migrations.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/eventually.h"
#include "tests/store/store_test_util.h"

namespace fleet::store {
namespace {

using ::fleet::store::testing_util::IsOk;
using ::fleet::store::testing_util::QueryText;
using ::fleet::store::testing_util::ScratchDir;
using ::fleet::store::testing_util::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr absl::Duration kDay = absl::Hours(24);

// Only the limits a test names; nothing else is pruned.
RetentionLimits ByAge(absl::Duration age) { return {age, 0}; }
RetentionLimits ByCount(int64_t count) { return {absl::ZeroDuration(), count}; }

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    Open();
  }

  void Open() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenSqliteStore({.path = path(), .clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  std::string path() const { return dir_.File("fleet.db"); }

  // A connection of the test's own to the store's file, as an operator's sqlite3 would be.
  std::unique_ptr<Database> Raw() {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path());
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  // Appends `n` events about object `id`, each with a message of `size` bytes.
  void Append(int n, const std::string& id = "x", size_t size = 10) {
    for (int i = 0; i < n; ++i) {
      v1::Event e;
      e.set_kind("test");
      e.set_object_kind("thing");
      e.set_object_id(id);
      e.set_principal("operator:alice");
      e.set_message(std::string(size, 'm'));
      ASSERT_THAT(store_->AppendEvent(e), IsOk());
    }
  }

  std::vector<uint64_t> Sequences(uint64_t after = 0, const std::string& id = "") {
    EventFilter filter;
    filter.after_sequence = after;
    filter.limit = 100000;
    filter.object_id = id;
    absl::StatusOr<std::vector<v1::Event>> events = store_->ListEvents(filter);
    EXPECT_TRUE(events.ok()) << events.status();
    std::vector<uint64_t> out;
    if (events.ok()) {
      for (const v1::Event& e : *events) out.push_back(e.sequence());
    }
    return out;
  }

  // An allocation with one member, in `state`: created READY, then moved there (ended at the
  // clock's time now, for RELEASED and FAILED).
  void Allocation(const std::string& id, v1::AllocationState state) {
    v1::Allocation a;
    a.set_id(id);
    a.set_tenant("t1");
    a.set_state(v1::ALLOCATION_STATE_READY);
    a.add_members("gpu1");
    ASSERT_THAT(store_->CreateAllocation(a, "operator:alice"), IsOk());
    if (state == v1::ALLOCATION_STATE_READY) return;
    AllocationUpdate update;
    update.id = id;
    update.state = state;
    if (state == v1::ALLOCATION_STATE_RELEASED || state == v1::ALLOCATION_STATE_FAILED) {
      update.release = AllocationUpdate::ReleaseIntent{state, "done"};
      update.stage_timings = std::vector<v1::StageTiming>(1);
    }
    ASSERT_THAT(store_->UpdateAllocation(update, "operator:alice").status(), IsOk());
  }

  std::vector<std::string> AllocationIds() {
    AllocationFilter filter;
    filter.include_released = true;
    absl::StatusOr<std::vector<v1::Allocation>> all = store_->ListAllocations(filter);
    EXPECT_TRUE(all.ok()) << all.status();
    std::vector<std::string> ids;
    if (all.ok()) {
      for (const v1::Allocation& a : *all) ids.push_back(a.id());
    }
    return ids;
  }

  RetentionPolicy Policy() {
    RetentionPolicy policy;
    policy.events = {};
    policy.ended_allocations = {};
    policy.batch_pause = absl::ZeroDuration();
    return policy;
  }

  ScratchDir dir_;
  fleet::testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

// ---------------------------------------------------------------------------------------
// Events

TEST_F(RetentionTest, EventsPastTheirAgeGoAndYoungOnesStay) {
  Append(5);
  clock_.Advance(31 * kDay);
  Append(3);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEvents(ByAge(30 * kDay), 1000));
  EXPECT_EQ(pruned, 5);
  EXPECT_THAT(Sequences(), ElementsAre(6, 7, 8));
  // Nothing more is old enough.
  ASSERT_OK_AND_ASSIGN(int64_t again, store_->PruneEvents(ByAge(30 * kDay), 1000));
  EXPECT_EQ(again, 0);
  EXPECT_THAT(Sequences(), SizeIs(3));
}

TEST_F(RetentionTest, TheCountLimitKeepsTheNewestEvents) {
  Append(10);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEvents(ByCount(4), 1000));
  EXPECT_EQ(pruned, 6);
  EXPECT_THAT(Sequences(), ElementsAre(7, 8, 9, 10));
}

TEST_F(RetentionTest, TheNewestEventIsNeverPrunedSoSequencesGoOnAcrossARestart) {
  Append(3);
  clock_.Advance(100 * kDay);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEvents(ByAge(kDay), 1000));
  EXPECT_EQ(pruned, 2);
  EXPECT_THAT(Sequences(), ElementsAre(3));
  Open();
  EXPECT_EQ(store_->LastEventSequence(), 3u);
  Append(1);
  EXPECT_THAT(Sequences(), ElementsAre(3, 4));
}

TEST_F(RetentionTest, NoLimitsPruneNothing) {
  Append(4);
  clock_.Advance(1000 * kDay);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEvents({}, 1000));
  EXPECT_EQ(pruned, 0);
  EXPECT_THAT(Sequences(), SizeIs(4));
}

// A follower far behind (WatchEvents, a watch reading the log) asks for events after a
// sequence that was pruned: it gets the oldest kept, and the log's end is where it was.
TEST_F(RetentionTest, AReaderOfPrunedEventsResumesAtTheOldestKept) {
  Append(3, "a");
  Append(3, "b");
  clock_.Advance(31 * kDay);
  Append(2, "a");
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEvents(ByAge(30 * kDay), 1000));
  ASSERT_EQ(pruned, 6);
  EXPECT_THAT(Sequences(/*after=*/1), ElementsAre(7, 8));
  EXPECT_THAT(Sequences(/*after=*/2, "a"), ElementsAre(7, 8));
  EXPECT_THAT(Sequences(/*after=*/5, "b"), ElementsAre());
  EXPECT_EQ(store_->LastEventSequence(), 8u);
  // Nothing newer than the end: a follower waits, it does not spin on the gap.
  EXPECT_FALSE(store_->WaitForEvent(8, absl::Now()));
  EXPECT_TRUE(store_->WaitForEvent(1, absl::Now()));
}

TEST_F(RetentionTest, TheDatabaseRefusesToDeleteAYoungEventOrUpdateAny) {
  Append(4);
  clock_.Advance(31 * kDay);
  Append(3);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEvents(ByAge(30 * kDay), 1000));
  ASSERT_EQ(pruned, 4);
  std::unique_ptr<Database> db = Raw();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(QueryText(*db, "SELECT prune_below FROM event_retention"), "5");
  EXPECT_THAT(db->Exec("DELETE FROM events WHERE sequence = 5"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(db->Exec("DELETE FROM events"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(db->Exec("UPDATE events SET message = 'rewritten' WHERE sequence = 7"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  // The cut-off only grows, never past the newest event, and stays one row.
  EXPECT_THAT(db->Exec("UPDATE event_retention SET prune_below = 2"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("only grows")));
  EXPECT_THAT(db->Exec("UPDATE event_retention SET prune_below = 8"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newest event")));
  EXPECT_THAT(db->Exec("DELETE FROM event_retention"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("one row")));
  EXPECT_THAT(db->Exec("INSERT OR REPLACE INTO event_retention VALUES (1, 0)"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("one row")));
  EXPECT_EQ(QueryText(*db, "SELECT prune_below FROM event_retention"), "5");
  EXPECT_THAT(Sequences(), ElementsAre(5, 6, 7));
}

TEST_F(RetentionTest, BeforeAnyPruningNoEventMayBeDeleted) {
  Append(2);
  std::unique_ptr<Database> db = Raw();
  ASSERT_NE(db, nullptr);
  EXPECT_THAT(db->Exec("DELETE FROM events WHERE sequence = 1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(Sequences(), ElementsAre(1, 2));
}

// ---------------------------------------------------------------------------------------
// Allocations

TEST_F(RetentionTest, OldEndedAllocationsGoAndLiveOnesOfAnyAgeStay) {
  for (v1::AllocationState live : {v1::ALLOCATION_STATE_PENDING, v1::ALLOCATION_STATE_PROGRAMMING,
                                   v1::ALLOCATION_STATE_TRAINING, v1::ALLOCATION_STATE_READY,
                                   v1::ALLOCATION_STATE_DEGRADED, v1::ALLOCATION_STATE_RELEASING}) {
    Allocation(absl::StrCat("live-", v1::AllocationState_Name(live)), live);
  }
  Allocation("old-released", v1::ALLOCATION_STATE_RELEASED);
  Allocation("old-failed", v1::ALLOCATION_STATE_FAILED);
  clock_.Advance(31 * kDay);
  Allocation("young-released", v1::ALLOCATION_STATE_RELEASED);
  Allocation("young-failed", v1::ALLOCATION_STATE_FAILED);

  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEndedAllocations(ByAge(30 * kDay), 1000));
  EXPECT_EQ(pruned, 2);
  std::vector<std::string> ids = AllocationIds();
  EXPECT_THAT(ids, SizeIs(8));
  EXPECT_THAT(ids, ::testing::Not(::testing::Contains("old-released")));
  EXPECT_THAT(ids, ::testing::Not(::testing::Contains("old-failed")));
  EXPECT_THAT(store_->GetAllocation("old-released"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("old-released")));

  // Past every age, still only ended ones go.
  clock_.Advance(1000 * kDay);
  ASSERT_OK_AND_ASSIGN(int64_t later, store_->PruneEndedAllocations(ByAge(30 * kDay), 1000));
  EXPECT_EQ(later, 2);
  EXPECT_THAT(AllocationIds(), SizeIs(6));
  for (const std::string& id : AllocationIds()) EXPECT_THAT(id, HasSubstr("live-"));
}

TEST_F(RetentionTest, TheCountLimitKeepsTheNewestEndedAllocations) {
  Allocation("live-old", v1::ALLOCATION_STATE_READY);
  for (int i = 1; i <= 5; ++i) {
    clock_.Advance(absl::Minutes(1));
    Allocation(absl::StrCat("ended-", i),
               i % 2 ? v1::ALLOCATION_STATE_RELEASED : v1::ALLOCATION_STATE_FAILED);
  }
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEndedAllocations(ByCount(2), 1000));
  EXPECT_EQ(pruned, 3);
  EXPECT_THAT(AllocationIds(), ElementsAre("live-old", "ended-4", "ended-5"));
}

TEST_F(RetentionTest, AnEndedAllocationsRowsGoWithIt) {
  Allocation("gone", v1::ALLOCATION_STATE_RELEASED);
  Allocation("kept", v1::ALLOCATION_STATE_READY);
  std::unique_ptr<Database> db = Raw();
  ASSERT_NE(db, nullptr);
  ASSERT_EQ(QueryText(*db, "SELECT count(*) FROM allocation_members"), "2");
  clock_.Advance(31 * kDay);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEndedAllocations(ByAge(30 * kDay), 1000));
  EXPECT_EQ(pruned, 1);
  EXPECT_EQ(QueryText(*db, "SELECT group_concat(allocation_id) FROM allocation_members"), "kept");
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM allocations WHERE id = 'gone'"), "0");
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
}

// Its cross-connects may still be on the switch: the engine clears them, then it may go.
TEST_F(RetentionTest, AnEndedAllocationWithPendingRemovalsStays) {
  Allocation("pinned", v1::ALLOCATION_STATE_FAILED);
  Allocation("free", v1::ALLOCATION_STATE_FAILED);
  {
    std::unique_ptr<Database> db = Raw();
    ASSERT_NE(db, nullptr);
    ASSERT_THAT(db->Exec("INSERT INTO pending_removals VALUES ('pinned', 's1', 1, 9)"), IsOk());
  }
  clock_.Advance(31 * kDay);
  ASSERT_OK_AND_ASSIGN(int64_t pruned, store_->PruneEndedAllocations(ByAge(30 * kDay), 1000));
  EXPECT_EQ(pruned, 1);
  EXPECT_THAT(AllocationIds(), ElementsAre("pinned"));
  ASSERT_THAT(store_->ClearPendingRemovals("pinned"), IsOk());
  ASSERT_OK_AND_ASSIGN(int64_t then, store_->PruneEndedAllocations(ByAge(30 * kDay), 1000));
  EXPECT_EQ(then, 1);
  EXPECT_THAT(AllocationIds(), SizeIs(0));
}

// ---------------------------------------------------------------------------------------
// Passes

TEST_F(RetentionTest, APassPrunesInTransactionsOfAtMostTheBatch) {
  Append(6);
  // Two events each (created, then released): sequences 7 to 16.
  for (int i = 1; i <= 5; ++i) Allocation(absl::StrCat("a", i), v1::ALLOCATION_STATE_RELEASED);
  clock_.Advance(31 * kDay);
  ASSERT_OK_AND_ASSIGN(int64_t two, store_->PruneEvents(ByAge(30 * kDay), 2));
  EXPECT_EQ(two, 2);  // A call is one transaction, of at most the rows asked.

  RetentionPolicy policy = Policy();
  policy.events = ByAge(30 * kDay);
  policy.ended_allocations = ByAge(30 * kDay);
  policy.batch_rows = 2;
  std::vector<RetentionPass> reported;
  Retention retention(store_.get(), policy,
                      [&](const RetentionPass& pass) { reported.push_back(pass); });
  RetentionPass pass = retention.RunPass();
  ASSERT_THAT(pass.status, IsOk());
  // Events 3 to 15 (the newest stays) in 7 batches; the 5 allocations in 3.
  EXPECT_EQ(pass.events_pruned, 13);
  EXPECT_EQ(pass.allocations_pruned, 5);
  EXPECT_EQ(pass.batches, 7 + 3);
  EXPECT_FALSE(pass.more);
  ASSERT_THAT(reported, SizeIs(1));
  EXPECT_EQ(reported[0].allocations_pruned, 5);
}

TEST_F(RetentionTest, FiveRowsInBatchesOfTwoTakeThreeTransactions) {
  Append(6);
  clock_.Advance(31 * kDay);
  RetentionPolicy policy = Policy();
  policy.events = ByAge(30 * kDay);
  policy.batch_rows = 2;
  Retention retention(store_.get(), policy);
  RetentionPass pass = retention.RunPass();
  ASSERT_THAT(pass.status, IsOk());
  EXPECT_EQ(pass.events_pruned, 5);
  EXPECT_EQ(pass.batches, 3);
}

TEST_F(RetentionTest, APassStopsAtItsBoundAndTheNextGoesOn) {
  Append(10);
  clock_.Advance(31 * kDay);
  RetentionPolicy policy = Policy();
  policy.events = ByAge(30 * kDay);
  policy.batch_rows = 2;
  policy.pass_max_rows = 4;
  Retention retention(store_.get(), policy);
  RetentionPass first = retention.RunPass();
  ASSERT_THAT(first.status, IsOk());
  EXPECT_EQ(first.events_pruned, 4);
  EXPECT_TRUE(first.more);
  RetentionPass second = retention.RunPass();
  ASSERT_THAT(second.status, IsOk());
  EXPECT_EQ(second.events_pruned, 4);
  RetentionPass third = retention.RunPass();
  ASSERT_THAT(third.status, IsOk());
  EXPECT_EQ(third.events_pruned, 1);  // The newest stays.
  EXPECT_FALSE(third.more);
  EXPECT_THAT(Sequences(), ElementsAre(10));
}

TEST_F(RetentionTest, APassWithNothingToPruneChangesNothing) {
  Append(3);
  Allocation("young", v1::ALLOCATION_STATE_RELEASED);
  RetentionPolicy policy = Policy();
  policy.events = ByAge(30 * kDay);
  policy.ended_allocations = ByAge(30 * kDay);
  Retention retention(store_.get(), policy);
  RetentionPass pass = retention.RunPass();
  ASSERT_THAT(pass.status, IsOk());
  EXPECT_EQ(pass.events_pruned + pass.allocations_pruned + pass.batches, 0);
  EXPECT_THAT(Sequences(), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(AllocationIds(), ElementsAre("young"));
  EXPECT_GT(pass.size.pages, 0);
}

TEST_F(RetentionTest, StartRunsPassesOnItsThreadAndStopEndsThem) {
  RetentionPolicy policy = Policy();
  policy.interval = absl::Hours(1);
  std::atomic<int> passes{0};
  Retention retention(store_.get(), policy, [&](const RetentionPass&) { ++passes; });
  retention.Start();
  EXPECT_TRUE(fleet::testing::Eventually([&] { return passes.load() >= 1; }));
  retention.Stop();  // Wakes the wait for the next pass; returns once the thread has ended.
  EXPECT_EQ(passes.load(), 1);

  policy.interval = absl::ZeroDuration();
  std::atomic<int> none{0};
  Retention off(store_.get(), policy, [&](const RetentionPass&) { ++none; });
  off.Start();
  off.Stop();
  EXPECT_EQ(none.load(), 0);
}

// ---------------------------------------------------------------------------------------
// Space

TEST_F(RetentionTest, AFreshDatabaseHasIncrementalVacuum) {
  std::unique_ptr<Database> db = Raw();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(QueryText(*db, "PRAGMA auto_vacuum"), "2");
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "wal");
}

TEST_F(RetentionTest, AnExistingDatabaseIsRewrittenOnceForIncrementalVacuum) {
  store_.reset();
  const std::string old_path = dir_.File("old.db");
  {
    // As an earlier fleetd left it: WAL, the schema, data, no auto-vacuum.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(old_path));
    ASSERT_THAT(db->EnableWriteAheadLog(), IsOk());
    ASSERT_THAT(
        Migrate(*db, std::vector<Migration>(Migrations().begin(), Migrations().begin() + 3)),
        IsOk());
    ASSERT_THAT(db->Exec("INSERT INTO hosts (name) VALUES ('h1')"), IsOk());
    ASSERT_EQ(QueryText(*db, "PRAGMA auto_vacuum"), "0");
  }
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                         OpenSqliteStore({.path = old_path, .clock = &clock_}));
    EXPECT_THAT(store->GetHost("h1"), IsOk());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(old_path));
  EXPECT_EQ(QueryText(*db, "PRAGMA auto_vacuum"), "2");
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "wal");
  ASSERT_OK_AND_ASSIGN(bool rewritten, db->EnableIncrementalVacuum());
  EXPECT_FALSE(rewritten);
}

TEST_F(RetentionTest, PrunedPagesAreHandedBackAndTheFileShrinks) {
  Append(1500, "x", 2000);  // About 3 MB of events.
  clock_.Advance(31 * kDay);
  Append(1);
  ASSERT_OK_AND_ASSIGN(StorageSize before, store_->Storage());
  ASSERT_GT(before.pages, 500);

  RetentionPolicy policy = Policy();
  policy.events = ByAge(30 * kDay);
  policy.vacuum_step_pages = 64;
  Retention retention(store_.get(), policy);
  RetentionPass pass = retention.RunPass();
  ASSERT_THAT(pass.status, IsOk());
  EXPECT_EQ(pass.events_pruned, 1500);
  EXPECT_GT(pass.pages_reclaimed, 500);
  EXPECT_LT(pass.size.pages, before.pages / 2);
  EXPECT_EQ(pass.size.free_pages, 0);
  ASSERT_OK_AND_ASSIGN(StorageSize after, store_->Storage());
  EXPECT_EQ(after.pages, pass.size.pages);

  // The file itself shrinks when the log is checkpointed: by the background checkpoint while
  // open, or at the close.
  store_.reset();
  EXPECT_LE(std::filesystem::file_size(path()),
            static_cast<uintmax_t>(after.pages * after.page_size));
  EXPECT_LT(std::filesystem::file_size(path()),
            static_cast<uintmax_t>(before.pages * before.page_size) / 2);
}

// The vacuum's commits go through the write-ahead log like any other: the background
// checkpoint copies them and truncates the file, no commit does.
TEST(RetentionSqliteTest, IncrementalVacuumKeepsTheBackgroundCheckpointWorking) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("v.db");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  ASSERT_OK_AND_ASSIGN(bool rewritten, db->EnableIncrementalVacuum());
  EXPECT_FALSE(rewritten);  // New: set before the first table, no rewrite.
  // A checkpoint after every commit: the last one follows the vacuum's last commit.
  ASSERT_THAT(db->EnableWriteAheadLog(1), IsOk());
  ASSERT_THAT(db->Exec("CREATE TABLE t (x BLOB)"), IsOk());
  for (int i = 0; i < 400; ++i) {
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (zeroblob(4000))"), IsOk());
  }
  ASSERT_TRUE(
      fleet::testing::Eventually([&] { return std::filesystem::file_size(path) >= 400u * 4096; }));
  ASSERT_THAT(db->Exec("DELETE FROM t WHERE rowid > 20"), IsOk());
  ASSERT_OK_AND_ASSIGN(Database::Pages full, db->PageCounts());
  EXPECT_GE(full.free_pages, 380);
  const int64_t checkpoints = db->background_checkpoints();
  int64_t reclaimed = 0;
  while (true) {
    ASSERT_OK_AND_ASSIGN(int64_t got, db->IncrementalVacuum(100));
    reclaimed += got;
    if (got == 0) break;
  }
  EXPECT_GE(reclaimed, full.free_pages);  // Pointer-map pages of the free ones go too.
  ASSERT_OK_AND_ASSIGN(Database::Pages after, db->PageCounts());
  EXPECT_EQ(after.free_pages, 0);
  EXPECT_EQ(after.pages, full.pages - reclaimed);
  EXPECT_TRUE(fleet::testing::Eventually([&] {
    return db->background_checkpoints() > checkpoints &&
           std::filesystem::file_size(path) == static_cast<uintmax_t>(after.pages * 4096);
  }));
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM t"), "20");
}

}  // namespace
}  // namespace fleet::store
