// A store with a commit log (controller/store/commit_log.h): every write of every aggregate
// reaches the log as one numbered entry (its schema version and changeset) before it commits, and a
// replica that applies them in order holds, row for row, what the writer holds; a write the log
// refuses is not committed and takes no entry number.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "controller/store/changesets.h"
#include "controller/store/commit_log.h"
#include "controller/store/migrations.h"
#include "controller/store/store.h"
#include "tests/store/store_test_util.h"

namespace fleet::store::testing_util {
namespace {

// Applies each entry at once to a follower store of its own, as a follower would.
class ApplyingLog : public CommitLog {
 public:
  explicit ApplyingLog(const std::string& path) : path_(path) {
    absl::StatusOr<std::unique_ptr<Store>> follower =
        OpenSqliteStore({.path = path, .clock = &clock_});
    EXPECT_TRUE(follower.ok()) << follower.status();
    if (follower.ok()) follower_ = std::move(*follower);
  }

  absl::Status Append(uint64_t entry, const std::string& bytes) override {
    // Every entry names the writer's schema (changesets.h).
    EXPECT_THAT(bytes, ::testing::StartsWith("fleet-log-entry schema=")) << "entry " << entry;
    if (!refusal_.ok()) return refusal_;
    entries_.push_back(entry);
    return follower_->ApplyReplicated(entry, bytes);
  }

  Store& follower() { return *follower_; }
  std::string Dump() {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? testing_util::Dump(**db) : "";
  }
  const std::vector<uint64_t>& entries() const { return entries_; }
  void Refuse(absl::Status refusal) { refusal_ = std::move(refusal); }

 private:
  const std::string path_;
  fleet::testing::FakeClock clock_;
  std::unique_ptr<Store> follower_;
  std::vector<uint64_t> entries_;
  absl::Status refusal_;
};

class StoreReplicationTest : public StoreTest {
 protected:
  void SetUp() override {
    path_ = dir_.File("fleet.db");
    log_ = std::make_unique<ApplyingLog>(dir_.File("follower.db"));
    OpenStore(path_, log_.get());
  }

  // The writer's database, read through a connection of its own.
  std::string WriterDump() {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? Dump(**db) : "";
  }

  // After a write: the replica holds what the writer holds.
  void ExpectReplicated(const std::string& after) {
    EXPECT_EQ(log_->Dump(), WriterDump()) << "after " << after;
  }

  void TearDown() override { store_.reset(); }  // Before log_, which it writes to.

  std::unique_ptr<ApplyingLog> log_;
  std::string path_;
};

// Which inventory file a replica applied at start is its own business (kLocalTables): the
// record is written without a log entry and reaches no other replica.
TEST_F(StoreReplicationTest, TheRecordOfTheInventoryFileAppliedIsTheReplicasOwn) {
  WriteSite();
  const size_t entries = log_->entries().size();
  ASSERT_THAT(store_->RecordAppliedInventoryFile("file sha256 ab; inventory sha256 cd"), IsOk());
  EXPECT_EQ(log_->entries().size(), entries);
  EXPECT_EQ(store_->AppliedInventoryFile().value_or(""), "file sha256 ab; inventory sha256 cd");
  EXPECT_EQ(log_->follower().AppliedInventoryFile().value_or("unreadable"), "");
}

TEST_F(StoreReplicationTest, EveryKindOfWriteReachesTheReplicaAsOneEntryInOrder) {
  WriteSite();
  ExpectReplicated("the inventory");

  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()});
  a.mutable_request()->set_request_id("req-1");
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ExpectReplicated("an allocation");

  AllocationUpdate ready;
  ready.id = "a1";
  ready.state = v1::ALLOCATION_STATE_READY;
  ready.circuits["c-up"] = {v1::CIRCUIT_STATE_ACTIVE, ""};
  ASSERT_THAT(store_->UpdateAllocation(ready, kOperator).status(), IsOk());
  ExpectReplicated("an update");

  ASSERT_THAT(store_->SetPortHealth({{PortRef("s1", 4), v1::OPER_STATE_FAILED, "dark"}}), IsOk());
  ExpectReplicated("port health");
  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 1, 11)}), IsOk());
  ExpectReplicated("observed cross-connects");

  // A release that removes the circuits (cascading to their cross-connects), and retention.
  ASSERT_THAT(store_->UpdateAllocation(ReleaseOf("a1"), kOperator).status(), IsOk());
  ExpectReplicated("a release");
  clock_.Advance(absl::Hours(24 * 60));
  ASSERT_THAT(store_->PruneEndedAllocations({.max_age = absl::Hours(24)}, 100).status(), IsOk());
  ASSERT_THAT(store_->PruneEvents({.max_age = absl::Hours(24)}, 100).status(), IsOk());
  ExpectReplicated("retention");
  AllocationFilter every;
  every.include_released = true;
  absl::StatusOr<std::vector<v1::Allocation>> left = log_->follower().ListAllocations(every);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty());

  // One entry per write, numbered from 1 without a gap; the writer's position is the last.
  ASSERT_FALSE(log_->entries().empty());
  for (size_t i = 0; i < log_->entries().size(); ++i) EXPECT_EQ(log_->entries()[i], i + 1);
  absl::StatusOr<std::unique_ptr<Database>> writer = Database::Open(path_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(AppliedEntry(**writer).value_or(0), log_->entries().back());
}

