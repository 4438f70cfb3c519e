// A store with a commit log (controller/store/commit_log.h): every write of every aggregate
// reaches the log as one numbered changeset before it commits, and a replica that applies
// them in order holds, row for row, what the writer holds; a write the log refuses is not
// committed and takes no entry number.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "controller/store/changesets.h"
#include "controller/store/commit_log.h"
#include "controller/store/migrations.h"
#include "controller/store/store.h"
#include "tests/store/store_test_util.h"

namespace fleet::store::testing_util {
namespace {

// Applies each entry at once to a replica of its own, as a follower would.
class ApplyingLog : public CommitLog {
 public:
  ApplyingLog() {
    replica_ = Database::Open(":memory:").value();
    EXPECT_THAT(Migrate(*replica_, Migrations()), IsOk());
  }

  absl::Status Append(uint64_t entry, const std::string& changeset) override {
    if (!refusal_.ok()) return refusal_;
    entries_.push_back(entry);
    return ApplyChangeset(*replica_, changeset, [&] { return SetAppliedEntry(*replica_, entry); });
  }

  Database& replica() { return *replica_; }
  const std::vector<uint64_t>& entries() const { return entries_; }
  void Refuse(absl::Status refusal) { refusal_ = std::move(refusal); }

 private:
  std::unique_ptr<Database> replica_;
  std::vector<uint64_t> entries_;
  absl::Status refusal_;
};

class StoreReplicationTest : public StoreTest {
 protected:
  void SetUp() override {
    path_ = dir_.File("fleet.db");
    OpenStore(path_, &log_);
  }

  // The writer's database, read through a connection of its own.
  std::string WriterDump() {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? Dump(**db) : "";
  }

  // After a write: the replica holds what the writer holds.
  void ExpectReplicated(const std::string& after) {
    EXPECT_EQ(Dump(log_.replica()), WriterDump()) << "after " << after;
  }

  void TearDown() override { store_.reset(); }  // Before log_, which it writes to.

  ApplyingLog log_;
  std::string path_;
};

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
  AllocationUpdate release;
  release.id = "a1";
  release.state = v1::ALLOCATION_STATE_RELEASED;
  release.release = AllocationUpdate::ReleaseIntent{v1::ALLOCATION_STATE_RELEASED, "done"};
  release.remove_circuits = true;
  ASSERT_THAT(store_->UpdateAllocation(release, kOperator).status(), IsOk());
  ExpectReplicated("a release");
  clock_.Advance(absl::Hours(24 * 60));
  ASSERT_THAT(store_->PruneEndedAllocations({.max_age = absl::Hours(24)}, 100).status(), IsOk());
  ASSERT_THAT(store_->PruneEvents({.max_age = absl::Hours(24)}, 100).status(), IsOk());
  ExpectReplicated("retention");
  EXPECT_EQ(QueryText(log_.replica(), "SELECT count(*) FROM allocations"), "0");

  // One entry per write, numbered from 1 without a gap; the writer's position is the last.
  ASSERT_FALSE(log_.entries().empty());
  for (size_t i = 0; i < log_.entries().size(); ++i) EXPECT_EQ(log_.entries()[i], i + 1);
  absl::StatusOr<std::unique_ptr<Database>> writer = Database::Open(path_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(AppliedEntry(**writer).value_or(0), log_.entries().back());
}

TEST_F(StoreReplicationTest, AWriteTheLogRefusesIsNotCommittedAndTakesNoEntry) {
  WriteSite();
  const Counts before = Count();
  const size_t entries = log_.entries().size();
  log_.Refuse(absl::UnavailableError("etcd: no quorum"));
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no quorum")));
  EXPECT_EQ(Count(), before);

  log_.Refuse(absl::OkStatus());
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ASSERT_EQ(log_.entries().size(), entries + 1);
  EXPECT_EQ(log_.entries().back(), entries + 1);
  ExpectReplicated("the write made again");
}

}  // namespace
}  // namespace fleet::store::testing_util