// The position a read waits for (read-your-writes, docs/ha.md) moves with every committed
// write and applied entry, and a store opened again starts from the one it holds.
TEST_F(StoreReplicationTest, ThePositionInMemoryMovesWithEachWriteAndEachAppliedEntry) {
  EXPECT_EQ(store_->AwaitReplicaPosition(0, absl::ZeroDuration()), 0u);
  WriteSite();
  const uint64_t written = log_->entries().back();
  EXPECT_EQ(store_->AwaitReplicaPosition(written, absl::ZeroDuration()), written);
  EXPECT_EQ(store_->AwaitReplicaPosition(0, absl::ZeroDuration()),
            store_->ReplicaPosition().value_or(0));
  // The follower's, moved by the entries it applied.
  EXPECT_EQ(log_->follower().AwaitReplicaPosition(0, absl::ZeroDuration()), written);
  // Not yet there: it waits the time given, then answers where it is.
  EXPECT_EQ(log_->follower().AwaitReplicaPosition(written + 1, absl::Milliseconds(10)), written);

  // A write the log refuses moves nothing.
  log_->Refuse(absl::UnavailableError("no quorum"));
  EXPECT_FALSE(store_->SetPortHealth({{PortRef("s1", 4), v1::OPER_STATE_FAILED, "dark"}}).ok());
  EXPECT_EQ(store_->AwaitReplicaPosition(0, absl::ZeroDuration()), written);

  store_.reset();
  OpenStore(path_, log_.get());
  EXPECT_EQ(store_->AwaitReplicaPosition(0, absl::ZeroDuration()), written);
}

// Once the replica applies no more (shutdown), no read waits for an entry that will not
// come: a waiter returns where the store is, long before its time is up, and later ones at
// once.
TEST_F(StoreReplicationTest, EndingPositionWaitsWakesAWaiter) {
  WriteSite();
  const uint64_t written = log_->entries().back();
  Store& follower = log_->follower();
  const absl::Duration patience = absl::Seconds(60);
  uint64_t answered = 0;
  absl::Duration waited;
  std::thread waiter([&] {
    const absl::Time start = absl::Now();
    answered = follower.AwaitReplicaPosition(written + 1, patience);
    waited = absl::Now() - start;
  });
  // Most likely waiting by then; it must be woken either way.
  absl::SleepFor(absl::Milliseconds(50));
  follower.EndReplicaPositionWaits();
  waiter.join();
  EXPECT_EQ(answered, written);
  EXPECT_LT(waited, patience / 2) << "the waiter was not woken";
  const absl::Time later = absl::Now();
  EXPECT_EQ(follower.AwaitReplicaPosition(written + 5, patience), written);
  EXPECT_LT(absl::Now() - later, patience / 2);
}

// A replica on another migration refuses the writer's entries whole, rather than apply them
// where a migration changed only data: its position stays, and so does what it holds.
TEST_F(StoreReplicationTest, AReplicaOfAnotherSchemaRefusesTheEntries) {
  WriteSite();
  const uint64_t written = log_->entries().back();
  {
    absl::StatusOr<std::unique_ptr<Database>> follower_db =
        Database::Open(dir_.File("follower.db"));
    ASSERT_TRUE(follower_db.ok()) << follower_db.status();
    const int schema = SchemaVersion(**follower_db).value_or(0);
    ASSERT_THAT((*follower_db)->Exec(absl::StrCat("PRAGMA user_version = ", schema + 1)), IsOk());
  }
  const std::string before = log_->Dump();
  // The follower's refusal is the log's answer here: the write is not committed either.
  EXPECT_THAT(store_->SetPortHealth({{PortRef("s1", 4), v1::OPER_STATE_FAILED, "dark"}}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("written at schema version")));
  EXPECT_EQ(log_->follower().ReplicaPosition().value_or(0), written);
  EXPECT_EQ(log_->Dump(), before);
}

// The log's snapshot (docs/ha.md): a copy of the whole database with the position it holds,
// which a replica loads in place of its own and follows the log from.
TEST_F(StoreReplicationTest, ASnapshotIsTheDatabaseAtThePositionItReturns) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                               kOperator),
      IsOk());
  const std::string copy = dir_.File("snapshot.db");
  absl::StatusOr<uint64_t> position = store_->SnapshotTo(copy);
  ASSERT_TRUE(position.ok()) << position.status();
  EXPECT_EQ(*position, log_->entries().back());
  absl::StatusOr<std::unique_ptr<Database>> snapshot = Database::Open(copy);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(Dump(**snapshot), WriterDump());
  EXPECT_EQ(AppliedEntry(**snapshot).value_or(0), *position);
  snapshot->reset();
  // A store opened on it goes on from there: the next entry applies.
  ASSERT_THAT(store_->UpdateAllocation(ReleaseOf("a1"), kOperator).status(), IsOk());
  fleet::testing::FakeClock clock;
  absl::StatusOr<std::unique_ptr<Store>> loaded = OpenSqliteStore({.path = copy, .clock = &clock});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->ReplicaPosition().value_or(0), *position);
  // A file already there is not overwritten.
  const absl::StatusOr<uint64_t> again = store_->SnapshotTo(copy);
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()), ::testing::HasSubstr(copy));
}

// What a follower serves comes from its desired state and commit feed, kept in memory: they
// follow the applied entries as the leader's follow its own commits.
TEST_F(StoreReplicationTest, AFollowersReadsAndWatchersSeeWhatTheLeadersDo) {
  WriteSite();
  Store& follower = log_->follower();
  const uint64_t seen = follower.LastEventSequence();
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()});
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  AllocationUpdate ready;
  ready.id = "a1";
  ready.state = v1::ALLOCATION_STATE_READY;
  ready.circuits["c-up"] = {v1::CIRCUIT_STATE_ACTIVE, ""};
  ASSERT_THAT(store_->UpdateAllocation(ready, kOperator).status(), IsOk());
  ASSERT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15)},
                                     v1::CIRCUIT_STATE_ACTIVE, "")),
                  kOperator),
              IsOk());

  absl::StatusOr<v1::Allocation> here = follower.GetAllocation("a1");
  absl::StatusOr<v1::Allocation> there = store_->GetAllocation("a1");
  ASSERT_TRUE(here.ok() && there.ok()) << here.status() << there.status();
  EXPECT_THAT(*here, EqualsProto(*there));
  AllocationFilter live;
  live.state = v1::ALLOCATION_STATE_READY;  // Answered from the desired state.
  absl::StatusOr<std::vector<v1::Allocation>> listed = follower.ListAllocations(live);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_THAT((*listed)[0], EqualsProto(*there));
  absl::StatusOr<std::vector<v1::Circuit>> circuits = follower.ListCircuits({});
  absl::StatusOr<std::vector<v1::Circuit>> leader_circuits = store_->ListCircuits({});
  ASSERT_TRUE(circuits.ok() && leader_circuits.ok());
  ASSERT_EQ(circuits->size(), leader_circuits->size());
  for (size_t i = 0; i < circuits->size(); ++i) {
    EXPECT_THAT((*circuits)[i], EqualsProto((*leader_circuits)[i]));
  }

  // The commit feed: the newest event, and the allocation's last commit with its image.
  EXPECT_EQ(follower.LastEventSequence(), store_->LastEventSequence());
  EXPECT_GT(follower.LastEventSequence(), seen);
  std::optional<AllocationCommit> last = follower.LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_EQ(last->allocation->state(), v1::ALLOCATION_STATE_READY);

  // An entry held already is done (the leader's own); one past the next is refused.
  const Counts before = Count();
  EXPECT_THAT(store_->ApplyReplicated(1, "not even a changeset"), IsOk());
  EXPECT_EQ(Count(), before);
  const uint64_t position = follower.ReplicaPosition().value_or(0);
  EXPECT_THAT(follower.ApplyReplicated(position + 2, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is not the next")));

  // A release leaves the follower's desired state as it leaves the leader's.
  ASSERT_THAT(store_->UpdateAllocation(ReleaseOf("a1"), kOperator).status(), IsOk());
  absl::StatusOr<std::vector<v1::Allocation>> live_after = follower.ListAllocations(live);
  ASSERT_TRUE(live_after.ok()) << live_after.status();
  EXPECT_TRUE(live_after->empty()) << "the follower still holds the released allocation live";
  absl::StatusOr<std::vector<v1::Circuit>> circuits_after = follower.ListCircuits({});
  ASSERT_TRUE(circuits_after.ok());
  EXPECT_EQ(circuits_after->size(), 1u);  // The manual circuit only.
  std::optional<AllocationCommit> released = follower.LastCommitted("a1");
  ASSERT_TRUE(released.has_value() && released->allocation != nullptr);
  EXPECT_EQ(released->allocation->state(), v1::ALLOCATION_STATE_RELEASED);
}

TEST_F(StoreReplicationTest, AWriteTheLogRefusesIsNotCommittedAndTakesNoEntry) {
  WriteSite();
  const Counts before = Count();
  const size_t entries = log_->entries().size();
  log_->Refuse(absl::UnavailableError("etcd: no quorum"));
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no quorum")));
  EXPECT_EQ(Count(), before);

  // Refused by the commit point first (this replica may not act): the log is not asked.
  log_->Refuse(absl::OkStatus());
  commit_point_.SetFence([](Effect) { return absl::UnavailableError("not leading"); });
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not leading")));
  EXPECT_EQ(log_->entries().size(), entries);
  commit_point_.SetFence({});

  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ASSERT_EQ(log_->entries().size(), entries + 1);
  EXPECT_EQ(log_->entries().back(), entries + 1);
  ExpectReplicated("the write made again");
}

}  // namespace
}  // namespace fleet::store::testing_util
